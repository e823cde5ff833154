//! Control plane: what operators publish and what nodes run. A *draft* is edited through the
//! admin API; committing it makes an immutable numbered *revision*; a revision is *staged* to
//! the nodes carrying a label or *released* to all, and any earlier one can be rolled back to.
//! Revisions hold the published sections of the configuration (upstreams, sites, services,
//! apps, plans); each node merges them into its own file, which keeps the node's listeners,
//! workers, TLS and Redis settings.
//!
//! The [`Store`] keeps all of it on local disk (a single node) or in the cluster's Redis, where a
//! pub/sub message tells every node that the releases changed.

#![forbid(unsafe_code)]

pub mod diff;
pub mod document;
mod local;
mod redis_store;
mod store;
mod types;

pub use store::{Changes, Store, StoreError};
pub use types::*;

/// Seconds since the Unix epoch.
pub fn now_secs() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}
