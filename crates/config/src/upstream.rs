//! Configuration of upstreams: the endpoints a pool sends requests to, how it balances between
//! them, how it connects (protocol, TLS, keep-alive, timeouts) and how it judges their health.

use crate::error::ValueError;
use crate::gateway::CircuitBreaker;
use crate::model::{defaults, TlsVersion};
use crate::units::Duration;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

/// An upstream pool.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Upstream {
    /// Endpoints of the pool.
    pub targets: Vec<Target>,
    /// Balancing policy.
    #[serde(default)]
    pub balance: Balance,
    /// The key for `consistent_hash`.
    #[serde(default)]
    pub hash_key: Option<HashKey>,
    /// Protocol spoken to the endpoints.
    #[serde(default)]
    pub protocol: UpstreamProtocol,
    /// TLS to the endpoints (`tls: {}`: verified against the system's roots).
    #[serde(default)]
    pub tls: Option<UpstreamTls>,
    /// Keep-alive pool settings.
    #[serde(default)]
    pub keepalive: Keepalive,
    /// Timeouts.
    #[serde(default)]
    pub timeouts: Timeouts,
    /// Further attempts on another endpoint after a failed one.
    #[serde(default = "defaults::retries")]
    pub retries: u32,
    /// Upstream statuses that count as failures worth a retry (idempotent requests only).
    #[serde(default)]
    pub retry_on_status: Vec<u16>,
    /// Passive health: eject an endpoint after consecutive failures.
    #[serde(default)]
    pub passive_health: PassiveHealth,
    /// Active health checks.
    #[serde(default)]
    pub health_check: Option<HealthCheck>,
    /// Circuit breaker on each endpoint.
    #[serde(default)]
    pub circuit_breaker: Option<CircuitBreaker>,
}

/// One endpoint; written as `"ip:port"` or as a map.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// Endpoint address.
    pub address: SocketAddr,
    /// Relative weight, 1 to 1000.
    pub weight: u32,
    /// Concurrent requests allowed to this endpoint (0: no limit).
    pub max_conns: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetMap {
    address: SocketAddr,
    #[serde(default = "defaults::weight")]
    weight: u32,
    #[serde(default)]
    max_conns: u32,
}

impl<'de> Deserialize<'de> for Target {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Target;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an address `ip:port` or a map with `address`, `weight`, `max_conns`")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Target, E> {
                let address = v.parse().map_err(|_| E::custom(format!("invalid address `{v}`: expected ip:port")))?;
                Ok(Target { address, weight: 1, max_conns: 0 })
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Target, A::Error> {
                let m = TargetMap::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(Target { address: m.address, weight: m.weight, max_conns: m.max_conns })
            }
        }
        d.deserialize_any(V)
    }
}

/// Balancing policy of an upstream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Balance {
    /// Weighted random.
    Random,
    /// Smooth weighted round robin (nginx's order).
    #[default]
    RoundRobin,
    /// Fewest requests in flight relative to weight.
    LeastConn,
    /// Peak-EWMA latency, power of two random choices.
    Ewma,
    /// Client address hash on the first two octets (IPv4) or first 48 bits (IPv6), weighted.
    IpHash,
    /// Consistent hash ring on `hash_key`.
    ConsistentHash,
}

/// What `consistent_hash` hashes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HashKey {
    /// The client address.
    ClientIp,
    /// The request path and query.
    Uri,
    /// A request header (lower-case name).
    Header(String),
    /// A cookie by name.
    Cookie(String),
}

impl HashKey {
    /// Parses `client_ip`, `uri`, `header:NAME` or `cookie:NAME`.
    pub fn parse(text: &str) -> Result<Self, ValueError> {
        let bad = || ValueError::InvalidHashKey { text: text.into() };
        match text.split_once(':') {
            None if text == "client_ip" => Ok(HashKey::ClientIp),
            None if text == "uri" => Ok(HashKey::Uri),
            Some(("header", name)) if is_token(name) => Ok(HashKey::Header(name.to_ascii_lowercase())),
            Some(("cookie", name)) if is_token(name) => Ok(HashKey::Cookie(name.to_string())),
            _ => Err(bad()),
        }
    }
}

