//! The hyperapi 0.2.2 file format (`-c FILE` of its binary), read leniently: every field it defines,
//! plus whatever else the file holds, kept aside so that it can be reported rather than lost.
//!
//! hyperapi itself required every field; here the ones with a Gatehouse default may be missing.

use serde::de::{self, Deserializer};
use serde::Deserialize;
use serde_yaml::{Mapping, Value};
use std::collections::BTreeMap;

/// Settings the file holds that hyperapi 0.2.2 does not define.
pub type Extra = BTreeMap<String, Value>;

/// The whole file.
#[derive(Debug, Deserialize)]
pub struct File {
    /// API services.
    #[serde(default)]
    pub services: Vec<Service>,
    /// API consumers.
    #[serde(default)]
    pub clients: Vec<Client>,
    /// Not a hyperapi setting (it took the address from `-L`), accepted so a file can carry it.
    #[serde(default)]
    pub listen: Option<String>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `ServiceInfo`.
#[derive(Debug, Deserialize)]
pub struct Service {
    /// Unique id; clients name it in `services`.
    #[serde(deserialize_with = "scalar")]
    pub service_id: String,
    /// `/segment`: hyperapi routes on the first path segment only.
    pub path: String,
    /// Unused by hyperapi 0.2.2.
    #[serde(default)]
    pub protocol: Option<String>,
    /// `{type: None | AppKey | JWT}`.
    pub auth: Auth,
    /// Seconds: connect timeout and deadline of the whole upstream exchange.
    #[serde(default)]
    pub timeout: Option<u32>,
    /// `hash`, `load`, `conn`; anything else is weighted random.
    #[serde(default)]
    pub load_balance: Option<String>,
    /// Filters applied to every caller.
    #[serde(default)]
    pub filters: Vec<Filter>,
    /// Named filter sets, one of which each client is given.
    #[serde(default)]
    pub sla: Vec<ServiceLevel>,
    /// Endpoints.
    #[serde(default)]
    pub upstreams: Vec<Upstream>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `AuthSetting`, an internally tagged enum in hyperapi.
#[derive(Debug, Deserialize)]
pub struct Auth {
    /// `None`, `AppKey` or `JWT`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `ServiceLevel`: an SLA.
#[derive(Debug, Deserialize)]
pub struct ServiceLevel {
    /// Name clients refer to.
    #[serde(deserialize_with = "scalar")]
    pub name: String,
    /// Filters applied to the clients given this SLA.
    #[serde(default)]
    pub filters: Vec<Filter>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `Upstream`: one endpoint.
#[derive(Debug, Deserialize)]
pub struct Upstream {
    /// Label of the `X-UPSTREAM-ID` response header and of metrics.
    #[serde(default, deserialize_with = "optional_scalar")]
    pub id: Option<String>,
    /// `http://host:port/path`.
    pub target: String,
    /// Concurrent requests.
    #[serde(default)]
    pub max_conn: Option<u64>,
    /// Weight for weighted random balancing.
    #[serde(default)]
    pub weight: Option<u64>,
    /// Label of the `X-UPSTREAM-VERSION` response header and of metrics.
    #[serde(default, deserialize_with = "optional_scalar")]
    pub version: Option<String>,
    /// Circuit breaker: errors tolerated (0: breaker off).
    #[serde(default)]
    pub error_threshold: Option<u64>,
    /// Circuit breaker: seconds after which the error count starts again.
    #[serde(default)]
    pub error_reset: Option<u64>,
    /// Circuit breaker: seconds open before a probe.
    #[serde(default)]
    pub retry_delay: Option<u64>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `FilterSetting`, an adjacently tagged enum in hyperapi; the setting is read by type later, so
/// that an unknown type is a report line, not a parse error.
#[derive(Debug, Deserialize)]
pub struct Filter {
    /// `RateLimit`, `Header` or `ACL`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The type's settings.
    #[serde(default)]
    pub setting: Value,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `RateLimitSetting`: a token bucket of `burst` tokens, refilled with `limit` every `interval`
/// seconds.
#[derive(Debug, Deserialize)]
pub struct RateLimitSetting {
    /// Seconds.
    pub interval: i64,
    /// Tokens added per interval.
    pub limit: i64,
    /// Bucket size.
    pub burst: i64,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `HeaderSetting`.
#[derive(Debug, Deserialize)]
pub struct HeaderSetting {
    /// `request` or `response`.
    pub operate_on: String,
    /// `[name, value]` pairs, each replacing any value.
    #[serde(default)]
    pub injection: Vec<(String, String)>,
    /// Names removed (before the injections).
    #[serde(default)]
    pub removal: Vec<String>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `ACLSetting`.
#[derive(Debug, Deserialize)]
pub struct AclSetting {
    /// `allow`; anything else means deny.
    pub access_control: String,
    /// Rules.
    #[serde(default)]
    pub paths: Vec<PathMatcher>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `PathMatcher`.
#[derive(Debug, Deserialize)]
pub struct PathMatcher {
    /// Comma-separated methods, or `*` for GET, POST, DELETE, PUT, OPTIONS and PATCH.
    pub methods: String,
    /// A glob (the `glob` crate's, where `*` also matches `/`) on the path below the service.
    pub path_pattern: String,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `ClientInfo`.
#[derive(Debug, Deserialize)]
pub struct Client {
    /// Unique id; the `sub` of its JWTs.
    #[serde(deserialize_with = "scalar")]
    pub client_id: String,
    /// The app key.
    #[serde(default, deserialize_with = "scalar")]
    pub app_key: String,
    /// PEM ES256 public key verifying its JWTs.
    #[serde(default)]
    pub pub_key: String,
    /// Client addresses (never checked by hyperapi 0.2.2).
    #[serde(default)]
    pub ip_whitelist: Vec<String>,
    /// `service_id: SLA name`, in file order.
    #[serde(default)]
    pub services: Mapping,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Parses the file.
pub fn parse(text: &str) -> Result<File, serde_yaml::Error> {
    serde_yaml::from_str(text)
}

/// The text of a scalar (`id: 1` and `id: "1"` alike), or `None` for anything else.
pub fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn scalar<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let v = Value::deserialize(d)?;
    scalar_text(&v).ok_or_else(|| de::Error::custom("expected a string or a number"))
}

fn optional_scalar<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        v => scalar_text(&v).map(Some).ok_or_else(|| de::Error::custom("expected a string or a number")),
    }
}
