//! The API's answers and request bodies, typed so that their schemas in the OpenAPI document are
//! derived from them ([`crate::api::openapi`]): the JSON answers make is what the API sends, and
//! a body is taken only as its type reads it.

use gatehouse_control::{Event, NodeReport, Releases, RevisionMeta};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `GET /revisions`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct RevisionList {
    /// Every revision, oldest first.
    pub revisions: Vec<RevisionMeta>,
    /// The revision every node runs unless a label of its has a staged one; null before the first
    /// release.
    #[schema(required = true)]
    pub released: Option<u64>,
    /// Revisions staged to labels.
    pub staged: BTreeMap<String, u64>,
}

/// What a release, rollback, stage or unstage did.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ReleaseChange {
    /// The releases after the change.
    pub releases: Releases,
    /// The change.
    pub event: Event,
}

/// `GET /releases`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ReleaseHistory {
    /// The revision every node runs unless a label of its has a staged one.
    #[schema(required = true)]
    pub released: Option<u64>,
    /// Revisions staged to labels.
    pub staged: BTreeMap<String, u64>,
    /// Counts changes of the releases.
    pub seq: u64,
    /// The last 100 changes, newest first.
    pub history: Vec<Event>,
}

/// The draft after a change, secrets redacted.
#[derive(Serialize, utoipa::ToSchema)]
pub struct DraftWritten {
    /// Its version, which is its new `ETag`.
    pub version: u64,
    /// The published sections.
    #[schema(schema_with = gatehouse_control::document_schema)]
    pub document: serde_json::Value,
}

/// `GET` and `PUT /log-level`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct LogLevel {
    /// The filter in force.
    pub level: String,
    /// `log.level` of the configuration in force.
    pub configured: String,
}

/// A node as `GET /nodes` shows it: its last report, and whether that is old.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = Node)]
pub struct NodeView {
    /// Its last report.
    #[serde(flatten)]
    pub report: NodeReport,
    /// No report for three poll intervals.
    pub stale: bool,
}

/// `GET /nodes`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct NodeList {
    /// Every node that reported, by id.
    pub nodes: Vec<NodeView>,
}

/// `GET /status`: this node.
#[derive(Serialize, utoipa::ToSchema)]
pub struct NodeStatus {
    /// Gatehouse version.
    pub version: &'static str,
    /// Process id.
    pub pid: u32,
    /// Configuration generation (1 at start, +1 per applied change).
    pub generation: u64,
    /// Worker threads.
    pub workers: usize,
    /// Each listener's bound address, by name.
    #[schema(value_type = BTreeMap<String, String>)]
    pub listeners: BTreeMap<String, std::net::SocketAddr>,
    /// The admin listener's bound address.
    #[schema(value_type = Option<String>, required = true)]
    pub admin: Option<std::net::SocketAddr>,
    /// What this node follows.
    pub control: ControlStatus,
}

/// Where a node stands in the control plane.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ControlStatus {
    /// Node id.
    pub node: String,
    /// Its labels.
    pub labels: Vec<String>,
    /// The revision store (`local` or `redis`); none when the node runs its file alone.
    #[schema(required = true)]
    pub store: Option<StoreKind>,
    /// The revision it runs; none when it runs its file.
    #[schema(required = true)]
    pub revision: Option<u64>,
    /// The revision it should run.
    #[schema(required = true)]
    pub target: Option<u64>,
    /// The last revision it refused, while that is still its target.
    #[schema(required = true)]
    pub last_error: Option<gatehouse_control::ApplyError>,
}

/// Where revisions are kept.
#[derive(Serialize, utoipa::ToSchema, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// A directory on this node.
    Local,
    /// Redis, shared by the cluster.
    Redis,
}

/// `GET /stats`: counters the console charts, summed over routes (rates come from differences
/// between samples).
#[derive(Serialize, utoipa::ToSchema)]
pub struct Stats {
    /// Unix milliseconds of the sample.
    pub time_ms: u64,
    /// Configuration generation.
    pub generation: u64,
    /// Client connections open now.
    pub connections_active: i64,
    /// Answers by status class.
    pub requests: StatusClasses,
    /// Request latency.
    pub latency: Latency,
    /// TLS handshakes.
    pub tls: Handshakes,
    /// Each upstream's endpoints.
    pub upstreams: Vec<UpstreamStats>,
}

/// Answers by status class.
#[derive(Serialize, utoipa::ToSchema)]
pub struct StatusClasses {
    #[serde(rename = "1xx")]
    #[schema(rename = "1xx")]
    /// 1xx answers.
    pub informational: u64,
    #[serde(rename = "2xx")]
    #[schema(rename = "2xx")]
    /// 2xx answers.
    pub success: u64,
    #[serde(rename = "3xx")]
    #[schema(rename = "3xx")]
    /// 3xx answers.
    pub redirection: u64,
    #[serde(rename = "4xx")]
    #[schema(rename = "4xx")]
    /// 4xx answers.
    pub client_error: u64,
    #[serde(rename = "5xx")]
    #[schema(rename = "5xx")]
    /// 5xx answers.
    pub server_error: u64,
}