/// True for a non-empty RFC 9110 token (header names, cookie names).
pub fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

impl<'de> Deserialize<'de> for HashKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        HashKey::parse(&s).map_err(de::Error::custom)
    }
}

/// Protocol to the endpoints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UpstreamProtocol {
    /// HTTP/1.1 with pooled keep-alive connections.
    #[default]
    Http1,
    /// HTTP/2 (prior knowledge in plain text, ALPN `h2` over TLS), one multiplexed connection per
    /// endpoint and worker.
    Http2,
    /// Over TLS, what the endpoint picks by ALPN among `h2` and `http/1.1`; in plain text, HTTP/1.1.
    Auto,
}

/// TLS from the proxy to an upstream's endpoints.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UpstreamTls {
    /// PEM file of the CA certificates endpoint certificates must chain to, instead of the
    /// system's roots.
    pub ca: Option<PathBuf>,
    /// Name sent as SNI and verified in the endpoint's certificate. Default: the target's host
    /// name, or its IP address (verified against the certificate's IP addresses, no SNI sent).
    pub server_name: Option<String>,
    /// Verify the endpoint's certificate. `false` accepts any certificate (logged as a warning at
    /// start): only for endpoints on a trusted network.
    pub verify: bool,
    /// PEM file of the client certificate chain presented to endpoints that ask for one (mTLS).
    pub cert: Option<PathBuf>,
    /// PEM file of the client certificate's private key.
    pub key: Option<PathBuf>,
    /// Protocol versions offered.
    pub versions: Vec<TlsVersion>,
    /// ALPN protocols offered. Default: from `protocol` (`http1`: `http/1.1`, `http2`: `h2`,
    /// `auto`: `h2`, `http/1.1`).
    pub alpn: Option<Vec<String>>,
    /// Sessions remembered per endpoint for resumption (tickets and session ids); 0 turns
    /// resumption off.
    pub session_cache: usize,
}

impl Default for UpstreamTls {
    fn default() -> Self {
        UpstreamTls {
            ca: None,
            server_name: None,
            verify: true,
            cert: None,
            key: None,
            versions: vec![TlsVersion::Tls12, TlsVersion::Tls13],
            alpn: None,
            session_cache: 32,
        }
    }
}

/// Keep-alive pool settings, per endpoint and worker.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Keepalive {
    /// Idle connections kept per endpoint and worker.
    pub max_idle: usize,
    /// Idle connections older than this are closed.
    pub idle_timeout: Duration,
}

impl Default for Keepalive {
    fn default() -> Self {
        Keepalive { max_idle: 256, idle_timeout: Duration::secs(60) }
    }
}

/// Upstream timeouts.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Timeouts {
    /// Establishing a TCP connection.
    pub connect: Duration,
    /// Waiting for the response head, and between two reads of the response body.
    pub read: Duration,
    /// A single blocked write of the request to the endpoint.
    pub write: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts { connect: Duration::secs(3), read: Duration::secs(60), write: Duration::secs(60) }
    }
}

/// Passive health: eject after `failures` consecutive failures for `eject`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PassiveHealth {
    /// Consecutive failures (connect errors, timeouts, 5xx listed in `retry_on_status`) that eject; 0 disables.
    pub failures: u32,
    /// How long an ejected endpoint is skipped.
    pub eject: Duration,
}

impl Default for PassiveHealth {
    fn default() -> Self {
        PassiveHealth { failures: 3, eject: Duration::secs(10) }
    }
}

/// Active HTTP health check.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthCheck {
    /// Path requested with GET.
    pub path: String,
    /// Time between checks.
    #[serde(default = "defaults::hc_interval")]
    pub interval: Duration,
    /// Time allowed for one check.
    #[serde(default = "defaults::hc_timeout")]
    pub timeout: Duration,
    /// Consecutive successes that mark an endpoint healthy.
    #[serde(default = "defaults::rise")]
    pub rise: u32,
    /// Consecutive failures that mark an endpoint unhealthy.
    #[serde(default = "defaults::fall")]
    pub fall: u32,
    /// Host header sent with checks.
    #[serde(default)]
    pub host: Option<String>,
}
