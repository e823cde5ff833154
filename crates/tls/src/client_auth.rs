//! Client certificates (mutual TLS) per site: which verifier a handshake uses is decided by the
//! name the client sends, as the certificate is.

use crate::index::wildcard_parent;
use rustls::server::danger::ClientCertVerifier;
use std::collections::HashMap;
use std::sync::Arc;

/// One site's client-certificate policy.
#[derive(Debug)]
pub struct SitePolicy {
    /// The site.
    pub site: Arc<str>,
    /// Verifies client certificates against the site's CAs (and may require one).
    pub verifier: Arc<dyn ClientCertVerifier>,
}

/// Policies by host name: exact, `*.` wildcard one label deep, then `*`.
#[derive(Debug, Default)]
pub struct ClientAuthIndex {
    exact: HashMap<String, Arc<SitePolicy>>,
    wildcard: HashMap<String, Arc<SitePolicy>>,
    any: Option<Arc<SitePolicy>>,
}

impl ClientAuthIndex {
    /// Adds `policy` for host patterns as sites write them (`example.com`, `*.example.com`, `*`).
    pub fn add<'a>(&mut self, hosts: impl IntoIterator<Item = &'a str>, policy: Arc<SitePolicy>) {
        for h in hosts {
            let h = h.to_ascii_lowercase();
            if h == "*" {
                self.any = Some(policy.clone());
            } else if let Some(parent) = h.strip_prefix("*.") {
                self.wildcard.insert(parent.to_string(), policy.clone());
            } else {
                self.exact.insert(h, policy.clone());
            }
        }
    }

    /// Whether no site verifies client certificates.
    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.wildcard.is_empty() && self.any.is_none()
    }

    /// The policy for a handshake naming `name` (normalised), or sending no name.
    pub fn get(&self, name: Option<&str>) -> Option<&Arc<SitePolicy>> {
        let Some(name) = name else { return self.any.as_ref() };
        self.exact.get(name).or_else(|| wildcard_parent(name).and_then(|p| self.wildcard.get(p))).or(self.any.as_ref())
    }
}

/// The subject of a DER certificate, for the backend's `X-Client-Cert-Subject` header.
pub fn subject_of(der: &[u8]) -> Option<String> {
    use x509_parser::prelude::{FromDer, X509Certificate};
    X509Certificate::from_der(der).ok().map(|(_, c)| c.subject().to_string())
}
