//! The API-gateway part of the model: services (path prefixes guarded by plugins), apps (API
//! consumers with their credentials and grants) and plans (plugin sets granted to apps).

use crate::error::ValueError;
use crate::model::HostHeader;
use crate::units::{ByteSize, Duration};
use crate::upstream::is_token;
use serde::de::{self, Deserializer};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

/// An API service: a path prefix on some hosts, sent to an upstream, guarded by plugins.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Service {
    /// Host patterns it is served on; absent: on every site, and on any host no site claims.
    #[serde(default)]
    pub hosts: Vec<String>,
    /// Path prefix, e.g. `/mws`; matched on whole segments (`/mws` and `/mws/…`, not `/mwsx`).
    pub path: String,
    /// Upstream name, or a weighted list of upstreams (a split), as for routes.
    pub upstream: crate::Destination,
    /// How a client is kept on the upstream of a split it got, as for routes.
    #[serde(default)]
    pub sticky: Option<crate::Sticky>,
    /// A copy of its requests sent to another upstream, as for routes.
    #[serde(default)]
    pub mirror: Option<crate::Mirror>,
    /// Remove the prefix before forwarding.
    #[serde(default = "yes")]
    pub strip_prefix: bool,
    /// Host header sent upstream, as for routes.
    #[serde(default)]
    pub host_header: HostHeader,
    /// Largest request body accepted.
    #[serde(default = "max_body")]
    pub max_body: ByteSize,
    /// Longest a request may take, head to the end of the response, as for routes.
    #[serde(default)]
    pub stream_timeout: Option<Duration>,
    /// Route, guard and forward normalized paths (`false`: the client's path as sent, and then no
    /// `acl` or `per_path` limit may apply).
    #[serde(default = "yes")]
    pub normalize_path: bool,
    /// How callers prove who they are: `none`, `app_key`, `jwt`, or a list of those accepted.
    #[serde(default)]
    pub auth: Auth,
    /// Where the app key is looked for.
    #[serde(default)]
    pub app_key: AppKeySources,
    /// JWT checks for `auth: jwt`: one issuer's settings, or a list of issuers.
    #[serde(default)]
    pub jwt: JwtIssuers,
    /// The authorization service asked for `auth: external`.
    #[serde(default)]
    pub external: Option<External>,
    /// Header that carries the caller's app id to the backend (`""`: none). Whatever the client
    /// sent under this name is removed first.
    #[serde(default = "app_id_header")]
    pub app_id_header: String,
    /// Method and path rules for every caller, checked before the caller's plan.
    #[serde(default)]
    pub acl: Option<Acl>,
    /// Rate limits for every caller; a request must pass every one.
    #[serde(default)]
    pub rate_limits: Vec<RateLimit>,
    /// Header rewrites for every caller, applied before the plan's.
    #[serde(default)]
    pub headers: HeaderRewrite,
    /// Which other origins' pages may read its answers (CORS); preflights answered before any
    /// credential, ACL or rate limit is judged.
    #[serde(default)]
    pub cors: Option<crate::Cors>,
    /// Answers compressed for clients that accept it (in place of the sites' `compression`).
    #[serde(default)]
    pub compression: Option<crate::Compression>,
}

/// A plan (SLA): plugins applied to the apps granted it, after the service's own.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// Method and path rules.
    #[serde(default)]
    pub acl: Option<Acl>,
    /// Rate limits; a request must pass every one.
    #[serde(default)]
    pub rate_limits: Vec<RateLimit>,
    /// Header rewrites.
    #[serde(default)]
    pub headers: HeaderRewrite,
}

/// Credential types a service accepts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Auth(pub Vec<AuthMethod>);

/// One credential type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthMethod {
    /// An app key in a header, query parameter or path segment.
    AppKey,
    /// A bearer JWT signed with one of the app's keys.
    Jwt,
    /// The answer of an authorization service (`external`).
    External,
}

