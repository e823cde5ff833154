//! Cluster rate-limit state: the key's TAT lives in Redis and each decision is one script run
//! there, atomically, on Redis' clock (so node clocks need not agree). Never GET-then-SET, which
//! lets several times the limit through when nodes race.

use super::gcra::{Decision, Gcra};
use gatehouse_redis::{Client, Script, Value};
use std::sync::LazyLock;

/// The GCRA of [`Gcra::decide`] in Lua. KEYS[1]: the TAT; ARGV: emission, tolerance, block (µs).
/// Returns `{1, remaining, reset_us}` or `{0, retry_after_us}`.
static SCRIPT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local emission = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local block = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
local next = math.max(tat, now) + emission
local ahead = next - now
if ahead <= tolerance then
  redis.call('SET', KEYS[1], string.format('%.0f', next), 'PX', math.ceil(ahead / 1000) + 1)
  return {1, math.floor((tolerance - ahead) / emission), ahead}
end
local retry = ahead - tolerance
if block > 0 and tat <= now + tolerance then
  local blocked = now + block + tolerance - emission
  if blocked > tat then
    redis.call('SET', KEYS[1], string.format('%.0f', blocked), 'PX', math.ceil((blocked - now) / 1000) + 1)
    return {0, math.max(block, retry)}
  end
end
return {0, retry}
"#,
    )
});

/// Runs one decision in Redis for the key `key`.
pub async fn decide(client: &Client, g: &Gcra, key: &[u8]) -> Result<Decision, gatehouse_redis::Error> {
    let args = [g.emission_us.to_string(), g.tolerance_us.to_string(), g.block_us.to_string()];
    let reply = client.eval(&SCRIPT, &[key], &args).await?;
    let bad = || gatehouse_redis::Error::Protocol("rate-limit script: unexpected reply".into());
    let Value::Array(items) = reply else { return Err(bad()) };
    let n = |i: usize| items.get(i).and_then(Value::as_int).map(|v| v.max(0) as u64);
    match n(0) {
        Some(1) => Ok(Decision::Allow { remaining: n(1).ok_or_else(bad)?, reset_us: n(2).ok_or_else(bad)? }),
        Some(0) => Ok(Decision::Deny { retry_after_us: n(1).ok_or_else(bad)? }),
        _ => Err(bad()),
    }
}
