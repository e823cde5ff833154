//! The REST API under `/api/v1`: JSON in and out, bearer tokens, the draft guarded by
//! `If-Match`, revisions, releases, stages, nodes, certificates and the audit log. Every change
//! is validated against this node's file before it is kept, and written to the audit log.

use super::auth::{Audit, Entry, Tokens};
use super::certs::CertStore;
use super::http_util;
use super::AdminState;
use crate::bodies::{
    self, AcmeNames, Diff, LogLevel, NewRevision, NodeList, NodeView, ReleaseChange, ReleaseHistory, Renewing,
    RevisionList, RevisionView, SetLogLevel, StageTo,
};
use bytes::Bytes;
use gatehouse_config::AdminRole;
use gatehouse_control::document::{self, FieldError};
use gatehouse_control::{diff, now_secs, Action, Draft, Event, Store, StoreError};
use http::{Method, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The OpenAPI document of this API, as written (YAML).
const OPENAPI_YAML: &str = include_str!("openapi.yaml");

/// The OpenAPI 3.1 document as JSON, made once: the operations as `openapi.yaml` writes them,
/// the schemas of the API's own types derived from them ([`Schemas`], utoipa), and the answers
/// every call may get ([`common_answers`]).
pub fn openapi() -> &'static str {
    static JSON: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    JSON.get_or_init(|| match serde_yaml::from_str::<Value>(OPENAPI_YAML) {
        Ok(mut doc) => {
            derived_schemas(&mut doc);
            common_answers(&mut doc);
            doc.to_string()
        }
        Err(e) => json!({ "error": format!("the built-in OpenAPI document does not parse: {e}") }).to_string(),
    })
}

/// Puts the schemas derived from the API's types ([`Schemas`]) in `doc`: the document writes
/// none of its own.
fn derived_schemas(doc: &mut Value) {
    let Ok(mut generated) = serde_json::to_value(<Schemas as utoipa::OpenApi>::openapi()) else { return };
    if let (Some(schemas), Some(components)) =
        (generated.pointer_mut("/components/schemas").map(Value::take), doc.get_mut("components"))
    {
        components["schemas"] = schemas;
    }
}

/// Adds to every operation of `doc` the answers any call may get, as [`Api::handle`] gives them:
/// 400 (a broken `%`-escape, `If-Match`, query or body), 401 (no accepted token), 403 (a `read`
/// token that writes), 404 (a path naming what does not exist), 413 (a body over
/// `admin.max_body`) and 503 (the revision store away); 409
/// on the certificate store (none on this node); 412 where `If-Match` is taken, and 422 and 428
/// on the draft's edits, which need it. Each as problem details.
fn common_answers(doc: &mut Value) {
    let error = json!({ "$ref": "#/components/responses/Error" });
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else { return };
    for (path, item) in paths.iter_mut() {
        if path == "/openapi.json" {
            continue;
        }
        for (method, op) in item.as_object_mut().into_iter().flatten() {
            let writes = method != "get";
            let guarded = op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|p| p["$ref"] == "#/components/parameters/IfMatch" || p["name"].as_str() == Some("If-Match"));
            let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) else { continue };
            let edits = guarded && path.starts_with("/draft");
            let named = path.contains('{');
            let certificates = path.starts_with("/certificates");
            for (status, applies) in [
                ("400", true),
                ("401", true),
                ("403", writes),
                ("404", named),
                ("409", certificates),
                ("412", guarded),
                ("413", true),
                ("422", edits),
                ("428", edits),
                ("503", true),
            ] {
                if applies {
                    responses.entry(status).or_insert_with(|| error.clone());
                }
            }
        }
    }
}