impl<'de> Deserialize<'de> for Auth {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            One(String),
            Many(Vec<String>),
        }
        let names = match Form::deserialize(d)? {
            Form::One(s) if s == "none" => return Ok(Auth(Vec::new())),
            Form::One(s) => vec![s],
            Form::Many(v) => v,
        };
        let mut out = Vec::new();
        for n in names {
            let m = match n.as_str() {
                "app_key" => AuthMethod::AppKey,
                "jwt" => AuthMethod::Jwt,
                "external" => AuthMethod::External,
                other => {
                    return Err(de::Error::custom(format!(
                        "unknown auth `{other}`: use none, app_key, jwt or external"
                    )))
                }
            };
            if !out.contains(&m) {
                out.push(m);
            }
        }
        Ok(Auth(out))
    }
}

/// Where an app key may be sent. Each source can be turned off.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AppKeySources {
    /// Request header (`""`: not read).
    pub header: String,
    /// Query parameter (`""`: not read).
    pub query: String,
    /// A `/~KEY/` path segment right after the service prefix.
    pub path: bool,
}

impl Default for AppKeySources {
    fn default() -> Self {
        AppKeySources { header: "x-app-key".into(), query: "_app_key".into(), path: true }
    }
}

/// The JWT issuers a service accepts tokens from; a token goes to the first whose `issuer` is its
/// `iss` (an entry without `issuer` takes any, so it comes last).
#[derive(Clone, Debug, PartialEq)]
pub struct JwtIssuers(pub Vec<JwtSettings>);

impl Default for JwtIssuers {
    fn default() -> Self {
        JwtIssuers(vec![JwtSettings::default()])
    }
}

impl<'de> Deserialize<'de> for JwtIssuers {
    /// One mapping, or a sequence of them; serde's errors name the field at fault either way.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> de::Visitor<'de> for V {
            type Value = JwtIssuers;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("JWT settings, or a list of them (one per issuer)")
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<JwtIssuers, A::Error> {
                Ok(JwtIssuers(vec![JwtSettings::deserialize(de::value::MapAccessDeserializer::new(map))?]))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<JwtIssuers, A::Error> {
                Ok(JwtIssuers(Vec::deserialize(de::value::SeqAccessDeserializer::new(seq))?))
            }
        }
        d.deserialize_any(V)
    }
}

/// JWT validation rules for one issuer of a service.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct JwtSettings {
    /// Required `iss`; with several issuers, the one this entry is for.
    pub issuer: Option<String>,
    /// Required `aud` (one of the token's audiences).
    pub audience: Option<String>,
    /// Clock skew allowed on `exp` and `nbf`.
    pub leeway: Duration,
    /// Refuse tokens without `exp`.
    pub require_exp: bool,
    /// Claim naming the app: for apps' own keys, when the token has no `kid` (default `sub`);
    /// for a key set, a token whose claim names an app gets that app's grant and plan (no
    /// default: callers are not apps).
    pub app_claim: Option<String>,
    /// Find the key set at `{issuer}/.well-known/openid-configuration` (OpenID Connect
    /// Discovery).
    pub discovery: bool,
    /// The key set's URL, instead of discovery.
    pub jwks_uri: Option<String>,
    /// How the key set is fetched and kept.
    pub jwks: JwksSettings,
    /// Claims sent to the backend as headers: claim name → header name. The client's own
    /// headers of those names are always removed.
    pub forward_claims: BTreeMap<String, String>,
    /// Remove the `Authorization` header before forwarding (the backend sees the claims it is
    /// given, not the token).
    pub strip_token: bool,
    /// Plan for callers whose token names no app (key set only).
    pub plan: Option<String>,
}

impl Default for JwtSettings {
    fn default() -> Self {
        JwtSettings {
            issuer: None,
            audience: None,
            leeway: Duration::secs(30),
            require_exp: true,
            app_claim: None,
            discovery: false,
            jwks_uri: None,
            jwks: JwksSettings::default(),
            forward_claims: BTreeMap::new(),
            strip_token: false,
            plan: None,
        }
    }
}

impl JwtSettings {
    /// Whether the keys come from a key set (discovery or `jwks_uri`) rather than from apps.
    pub fn uses_key_set(&self) -> bool {
        self.discovery || self.jwks_uri.is_some()
    }
}

