//! The files a draft names (JWT public keys, CA bundles, upstream client certificates and keys):
//! a file first named through the API must lie under `admin.file_roots` and be a regular file of
//! at most 1 MiB, or be PEM written inline. Every refusal reads the same, so the API says nothing
//! about which paths exist on the machine.

use super::api::{field, ApiError};
use serde_json::Value;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// What a refused file is told.
const REFUSED: &str =
    "not a file the admin API may read: name a regular file of at most 1 MiB under admin.file_roots, or give the PEM inline";

/// Every file a published document names, with where: `apps.a.jwt_keys[0].public_key`,
/// `upstreams.u.tls.ca` (and `cert`, `key`), `sites.s.client_auth.ca`,
/// `services.s.jwt.jwks.ca` (or `jwt[1].jwks.ca`), `services.s.external.ca`.
fn files(doc: &Value) -> Vec<(String, &str)> {
    let mut out = Vec::new();
    let entries = |section: &str| doc.get(section).and_then(Value::as_object).into_iter().flatten();
    for (name, app) in entries("apps") {
        for (i, k) in app.get("jwt_keys").and_then(Value::as_array).into_iter().flatten().enumerate() {
            if let Some(p) = k.get("public_key").and_then(Value::as_str) {
                out.push((format!("apps.{name}.jwt_keys[{i}].public_key"), p));
            }
        }
    }
    for (name, u) in entries("upstreams") {
        for key in ["ca", "cert", "key"] {
            if let Some(p) = u.get("tls").and_then(|t| t.get(key)).and_then(Value::as_str) {
                out.push((format!("upstreams.{name}.tls.{key}"), p));
            }
        }
    }
    for (name, s) in entries("sites") {
        if let Some(p) = s.get("client_auth").and_then(|c| c.get("ca")).and_then(Value::as_str) {
            out.push((format!("sites.{name}.client_auth.ca"), p));
        }
    }
    for (name, s) in entries("services") {
        // `jwt` is one issuer's settings or a list of them.
        let issuers: Vec<(String, &Value)> = match s.get("jwt") {
            Some(Value::Array(list)) => list.iter().enumerate().map(|(i, j)| (format!("jwt[{i}]"), j)).collect(),
            Some(one) => vec![("jwt".to_string(), one)],
            None => Vec::new(),
        };
        for (at, j) in issuers {
            if let Some(p) = j.get("jwks").and_then(|k| k.get("ca")).and_then(Value::as_str) {
                out.push((format!("services.{name}.{at}.jwks.ca"), p));
            }
        }
        if let Some(p) = s.get("external").and_then(|e| e.get("ca")).and_then(Value::as_str) {
            out.push((format!("services.{name}.external.ca"), p));
        }
    }
    out
}

/// Refuses the files `after` names that `before` did not (the node's own file and earlier
/// drafts were written by operators) unless [`gatehouse_files::allowed`] under `roots`, a
/// relative path taken in `dir` as the node will read it.
pub(super) fn check(before: &Value, after: &Value, roots: &[PathBuf], dir: &Path) -> Result<(), ApiError> {
    let known: HashSet<&str> = files(before).into_iter().map(|(_, p)| p).collect();
    let in_dir = |p: &str| match gatehouse_files::inline_pem(Path::new(p)) {
        Some(_) => PathBuf::from(p),
        None => dir.join(p),
    };
    let refused: Vec<_> = files(after)
        .into_iter()
        .filter(|(_, p)| !known.contains(p) && !gatehouse_files::allowed(&in_dir(p), roots))
        .map(|(at, _)| field(&at, REFUSED.into()))
        .collect();
    if refused.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(refused))
    }
}