/// The API's state.
pub struct Api {
    /// Bearer tokens.
    pub tokens: Tokens,
    /// Largest body read.
    pub max_body: usize,
    /// Drafts, revisions, releases, node reports.
    pub store: Store,
    /// This node's configuration file (or the quick start): drafts are validated merged into it.
    pub base: Arc<Mutex<String>>,
    /// Change log.
    pub audit: Audit,
    /// The certificate store (`tls.store`), if any.
    pub certs: Option<CertStore>,
    /// The ACME manager, while `tls.acme` is on.
    pub acme: Arc<gatehouse_acme::ManagerSlot>,
    /// Nodes report this often; a report older than three intervals is stale.
    pub poll_interval: Duration,
    /// Where files first named in a draft may be (`admin.file_roots`).
    pub file_roots: Vec<std::path::PathBuf>,
    /// What relative paths in a document resolve against: the configuration file's directory
    /// (empty for the quick start: the working directory).
    pub config_dir: std::path::PathBuf,
    /// Calls without an accepted token: counted, logged at a bounded rate, never audited.
    pub refused: Refused,
    /// With `admin.app_keys: hmac`, an app key's `key_hmac` under the cluster secret.
    pub app_key_mac: Option<AppKeyMac>,
}

/// An app key's `key_hmac`, in hex, under the cluster secret (`Cluster::app_key_mac`).
pub type AppKeyMac = Arc<dyn Fn(&[u8]) -> String + Send + Sync>;

/// Calls refused for want of an accepted token. They are not audited, so that nobody without a
/// token can grow the audit log; they are counted, and logged at most once per [`Refused::EVERY`]
/// with how many came since.
#[derive(Debug, Default)]
pub struct Refused {
    /// Every refused call.
    pub total: std::sync::atomic::AtomicU64,
    /// When the last line was logged, and the count then.
    logged: Mutex<Option<(std::time::Instant, u64)>>,
}

impl Refused {
    /// At most one log line this often.
    const EVERY: Duration = Duration::from_secs(10);

    /// Counts one refused call, and logs it unless one was logged within [`Refused::EVERY`].
    pub fn count(&self, remote: SocketAddr, method: &Method, path: &str) {
        use std::sync::atomic::Ordering;
        let total = self.total.fetch_add(1, Ordering::Relaxed) + 1;
        let mut last = self.logged.lock().unwrap_or_else(|p| p.into_inner());
        let now = std::time::Instant::now();
        if last.is_none_or(|(at, _)| now.duration_since(at) >= Self::EVERY) {
            let since = last.map_or(total, |(_, then)| total - then);
            let shown: String = path.chars().take(128).collect();
            tracing::warn!(%remote, %method, path = %shown, refused_since_last = since, "admin API call without a valid token");
            *last = Some((now, total));
        }
    }
}

/// An API call, parsed.
pub struct Call {
    /// Method.
    pub method: Method,
    /// Path segments after `/api/v1/`, decoded.
    pub segs: Vec<String>,
    /// Query pairs.
    pub query: Vec<(String, String)>,
    /// The `If-Match` precondition, when sent.
    pub if_match: Option<IfMatch>,
    /// Body.
    pub body: Bytes,
    /// Token holder.
    pub who: String,
}

impl Call {
    /// A query parameter.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// An integer query parameter in `min..=max`; a 400 naming it otherwise.
    pub fn int_param(&self, name: &str, min: u64, max: u64) -> Result<Option<u64>, ApiError> {
        let Some(v) = self.param(name) else { return Ok(None) };
        match v.parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) && self.query.iter().filter(|(k, _)| k == name).count() == 1 => {
                Ok(Some(n))
            }
            _ => Err(ApiError::bad(format!("{name}: one integer from {min} to {max}"))),
        }
    }

    /// The body as JSON.
    pub fn json(&self) -> Result<Value, ApiError> {
        if self.body.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&self.body).map_err(|e| ApiError::bad(format!("the body is not JSON: {e}")))
    }

    /// The body as a `T` reads it: 400 when it is not JSON, 422 when it is JSON but not a `T`
    /// (a field missing, of another type, or unknown).
    pub fn body<T: serde::de::DeserializeOwned>(&self) -> Result<T, ApiError> {
        serde_json::from_value(self.json()?).map_err(|e| ApiError {
            message: format!("the body is not what this operation takes: {e}"),
            ..ApiError::invalid(vec![field("body", e.to_string())])
        })
    }
}

/// The largest integer the document lets a parameter be (2^53 - 1, exact in JSON everywhere).
pub const MAX_INT: u64 = (1 << 53) - 1;

