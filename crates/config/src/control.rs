//! Control-plane settings: the admin API's tokens and limits, this node's identity and labels,
//! and where published revisions are kept and how often they are looked for.

use crate::units::{ByteSize, Duration};
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::PathBuf;

/// The admin listener: metrics and health without a token, the API and console with one.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Admin {
    /// Address to bind; loopback unless set, as the API can change everything.
    #[serde(default = "admin_bind")]
    pub bind: SocketAddr,
    /// Bearer tokens of the API and console, kept as SHA-256 hashes; none: the API is off.
    #[serde(default)]
    pub tokens: Vec<AdminToken>,
    /// A file holding one `write` token in the clear, made with a random token on first start:
    /// the quick start's way to open the console without editing the configuration.
    #[serde(default)]
    pub token_file: Option<TokenFile>,
    /// Largest request body the API reads (a whole draft, a certificate bundle).
    #[serde(default = "max_body")]
    pub max_body: ByteSize,
    /// File receiving one JSON line per change made through the API; default
    /// `<control.dir>/audit.log`, `off` for none.
    #[serde(default)]
    pub audit_log: Option<String>,
    /// Largest audit log file; when the next line would not fit, the file becomes `<file>.1`.
    #[serde(default = "audit_max_size")]
    pub audit_max_size: ByteSize,
    /// Serve the admin listener over TLS, optionally requiring client certificates.
    #[serde(default)]
    pub tls: Option<AdminTls>,
    /// Directories a file first named in a draft (a JWT public key, a CA bundle) must be under;
    /// empty: the configuration file's directory and `control.dir`.
    #[serde(default)]
    pub file_roots: Vec<PathBuf>,
    /// Host names the listener answers for besides IP addresses and `localhost`; any other
    /// `Host` (a browser led there by DNS rebinding) gets 421.
    #[serde(default)]
    pub hosts: Vec<String>,
    /// Paths answered without a token; the others of [`PUBLIC_PATHS`] need one (any role).
    #[serde(default = "public_default")]
    pub public: Vec<String>,
    /// How an app key given to the API is kept: `sha256` (`key_sha256`) or `hmac` (`key_hmac`,
    /// under the cluster secret).
    #[serde(default)]
    pub app_keys: AppKeyDigest,
}

/// How the admin API keeps the app keys it is given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AppKeyDigest {
    /// Its SHA-256 (`key_sha256`): safe for keys of high entropy only.
    #[default]
    Sha256,
    /// Its HMAC-SHA-256 under the cluster secret (`key_hmac`).
    Hmac,
}

/// The admin paths that may be answered without a token (`admin.public`).
pub const PUBLIC_PATHS: &[&str] = &["/healthz", "/metrics", "/status", "/api/v1/openapi.json"];

fn public_default() -> Vec<String> {
    vec!["/healthz".into()]
}

fn admin_bind() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 9080))
}

fn max_body() -> ByteSize {
    ByteSize(8 << 20)
}

fn audit_max_size() -> ByteSize {
    ByteSize(16 << 20)
}

/// One API token.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminToken {
    /// Who holds it: recorded as the author of drafts, revisions and releases.
    pub name: String,
    /// SHA-256 of the token, 64 hex digits (`printf %s TOKEN | sha256sum`).
    pub sha256: String,
    /// What it may do.
    #[serde(default)]
    pub role: AdminRole,
}

/// A token kept in a file (mode 600).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenFile {
    /// Who holds it.
    #[serde(default = "token_file_name")]
    pub name: String,
    /// Where it is.
    pub path: PathBuf,
}

fn token_file_name() -> String {
    "admin".into()
}

impl Admin {
    /// Whether the API and console are on (some token is configured).
    pub fn api_on(&self) -> bool {
        !self.tokens.is_empty() || self.token_file.is_some()
    }
}

/// What a token may do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdminRole {
    /// Read everything the API shows.
    Read,
    /// Read, edit the draft, make revisions, stage, release, roll back, manage certificates.
    #[default]
    Write,
}

