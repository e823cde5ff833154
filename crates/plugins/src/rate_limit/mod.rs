//! Admit stage, rate limits: one GCRA per configured limit, keyed by app, client address or a
//! header (optionally per path), counted on this node ([`local`]) or in Redis for the whole
//! cluster ([`cluster`]).

pub mod cluster;
pub mod gcra;
pub mod local;

use crate::stats::ServiceStats;
use data_encoding::HEXLOWER;
use gatehouse_config::{FailMode, LimitKey, RateLimit};
use gcra::{Decision, Gcra};
use http::HeaderMap;
use local::LocalTable;
use std::net::IpAddr;
use std::sync::Arc;

/// One compiled limit.
#[derive(Debug)]
pub struct Limiter {
    gcra: Gcra,
    /// `limit` as a header value, made once; `None` when admitted responses do not carry the
    /// `RateLimit-*` headers.
    limit_value: Option<http::HeaderValue>,
    key: LimitKey,
    /// For `header:NAME` keys, the name parsed once.
    header: Option<http::HeaderName>,
    per_path: bool,
    store: Store,
}

#[derive(Debug)]
enum Store {
    Local(Arc<LocalTable>),
    Cluster {
        client: gatehouse_redis::Client,
        /// `prefix:rl:<limit id>:`
        key_prefix: String,
        on_error: FailMode,
    },
}

/// What a limit keys on, for one request.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    /// The service, so a plan granted on two services counts them apart.
    pub service: &'a str,
    /// A stable hash of the service name.
    pub service_hash: u64,
    /// The authenticated app.
    pub app: Option<&'a str>,
    /// A stable hash of the app id (0 without one).
    pub app_hash: u64,
    /// The client address.
    pub client_ip: IpAddr,
    /// Request headers.
    pub headers: &'a HeaderMap,
    /// Path below the service prefix.
    pub path: &'a str,
}

/// A limit's verdict on one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Admitted; the facts for the `RateLimit-*` headers.
    Allow(Quota),
    /// Refused: retry after this many microseconds.
    Deny {
        /// Microseconds until a request would be admitted.
        retry_after_us: u64,
        /// The limit, for `RateLimit-Limit`.
        limit: u64,
    },
    /// Redis could not decide and the limit fails closed.
    Unavailable,
}

/// What the `RateLimit-*` headers tell the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    /// Requests per interval.
    pub limit: u64,
    /// Requests that could still arrive at once.
    pub remaining: u64,
    /// Microseconds until the whole burst is available again.
    pub reset_us: u64,
}

impl Limiter {
    /// A local limit on `table`.
    pub fn local(cfg: &RateLimit, table: Arc<LocalTable>) -> Self {
        Limiter {
            gcra: Gcra::new(cfg),
            limit_value: cfg.headers.then(|| cfg.limit.into()),
            key: cfg.key.clone(),
            header: header_name(&cfg.key),
            per_path: cfg.per_path,
            store: Store::Local(table),
        }
    }

    /// A cluster limit whose Redis keys start with `key_prefix`.
    pub fn cluster(cfg: &RateLimit, client: gatehouse_redis::Client, key_prefix: String) -> Self {
        Limiter {
            gcra: Gcra::new(cfg),
            limit_value: cfg.headers.then(|| cfg.limit.into()),
            key: cfg.key.clone(),
            header: header_name(&cfg.key),
            per_path: cfg.per_path,
            store: Store::Cluster { client, key_prefix, on_error: cfg.on_redis_error },
        }
    }

    /// The limit as a header value, for `RateLimit-Limit`; `None` when admitted responses do
    /// not tell the quota.
    pub fn limit_value(&self) -> Option<&http::HeaderValue> {
        self.limit_value.as_ref()
    }

    /// Whether deciding needs Redis.
    pub fn is_cluster(&self) -> bool {
        matches!(self.store, Store::Cluster { .. })
    }