/// An authorization service (nginx `auth_request`, Traefik `forwardAuth`, Envoy `ext_authz`):
/// asked about each request, its 2xx admits it, any other answer goes back to the client.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct External {
    /// The service's URL (`http://` or `https://`); asked with `GET`.
    pub url: String,
    /// Longest the service may take to answer.
    #[serde(default = "two_seconds")]
    pub timeout: Duration,
    /// Request headers sent to the service (as well as `X-Forwarded-Method`, `-Uri`, `-Host` and
    /// `-For`).
    #[serde(default = "external_forward")]
    pub forward_headers: Vec<String>,
    /// Headers of the service's 2xx answer added to the request sent upstream; the client's own
    /// headers of those names are always removed.
    #[serde(default)]
    pub copy_response_headers: Vec<String>,
    /// Keep 2xx answers for a while, by method, target and these request headers.
    #[serde(default)]
    pub cache: Option<ExternalCache>,
    /// Admit requests when the service cannot be asked (down, timed out): say so explicitly.
    #[serde(default)]
    pub fail_open: bool,
    /// PEM file of the CAs of an `https://` service's certificate; absent: the system's roots.
    #[serde(default)]
    pub ca: Option<PathBuf>,
}

/// How long an authorization service's 2xx answers are kept.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExternalCache {
    /// How long an answer is used.
    pub ttl: Duration,
    /// Request headers that, with the method and target, say whose answer it is.
    #[serde(default = "external_cache_key")]
    pub key: Vec<String>,
    /// Most answers kept.
    #[serde(default = "external_cache_entries")]
    pub max_entries: usize,
}

fn two_seconds() -> Duration {
    Duration::secs(2)
}

fn external_forward() -> Vec<String> {
    vec!["authorization".into(), "cookie".into()]
}

fn external_cache_key() -> Vec<String> {
    vec!["authorization".into(), "cookie".into()]
}

fn external_cache_entries() -> usize {
    10_000
}

/// How a key set is fetched and kept.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct JwksSettings {
    /// Longest a fetched set is used before it is fetched again (sooner when the provider's
    /// `Cache-Control: max-age` says so).
    pub refresh: Duration,
    /// Shortest time between two fetches: bounds both a short `max-age` and the refetches that
    /// tokens with unknown key ids trigger.
    pub min_refetch: Duration,
    /// Longest a fetch (discovery and key set) may take.
    pub timeout: Duration,
    /// PEM file of the CAs that sign the provider's certificate; absent: the system's roots.
    pub ca: Option<PathBuf>,
}

impl Default for JwksSettings {
    fn default() -> Self {
        JwksSettings {
            refresh: Duration::secs(600),
            min_refetch: Duration::secs(30),
            timeout: Duration::secs(5),
            ca: None,
        }
    }
}

/// Allow and deny rules on method and path. Deny rules win; when allow rules exist, a request
/// must match one of them.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Acl {
    /// Requests matching one of these are allowed.
    #[serde(default)]
    pub allow: Vec<AclRule>,
    /// Requests matching one of these are refused.
    #[serde(default)]
    pub deny: Vec<AclRule>,
}

/// One ACL rule: a request matches when its method is listed (or none are) and its path matches
/// one of the globs (or none are given).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AclRule {
    /// Methods, upper case (`GET`, `POST`, …); empty: any.
    #[serde(default)]
    pub methods: Vec<String>,
    /// Path globs below the service prefix: `*` matches within one segment, `**` across
    /// segments; empty: any path.
    #[serde(default)]
    pub paths: Vec<String>,
}

