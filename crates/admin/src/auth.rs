//! Who is calling the admin API, and the audit log of what they changed.
//!
//! Tokens are configured as SHA-256 hashes; a presented token is hashed and compared with every
//! configured hash in constant time, without stopping at the first match, so the answer time
//! says nothing about which token came close.

use crate::bodies::{AuditEntry, AuditPage};
use aws_lc_rs::constant_time::verify_slices_are_equal;
use aws_lc_rs::digest::{digest, SHA256};
use gatehouse_config::{AdminRole, AdminToken};
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

/// Why a request without an accepted token is refused: none presented, or one not accepted (a
/// user who typed a token is told it is wrong, not that one is needed).
pub fn refusal(authorization: Option<&http::HeaderValue>) -> &'static str {
    match authorization {
        None => "a bearer token is required",
        Some(_) => "the bearer token was not accepted",
    }
}

/// The `WWW-Authenticate` of a refusal (RFC 6750: `invalid_token` when one was presented).
pub fn challenge(authorization: Option<&http::HeaderValue>) -> http::HeaderValue {
    match authorization {
        None => http::HeaderValue::from_static("Bearer realm=\"gatehouse\""),
        Some(_) => http::HeaderValue::from_static("Bearer realm=\"gatehouse\", error=\"invalid_token\""),
    }
}

/// One JSON line per change attempt by a token holder, in a file of at most `max_bytes` that is
/// moved to `<file>.1` (replacing the one before) when the next line would not fit.
pub struct Audit {
    path: Option<PathBuf>,
    max_bytes: u64,
    file: Mutex<Option<(std::fs::File, u64)>>,
}

/// The longest request path an entry keeps (a longer one is cut, marked with `…`).
const MAX_PATH: usize = 256;

/// One audit entry.
pub struct Entry<'a> {
    /// Token name.
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
    /// Appends to `path` (created mode 600), at most `max_bytes` per file; `None`: no audit log.
    pub fn new(path: Option<PathBuf>, max_bytes: u64) -> Self {
        Audit { path, max_bytes: max_bytes.max(4096), file: Mutex::new(None) }
    }

    /// Writes one entry.
    pub fn write(&self, e: Entry<'_>) {
        let Some(path) = &self.path else { return };
        let shown = match e.path.char_indices().nth(MAX_PATH) {
            Some((cut, _)) => format!("{}…", &e.path[..cut]),
            None => e.path.to_string(),
        };
        let entry = AuditEntry {
            time: gatehouse_telemetry::rfc3339_time(std::time::SystemTime::now()),
            who: e.who.to_string(),
            remote: e.remote.to_string(),
            method: e.method.to_string(),
            path: shown,
            status: e.status,
            detail: e.detail,
        };
        let line = serde_json::to_string(&entry).unwrap_or_default() + "\n";
        let mut slot = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if slot.as_ref().is_some_and(|(_, len)| len + line.len() as u64 > self.max_bytes) {
            *slot = None;
            let old = PathBuf::from(format!("{}.1", path.display()));
            if let Err(e) = std::fs::rename(path, &old) {
                tracing::error!(path = %path.display(), error = %e, "cannot rotate the audit log");
            }
        }
        if slot.is_none() {
            use std::os::unix::fs::OpenOptionsExt;
            let opened = std::fs::OpenOptions::new().append(true).create(true).mode(0o600).open(path);
            match opened.and_then(|f| f.metadata().map(|m| (f, m.len()))) {
                Ok(f) => *slot = Some(f),
                Err(e) => {
                    tracing::error!(path = %path.display(), error = %e, "cannot open the audit log");
                    return;
                }
            }
        }
        if let Some((f, len)) = slot.as_mut() {
            match f.write_all(line.as_bytes()) {
                Ok(()) => *len += line.len() as u64,
                Err(e) => {
                    tracing::error!(path = %path.display(), error = %e, "cannot write the audit log");
                    *slot = None;
                }
            }
        }
    }

    /// At most `limit` entries ending before byte `before` (default: the end), newest first,
    /// read backwards from there a block at a time, never the whole file. Offsets count through
    /// the file moved aside (`<file>.1`) and then the current one, as if they were one.
    pub fn page(&self, limit: usize, before: Option<u64>) -> AuditPage {
        const BLOCK: u64 = 64 * 1024;
        let Some(path) = &self.path else { return AuditPage { entries: Vec::new(), next: None } };
        let log = Joined::open(&[PathBuf::from(format!("{}.1", path.display())), path.clone()]);
        let mut end = before.map_or(log.len(), |b| b.min(log.len()));
        let mut entries = Vec::new();
        // Bytes from `start` to `end` not yet split into lines (the first may be partial).
        let mut tail: Vec<u8> = Vec::new();
        let mut start = end;
        while entries.len() < limit && start > 0 {
            let from = start.saturating_sub(BLOCK);
            let Some(mut block) = log.read(from, start) else { break };
            block.extend_from_slice(&tail);
            tail = block;
            start = from;
            // Whole lines: those after a newline, or all when the start is reached.
            while entries.len() < limit {
                let body = &tail[..tail.len().saturating_sub(usize::from(tail.last() == Some(&b'\n')))];
                let cut = match body.iter().rposition(|&b| b == b'\n') {
                    Some(i) => i + 1,
                    None if start == 0 && !body.is_empty() => 0,
                    None => break,
                };
                if let Ok(v) = serde_json::from_slice(&body[cut..]) {
                    entries.push(v);
                }
                end = start + cut as u64;
                tail.truncate(cut);
                if cut == 0 {
                    break;
                }
            }
        }
        AuditPage { entries, next: (end > 0).then_some(end) }
    }
}

/// Files read as one, in order (missing ones are empty).
struct Joined(Vec<(std::fs::File, u64)>);

impl Joined {
    fn open(paths: &[PathBuf]) -> Joined {
        Joined(
            paths
                .iter()
                .filter_map(|p| std::fs::File::open(p).ok())
                .filter_map(|f| f.metadata().ok().map(|m| (f, m.len())))
                .collect(),
        )
    }

    fn len(&self) -> u64 {
        self.0.iter().map(|(_, len)| len).sum()
    }

    /// The bytes from `from` to `to`.
    fn read(&self, from: u64, to: u64) -> Option<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let mut out = Vec::with_capacity(usize::try_from(to - from).ok()?);
        let mut base = 0;
        for (f, len) in &self.0 {
            let (a, b) = (from.max(base), to.min(base + len));
            if a < b {
                let mut part = vec![0; usize::try_from(b - a).ok()?];
                f.read_exact_at(&mut part, a - base).ok()?;
                out.extend_from_slice(&part);
            }
            base += len;
        }
        Some(out)
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
