//! Metric primitives: relaxed atomics, rendered in the Prometheus text format by the admin listener.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// A monotonically increasing count.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds one.
    pub fn inc(&self) {
        self.0.fetch_add(1, Relaxed);
    }
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Relaxed);
    }
    /// Current value.
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// A value that goes up and down.
#[derive(Debug, Default)]
pub struct Gauge(AtomicI64);

impl Gauge {
    /// Adds one.
    pub fn inc(&self) {
        self.0.fetch_add(1, Relaxed);
    }
    /// Subtracts one.
    pub fn dec(&self) {
        self.0.fetch_sub(1, Relaxed);
    }
    /// Current value.
    pub fn get(&self) -> i64 {
        self.0.load(Relaxed)
    }
}

/// Upper bounds of the latency histogram, seconds.
pub const LATENCY_BUCKETS: [f64; 14] =
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// A latency histogram with fixed buckets.
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [AtomicU64; LATENCY_BUCKETS.len()],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        if let Some(i) = LATENCY_BUCKETS.iter().position(|&b| secs <= b) {
            self.buckets[i].fetch_add(1, Relaxed);
        }
        self.count.fetch_add(1, Relaxed);
        self.sum_micros.fetch_add(u64::try_from(d.as_micros()).unwrap_or(u64::MAX), Relaxed);
    }

    /// Per-bucket counts (not cumulative; the last is above the highest bound), count, and sum in
    /// seconds.
    pub fn snapshot(&self) -> ([u64; LATENCY_BUCKETS.len() + 1], u64, f64) {
        let mut out = [0u64; LATENCY_BUCKETS.len() + 1];
        let count = self.count.load(Relaxed);
        let mut seen = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            out[i] = b.load(Relaxed);
            seen += out[i];
        }
        out[LATENCY_BUCKETS.len()] = count.saturating_sub(seen);
        (out, count, self.sum_micros.load(Relaxed) as f64 / 1e6)
    }

    /// Appends the `_bucket`, `_sum` and `_count` series of `name` with `labels` (`a="b",…`).
    pub fn render(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (i, bound) in LATENCY_BUCKETS.iter().enumerate() {
            cumulative += self.buckets[i].load(Relaxed);
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{bound}\"}} {cumulative}");
        }
        let count = self.count.load(Relaxed);
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {count}");
        let sum = self.sum_micros.load(Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum{{{labels}}} {sum}");
        let _ = writeln!(out, "{name}_count{{{labels}}} {count}");
    }
}

/// Per-route request counts by status class and latency; kept across reloads by route identity.
#[derive(Debug, Default)]
pub struct RouteStats {
    /// Responses by status class: index 0 = 1xx … 4 = 5xx.
    pub by_class: [Counter; 5],
    /// Time from request head to response head.
    pub latency: Histogram,
    /// gRPC calls by the `grpc-status` they ended with (the index; over 16 counts as 2, UNKNOWN).
    pub grpc: [Counter; 17],
    /// The counters of each upstream of a split and of the mirror, by `split:NAME` or
    /// `mirror:NAME` (kept, like the route's, across reloads that keep the route).
    tallies: std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<Tally>>>,
}

/// What a route sent to one upstream of its split, or to its mirror.
#[derive(Debug, Default)]
pub struct Tally {
    /// Requests sent there: drawn or matched for a split; copies answered for a mirror.
    pub requests: Counter,
    /// Copies that got no answer (no endpoint, connection, timeout).
    pub failed: Counter,
    /// Requests not copied because `max_in_flight` copies were under way.
    pub skipped: Counter,
    /// Requests not copied because their body was longer than `max_body`, or never ended.
    pub incomplete: Counter,
    /// Request body bytes copied.
    pub bytes: Counter,
}

impl RouteStats {
    /// Records one response.
    pub fn record(&self, status: u16, elapsed: Duration) {
        let class = usize::from(status / 100).clamp(1, 5) - 1;
        self.by_class[class].inc();
        self.latency.observe(elapsed);
    }

    /// Records the status a gRPC call ended with.
    pub fn record_grpc(&self, code: u8) {
        self.grpc[if code > 16 { 2 } else { usize::from(code) }].inc();
    }

    /// The counters kept under `key` (`split:NAME`, `mirror:NAME`), made on first use.
    pub fn tally(&self, key: &str) -> std::sync::Arc<Tally> {
        let mut map = self.tallies.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(key.to_string()).or_default().clone()
    }
}

/// Process-wide counters.
#[derive(Debug, Default)]
pub struct ProcessStats {
    /// Connections accepted.
    pub connections_accepted: Counter,
    /// Connections open now.
    pub connections_active: Gauge,
    /// Failed accepts on the traffic listeners (out of descriptors or memory).
    pub accept_errors: Counter,
    /// Connections closed at once because their address had `max_connections_per_ip` open.
    pub connections_over_ip_limit: Counter,
    /// Client connections closed because the client took nothing of a response for
    /// `send_timeout` (HTTP/1.x: a blocked write; HTTP/2: a stream stalled on the client).
    pub send_timeouts: Counter,
    /// Requests answered without a matching route.
    pub unrouted: Counter,
    /// Requests rejected as malformed before routing.
    pub bad_requests: Counter,
    /// Retries made to another endpoint.
    pub retries: Counter,
    /// Successful configuration reloads.
    pub reloads: Counter,
    /// Rejected configuration reloads.
    pub reload_failures: Counter,
    /// HTTP/2 connections closed with GOAWAY ENHANCE_YOUR_CALM, indexed by [`H2Offence`].
    pub h2_offenders: [Counter; H2Offence::ALL.len()],
    /// Connections that opened with a valid PROXY protocol header: version 1 (text), version 2
    /// (binary).
    pub proxy_protocol_headers: [Counter; 2],
    /// Connections to `proxy_protocol` listeners closed unserved, indexed by [`ProxyRefusal`].
    pub proxy_protocol_refused: [Counter; ProxyRefusal::ALL.len()],
}

