//! `/api/v1/certificates`: the certificate store (`tls.store`, a directory or Redis) through the
//! API. Uploads are checked (chain order, key matches, not expired) and go live at once on every
//! node that reads the store; answers carry the parsed facts and never a private key.

use super::api::{field, unrouted, Answer, ApiError, Call, Reply};
use crate::bodies::{
    AcmeName, CertificateFacts, CertificateList, CertificateSource, CertificateUpload, KeyType, Removed,
};
use gatehouse_control::now_secs;
use gatehouse_tls::bundle::{Facts, KeyKind};
use gatehouse_tls::catalog::{Catalog, CatalogError, Imported};
use http::Method;
use serde_json::json;

/// The certificate store the API manages.
pub struct CertStore(pub Catalog);

/// What the API shows of a bundle.
pub fn facts(f: &Facts, stored_as: &str) -> CertificateFacts {
    let now = now_secs();
    let day = |unix: i64| {
        gatehouse_telemetry::iso_date(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(u64::try_from(unix).unwrap_or(0)),
        )
    };
    CertificateFacts {
        names: f.names.clone(),
        subject: f.subject.clone(),
        issuer: f.issuer.clone(),
        serial: f.serial.clone(),
        key_type: match f.key {
            KeyKind::Ecdsa => KeyType::Ecdsa,
            KeyKind::Rsa => KeyType::Rsa,
            KeyKind::Other => KeyType::Other,
        },
        not_before: day(f.not_before),
        not_after: day(f.not_after),
        not_after_unix: f.not_after,
        days_left: (f.not_after - now).div_euclid(86_400),
        expired: f.expired_at(now),
        chain_length: f.chain_len,
        stored_as: stored_as.to_string(),
        warnings: None,
        source: None,
        acme: None,
    }
}

/// Where ACME's state says a name came from.
fn acme_source(s: &gatehouse_acme::NameStatus) -> CertificateSource {
    if s.source == "on-demand" {
        CertificateSource::OnDemand
    } else {
        CertificateSource::Acme
    }
}

/// What the API shows of an ACME-kept name.
pub fn acme_name(s: &gatehouse_acme::NameStatus) -> AcmeName {
    let when = |unix: i64| {
        gatehouse_telemetry::rfc3339_time(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(u64::try_from(unix).unwrap_or(0)),
        )
    };
    AcmeName {
        source: acme_source(s),
        not_after: s.not_after.map(when),
        issuer: s.issuer.clone(),
        next_renewal: s.next_renewal.map(when),
        last_error: s.last_error.clone(),
        updated: when(s.updated),
    }
}

/// The PEM of an upload: a raw PEM body, or JSON `{"pem": …}` or `{"cert": …, "key": …}`.
fn upload_pem(c: &Call) -> Result<Vec<u8>, ApiError> {
    let trimmed = c.body.iter().position(|b| !b.is_ascii_whitespace()).map_or(&c.body[..0], |i| &c.body[i..]);
    if !trimmed.starts_with(b"{") {
        return Ok(c.body.to_vec());
    }
    let v: CertificateUpload = c.body()?;
    match (v.pem, v.cert, v.key) {
        (Some(pem), _, _) => Ok(pem.into_bytes()),
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
                let certificates = all
                    .bundles
                    .iter()
                    .map(|(f, p)| {
                        let kept = f.names.iter().find_map(|n| acme.get(n));
                        CertificateFacts {
                            source: Some(kept.map_or(CertificateSource::Imported, acme_source)),
                            acme: kept.map(acme_name),
                            ..facts(f, p)
                        }
                    })
                    .collect();
                Ok(Reply::ok(json!(CertificateList { certificates })))
            }
            (&Method::POST, []) => {
                let pem = upload_pem(c)?;
                match self.0.import(&pem, now_secs()).await {
                    Ok(Imported { facts, warnings, place }) => {
                        let body = json!(CertificateFacts { warnings: Some(warnings), ..self::facts(&facts, &place) });
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
                let certificates = found.iter().map(|(f, p)| facts(f, p)).collect();
                Ok(Reply::ok(json!(CertificateList { certificates })))
            }
            (&Method::DELETE, [name]) => {
                let removed = self.0.remove(name, now_secs()).await.map_err(bad)?;
                if removed.is_empty() {
                    return Err(ApiError::not_found(format!("no stored certificate names {name}")));
                }
                let names: Vec<&Vec<String>> = removed.iter().map(|(f, _)| &f.names).collect();
                let body = json!(Removed { removed: removed.iter().map(|(f, p)| facts(f, p)).collect() });
                Ok(Reply { status: 200, body, etag: None, audit: json!({ "removed": names }) })
            }
            _ => Err(unrouted(c)),
        }
    }
}
