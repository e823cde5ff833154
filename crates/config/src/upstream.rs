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
    /// Open each connection to an endpoint with a PROXY protocol header naming the client.
    #[serde(default)]
    pub send_proxy_protocol: Option<ProxyProtocolVersion>,
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

/// One target of an upstream; written as `"ip:port"`, `"name:port"` or as a map.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// Where its endpoints are.
    pub address: Address,
    /// Relative weight, 1 to 1000 (for SRV targets, the records' weights are used).
    pub weight: u32,
    /// Concurrent requests allowed to each of its endpoints (0: no limit).
    pub max_conns: u32,
}

/// Where a target's endpoints are.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Address {
    /// One endpoint, an IP literal and port.
    Ip(SocketAddr),
    /// A host name, resolved (A and AAAA records): every address is an endpoint on `port`.
    Name {
        /// The name.
        host: String,
        /// The port.
        port: u16,
    },
    /// An SRV record name (`_http._tcp.api.internal`): each record gives a host, port and weight.
    Srv(String),
}

impl Address {
    /// Reads `ip:port`, `[ipv6]:port` or `name:port`.
    pub fn parse(text: &str) -> Result<Address, String> {
        if let Ok(addr) = text.parse::<SocketAddr>() {
            return Ok(Address::Ip(addr));
        }
        let expected = || format!("invalid address `{text}`: expected ip:port or name:port");
        let (host, port) = text.rsplit_once(':').ok_or_else(expected)?;
        let port: u16 = port.parse().map_err(|_| expected())?;
        if host.parse::<std::net::IpAddr>().is_ok() || host.starts_with('[') {
            return Err(expected());
        }
        if !valid_dns_name(host) {
            return Err(format!("invalid host name `{host}` in `{text}`"));
        }
        Ok(Address::Name { host: host.to_ascii_lowercase(), port })
    }

    /// The host name to resolve, if any.
    pub fn host(&self) -> Option<&str> {
        match self {
            Address::Name { host, .. } => Some(host),
            _ => None,
        }
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Ip(a) => a.fmt(f),
            Address::Name { host, port } => write!(f, "{host}:{port}"),
            Address::Srv(name) => write!(f, "srv {name}"),
        }
    }
}

/// Whether `name` is a DNS name: dot-separated labels of letters, digits, `-` and `_` (service
/// labels), each 1 to 63 bytes, 253 in all; a final dot is allowed.
pub fn valid_dns_name(name: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name);
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
        && !name.bytes().all(|b| b.is_ascii_digit() || b == b'.')
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetMap {
    #[serde(default)]
    address: Option<String>,
    #[serde(default)]
    srv: Option<String>,
    #[serde(default)]
    weight: Option<u32>,
    #[serde(default)]
    max_conns: u32,
}

impl<'de> Deserialize<'de> for Target {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Target;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    "an address `ip:port` or `name:port`, or a map with `address` (or `srv`), `weight`, `max_conns`",
                )
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Target, E> {
                let address = Address::parse(v).map_err(E::custom)?;
                Ok(Target { address, weight: 1, max_conns: 0 })
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Target, A::Error> {
                let m = TargetMap::deserialize(de::value::MapAccessDeserializer::new(map))?;
                let address = match (m.address, m.srv) {
                    (Some(a), None) => Address::parse(&a).map_err(de::Error::custom)?,
                    (None, Some(srv)) if m.weight.is_some() => {
                        return Err(de::Error::custom(format!(
                            "`{srv}`: an SRV target takes its weights from the records; remove `weight`"
                        )))
                    }
                    (None, Some(srv)) if valid_dns_name(&srv) => Address::Srv(srv.to_ascii_lowercase()),
                    (None, Some(srv)) => return Err(de::Error::custom(format!("invalid SRV name `{srv}`"))),
                    (Some(_), Some(_)) => return Err(de::Error::custom("set either `address` or `srv`, not both")),
                    (None, None) => return Err(de::Error::custom("missing field `address`")),
                };
                Ok(Target { address, weight: m.weight.unwrap_or_else(defaults::weight), max_conns: m.max_conns })
            }
        }
        d.deserialize_any(V)
    }
}

