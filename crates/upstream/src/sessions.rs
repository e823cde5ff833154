//! Connect stage, TLS resumption: one endpoint's client sessions. rustls' own memory cache keeps at
//! most 8 TLS 1.3 tickets per server name, each usable once; when many connections to one endpoint
//! open at once (a burst, or `keepalive: {max_idle: 0}`), it runs dry and the rest are full
//! handshakes (13–23 % of them in `bench/reencrypt.sh` runs). This store keeps up to
//! `session_cache` tickets, newest first, plus the TLS 1.2 session, which any number of
//! connections may resume.

use rustls::client::{ClientSessionStore, Tls12ClientSessionValue, Tls13ClientSessionValue};
use rustls::pki_types::ServerName;
use rustls::NamedGroup;
use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

/// The sessions of one endpoint. Every connection to it uses the same server name, so the name is
/// not part of the key.
#[derive(Debug)]
pub(crate) struct EndpointSessions {
    capacity: usize,
    state: Mutex<Sessions>,
}

#[derive(Debug, Default)]
struct Sessions {
    kx_hint: Option<NamedGroup>,
    tls12: Option<Tls12ClientSessionValue>,
    tls13: VecDeque<Tls13ClientSessionValue>,
}

impl EndpointSessions {
    /// A store that keeps up to `capacity` TLS 1.3 tickets.
    pub(crate) fn new(capacity: usize) -> Self {
        EndpointSessions { capacity: capacity.max(1), state: Mutex::new(Sessions::default()) }
    }

    fn lock(&self) -> MutexGuard<'_, Sessions> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl ClientSessionStore for EndpointSessions {
    fn set_kx_hint(&self, _: ServerName<'static>, group: NamedGroup) {
        self.lock().kx_hint = Some(group);
    }

    fn kx_hint(&self, _: &ServerName<'_>) -> Option<NamedGroup> {
        self.lock().kx_hint
    }

    fn set_tls12_session(&self, _: ServerName<'static>, value: Tls12ClientSessionValue) {
        self.lock().tls12 = Some(value);
    }

    fn tls12_session(&self, _: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        self.lock().tls12.clone()
    }

    fn remove_tls12_session(&self, _: &ServerName<'static>) {
        self.lock().tls12 = None;
    }

    fn insert_tls13_ticket(&self, _: ServerName<'static>, value: Tls13ClientSessionValue) {
        let mut st = self.lock();
        if st.tls13.len() >= self.capacity {
            st.tls13.pop_front();
        }
        st.tls13.push_back(value);
    }

    fn take_tls13_ticket(&self, _: &ServerName<'static>) -> Option<Tls13ClientSessionValue> {
        // The newest: the least likely to have expired or to be from an old ticket key.
        self.lock().tls13.pop_back()
    }
}