impl ProcessStats {
    /// Counts an HTTP/2 connection closed for `offence`.
    pub fn h2_offender(&self, offence: H2Offence) {
        self.h2_offenders[offence as usize].inc();
    }

    /// Counts a connection that opened with a PROXY protocol header of `version` (1 or 2).
    pub fn proxy_protocol_header(&self, version: u8) {
        if let Some(c) = self.proxy_protocol_headers.get(usize::from(version).wrapping_sub(1)) {
            c.inc();
        }
    }

    /// Counts a connection to a `proxy_protocol` listener closed unserved for `why`.
    pub fn proxy_protocol_refused(&self, why: ProxyRefusal) {
        self.proxy_protocol_refused[why as usize].inc();
    }
}

/// Why a connection to a `proxy_protocol` listener was closed before it was served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProxyRefusal {
    /// The peer is none of the listener's trusted balancers.
    Untrusted,
    /// The first bytes are not a valid PROXY protocol header.
    BadHeader,
    /// No whole header within `header_read_timeout`.
    Timeout,
    /// The peer closed the connection (or it failed) before a whole header arrived.
    Closed,
}

impl ProxyRefusal {
    /// Every reason, in index order.
    pub const ALL: [ProxyRefusal; 4] =
        [ProxyRefusal::Untrusted, ProxyRefusal::BadHeader, ProxyRefusal::Timeout, ProxyRefusal::Closed];

    /// The `reason` label value.
    pub fn label(self) -> &'static str {
        match self {
            ProxyRefusal::Untrusted => "untrusted",
            ProxyRefusal::BadHeader => "bad_header",
            ProxyRefusal::Timeout => "timeout",
            ProxyRefusal::Closed => "closed",
        }
    }
}

/// What an HTTP/2 client did to be sent GOAWAY ENHANCE_YOUR_CALM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum H2Offence {
    /// Too many PING frames.
    Ping,
    /// Too many SETTINGS frames.
    Settings,
    /// Too many empty DATA frames.
    EmptyFrames,
    /// Too many streams reset by the client (rapid reset).
    Resets,
    /// Too many CONTINUATION frames in one header block.
    Continuation,
    /// A header list far over the limit (an HPACK bomb).
    HeaderList,
    /// Too many streams the server had to reset for errors.
    StreamErrors,
    /// Another reason given by the HTTP/2 library.
    Other,
}

impl H2Offence {
    /// Every offence, in index order.
    pub const ALL: [H2Offence; 8] = [
        H2Offence::Ping,
        H2Offence::Settings,
        H2Offence::EmptyFrames,
        H2Offence::Resets,
        H2Offence::Continuation,
        H2Offence::HeaderList,
        H2Offence::StreamErrors,
        H2Offence::Other,
    ];

    /// The `reason` label value.
    pub fn label(self) -> &'static str {
        match self {
            H2Offence::Ping => "ping_flood",
            H2Offence::Settings => "settings_flood",
            H2Offence::EmptyFrames => "empty_frames",
            H2Offence::Resets => "rapid_reset",
            H2Offence::Continuation => "continuation_flood",
            H2Offence::HeaderList => "header_list_too_large",
            H2Offence::StreamErrors => "stream_errors",
            H2Offence::Other => "other",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_cumulative() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(300));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(30));
        let mut out = String::new();
        h.render(&mut out, "x", "route=\"a\"");
        assert!(out.contains("x_bucket{route=\"a\",le=\"0.0005\"} 1\n"), "{out}");
        assert!(out.contains("x_bucket{route=\"a\",le=\"0.005\"} 2\n"), "{out}");
        assert!(out.contains("x_bucket{route=\"a\",le=\"+Inf\"} 3\n"), "{out}");
        assert!(out.contains("x_count{route=\"a\"} 3\n"), "{out}");
    }

    #[test]
    fn reasons_index_their_own_counter() {
        let s = ProcessStats::default();
        for (i, o) in H2Offence::ALL.iter().enumerate() {
            assert_eq!(*o as usize, i);
        }
        s.h2_offender(H2Offence::Other);
        assert_eq!(s.h2_offenders[H2Offence::ALL.len() - 1].get(), 1);
        for (i, r) in ProxyRefusal::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
        }
        s.proxy_protocol_refused(ProxyRefusal::Closed);
        assert_eq!(s.proxy_protocol_refused[ProxyRefusal::ALL.len() - 1].get(), 1);
        for v in [0, 1, 2, 2, 3] {
            s.proxy_protocol_header(v);
        }
        assert_eq!([s.proxy_protocol_headers[0].get(), s.proxy_protocol_headers[1].get()], [1, 2]);
    }

    #[test]
    fn route_stats_classes() {
        let s = RouteStats::default();
        s.record(200, Duration::ZERO);
        s.record(204, Duration::ZERO);
        s.record(503, Duration::ZERO);
        assert_eq!(s.by_class[1].get(), 2);
        assert_eq!(s.by_class[4].get(), 1);
    }
}
