//! Endpoint state that outlives configuration snapshots: a reload that keeps an endpoint keeps its
//! health, counters and idle connections; a removed endpoint's state is freed with the last
//! snapshot that used it.

use crate::endpoint::EndpointState;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};

/// Endpoint states by upstream name and address.
#[derive(Debug)]
pub struct Registry {
    workers: usize,
    endpoints: Mutex<HashMap<(String, SocketAddr), Weak<EndpointState>>>,
}

impl Registry {
    /// A registry for `workers` worker threads (one idle pool each per endpoint).
    pub fn new(workers: usize) -> Self {
        Registry { workers, endpoints: Mutex::new(HashMap::new()) }
    }

    /// The state of `addr` in `upstream`, created when new. Called while compiling a snapshot,
    /// never on the request path.
    pub fn endpoint(&self, upstream: &str, addr: SocketAddr) -> Arc<EndpointState> {
        let mut map = self.endpoints.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, w| w.strong_count() > 0);
        let key = (upstream.to_string(), addr);
        if let Some(state) = map.get(&key).and_then(Weak::upgrade) {
            return state;
        }
        let state = Arc::new(EndpointState::new(addr, self.workers));
        map.insert(key, Arc::downgrade(&state));
        state
    }
}