/// TLS on the admin listener.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminTls {
    /// PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM private key.
    pub key: PathBuf,
    /// PEM CA certificates; when set, clients must present a certificate they issued.
    #[serde(default)]
    pub client_ca: Option<PathBuf>,
}

/// This node's identity in the cluster.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Node {
    /// Node id, unique in the cluster; default: the host name.
    pub id: Option<String>,
    /// Labels a revision can be staged to (e.g. `canary`); the first label with a staged
    /// revision decides what this node runs.
    pub labels: Vec<String>,
}

/// Where revisions live and how this node follows them.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Control {
    /// Directory of the local revision store (a node without `redis`) and of the applied
    /// revision kept for restarts.
    pub dir: PathBuf,
    /// How often a node looks for a new revision besides the pub/sub message, and reports itself.
    pub poll_interval: Duration,
    /// Apply released and staged revisions (`false`: run the file alone).
    pub follow: bool,
}

impl Default for Control {
    fn default() -> Self {
        Control { dir: PathBuf::from(".gatehouse/control"), poll_interval: Duration::secs(2), follow: true }
    }
}

/// The top-level sections a revision holds; everything else stays with each node's file.
pub const PUBLISHED_SECTIONS: &[&str] = &["upstreams", "sites", "services", "apps", "plans"];

pub(crate) fn validate(c: &crate::Config, err: &mut impl FnMut(String, String)) {
    if let Some(a) = &c.admin {
        let mut names = std::collections::HashSet::new();
        for (i, t) in a.tokens.iter().enumerate() {
            let p = format!("admin.tokens[{i}]");
            if t.name.is_empty() || t.name.len() > 64 || t.name.chars().any(|c| c.is_control() || c == '"') {
                err(format!("{p}.name"), "must be 1 to 64 printable characters".into());
            }
            if !names.insert(t.name.as_str()) {
                err(format!("{p}.name"), format!("`{}` is used by another token", t.name));
            }
            if t.sha256.len() != 64 || !t.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
                err(format!("{p}.sha256"), "must be 64 hex digits (the SHA-256 of the token)".into());
            }
        }
        if let Some(f) = &a.token_file {
            if !names.insert(f.name.as_str()) {
                err("admin.token_file.name".into(), format!("`{}` is used by a token", f.name));
            }
        }
        if a.max_body.0 < 1024 {
            err("admin.max_body".into(), "must be at least 1k".into());
        }
        if a.app_keys == AppKeyDigest::Hmac && c.redis.is_none() {
            err("admin.app_keys".into(), "`hmac` needs the cluster secret (`redis.secret_file`)".into());
        }
        for (i, p) in a.public.iter().enumerate() {
            if !PUBLIC_PATHS.contains(&p.as_str()) {
                err(format!("admin.public[{i}]"), format!("`{p}`: expected one of {}", PUBLIC_PATHS.join(", ")));
            }
        }
        for (i, h) in a.hosts.iter().enumerate() {
            if crate::compile::check_host_pattern(&h.to_ascii_lowercase()).is_err() || h.contains(['*', ':']) {
                err(format!("admin.hosts[{i}]"), format!("`{h}` is not a host name (no port, no wildcard)"));
            }
        }
    }
    if let Some(id) = &c.node.id {
        if !crate::schema::valid_name(id) {
            err("node.id".into(), "may use letters, digits, `-`, `_` and `.` only".into());
        }
    }
    for (i, l) in c.node.labels.iter().enumerate() {
        if !crate::schema::valid_name(l) {
            err(format!("node.labels[{i}]"), "may use letters, digits, `-`, `_` and `.` only".into());
        }
    }
    let poll = c.control.poll_interval.0;
    if poll < std::time::Duration::from_millis(100) || poll > std::time::Duration::from_secs(300) {
        err("control.poll_interval".into(), "must be from 100ms to 5m".into());
    }
}
