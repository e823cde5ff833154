//! The running node: what `gatehouse run` starts and keeps going, as a library a test can drive
//! in-process.
//!
//! ```text
//! run ── read and compile the file ── start workers (listener) ── TLS runtime (tls)
//!   └─ control loop (main thread's runtime)
//!        ├─ reload: SIGHUP, file change, a released revision (follow) ─► compile thread ─► apply
//!        │    (snapshot swap, listener set diffed, health checks restarted)
//!        ├─ admin listener (gatehouse-admin), demo backend, status events on stdout
//!        ├─ SIGUSR2: hand the sockets to a new binary (upgrade), then drain
//!        └─ SIGTERM/SIGINT: drain within shutdown_grace, then stop
//! ```

// Unsafe code is denied, not forbidden: taking over the listening sockets a previous process
// handed down (upgrade.rs) needs one `unsafe` block, with its reason written beside it.
#![deny(unsafe_code)]

pub mod check;
mod compiler;
mod demo;
pub mod error;
pub mod events;
mod follow;
mod listeners;
mod run;
mod systemd;
pub mod tls;
mod traces;
pub mod upgrade;

pub use check::{check, CheckError};
pub use error::NodeError;
pub use events::Events;
pub use run::{run, run_with};
pub use upgrade::Inherited;

use gatehouse_config::Config;
use gatehouse_tls::catalog::Catalog;
use std::sync::Arc;

/// The certificate store a configuration names (`tls.store`), to manage it.
pub fn cert_catalog(config: &Config) -> Result<Catalog, NodeError> {
    let Some(s) = &config.tls.store else {
        return Err(NodeError::NoCertStore);
    };
    if let Some(dir) = &s.dir {
        return Ok(Catalog::Dir(dir.clone()));
    }
    let cluster = tls::cluster(config, Arc::default())?.ok_or_else(|| {
        NodeError::Settings(vec![error::Setting::new("tls.store.redis", "needs the `redis` section")])
    })?;
    Ok(Catalog::Redis(gatehouse_tls::redis_store::RedisStore::new(cluster)))
}
