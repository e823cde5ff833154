//! TLS counters, shared by every listener of the process and read by `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A monotonically increasing counter.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds one.
    pub fn inc(&self) {
        self.0.fetch_add(1, Relaxed);
    }
    /// The current value.
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// How a handshake ended, for the failure counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The connection closed or timed out before the handshake finished.
    Aborted,
    /// The first bytes were not a TLS ClientHello.
    NotTls,
    /// No certificate for the name and no default.
    UnknownName,
    /// rustls refused the ClientHello or a later message (versions, suites, bad records).
    Protocol,
    /// The client refused our certificate or its own was refused.
    Certificate,
    /// Not a failure: a TLS-ALPN-01 validation (RFC 8737), answered with the challenge
    /// certificate and closed, as the protocol wants. Not counted among failures.
    Challenge,
}

impl Failure {
    /// Every reason, in metric order.
    pub const ALL: [Failure; 5] =
        [Failure::Aborted, Failure::NotTls, Failure::UnknownName, Failure::Protocol, Failure::Certificate];

    /// The `reason` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Failure::Aborted => "aborted",
            Failure::NotTls => "not_tls",
            Failure::UnknownName => "unknown_name",
            Failure::Protocol => "protocol",
            Failure::Certificate => "certificate",
            Failure::Challenge => "challenge",
        }
    }
}

/// How a session was resumed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    /// A stateless ticket (TLS 1.2 RFC 5077 or TLS 1.3 PSK ticket).
    Ticket,
    /// A session id (TLS 1.2) or stateful TLS 1.3 ticket from the session cache.
    SessionCache,
}

/// Handshake and certificate counters.
#[derive(Debug, Default)]
pub struct TlsStats {
    /// Full handshakes, TLS 1.2.
    pub full_tls12: Counter,
    /// Full handshakes, TLS 1.3.
    pub full_tls13: Counter,
    /// Resumed TLS 1.2 handshakes by ticket.
    pub resumed_tls12_ticket: Counter,
    /// Resumed TLS 1.2 handshakes by session id.
    pub resumed_tls12_cache: Counter,
    /// Resumed TLS 1.3 handshakes by stateless ticket.
    pub resumed_tls13_ticket: Counter,
    /// Resumed TLS 1.3 handshakes by stateful ticket (session cache).
    pub resumed_tls13_cache: Counter,
    /// Failures, indexed as [`Failure::ALL`].
    pub failures: [Counter; 5],
    /// Certificate lookups answered by a worker's or the shared cache.
    pub cert_cache_hits: Counter,
    /// Certificate lookups that went to the store.
    pub cert_cache_misses: Counter,
    /// Bundles loaded from the store.
    pub cert_loads: Counter,
    /// Bundles the store held but could not be loaded (bad file or entry).
    pub cert_load_errors: Counter,
    /// Certificates in memory whose validity ends within 30 days (a gauge, refreshed periodically).
    pub certs_expiring_30d: AtomicU64,
    /// Keys in the ticket key ring (a gauge).
    pub ticket_keys: AtomicU64,
    /// The cluster's Redis commands (for TLS state and the rest), given to its [`Cluster`](gatehouse_cluster::Cluster).
    pub redis: std::sync::Arc<gatehouse_cluster::RedisStats>,
    /// TLS 1.2 sessions and TLS 1.3 stateful tickets fetched from Redis before a handshake.
    pub sessions_fetched: Counter,
    /// Of those, the ones Redis held only when asked a second time, a moment later: the node that
    /// made the session was still writing it.
    pub sessions_fetched_late: Counter,
    /// QUIC (HTTP/3) counters.
    pub quic: QuicStats,
    /// ACME validation requests this node was asked to answer.
    pub challenges: ChallengeStats,
}

/// ACME validation requests this node was asked to answer (the orders are counted by the ACME
/// manager).
#[derive(Debug, Default)]
pub struct ChallengeStats {
    /// Challenge requests answered, HTTP-01 then TLS-ALPN-01.
    pub answered: [Counter; 2],
    /// Challenge requests for a token or name no order published, HTTP-01 then TLS-ALPN-01.
    pub unknown: [Counter; 2],
}

/// QUIC (HTTP/3) counters, for every `http3` listener together.
#[derive(Debug, Default)]
pub struct QuicStats {
    /// Handshakes completed.
    pub handshakes: Counter,
    /// Handshakes that presented a ticket the node could open (a resumed session).
    pub resumed: Counter,
    /// Resumed handshakes whose client sent requests in 0-RTT data.
    pub zero_rtt: Counter,
    /// Handshakes that failed or timed out.
    pub failed: Counter,
    /// Retry packets sent to validate a client's address before its handshake.
    pub retries: Counter,
    /// New connections refused at the worker's `max_connections`.
    pub refused: Counter,
    /// QUIC connections open now (a gauge).
    pub connections: AtomicU64,
    /// HTTP/3 requests.
    pub requests: Counter,
    /// Packets sent on closed connections that were lost and sent again.
    pub packets_lost: Counter,
    /// Packets of the previous process's connections sent on to it after a binary upgrade.
    pub forwarded: Counter,
    /// Packets that arrived on another worker's socket than their connection's (the client's
    /// address changed) and were handed to the worker that has the connection.
    pub steered: Counter,
}

impl Counter {
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Relaxed);
    }
}

impl TlsStats {
    /// Counts a failed handshake.
    pub fn failed(&self, why: Failure) {
        if let Some(i) = Failure::ALL.iter().position(|f| *f == why) {
            self.failures[i].inc();
        }
    }

    /// Counts a finished handshake.
    pub fn finished(&self, tls13: bool, resumed: Option<Mechanism>) {
        match (tls13, resumed) {
            (false, None) => self.full_tls12.inc(),
            (true, None) => self.full_tls13.inc(),
            (false, Some(Mechanism::Ticket)) => self.resumed_tls12_ticket.inc(),
            (false, Some(Mechanism::SessionCache)) => self.resumed_tls12_cache.inc(),
            (true, Some(Mechanism::Ticket)) => self.resumed_tls13_ticket.inc(),
            (true, Some(Mechanism::SessionCache)) => self.resumed_tls13_cache.inc(),
        }
    }
}
