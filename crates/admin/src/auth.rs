//! Who is calling the admin API, and the audit log of what they changed.
//!
//! Tokens are configured as SHA-256 hashes; a presented token is hashed and compared with every
//! configured hash in constant time, without stopping at the first match, so the answer time
//! says nothing about which token came close.

use aws_lc_rs::constant_time::verify_slices_are_equal;
use aws_lc_rs::digest::{digest, SHA256};
use gatehouse_config::{AdminRole, AdminToken};
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;

/// The configured tokens.
pub struct Tokens(Vec<(String, [u8; 32], AdminRole)>);

impl Tokens {
    /// From the configuration (already validated as 64 hex digits).
    pub fn new(tokens: &[AdminToken]) -> Self {
        Tokens(
            tokens
                .iter()
                .filter_map(|t| Some((t.name.clone(), gatehouse_plugins::parse_sha256_hex(&t.sha256)?, t.role)))
                .collect(),
        )
    }

    /// The holder and role of the bearer token in an `Authorization` header.
    pub fn check(&self, authorization: Option<&http::HeaderValue>) -> Option<(String, AdminRole)> {
        let value = authorization?.to_str().ok()?;
        let (scheme, token) = value.split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("bearer") || token.trim().is_empty() {
            return None;
        }
        let presented = digest(&SHA256, token.trim().as_bytes());
        let mut found = None;
        for (name, hash, role) in &self.0 {
            if verify_slices_are_equal(presented.as_ref(), hash).is_ok() && found.is_none() {
                found = Some((name.clone(), *role));
            }
        }
        found
    }
}

/// One JSON line per change attempt through the API.
pub struct Audit {
    path: Option<PathBuf>,
    file: Mutex<Option<std::fs::File>>,
}

/// One audit entry.
pub struct Entry<'a> {
    /// Token name, or `-` when none was accepted.
    pub who: &'a str,
    /// Client address.
    pub remote: std::net::SocketAddr,
    /// HTTP method.
    pub method: &'a str,
    /// Request path.
    pub path: &'a str,
    /// Answer status.
    pub status: u16,
    /// What changed (revision number, draft version, certificate names), when it did.
    pub detail: serde_json::Value,
}

impl Audit {
    /// Appends to `path` (created mode 600); `None`: no audit log.
    pub fn new(path: Option<PathBuf>) -> Self {
        Audit { path, file: Mutex::new(None) }
    }

    /// Writes one entry.
    pub fn write(&self, e: Entry<'_>) {
        let Some(path) = &self.path else { return };
        let line = json!({
            "time": gatehouse_telemetry::rfc3339_time(std::time::SystemTime::now()),
            "who": e.who,
            "remote": e.remote.to_string(),
            "method": e.method,
            "path": e.path,
            "status": e.status,
            "detail": e.detail,
        });
        let mut slot = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            use std::os::unix::fs::OpenOptionsExt;
            match std::fs::OpenOptions::new().append(true).create(true).mode(0o600).open(path) {
                Ok(f) => *slot = Some(f),
                Err(e) => {
                    tracing::error!(path = %path.display(), error = %e, "cannot open the audit log");
                    return;
                }
            }
        }
        if let Some(f) = slot.as_mut() {
            if let Err(e) = writeln!(f, "{line}") {
                tracing::error!(path = %path.display(), error = %e, "cannot write the audit log");
                *slot = None;
            }
        }
    }

    /// The last `limit` entries, newest first.
    pub fn tail(&self, limit: usize) -> Vec<serde_json::Value> {
        let Some(path) = &self.path else { return Vec::new() };
        let text = std::fs::read_to_string(path).unwrap_or_default();
        text.lines().rev().take(limit).filter_map(|l| serde_json::from_str(l).ok()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_match_by_hash_and_scheme() {
        let hash = gatehouse_control::document::sha256_hex(b"s3cret-token");
        let tokens = Tokens::new(&[
            AdminToken { name: "ops".into(), sha256: hash, role: AdminRole::Write },
            AdminToken {
                name: "viewer".into(),
                sha256: gatehouse_control::document::sha256_hex(b"look"),
                role: AdminRole::Read,
            },
        ]);
        let h = |v: &str| http::HeaderValue::from_str(v).expect("header");
        assert_eq!(tokens.check(Some(&h("Bearer s3cret-token"))), Some(("ops".into(), AdminRole::Write)));
        assert_eq!(tokens.check(Some(&h("bearer look"))), Some(("viewer".into(), AdminRole::Read)));
        assert_eq!(tokens.check(Some(&h("Bearer s3cret-tokeN"))), None);
        assert_eq!(tokens.check(Some(&h("Basic s3cret-token"))), None);
        assert_eq!(tokens.check(Some(&h("Bearer "))), None);
        assert_eq!(tokens.check(None), None);
    }
}