/// An answer that is not a success.
#[derive(Debug)]
pub struct ApiError {
    /// Status.
    pub status: StatusCode,
    /// What went wrong.
    pub message: String,
    /// Field errors, for 422.
    pub errors: Vec<FieldError>,
    /// The draft's current version, for 412.
    pub version: Option<u64>,
    /// The methods the resource takes, for 405 (`Allow`).
    pub allow: Option<String>,
}

impl ApiError {
    /// With a status and message.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError { status, message: message.into(), errors: Vec::new(), version: None, allow: None }
    }
    /// 400.
    pub fn bad(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }
    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }
    /// 409.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, message)
    }
    /// 422 with every field error.
    pub fn invalid(errors: Vec<FieldError>) -> Self {
        let n = errors.len();
        ApiError { errors, ..Self::new(StatusCode::UNPROCESSABLE_ENTITY, format!("{n} error(s) in the document")) }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Conflict { current } => ApiError {
                version: Some(current),
                ..ApiError::new(StatusCode::PRECONDITION_FAILED, format!("the draft is at version {current}"))
            },
            e if e.is_unavailable() => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
            _ => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        }
    }
}

/// A success.
pub struct Reply {
    /// Status.
    pub status: u16,
    /// Body.
    pub body: Value,
    /// `ETag` (the draft's version).
    pub etag: Option<u64>,
    /// What to record in the audit log for a change.
    pub audit: Value,
}

impl Reply {
    /// 200 with a body.
    pub fn ok(body: Value) -> Self {
        Reply { status: 200, body, etag: None, audit: Value::Null }
    }
}

/// Result of a handler.
pub type Answer = Result<Reply, ApiError>;

/// Problem details (RFC 9457): every error of the API.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[schema(as = Error)]
pub struct Problem<'a> {
    /// `about:blank`: the status says it all.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The status' reason phrase.
    pub title: &'static str,
    /// The status.
    #[schema(minimum = 400, maximum = 599)]
    pub status: u16,
    /// What went wrong.
    pub detail: &'a str,
    /// The same as `detail`.
    pub error: &'a str,
    /// Every field error (422).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    #[schema(required = false)]
    pub errors: &'a [FieldError],
    /// The draft's version (412).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
}

/// `e` as problem details.
fn error_body(e: &ApiError) -> Value {
    let problem = Problem {
        kind: "about:blank",
        title: e.status.canonical_reason().unwrap_or("Error"),
        status: e.status.as_u16(),
        detail: &e.message,
        error: &e.message,
        errors: &e.errors,
        version: e.version,
    };
    serde_json::to_value(&problem).unwrap_or_default()
}

/// The schemas of the API's own types, derived from them (utoipa): they replace the document's
/// entries of the same names.
#[derive(utoipa::OpenApi)]
#[openapi(components(schemas(
    Problem,
    FieldError,
    gatehouse_control::RevisionMeta,
    gatehouse_control::Draft,
    gatehouse_control::Releases,
    gatehouse_control::Action,
    gatehouse_control::Event,
    gatehouse_control::ApplyError,
    gatehouse_control::NodeReport,
    gatehouse_control::Health,
    gatehouse_control::diff::Row,
    gatehouse_control::diff::RowKind,
    bodies::RevisionList,
    bodies::RevisionView,
    bodies::ReleaseChange,
    bodies::ReleaseHistory,
    bodies::DraftWritten,
    bodies::LogLevel,
    bodies::NodeView,
    bodies::NodeList,
    bodies::NodeStatus,
    bodies::ControlStatus,
    bodies::StoreKind,
    bodies::Stats,
    bodies::StatusClasses,
    bodies::Latency,
    bodies::Handshakes,
    bodies::UpstreamStats,
    bodies::EndpointStats,
    bodies::Breaker,
    bodies::Diff,
    bodies::CertificateFacts,
    bodies::KeyType,
    bodies::CertificateSource,
    bodies::AcmeName,
    bodies::AcmeNames,
    bodies::Renewing,
    bodies::CertificateList,
    bodies::Removed,
    bodies::AuditPage,
    bodies::AuditEntry,
    bodies::Document,
    bodies::NewRevision,
    bodies::StageTo,
    bodies::SetLogLevel,
    bodies::CertificateUpload,
    bodies::NewTarget,
    bodies::TargetChange
)))]
struct Schemas;