/// A latency histogram.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Latency {
    /// Upper bounds of the buckets, in seconds.
    pub bounds: &'static [f64],
    /// Counts per bucket, one more than `bounds` (above the last).
    pub buckets: Vec<u64>,
    /// Requests.
    pub count: u64,
    /// Seconds, summed.
    pub sum: f64,
}

/// TLS handshakes since start.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Handshakes {
    /// Full handshakes.
    pub full: u64,
    /// Resumed sessions (tickets and the session cache).
    pub resumed: u64,
}

/// An upstream's endpoints.
#[derive(Serialize, utoipa::ToSchema)]
pub struct UpstreamStats {
    /// The upstream.
    pub name: String,
    /// Its endpoints.
    pub endpoints: Vec<EndpointStats>,
}

/// One endpoint of an upstream.
#[derive(Serialize, utoipa::ToSchema)]
pub struct EndpointStats {
    /// `ip:port`.
    pub address: String,
    /// Passing health checks.
    pub healthy: bool,
    /// Ejected by outlier detection.
    pub ejected: bool,
    /// Its circuit breaker.
    pub breaker: Breaker,
    /// Requests in flight.
    pub inflight: u32,
    /// Idle kept-alive connections.
    pub idle: usize,
    /// Requests since start.
    pub requests: u64,
    /// Failures since start.
    pub failures: u64,
}

/// A circuit breaker's state.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Breaker {
    /// Requests pass.
    Closed,
    /// Requests are refused.
    Open,
    /// A trial request passes.
    HalfOpen,
}

/// `GET /draft/diff` and `GET /revisions/{from}/diff/{to}`: two documents compared, secrets
/// redacted.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Diff {
    /// What the left side is (`revision 3`, `nothing`).
    pub from: String,
    /// What the right side is (`revision 4`, `draft`).
    pub to: String,
    /// Nothing differs.
    pub identical: bool,
    /// A unified diff.
    pub unified: String,
    /// Side by side.
    pub rows: Vec<gatehouse_control::diff::Row>,
}

/// What the API shows of a stored certificate bundle (never its key).
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = Certificate)]
pub struct CertificateFacts {
    /// DNS names it serves.
    pub names: Vec<String>,
    /// The leaf's subject.
    pub subject: String,
    /// The leaf's issuer.
    pub issuer: String,
    /// Serial number, hex.
    pub serial: String,
    /// The key's algorithm.
    pub key_type: KeyType,
    /// Start of validity (`YYYY-MM-DD`).
    #[schema(format = Date)]
    pub not_before: String,
    /// End of validity (`YYYY-MM-DD`).
    #[schema(format = Date)]
    pub not_after: String,
    /// End of validity, Unix seconds.
    pub not_after_unix: i64,
    /// Whole days until the end of validity (negative after it).
    pub days_left: i64,
    /// Past its end of validity.
    pub expired: bool,
    /// Certificates in the chain, the leaf included.
    pub chain_length: usize,
    /// Where the store keeps it.
    pub stored_as: String,
    /// What an upload should know (an upload's answer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warnings: Option<Vec<String>>,
    /// Where it came from (in listings).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<CertificateSource>,
    /// What ACME keeps of it (in listings, when ACME keeps one of its names).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acme: Option<AcmeName>,
}

/// A key's algorithm.
#[derive(Serialize, utoipa::ToSchema, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub enum KeyType {
    /// ECDSA.
    Ecdsa,
    /// RSA.
    Rsa,
    /// Any other.
    Other,
}

/// Where a stored certificate came from.
#[derive(Serialize, utoipa::ToSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum CertificateSource {
    /// ACME, for a name of `tls.acme.names`.
    Acme,
    /// ACME, for a name asked for on demand.
    OnDemand,
    /// Imported (the API, `gatehouse cert import`, or a file).
    Imported,
}

/// A name ACME keeps, as the store holds its state.
#[derive(Serialize, utoipa::ToSchema)]
pub struct AcmeName {
    /// `acme` (in `tls.acme.names`) or `on-demand`.
    pub source: CertificateSource,
    /// End of the stored certificate's validity (RFC 3339).
    #[schema(format = DateTime, required = true)]
    pub not_after: Option<String>,
    /// Its issuer.
    #[schema(required = true)]
    pub issuer: Option<String>,
    /// When it is renewed (or tried again) next (RFC 3339).
    #[schema(format = DateTime, required = true)]
    pub next_renewal: Option<String>,
    /// The last failure, until an order succeeds.
    #[schema(required = true)]
    pub last_error: Option<String>,
    /// When this state was written (RFC 3339).
    #[schema(format = DateTime)]
    pub updated: String,
}