/// A rate limit (GCRA): `limit` requests per `interval`, at most `burst` at once.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    /// Requests allowed per interval, on average.
    pub limit: u64,
    /// The interval.
    #[serde(default = "one_second")]
    pub interval: Duration,
    /// Requests that may arrive at once; defaults to `limit`.
    #[serde(default)]
    pub burst: Option<u64>,
    /// What is counted: `app`, `client_ip`, `header:NAME` or `service` (every caller together).
    #[serde(default)]
    pub key: LimitKey,
    /// Count each request path separately.
    #[serde(default)]
    pub per_path: bool,
    /// Once the limit is exceeded, refuse the key for this long.
    #[serde(default)]
    pub block: Option<Duration>,
    /// `local` (each node counts on its own) or `cluster` (one count in Redis for all nodes).
    #[serde(default)]
    pub scope: LimitScope,
    /// For `cluster`: what to do when Redis cannot answer: `open` (admit) or `closed` (refuse).
    #[serde(default)]
    pub on_redis_error: FailMode,
    /// For `local`: keys tracked at once (a table of this many slots).
    #[serde(default = "max_keys")]
    pub max_keys: usize,
    /// Tell admitted clients their quota in `RateLimit-Limit`, `RateLimit-Remaining` and
    /// `RateLimit-Reset` (a 429 always carries them). Off by default, as Envoy's: three more
    /// headers on every response cost more than the check itself.
    #[serde(default)]
    pub headers: bool,
}

/// What a rate limit counts by.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum LimitKey {
    /// The authenticated app.
    #[default]
    App,
    /// The client address.
    ClientIp,
    /// A request header (lower-case name); requests without it share one count.
    Header(String),
    /// Every request of the service together (for a plan: every request of its apps to the
    /// service): a ceiling that protects the backend.
    Service,
}

impl<'de> Deserialize<'de> for LimitKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.split_once(':') {
            None if s == "app" => Ok(LimitKey::App),
            None if s == "client_ip" => Ok(LimitKey::ClientIp),
            None if s == "service" => Ok(LimitKey::Service),
            Some(("header", name)) if is_token(name) => Ok(LimitKey::Header(name.to_ascii_lowercase())),
            _ => Err(de::Error::custom(format!("invalid key `{s}`: use app, client_ip, header:NAME or service"))),
        }
    }
}

/// Where a rate limit is counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitScope {
    /// In this node.
    #[default]
    Local,
    /// In Redis, shared by the cluster.
    Cluster,
}

/// Behaviour when a shared store is unreachable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailMode {
    /// Admit the request.
    #[default]
    Open,
    /// Refuse it with 503.
    Closed,
}

/// Header changes on the request to the backend and on the response to the client.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeaderRewrite {
    /// On the request sent upstream.
    #[serde(default)]
    pub request: HeaderOps,
    /// On the response sent to the client.
    #[serde(default)]
    pub response: HeaderOps,
}

/// Header operations, applied in the order remove, set, append.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeaderOps {
    /// Headers removed.
    #[serde(default)]
    pub remove: Vec<String>,
    /// Headers set, replacing any value.
    #[serde(default)]
    pub set: BTreeMap<String, String>,
    /// Headers added beside existing values.
    #[serde(default)]
    pub append: BTreeMap<String, String>,
}

impl HeaderOps {
    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.remove.is_empty() && self.set.is_empty() && self.append.is_empty()
    }
}

/// An API consumer.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct App {
    /// The app key, as callers send it.
    #[serde(default)]
    pub key: Option<String>,
    /// The SHA-256 of the app key in hex, so the file need not hold the key itself. Safe only
    /// for keys of high entropy: a guessable key is found from its digest offline.
    #[serde(default)]
    pub key_sha256: Option<String>,
    /// The HMAC-SHA-256 of the app key under a key derived from the cluster secret
    /// (`redis.secret_file`), in hex: a leaked file or revision reveals nothing without the secret.
    #[serde(default)]
    pub key_hmac: Option<String>,
    /// Shared secret: the HS256 key of JWTs the app signs (when `jwt_keys` does not list one).
    #[serde(default)]
    pub secret: Option<String>,
    /// Keys that verify the app's JWTs.
    #[serde(default)]
    pub jwt_keys: Vec<JwtKey>,
    /// Client networks the app may call from (`10.0.0.0/8`, `2001:db8::/32`, single addresses);
    /// empty: any.
    #[serde(default)]
    pub allow_ips: Vec<IpNet>,
    /// Services the app may call, each with its plan (`~` for none).
    #[serde(default)]
    pub grants: BTreeMap<String, Option<String>>,
    /// OpenID issuers whose tokens may name this app (through a service's `jwt.app_claim`); a
    /// token of another issuer naming it is taken as naming no app.
    #[serde(default)]
    pub issuers: Vec<String>,
}

