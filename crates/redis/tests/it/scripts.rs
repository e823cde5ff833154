//! Lua scripts: EVALSHA with the fallback to EVAL, atomicity, nested replies, script errors.

use crate::support::RedisServer;
use bytes::Bytes;
use gatehouse_redis::{Client, Error, Script, Value};

fn bulk(s: &str) -> Value {
    Value::Bulk(Bytes::copy_from_slice(s.as_bytes()))
}

#[tokio::test]
async fn evalsha_falls_back_to_eval_and_caches_the_script() {
    let server = RedisServer::start();
    let c = Client::connect(server.options()).await.unwrap();
    let script = Script::new("return {KEYS[1], ARGV[1], ARGV[2]}");
    // Our SHA-1 is the one Redis computes.
    let loaded = c.cmd(&[b"SCRIPT", b"LOAD", script.source()]).await.unwrap();
    assert_eq!(loaded.as_bytes(), Some(script.sha1_hex().as_bytes()));

    c.cmd(&[b"SCRIPT", b"FLUSH"]).await.unwrap();
    let exists = [b"SCRIPT".as_slice(), b"EXISTS", script.sha1_hex().as_bytes()];
    assert_eq!(c.cmd(&exists).await.unwrap(), Value::Array(vec![Value::Int(0)]));
    // Not cached: EVALSHA gets NOSCRIPT, EVAL runs it.
    let reply = c.eval(&script, &["k"], &["a", "b"]).await.unwrap();
    assert_eq!(reply, Value::Array(vec![bulk("k"), bulk("a"), bulk("b")]));
    // EVAL cached it, so EVALSHA alone works now.
    assert_eq!(c.cmd(&exists).await.unwrap(), Value::Array(vec![Value::Int(1)]));
    let direct = c.cmd(&[b"EVALSHA", script.sha1_hex().as_bytes(), b"1", b"k2", b"c", b"d"]).await.unwrap();
    assert_eq!(direct, Value::Array(vec![bulk("k2"), bulk("c"), bulk("d")]));
    assert_eq!(
        c.eval(&script, &["x"], &["y", "z"]).await.unwrap(),
        Value::Array(vec![bulk("x"), bulk("y"), bulk("z")])
    );
}

#[tokio::test]
async fn nested_replies_and_script_errors() {
    let server = RedisServer::start();
    let c = Client::connect(server.options()).await.unwrap();
    let nested = Script::new("return {1, {2, 'x', {}}, 'ok', false}");
    let no_args: &[&str] = &[];
    assert_eq!(
        c.eval(&nested, no_args, no_args).await.unwrap(),
        Value::Array(vec![
            Value::Int(1),
            Value::Array(vec![Value::Int(2), bulk("x"), Value::Array(vec![])]),
            bulk("ok"),
            Value::Nil,
        ])
    );
    let failing = Script::new("return redis.error_reply('LIMIT exceeded')");
    match c.eval(&failing, no_args, no_args).await {
        Err(Error::Server(msg)) => assert_eq!(msg, "LIMIT exceeded"),
        other => panic!("expected the script's error, got {other:?}"),
    }
    let broken = Script::new("this is not lua");
    assert!(matches!(c.eval(&broken, no_args, no_args).await, Err(Error::Server(_))));
    c.ping().await.unwrap();
}

#[tokio::test]
async fn a_script_is_atomic_under_concurrency() {
    let server = RedisServer::start();
    let c = Client::connect(server.options()).await.unwrap();
    // A fixed-window rate limiter: count, start the window on the first hit, and say whether
    // this hit is within the limit.
    let limiter = Script::new(
        "local n = redis.call('INCR', KEYS[1]) \
         if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end \
         if n <= tonumber(ARGV[2]) then return {1, n} else return {0, n} end",
    );
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (c, limiter) = (c.clone(), limiter.clone());
            tokio::spawn(async move {
                let mut seen = Vec::new();
                for _ in 0..50 {
                    let reply = c.eval(&limiter, &["rate:10.0.0.1"], &["60000", "150"]).await.unwrap();
                    let Value::Array(parts) = reply else { panic!("unexpected reply {reply:?}") };
                    seen.push((parts[0].as_int().unwrap(), parts[1].as_int().unwrap()));
                }
                seen
            })
        })
        .collect();
    let mut counts = Vec::new();
    let mut allowed = 0;
    for task in tasks {
        for (ok, n) in task.await.unwrap() {
            allowed += ok;
            counts.push(n);
        }
    }
    counts.sort_unstable();
    // Every hit saw a distinct count: no lost update between INCR and the check.
    assert_eq!(counts, (1..=400).collect::<Vec<i64>>());
    assert_eq!(allowed, 150);
    let ttl = c.cmd(&[b"PTTL", b"rate:10.0.0.1"]).await.unwrap().as_int().unwrap();
    assert!(ttl > 0 && ttl <= 60_000, "ttl {ttl}");
}