/// How upstream host names are resolved (the top-level `resolver` section).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Resolver {
    /// DNS servers (`ip:port`) asked instead of those of `/etc/resolv.conf`.
    pub nameservers: Vec<SocketAddr>,
    /// Time allowed for one query to one server.
    pub timeout: Duration,
    /// Queries sent for one lookup before it fails.
    pub attempts: u32,
    /// Shortest time an answer is used before it is asked again, whatever its TTL.
    pub min_ttl: Duration,
    /// Longest time an answer is used before it is asked again, whatever its TTL.
    pub max_ttl: Duration,
    /// Time before a failed lookup is tried again (the last good answer is kept meanwhile).
    pub failure_retry: Duration,
    /// Which addresses of a name become endpoints.
    pub prefer: IpPreference,
}

impl Default for Resolver {
    fn default() -> Self {
        Resolver {
            nameservers: Vec::new(),
            timeout: Duration::secs(2),
            attempts: 2,
            min_ttl: Duration::secs(1),
            max_ttl: Duration::secs(300),
            failure_retry: Duration::secs(5),
            prefer: IpPreference::Ipv4,
        }
    }
}

/// Which addresses of a host name become endpoints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IpPreference {
    /// The IPv4 addresses; the IPv6 ones only when the name has no IPv4 address.
    #[default]
    Ipv4,
    /// The IPv6 addresses; the IPv4 ones only when the name has no IPv6 address.
    Ipv6,
    /// Every address, IPv4 and IPv6.
    Both,
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

/// A PROXY protocol version sent to upstreams.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProxyProtocolVersion {
    /// The text header (`PROXY TCP4 ...`).
    V1,
    /// The binary header.
    V2,
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
    /// HTTP/2 PING on a connection with open streams after this long without a frame from the
    /// endpoint (`0s`: none). Five minutes by default: gRPC servers answer more frequent pings
    /// on a stream that sends no data with GOAWAY `too_many_pings`.
    pub ping_interval: Duration,
    /// A PING unanswered for this long closes the connection and fails its streams.
    pub ping_timeout: Duration,
}

impl Default for Keepalive {
    fn default() -> Self {
        Keepalive {
            max_idle: 256,
            idle_timeout: Duration::secs(60),
            ping_interval: Duration::secs(300),
            ping_timeout: Duration::secs(20),
        }
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
    /// gRPC statuses an endpoint answers with that count as its failures (for ejection and the
    /// circuit breaker), by name (`UNAVAILABLE`) or number (`14`); none by default: an endpoint
    /// that answers a call with a status has answered.
    pub grpc_failures: Vec<GrpcCode>,
}

impl Default for PassiveHealth {
    fn default() -> Self {
        PassiveHealth { failures: 3, eject: Duration::secs(10), grpc_failures: Vec::new() }
    }
}

/// A gRPC status code, 0 to 16.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrpcCode(pub u8);

/// gRPC's status codes by number.
pub const GRPC_CODE_NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

impl<'de> Deserialize<'de> for GrpcCode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(u64),
            Name(String),
        }
        let code = match Raw::deserialize(d)? {
            Raw::Number(n) => u8::try_from(n).ok().filter(|&n| n <= 16),
            Raw::Name(name) => {
                GRPC_CODE_NAMES.iter().position(|c| c.eq_ignore_ascii_case(&name)).and_then(|i| u8::try_from(i).ok())
            }
        };
        code.map(GrpcCode)
            .ok_or_else(|| de::Error::custom("a gRPC status: a name such as UNAVAILABLE, or a number from 0 to 16"))
    }
}

/// How a health check asks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HealthCheckKind {
    /// `GET path`.
    #[default]
    Http,
    /// gRPC's health checking protocol.
    Grpc,
}

/// Active HTTP health check.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthCheck {
    /// What is asked: `http` (GET `path`, a 2xx or 3xx answer is healthy) or `grpc` (gRPC's
    /// health protocol, `grpc.health.v1.Health/Check` for `service`).
    #[serde(default, rename = "type")]
    pub kind: HealthCheckKind,
    /// Path requested with GET (`type: http`).
    #[serde(default)]
    pub path: String,
    /// The service asked about (`type: grpc`); empty: the server as a whole.
    #[serde(default)]
    pub service: String,
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