/// A JWT verification key.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JwtKey {
    /// Key id matched against the token's `kid`; unique across apps.
    #[serde(default)]
    pub kid: Option<String>,
    /// `HS256`, `HS384`, `HS512`, `RS256`, `RS384`, `RS512`, `PS256`, `PS384`, `PS512`, `ES256`,
    /// `ES384`, `ES512` or `EdDSA`.
    pub alg: String,
    /// The HMAC secret, for `HS*`.
    #[serde(default)]
    pub secret: Option<String>,
    /// PEM public key file (or certificate), for the other algorithms.
    #[serde(default)]
    pub public_key: Option<PathBuf>,
}

/// Circuit breaker of each endpoint of an upstream.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CircuitBreaker {
    /// Failures (5xx answers, connect errors, timeouts) that open the breaker.
    pub error_threshold: u32,
    /// Window in which those failures are counted.
    #[serde(default = "ten_seconds")]
    pub error_reset: Duration,
    /// How long the breaker stays open before one probe request is let through.
    #[serde(default = "ten_seconds")]
    pub retry_delay: Duration,
}

/// An IP network: an address and a prefix length (`10.0.0.0/8`); a bare address is one host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpNet {
    /// The network address, host bits cleared.
    pub addr: IpAddr,
    /// Prefix length.
    pub prefix: u8,
}

impl IpNet {
    /// Parses `addr/len` or a bare address.
    pub fn parse(text: &str) -> Result<Self, ValueError> {
        let bad = || ValueError::InvalidNetwork { text: text.into() };
        let (addr, prefix) = match text.split_once('/') {
            Some((a, p)) => (a.parse::<IpAddr>().map_err(|_| bad())?, Some(p.parse::<u8>().map_err(|_| bad())?)),
            None => (text.parse::<IpAddr>().map_err(|_| bad())?, None),
        };
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = prefix.unwrap_or(max);
        if prefix > max {
            return Err(bad());
        }
        Ok(IpNet { addr: mask(addr, prefix), prefix })
    }

    /// Whether `ip` is in the network; an IPv4-mapped IPv6 address counts as its IPv4 address.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        ip.is_ipv4() == self.addr.is_ipv4() && mask(ip, self.prefix) == self.addr
    }
}

fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let bits = u32::from(v4) & u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4(bits.into())
        }
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6(bits.into())
        }
    }
}

impl<'de> Deserialize<'de> for IpNet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        IpNet::parse(&s).map_err(de::Error::custom)
    }
}

fn yes() -> bool {
    true
}
fn max_body() -> ByteSize {
    ByteSize(16 << 20)
}
fn app_id_header() -> String {
    "x-app-id".into()
}
fn one_second() -> Duration {
    Duration::secs(1)
}
fn ten_seconds() -> Duration {
    Duration::secs(10)
}
fn max_keys() -> usize {
    65_536
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks() {
        let n = IpNet::parse("10.1.2.3/8").expect("valid");
        assert_eq!(n.addr, "10.0.0.0".parse::<IpAddr>().expect("ip"));
        assert!(n.contains("10.200.0.1".parse().expect("ip")));
        assert!(n.contains("::ffff:10.0.0.1".parse().expect("ip")));
        assert!(!n.contains("11.0.0.1".parse().expect("ip")));
        assert!(IpNet::parse("0.0.0.0/0").expect("valid").contains("1.2.3.4".parse().expect("ip")));
        let one = IpNet::parse("192.0.2.7").expect("valid");
        assert!(one.contains("192.0.2.7".parse().expect("ip")) && !one.contains("192.0.2.8".parse().expect("ip")));
        assert!(IpNet::parse("2001:db8::/32").expect("valid").contains("2001:db8:1::1".parse().expect("ip")));
        for bad in ["10.0.0.0/33", "x", "10.0.0.0/", "::/129"] {
            assert!(IpNet::parse(bad).is_err(), "{bad}");
        }
    }
}