/// `GET /acme`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct AcmeNames {
    /// ACME is on (`tls.acme`).
    pub enabled: bool,
    /// Every name ACME keeps.
    pub names: BTreeMap<String, AcmeName>,
}

/// `POST /acme/{name}/renew`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Renewing {
    /// The name being renewed.
    pub renewing: String,
}

/// `GET /certificates` and `GET /certificates/{name}`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct CertificateList {
    /// The bundles.
    pub certificates: Vec<CertificateFacts>,
}

/// `DELETE /certificates/{name}`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Removed {
    /// The bundles removed.
    pub removed: Vec<CertificateFacts>,
}

/// `GET /audit`: a page of the audit log, newest first.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = Audit)]
pub struct AuditPage {
    /// The entries.
    pub entries: Vec<AuditEntry>,
    /// Pass as `before` for the page before; null at the start.
    #[schema(required = true)]
    pub next: Option<u64>,
}

/// One change the API made (or refused).
#[derive(Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct AuditEntry {
    /// When (RFC 3339).
    #[schema(format = DateTime)]
    pub time: String,
    /// The token's name.
    pub who: String,
    /// The caller's address.
    pub remote: String,
    /// The HTTP method.
    pub method: String,
    /// The path (cut at 256 characters).
    pub path: String,
    /// The answer's status.
    pub status: u16,
    /// What changed (revision number, draft version, certificate names), or the error.
    #[serde(default)]
    pub detail: serde_json::Value,
}

/// `GET /revisions/{number}`: a revision with its content, secrets redacted.
#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = Revision)]
pub struct RevisionView {
    /// Number, hash, author, message, time.
    #[serde(flatten)]
    pub meta: RevisionMeta,
    /// The canonical YAML that is hashed and diffed.
    pub content: String,
    /// The published sections.
    #[schema(schema_with = gatehouse_control::document_schema)]
    pub document: serde_json::Value,
}

/// The published sections, each a map of names to entries as in the configuration file
/// (docs/config.md): the body of `PUT /draft`, and the document of drafts and revisions.
#[derive(Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Document {
    /// Upstreams by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<BTreeMap<String, Object>>)]
    pub upstreams: Option<Entries>,
    /// Sites by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<BTreeMap<String, Object>>)]
    pub sites: Option<Entries>,
    /// Services by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<BTreeMap<String, Object>>)]
    pub services: Option<Entries>,
    /// Apps by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<BTreeMap<String, Object>>)]
    pub apps: Option<Entries>,
    /// Plans by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<BTreeMap<String, Object>>)]
    pub plans: Option<Entries>,
}

/// A section's entries by name, each as in the configuration file.
pub type Entries = BTreeMap<String, serde_json::Map<String, serde_json::Value>>;

/// `POST /revisions`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewRevision {
    /// Why; not blank.
    #[schema(min_length = 1, max_length = 1000, pattern = r"\S", example = "route /shop to the new pool")]
    pub message: String,
}

/// `POST /revisions/{number}/stage`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StageTo {
    /// The node label whose nodes run the revision.
    #[schema(
        min_length = 1,
        max_length = 128,
        pattern = r"^[A-Za-z0-9._-]*[A-Za-z0-9_-][A-Za-z0-9._-]*$",
        example = "canary"
    )]
    pub label: String,
}

/// `PUT /log-level`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetLogLevel {
    /// A level (trace, debug, info, warn, error, off), or comma-separated target=level directives
    /// after one: `info,gatehouse_acme=debug`.
    #[schema(example = "debug")]
    pub level: String,
}

/// `POST /certificates` as JSON: `pem` (chain and key), or `cert` and `key`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CertificateUpload {
    /// The chain, leaf first, and the key, PEM.
    pub pem: Option<String>,
    /// The chain, leaf first, PEM.
    pub cert: Option<String>,
    /// The key, PEM.
    pub key: Option<String>,
}

/// `POST /draft/upstreams/{name}/targets`: a target as in the configuration file.
#[derive(Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewTarget {
    /// `ip:port` or `name:port`.
    #[schema(min_length = 1, example = "127.0.0.1:9001")]
    pub address: String,
    /// Relative weight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 1000)]
    pub weight: Option<u32>,
    /// Concurrent requests allowed to each of its endpoints (0: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_conns: Option<u32>,
}

/// `PUT /draft/upstreams/{name}/targets/{address}`: the target's new settings; its address is the
/// path's.
#[derive(Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TargetChange {
    /// The path's address, if given (another is refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Relative weight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 1000)]
    pub weight: Option<u32>,
    /// Concurrent requests allowed to each of its endpoints (0: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_conns: Option<u32>,
}
