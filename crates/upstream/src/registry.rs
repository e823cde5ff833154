//! Endpoint state that outlives configuration snapshots: a reload that keeps an endpoint keeps its
//! health, counters and idle connections; a removed endpoint's state is freed with the last
//! snapshot that used it.

use crate::endpoint::EndpointState;
use crate::tls::TlsClient;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};

/// An endpoint's identity: its upstream, address, the host name it was found by, and how its
/// connections are opened ([`Transport`]): changed settings make a new endpoint, with new
/// connections.
type Key = (String, SocketAddr, Option<String>, u64);

/// How an upstream opens connections, beyond the address: TLS and the PROXY header. A
/// connection opened one way is never reused under another (one that named a client in a PROXY
/// header must not carry another client's requests once the header is turned off).
#[derive(Clone, Copy, Debug)]
pub struct Transport<'a> {
    /// TLS settings.
    pub tls: Option<&'a TlsClient>,
    /// PROXY header sent.
    pub proxy_protocol: Option<gatehouse_config::ProxyProtocolVersion>,
}

impl Transport<'_> {
    fn fingerprint(&self) -> u64 {
        let pp = match self.proxy_protocol {
            None => 0,
            Some(gatehouse_config::ProxyProtocolVersion::V1) => 1,
            Some(gatehouse_config::ProxyProtocolVersion::V2) => 2,
        };
        self.tls.map_or(0, TlsClient::fingerprint).rotate_left(2) ^ pp
    }
}

/// Endpoint states by upstream name and address.
#[derive(Debug)]
pub struct Registry {
    workers: usize,
    endpoints: Mutex<HashMap<Key, Weak<EndpointState>>>,
}

impl Registry {
    /// A registry for `workers` worker threads (one idle pool each per endpoint).
    pub fn new(workers: usize) -> Self {
        Registry { workers, endpoints: Mutex::new(HashMap::new()) }
    }

    /// The state of `addr` (found by `host`, reached by `transport`) in `upstream`, created when
    /// new. Called while compiling a snapshot or publishing a DNS answer, never on the request
    /// path.
    pub fn endpoint(
        &self,
        upstream: &str,
        addr: SocketAddr,
        host: Option<&str>,
        transport: Transport<'_>,
    ) -> Arc<EndpointState> {
        let mut map = self.endpoints.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, w| w.strong_count() > 0);
        let key = (upstream.to_string(), addr, host.map(str::to_string), transport.fingerprint());
        if let Some(state) = map.get(&key).and_then(Weak::upgrade) {
            return state;
        }
        let tls = transport.tls.map(|t| t.for_endpoint(t.server_name(host, addr.ip())));
        let state = Arc::new(EndpointState::new(addr, host, tls, self.workers));
        map.insert(key, Arc::downgrade(&state));
        state
    }
}
