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
mod gateway;
pub mod headers;
pub mod rate_limit;
mod service;
mod stats;

pub use denial::Denial;
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
    /// For `gatehouse check`: cluster limits are compiled as local ones, never served.
    offline: bool,
    tables: Mutex<HashMap<String, Weak<LocalTable>>>,
    stats: Mutex<HashMap<String, Weak<ServiceStats>>>,
}

impl Registry {
    /// A registry; the cluster's Redis, when there is one, serves `scope: cluster` limits.
    pub fn new(redis: Option<Arc<gatehouse_cluster::Cluster>>) -> Self {
        Registry { redis, ..Registry::default() }
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

    /// The counters of service `name`.
    fn stats(&self, name: &str) -> Arc<ServiceStats> {
        shared(&self.stats, name, ServiceStats::default)
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
