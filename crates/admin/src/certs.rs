//! `/api/v1/certificates`: the certificate store (`tls.store`, a directory or Redis) through the
//! API. Uploads are checked (chain order, key matches, not expired) and go live at once on every
//! node that reads the store; answers carry the parsed facts and never a private key.

use super::api::{field, unrouted, Answer, ApiError, Call, Reply};
use gatehouse_control::now_secs;
use gatehouse_tls::bundle::Facts;
use gatehouse_tls::catalog::{Catalog, CatalogError, Imported};
use http::Method;
use serde_json::{json, Value};

/// The certificate store the API manages.
pub struct CertStore(pub Catalog);

/// What the API shows of a bundle.
pub fn facts_json(f: &Facts, stored_as: &str) -> Value {
    let now = now_secs();
    let day = |unix: i64| {
        gatehouse_telemetry::iso_date(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(u64::try_from(unix).unwrap_or(0)),
        )
    };
    json!({
        "names": f.names,
        "subject": f.subject,
        "issuer": f.issuer,
        "serial": f.serial,
        "key_type": f.key.as_str(),
        "not_before": day(f.not_before),
        "not_after": day(f.not_after),
        "not_after_unix": f.not_after,
        "days_left": (f.not_after - now).div_euclid(86_400),
        "expired": f.expired_at(now),
        "chain_length": f.chain_len,
        "stored_as": stored_as,
    })
}

/// What the API shows of an ACME-kept name.
pub fn acme_json(s: &gatehouse_acme::NameStatus) -> Value {
    let when = |unix: Option<i64>| {
        unix.map(|t| {
            gatehouse_telemetry::rfc3339_time(
                std::time::UNIX_EPOCH + std::time::Duration::from_secs(u64::try_from(t).unwrap_or(0)),
            )
        })
    };
    json!({
        "source": s.source,
        "not_after": when(s.not_after),
        "issuer": s.issuer,
        "next_renewal": when(s.next_renewal),
        "last_error": s.last_error,
        "updated": when(Some(s.updated)),
    })
}

/// The PEM of an upload: a raw PEM body, or JSON `{"pem": …}` or `{"cert": …, "key": …}`.
fn upload_pem(c: &Call) -> Result<Vec<u8>, ApiError> {
    let trimmed = c.body.iter().position(|b| !b.is_ascii_whitespace()).map_or(&c.body[..0], |i| &c.body[i..]);
    if !trimmed.starts_with(b"{") {
        return Ok(c.body.to_vec());
    }
    let v = c.json()?;
    let s = |k: &str| v.get(k).and_then(Value::as_str);
    match (s("pem"), s("cert"), s("key")) {
        (Some(pem), _, _) => Ok(pem.as_bytes().to_vec()),
        (None, Some(cert), Some(key)) => Ok(format!("{}\n{}\n", cert.trim_end(), key.trim_end()).into_bytes()),
        _ => Err(ApiError::invalid(vec![field("pem", "send `pem` (chain and key) or `cert` and `key`".into())])),
    }
}

impl CertStore {
    pub(super) async fn call(&self, c: &Call, segs: &[&str]) -> Answer {
        let unavailable = |e: CatalogError| ApiError::new(http::StatusCode::SERVICE_UNAVAILABLE, e.to_string());
        let bad = |e: CatalogError| ApiError::bad(e.to_string());
        match (&c.method, segs) {
            (&Method::GET, []) => {
                let all = self.0.list(now_secs()).await.map_err(unavailable)?;
                for (place, e) in &all.unusable {
                    tracing::warn!(bundle = %place, error = %e, "unusable certificate bundle in the store");
                }
                // Where each came from: ACME (configured or on demand), else imported.
                let acme = gatehouse_acme::account::Keep::of(&self.0).statuses().await.unwrap_or_default();
                let list: Vec<Value> = all
                    .bundles
                    .iter()
                    .map(|(f, p)| {
                        let mut v = facts_json(f, p);
                        let kept = f.names.iter().find_map(|n| acme.get(n));
                        v["source"] = json!(kept.map_or("imported", |s| s.source.as_str()));
                        if let Some(s) = kept {
                            v["acme"] = acme_json(s);
                        }
                        v
                    })
                    .collect();
                Ok(Reply::ok(json!({ "certificates": list })))
            }
            (&Method::POST, []) => {
                let pem = upload_pem(c)?;
                match self.0.import(&pem, now_secs()).await {
                    Ok(Imported { facts, warnings, place }) => {
                        let mut body = facts_json(&facts, &place);
                        body["warnings"] = json!(warnings);
                        let audit = json!({ "certificate": facts.names, "serial": facts.serial });
                        Ok(Reply { status: 201, body, etag: None, audit })
                    }
                    Err(e) => {
                        Err(ApiError::invalid(vec![field("pem", format!("refused, the store is unchanged: {e}"))]))
                    }
                }
            }
            (&Method::GET, [name]) => {
                let found = self.0.serving(name, now_secs()).await.map_err(bad)?;
                if found.is_empty() {
                    return Err(ApiError::not_found(format!("no stored certificate serves {name}")));
                }
                Ok(Reply::ok(
                    json!({ "certificates": found.iter().map(|(f, p)| facts_json(f, p)).collect::<Vec<_>>() }),
                ))
            }
            (&Method::DELETE, [name]) => {
                let removed = self.0.remove(name, now_secs()).await.map_err(bad)?;
                if removed.is_empty() {
                    return Err(ApiError::not_found(format!("no stored certificate names {name}")));
                }
                let names: Vec<&Vec<String>> = removed.iter().map(|(f, _)| &f.names).collect();
                let body = json!({ "removed": removed.iter().map(|(f, p)| facts_json(f, p)).collect::<Vec<_>>() });
                Ok(Reply { status: 200, body, etag: None, audit: json!({ "removed": names }) })
            }
            _ => Err(unrouted(c)),
        }
    }
}
