//! Admit stage: the API gateway's checks between routing and forwarding, run inline on the
//! request path from one compiled [`Gateway`] in the configuration snapshot — no channel, no task
//! per plugin, no private copy of the configuration.
//!
//! ```text
//! service route ─► app key / JWT ─► allow_ips ─► grant ─► ACL ─► rate limits ─► header rewrite
//!                     401             403          403     403       429
//! ```
//! State that must outlive a reload (local rate-limit tables, counters) lives in a [`Registry`]
//! keyed by stable names.

#![forbid(unsafe_code)]

pub mod acl;
pub mod app_key;
pub mod cors;
mod denial;
mod error;
mod external;
mod gateway;
pub mod headers;
pub mod rate_limit;
mod service;
mod stats;

pub use denial::{Denial, ExternalAnswer};
pub use error::GatewayError;
pub use gateway::{parse_sha256_hex, AppEntry, Gateway, PlanGate};
pub use headers::EditHeaders;
pub use rate_limit::Quota;
pub use service::{quota_headers, Admitted, ServiceGate};
pub use stats::ServiceStats;

use rate_limit::local::LocalTable;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

/// Gateway state that survives configuration reloads.
#[derive(Debug, Default)]
pub struct Registry {
    redis: Option<Arc<gatehouse_cluster::Cluster>>,
    /// Where key-set refresher tasks run (the runtime the registry was made on).
    runtime: Option<tokio::runtime::Handle>,
    /// OpenID providers' key sets, by everything that decides how they are fetched.
    key_sources: Mutex<HashMap<String, Weak<gatehouse_jwks::KeySource>>>,
    /// For `gatehouse check`: cluster limits are compiled as local ones, never served.
    offline: bool,
    tables: Mutex<HashMap<String, Weak<LocalTable>>>,
    stats: Mutex<HashMap<String, Weak<ServiceStats>>>,
}

impl Registry {
    /// A registry; the cluster's Redis, when there is one, serves `scope: cluster` limits. Made on
    /// a Tokio runtime, it runs the key-set refreshers there.
    pub fn new(redis: Option<Arc<gatehouse_cluster::Cluster>>) -> Self {
        Registry { redis, runtime: tokio::runtime::Handle::try_current().ok(), ..Registry::default() }
    }

    /// A registry for checking a configuration without serving it (no Redis needed).
    pub fn offline() -> Self {
        Registry { offline: true, ..Registry::default() }
    }

    /// The local table for the limit with identity `id` (which includes its parameters, so a
    /// changed limit starts afresh and an unchanged one keeps its counts).
    fn table(&self, id: &str, keys: usize) -> Arc<LocalTable> {
        shared(&self.tables, id, || LocalTable::new(keys))
    }

    /// The key set of a JWT issuer, shared by every service and configuration that fetches it the
    /// same way (a changed CA file makes a new one). Offline, it is made but never fetched.
    fn key_source(&self, j: &gatehouse_config::JwtSettings) -> Result<Arc<gatehouse_jwks::KeySource>, GatewayError> {
        use gatehouse_jwks::{KeySource, Settings, Source};
        use std::hash::{BuildHasher as _, BuildHasherDefault, DefaultHasher};
        let source = match (&j.jwks_uri, &j.issuer) {
            (Some(uri), _) => Source::Uri(uri.clone()),
            (None, Some(issuer)) => Source::Discovery { issuer: issuer.clone() },
            (None, None) => return Err(GatewayError::JwksCa { path: "".into(), reason: "no key set source".into() }),
        };
        let k = &j.jwks;
        let ca = match &k.ca {
            Some(path) => {
                let pem = gatehouse_files::read(path)
                    .map_err(|e| GatewayError::JwksCa { path: path.clone(), reason: e.to_string() })?;
                Some((path.clone(), pem))
            }
            None => None,
        };
        let ca_hash = ca.as_ref().map(|(_, pem)| BuildHasherDefault::<DefaultHasher>::default().hash_one(pem));
        let id = format!("{source:?} {:?} {:?} {:?} {ca_hash:?}", k.refresh.0, k.min_refetch.0, k.timeout.0);
        let mut map = self.key_sources.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, w| w.strong_count() > 0);
        if let Some(existing) = map.get(&id).and_then(Weak::upgrade) {
            return Ok(existing);
        }
        // The same provider fetched another way (a reload changed `refresh`, say): its set serves
        // until the new source's first fetch.
        let prefix = format!("{source:?} ");
        let seed = map.iter().filter(|(k, _)| k.starts_with(&prefix)).find_map(|(_, w)| w.upgrade()?.current());
        let roots = match ca {
            Some((path, pem)) => Some(read_roots(&pem).map_err(|reason| GatewayError::JwksCa { path, reason })?),
            None => None,
        };
        let settings =
            Settings { source, refresh: k.refresh.0, min_refetch: k.min_refetch.0, timeout: k.timeout.0, roots };
        let runtime = if self.offline { None } else { self.runtime.as_ref() };
        let made = KeySource::start(settings, runtime, seed);
        map.insert(id, Arc::downgrade(&made));
        Ok(made)
    }

    /// The counters of service `name`.
    fn stats(&self, name: &str) -> Arc<ServiceStats> {
        shared(&self.stats, name, ServiceStats::default)
    }
}

/// The CA certificates of a PEM file.
pub(crate) fn read_roots(pem: &[u8]) -> Result<rustls::RootCertStore, String> {
    use rustls::pki_types::{pem::PemObject as _, CertificateDer};
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        roots.add(cert.map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    }
    match roots.is_empty() {
        true => Err("holds no certificate".into()),
        false => Ok(roots),
    }
}

fn shared<T>(map: &Mutex<HashMap<String, Weak<T>>>, id: &str, make: impl FnOnce() -> T) -> Arc<T> {
    let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
    map.retain(|_, w| w.strong_count() > 0);
    if let Some(v) = map.get(id).and_then(Weak::upgrade) {
        return v;
    }
    let v = Arc::new(make());
    map.insert(id.to_string(), Arc::downgrade(&v));
    v
}