/// The answer to a call no handler took: 405 with `Allow` or 404 ([`crate::routes::unrouted`]).
pub fn unrouted(c: &Call) -> ApiError {
    let segs: Vec<&str> = c.segs.iter().map(String::as_str).collect();
    crate::routes::unrouted(&c.method, &segs)
}

/// The answer for `e`: problem details (`application/problem+json`), with `Allow` on a 405.
pub fn problem(e: &ApiError) -> http::Response<Full<Bytes>> {
    let mut resp = http_util::text(e.status.as_u16(), "application/problem+json", error_body(e).to_string());
    if let Some(allow) = e.allow.as_deref().and_then(|a| http::HeaderValue::from_str(a).ok()) {
        resp.headers_mut().insert(http::header::ALLOW, allow);
    }
    resp
}

/// An `If-Match` precondition (RFC 9110 §13.1.1) on the draft's version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IfMatch {
    /// `*`: whatever the version.
    Any,
    /// A list of entity tags: true when one is the draft's `ETag` (`"N"`), compared strongly,
    /// so a weak tag never is.
    Tags(Vec<Option<u64>>),
}

impl IfMatch {
    /// Whether the draft at `version` meets the precondition.
    pub fn matches(&self, version: u64) -> bool {
        match self {
            IfMatch::Any => true,
            IfMatch::Tags(tags) => tags.contains(&Some(version)),
        }
    }
}

/// `*`, or a list of entity tags (`"7"`, or `W/"7"` which never matches); an empty field is
/// none; anything else, or a tag that is not a version of at most 15 digits, is 400.
fn parse_if_match(h: Option<&http::HeaderValue>) -> Result<Option<IfMatch>, ApiError> {
    let Some(h) = h else { return Ok(None) };
    let bad = || ApiError::bad("If-Match must be `*` or the draft's ETag, e.g. \"7\"");
    let s = h.to_str().map_err(|_| bad())?.trim();
    if s.is_empty() {
        // An empty field is no field (a required one is then 428).
        return Ok(None);
    }
    if s == "*" {
        return Ok(Some(IfMatch::Any));
    }
    let mut tags = Vec::new();
    for tag in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let (weak, tag) = match tag.strip_prefix("W/") {
            Some(t) => (true, t),
            None => (false, tag),
        };
        let digits = tag
            .strip_prefix('"')
            .and_then(|t| t.strip_suffix('"'))
            .filter(|d| (1..=15).contains(&d.len()) && d.bytes().all(|b| b.is_ascii_digit()));
        let version: u64 = digits.and_then(|d| d.parse().ok()).ok_or_else(bad)?;
        tags.push((!weak).then_some(version));
    }
    Ok(Some(IfMatch::Tags(tags)))
}