    /// Decides for one request.
    pub async fn check(&self, s: &Subject<'_>, stats: &ServiceStats) -> Verdict {
        let mut ip_text = [0u8; 16];
        let ident: &[u8] = match &self.key {
            LimitKey::App => s.app.unwrap_or("").as_bytes(),
            LimitKey::ClientIp => match s.client_ip {
                IpAddr::V4(v4) => {
                    ip_text[..4].copy_from_slice(&v4.octets());
                    &ip_text[..4]
                }
                IpAddr::V6(v6) => {
                    ip_text = v6.octets();
                    &ip_text
                }
            },
            LimitKey::Header(_) => {
                self.header.as_ref().and_then(|n| s.headers.get(n)).map_or(&[][..], |v| v.as_bytes())
            }
            LimitKey::Service => b"",
        };
        let path: &[u8] = if self.per_path { s.path.as_bytes() } else { b"" };
        let decision = match &self.store {
            Store::Local(table) => {
                let h = match (&self.key, self.per_path) {
                    (LimitKey::App | LimitKey::Service, false) => {
                        table.hash_configured(s.service_hash ^ s.app_hash.rotate_left(29))
                    }
                    _ => table.hash(&[&s.service_hash.to_le_bytes(), ident, path]),
                };
                table.decide(&self.gcra, h)
            }
            Store::Cluster { client, key_prefix, on_error } => {
                let key = redis_key(key_prefix, s.service, ident, path);
                // Boxed: the Redis exchange's state is large, and only cluster limits need it, so
                // every other request's future stays small.
                match Box::pin(cluster::decide(client, &self.gcra, &key)).await {
                    Ok(d) => d,
                    Err(e) => {
                        stats.limiter_errors.inc();
                        if stats.limiter_logged.now(std::time::Duration::from_secs(10)) {
                            tracing::warn!(
                                service = s.service,
                                error = %e,
                                on_redis_error = ?on_error,
                                "cluster rate limit: Redis did not decide (logged once per 10 s per service)"
                            );
                        }
                        return match on_error {
                            FailMode::Open => {
                                Verdict::Allow(Quota { limit: self.gcra.limit, remaining: 0, reset_us: 0 })
                            }
                            FailMode::Closed => Verdict::Unavailable,
                        };
                    }
                }
            }
        };
        match decision {
            Decision::Allow { remaining, reset_us } => {
                Verdict::Allow(Quota { limit: self.gcra.limit, remaining, reset_us })
            }
            Decision::Deny { retry_after_us } => Verdict::Deny { retry_after_us, limit: self.gcra.limit },
        }
    }
}

/// The Redis key of one cluster counter, `prefix:rl:<limit>:{<service>:<hex ident>[:<path hash>]}`:
/// the limit's prefix, then a hash tag of the counter's own (so counters spread over a Redis
/// Cluster's shards). Readable enough to inspect, bounded in length whatever the path.
pub fn redis_key(prefix: &str, service: &str, ident: &[u8], path: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(prefix.len() + service.len() + ident.len() * 2 + 24);
    k.extend_from_slice(prefix.as_bytes());
    // The counter's own hash tag: counters spread over a Redis Cluster's shards.
    k.push(b'{');
    k.extend_from_slice(service.as_bytes());
    k.push(b':');
    let hex_at = k.len();
    k.resize(hex_at + HEXLOWER.encode_len(ident.len()), 0);
    HEXLOWER.encode_mut(ident, &mut k[hex_at..]);
    if !path.is_empty() {
        k.extend_from_slice(format!(":{:016x}", fnv1a(path)).as_bytes());
    }
    k.push(b'}');
    k
}

/// The header a `header:NAME` key reads (validated as a token with the configuration).
fn header_name(key: &LimitKey) -> Option<http::HeaderName> {
    match key {
        LimitKey::Header(name) => http::HeaderName::from_bytes(name.as_bytes()).ok(),
        _ => None,
    }
}

/// A hash that every node computes alike (the local tables use a per-process keyed hash).
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::{fnv1a, redis_key};

    #[test]
    fn redis_keys_name_the_ident_in_lowercase_hex() {
        // Every node of a cluster, whatever its version, must make the same key.
        assert_eq!(redis_key("gh:rl:7:", "svc", &[0x00, 0x1f, 0xab, 0xff], b""), b"gh:rl:7:{svc:001fabff}");
        let with_path = redis_key("p:", "s", b"k", b"/a");
        assert_eq!(with_path, format!("p:{{s:6b:{:016x}}}", fnv1a(b"/a")).into_bytes());
    }
}