impl Api {
    /// Answers one API request.
    pub async fn handle(
        &self,
        req: http::Request<hyper::body::Incoming>,
        remote: SocketAddr,
        state: &AdminState,
    ) -> http::Response<Full<Bytes>> {
        let (parts, body) = req.into_parts();
        let path = parts.uri.path().to_string();
        let method = parts.method.clone();
        let changes = method != Method::GET && method != Method::HEAD;
        let who = self.tokens.check(parts.headers.get(http::header::AUTHORIZATION));
        let result = match &who {
            None => Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                crate::auth::refusal(parts.headers.get(http::header::AUTHORIZATION)),
            )),
            Some((_, AdminRole::Read)) if changes => {
                Err(ApiError::new(StatusCode::FORBIDDEN, "this token may only read"))
            }
            Some((name, _)) => match self.call(&parts, body, name).await {
                Ok(call) => self.route(&call, state).await,
                Err(e) => Err(e),
            },
        };
        let who_name = who.as_ref().map_or("-", |(n, _)| n.as_str());
        let mut resp = match &result {
            Ok(r) => http_util::json(r.status, &r.body),
            Err(e) => problem(e),
        };
        if who.is_none() {
            self.refused.count(remote, &method, &path);
        } else if changes {
            let (status, detail) = match &result {
                Ok(r) => (r.status, r.audit.clone()),
                Err(e) => (e.status.as_u16(), json!({"error": e.message})),
            };
            self.audit.write(Entry { who: who_name, remote, method: method.as_str(), path: &path, status, detail });
        }
        match result {
            Ok(Reply { etag: Some(v), .. }) => {
                if let Ok(h) = http::HeaderValue::from_str(&format!("\"{v}\"")) {
                    resp.headers_mut().insert(http::header::ETAG, h);
                }
            }
            Err(ApiError { status: StatusCode::UNAUTHORIZED, .. }) => {
                resp.headers_mut().insert(
                    http::header::WWW_AUTHENTICATE,
                    crate::auth::challenge(parts.headers.get(http::header::AUTHORIZATION)),
                );
            }
            _ => {}
        }
        resp
    }

    async fn call(
        &self,
        parts: &http::request::Parts,
        body: hyper::body::Incoming,
        who: &str,
    ) -> Result<Call, ApiError> {
        let rest = parts.uri.path().strip_prefix("/api/v1").unwrap_or("");
        let mut segs = Vec::new();
        for s in rest.split('/').filter(|s| !s.is_empty()) {
            segs.push(http_util::percent_decode(s).ok_or_else(|| ApiError::bad("bad %-escape in the path"))?);
        }
        // A method the resource does not take is said before its headers and body are read.
        let names: Vec<&str> = segs.iter().map(String::as_str).collect();
        if !crate::routes::allowed(&names).is_some_and(|m| m.iter().any(|m| m == parts.method.as_str())) {
            return Err(crate::routes::unrouted(&parts.method, &names));
        }
        let body = Limited::new(body, self.max_body).collect().await.map_err(|_| {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, format!("bodies are limited to {} bytes", self.max_body))
        })?;
        Ok(Call {
            method: parts.method.clone(),
            segs,
            query: http_util::query_pairs(parts.uri.query()),
            if_match: parse_if_match(parts.headers.get(http::header::IF_MATCH))?,
            body: body.to_bytes(),
            who: who.to_string(),
        })
    }

    async fn route(&self, c: &Call, state: &AdminState) -> Answer {
        let segs: Vec<&str> = c.segs.iter().map(String::as_str).collect();
        match (&c.method, segs.as_slice()) {
            (&Method::GET, ["stats"]) => Ok(Reply::ok(json!(super::stats::stats(&state.shared, &state.tls)))),
            (&Method::GET, ["status"]) => Ok(Reply::ok(state.status.lock().map(|s| s.clone()).unwrap_or_default())),
            (_, ["draft", ..]) => self.draft_call(c, &segs[1..]).await,
            (&Method::GET, ["revisions"]) => self.list_revisions().await,
            (&Method::POST, ["revisions"]) => self.commit(c).await,
            (&Method::GET, ["revisions", n]) => self.show_revision(n).await,
            (&Method::GET, ["revisions", a, "diff", b]) => self.diff_revisions(c, a, b).await,
            (&Method::POST, ["revisions", n, "release"]) => self.release(c, n, Action::Release).await,
            (&Method::POST, ["revisions", n, "rollback"]) => self.release(c, n, Action::Rollback).await,
            (&Method::POST, ["revisions", n, "stage"]) => self.release(c, n, Action::Stage).await,
            (&Method::DELETE, ["stages", label]) => self.unstage(c, label).await,
            (&Method::GET, ["releases"]) => self.releases().await,
            (&Method::GET, ["nodes"]) => self.nodes().await,
            (&Method::GET, ["audit"]) => {
                let limit = c.int_param("limit", 1, 1000)?.unwrap_or(100);
                let before = c.int_param("before", 0, MAX_INT)?;
                let page = self.audit.page(usize::try_from(limit).unwrap_or(1000), before);
                Ok(Reply::ok(json!(page)))
            }
            (&Method::GET, ["log-level"]) => log_level(),
            (&Method::PUT, ["log-level"]) => set_log_level(c),
            (&Method::GET, ["acme"]) => self.acme_names().await,
            (&Method::POST, ["acme", name, "renew"]) => self.acme_renew(name),
            (_, ["certificates", ..]) => match &self.certs {
                Some(store) => store.call(c, &segs[1..]).await,
                None => Err(ApiError::conflict("this node has no certificate store (tls.store)")),
            },
            _ => Err(unrouted(c)),
        }
    }

    /// `GET /acme`: every name ACME keeps, as the store holds their state (the whole cluster's).
    async fn acme_names(&self) -> Answer {
        let Some(manager) = self.acme.get() else {
            return Ok(Reply::ok(json!(AcmeNames { enabled: false, names: Default::default() })));
        };
        let statuses = manager
            .statuses()
            .await
            .map_err(|e| ApiError::new(http::StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
        let names = statuses.iter().map(|(n, s)| (n.clone(), super::certs::acme_name(s))).collect();
        Ok(Reply::ok(json!(AcmeNames { enabled: true, names })))
    }

    /// `POST /acme/{name}/renew`: renews a kept name now.
    fn acme_renew(&self, name: &str) -> Answer {
        let Some(manager) = self.acme.get() else {
            return Err(ApiError::conflict("ACME is off on this node (tls.acme)"));
        };
        if !manager.renew_now(name) {
            return Err(ApiError::not_found(format!("ACME does not keep {name} on this node")));
        }
        let body = json!(Renewing { renewing: name.to_string() });
        Ok(Reply { status: 202, body, etag: None, audit: json!({ "renew": name }) })
    }

    /// The draft, or what a first draft starts from: the released revision, else this node's file.
    pub async fn current_draft(&self) -> Result<Draft, ApiError> {
        if let Some(d) = self.store.draft().await? {
            return Ok(d);
        }
        let releases = self.store.releases().await?;
        let document = match releases.released {
            Some(n) => self.store.revision(n).await?.ok_or_else(|| ApiError::not_found("released revision"))?.document,
            None => {
                let base = self.base.lock().map(|b| b.clone()).unwrap_or_default();
                let doc = document::published_of(&base)
                    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
                document::normalise(doc, None).map_err(ApiError::invalid)?
            }
        };
        Ok(Draft { version: 0, document, updated_by: String::new(), updated: 0 })
    }

    /// Every error the document has once merged into this node's file.
    pub fn validate(&self, doc: &Value) -> Result<(), ApiError> {
        let base = self.base.lock().map(|b| b.clone()).unwrap_or_default();
        let merged =
            document::merge(&base, doc).map_err(|e| ApiError::invalid(vec![field("(document)", e.to_string())]))?;
        let mut config = gatehouse_config::compile_value(merged)
            .map_err(|errs| ApiError::invalid(errs.0.into_iter().map(|e| field(&e.path, e.message)).collect()))?;
        config.resolve_paths(&self.config_dir);
        gatehouse_plugins::Gateway::build(&config, &gatehouse_plugins::Registry::offline()).map(drop).map_err(|e| {
            ApiError::invalid(
                e.to_string()
                    .lines()
                    .map(|l| match l.split_once(": ") {
                        Some((p, m)) => field(p, m.to_string()),
                        None => field("(document)", l.to_string()),
                    })
                    .collect(),
            )
        })
    }

    async fn list_revisions(&self) -> Answer {
        let releases = self.store.releases().await?;
        let revisions = self.store.revisions().await?;
        let list = RevisionList { revisions, released: releases.released, staged: releases.staged };
        Ok(Reply::ok(json!(list)))
    }

    async fn commit(&self, c: &Call) -> Answer {
        let message = c.body::<NewRevision>()?.message.trim().to_string();
        if message.is_empty() || message.len() > 1000 {
            return Err(ApiError::invalid(vec![field("message", "say why, in 1 to 1000 characters".into())]));
        }
        let draft = self.current_draft().await?;
        if let Some(precondition) = &c.if_match {
            if !precondition.matches(draft.version) {
                return Err(StoreError::Conflict { current: draft.version }.into());
            }
        }
        self.validate(&draft.document)?;
        let hash = document::content_hash(&draft.document);
        if let Some(last) = self.store.revisions().await?.last() {
            if last.hash == hash {
                return Err(ApiError::conflict(format!("nothing changed since revision {}", last.number)));
            }
        }
        let rev = self.store.commit(draft.document, &c.who, &message).await?;
        let audit = json!({ "revision": rev.meta.number, "hash": rev.meta.hash, "draft_version": draft.version });
        Ok(Reply { status: 201, body: serde_json::to_value(&rev.meta).unwrap_or_default(), etag: None, audit })
    }

    /// Revision `n` (a path segment).
    async fn revision(&self, n: &str) -> Result<gatehouse_control::Revision, ApiError> {
        let number: u64 = n.parse().map_err(|_| ApiError::bad("revision numbers are integers"))?;
        self.store.revision(number).await?.ok_or_else(|| ApiError::not_found(format!("no revision {n}")))
    }

    /// The metadata of revision `n`, without loading its document.
    async fn revision_meta(&self, n: &str) -> Result<gatehouse_control::RevisionMeta, ApiError> {
        let number: u64 = n.parse().map_err(|_| ApiError::bad("revision numbers are integers"))?;
        self.store.revision_meta(number).await?.ok_or_else(|| ApiError::not_found(format!("no revision {n}")))
    }

    async fn show_revision(&self, n: &str) -> Answer {
        let rev = self.revision(n).await?;
        let document = document::redact(&rev.document, None);
        let content = document::canonical(&document);
        Ok(Reply::ok(json!(RevisionView { meta: rev.meta, content, document })))
    }

    async fn diff_revisions(&self, c: &Call, a: &str, b: &str) -> Answer {
        let ra = self.revision(a).await?;
        let (db, to) = if b == "draft" {
            (self.current_draft().await?.document, "draft".to_string())
        } else {
            let rb = self.revision(b).await?;
            (rb.document, format!("revision {}", rb.meta.number))
        };
        Ok(Reply::ok(diff_body(&ra.document, &db, &format!("revision {}", ra.meta.number), &to, c)?))
    }

    async fn release(&self, c: &Call, n: &str, action: Action) -> Answer {
        let number = self.revision_meta(n).await?.number;
        let before = self.store.releases().await?;
        let mut label = None;
        match action {
            Action::Stage => {
                let l = c.body::<StageTo>()?.label;
                if !gatehouse_config::valid_name(&l) {
                    return Err(ApiError::invalid(vec![field("label", "a node label: letters, digits, `-_.`".into())]));
                }
                label = Some(l);
            }
            Action::Rollback => match before.released {
                Some(current) if number < current => {}
                Some(current) => {
                    return Err(ApiError::conflict(format!(
                        "revision {number} is not earlier than the released revision {current}"
                    )))
                }
                None => return Err(ApiError::conflict("nothing is released yet")),
            },
            Action::Release | Action::Unstage => {}
        }
        self.record(Event { at: now_secs(), who: c.who.clone(), action, revision: number, label }).await
    }

    /// Keeps a release change and answers with the releases after it.
    async fn record(&self, event: Event) -> Answer {
        let after = self.store.record(event.clone()).await?;
        let audit = json!(event);
        Ok(Reply { status: 200, body: json!(ReleaseChange { releases: after, event }), etag: None, audit })
    }

    async fn unstage(&self, c: &Call, label: &str) -> Answer {
        let before = self.store.releases().await?;
        let Some(&revision) = before.staged.get(label) else {
            return Err(ApiError::not_found(format!("nothing is staged to `{label}`")));
        };
        self.record(Event {
            at: now_secs(),
            who: c.who.clone(),
            action: Action::Unstage,
            revision,
            label: Some(label.into()),
        })
        .await
    }

    async fn releases(&self) -> Answer {
        let r = self.store.releases().await?;
        let history = self.store.history(100).await?;
        Ok(Reply::ok(json!(ReleaseHistory { released: r.released, staged: r.staged, seq: r.seq, history })))
    }

    async fn nodes(&self) -> Answer {
        let stale_after = (self.poll_interval.as_secs() as i64 * 3).max(5);
        let now = now_secs();
        let mut nodes = self.store.nodes().await?;
        nodes.sort_by(|a, b| a.id.cmp(&b.id));
        let nodes = nodes.into_iter().map(|n| NodeView { stale: now - n.updated > stale_after, report: n }).collect();
        Ok(Reply::ok(json!(NodeList { nodes })))
    }
}

/// A field error.
pub fn field(path: &str, message: String) -> FieldError {
    FieldError { path: path.to_string(), message }
}

/// A diff of two documents, secrets redacted: unified text and side-by-side rows.
pub fn diff_body(from: &Value, to: &Value, from_name: &str, to_name: &str, c: &Call) -> Result<Value, ApiError> {
    let context = usize::try_from(c.int_param("context", 0, 1000)?.unwrap_or(3)).unwrap_or(3);
    let a = document::canonical(&document::redact(from, None));
    let b = document::canonical(&document::redact(to, Some(from)));
    Ok(json!(Diff {
        from: from_name.to_string(),
        to: to_name.to_string(),
        identical: a == b,
        unified: diff::unified(&a, &b, from_name, to_name, context),
        rows: diff::side_by_side(&a, &b, context),
    }))
}

/// `GET /log-level`: the process log's level filter in force and the configured one.
fn log_level() -> Answer {
    match gatehouse_telemetry::process_log::level() {
        Some((level, configured)) => Ok(Reply::ok(json!(LogLevel { level, configured }))),
        None => Err(ApiError::conflict("this node does not manage its process log")),
    }
}

/// `PUT /log-level` `{"level": "debug"}`: a new level filter, in force at once on this node until
/// the next change (another call, or a reload or release that changes `log.level`).
fn set_log_level(c: &Call) -> Answer {
    let body: SetLogLevel = c.body()?;
    use gatehouse_telemetry::process_log::{set_level, LevelError};
    match set_level(&body.level) {
        Ok(()) => {
            tracing::info!(level = body.level, by = c.who, "process log level changed through the admin API");
            let mut reply = log_level()?;
            reply.audit = json!({ "level": body.level });
            Ok(reply)
        }
        Err(LevelError::Invalid(e)) => Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, format!("level: {e}"))),
        Err(LevelError::NotManaged) => Err(ApiError::conflict("this node does not manage its process log")),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_openapi_document_parses() {
        let v: serde_json::Value = serde_json::from_str(super::openapi()).expect("json");
        assert_eq!(v["openapi"], "3.1.0");
        assert!(v["paths"]["/draft"]["put"].is_object());
    }

    /// Every schema comes from the API's types: the written document has none, and writes no
    /// record inline (a body there is a `$ref`, or a configuration entry, which is checked as
    /// the configuration is); every derived schema is used, and every `$ref` resolves.
    #[test]
    fn every_schema_is_derived_used_and_resolves() {
        use serde_json::Value;
        let written: Value = serde_yaml::from_str(super::OPENAPI_YAML).expect("yaml");
        assert!(written["components"].get("schemas").is_none(), "schemas written by hand");
        fn inline_records(v: &Value, at: &str, out: &mut Vec<String>) {
            match v {
                Value::Object(m) => {
                    if m.contains_key("properties") || m.contains_key("additionalProperties") {
                        out.push(at.to_string());
                    }
                    m.iter().for_each(|(k, v)| inline_records(v, &format!("{at}/{k}"), out));
                }
                Value::Array(a) => a.iter().for_each(|v| inline_records(v, at, out)),
                _ => {}
            }
        }
        let mut inline = Vec::new();
        inline_records(&written, "", &mut inline);
        assert_eq!(inline, Vec::<String>::new(), "records written inline");
        let served: Value = serde_json::from_str(super::openapi()).expect("json");
        fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
            match v {
                Value::Object(m) => {
                    if let Some(r) = m.get("$ref").and_then(Value::as_str) {
                        out.push(r);
                    }
                    m.values().for_each(|v| refs(v, out));
                }
                Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
                _ => {}
            }
        }
        let mut found = Vec::new();
        refs(&served, &mut found);
        assert!(found.len() > 50);
        for r in &found {
            let at = r.strip_prefix('#').unwrap_or(r);
            assert!(served.pointer(at).is_some(), "dangling {r}");
        }
        let derived = served["components"]["schemas"].as_object().expect("schemas");
        assert!(derived.len() >= 40, "{derived:?}");
        for name in derived.keys() {
            let used = found.contains(&format!("#/components/schemas/{name}").as_str());
            assert!(used, "{name} is derived but nothing refers to it");
        }
        assert_eq!(served["components"]["schemas"]["Error"]["required"].as_array().map(Vec::len), Some(5));
    }
}
