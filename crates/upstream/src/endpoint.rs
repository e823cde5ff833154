//! One endpoint's shared state: in-flight count, passive and active health, latency EWMA, counters,
//! and one idle-connection pool per worker (each worker touches only its own, so the mutex is never
//! contended).

use crate::breaker::Breaker;
use crate::error::UpstreamError;
use crate::pool::Idle;
use crate::tls::{EndpointTls, TlsFailure, TlsStats};
use gatehouse_clock::{now_ms, worker_index};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// An endpoint as compiled into an upstream: shared state plus this configuration's weight.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// State shared across reloads.
    pub state: Arc<EndpointState>,
    /// Relative weight (1..=1000).
    pub weight: u32,
    /// Concurrent request limit (0: none).
    pub max_conns: u32,
}

impl Endpoint {
    /// Whether the balancer may pick this endpoint now.
    pub fn available(&self, now_ms: u64) -> bool {
        let s = &self.state;
        s.healthy.load(Relaxed)
            && s.ejected_until_ms.load(Relaxed) <= now_ms
            && (self.max_conns == 0 || s.inflight.load(Relaxed) < self.max_conns)
            && s.breaker.available(now_ms)
    }
}

/// Counters exported as metrics.
#[derive(Debug, Default)]
pub struct EndpointStats {
    /// Requests sent.
    pub requests: AtomicU64,
    /// TCP connections opened.
    pub connects: AtomicU64,
    /// Connection attempts that failed.
    pub connect_errors: AtomicU64,
    /// Requests that failed (connect error, timeout, reset, retryable status).
    pub failures: AtomicU64,
    /// Times the endpoint was ejected by passive health.
    pub ejections: AtomicU64,
}

/// State of one endpoint, shared by every snapshot that contains it.
#[derive(Debug)]
pub struct EndpointState {
    /// Address.
    pub addr: SocketAddr,
    /// The address as text, for logs and metrics.
    pub addr_text: Arc<str>,
    /// What `Host` names under the route's `host_header: upstream` rule, and the authority of an
    /// HTTP/2 request that has none: `name:port` for a target written by name, else the address.
    pub authority: Box<str>,
    /// TLS to the endpoint, with its session cache.
    pub(crate) tls: Option<EndpointTls>,
    /// Upstream TLS counters.
    pub tls_stats: TlsStats,
    /// Under `protocol: auto`, whether the endpoint chose HTTP/2 on the last new connection.
    speaks_h2: AtomicBool,
    pub(crate) inflight: AtomicU32,
    consecutive_failures: AtomicU32,
    pub(crate) ejected_until_ms: AtomicU64,
    pub(crate) healthy: AtomicBool,
    /// Peak-EWMA of response time in microseconds, and when it was last updated.
    ewma_us: AtomicU64,
    ewma_at_ms: AtomicU64,
    pub(crate) pools: Box<[Mutex<Vec<Idle>>]>,
    /// Each worker's multiplexed HTTP/2 connections (`protocol: http2`, or `auto` when the
    /// endpoint chose it): one, and more while each is at its server's stream limit.
    pub(crate) h2: Box<[crate::pool::H2Slot]>,
    /// Counters.
    pub stats: EndpointStats,
    /// Circuit breaker (stays closed when the upstream has none).
    pub breaker: Breaker,
    /// What the endpoint's client spans say of it (its address, port, upstream), encoded once by
    /// the tracer on its first traced request (an endpoint belongs to one upstream).
    pub trace_attributes: std::sync::OnceLock<Box<[u8]>>,
}

/// Decay constant of the latency EWMA.
const EWMA_TAU_MS: f64 = 10_000.0;

impl EndpointState {
    pub(crate) fn new(addr: SocketAddr, host: Option<&str>, tls: Option<EndpointTls>, workers: usize) -> Self {
        EndpointState {
            addr,
            addr_text: addr.to_string().into(),
            authority: match host {
                Some(h) => format!("{h}:{}", addr.port()).into(),
                None => addr.to_string().into(),
            },
            tls,
            tls_stats: TlsStats::default(),
            speaks_h2: AtomicBool::new(false),
            inflight: AtomicU32::new(0),
            consecutive_failures: AtomicU32::new(0),
            ejected_until_ms: AtomicU64::new(0),
            healthy: AtomicBool::new(true),
            ewma_us: AtomicU64::new(0),
            ewma_at_ms: AtomicU64::new(0),
            pools: (0..workers.max(1)).map(|_| Mutex::new(Vec::new())).collect(),
            h2: (0..workers.max(1)).map(|_| crate::pool::H2Slot::default()).collect(),
            stats: EndpointStats::default(),
            breaker: Breaker::default(),
            trace_attributes: std::sync::OnceLock::new(),
        }
    }

    /// The name the endpoint's certificate is verified for, when the upstream uses TLS.
    pub fn tls_name(&self) -> Option<&str> {
        self.tls.as_ref().map(|t| &*t.name_text)
    }

    pub(crate) fn speaks_h2(&self) -> bool {
        self.speaks_h2.load(Relaxed)
    }

    pub(crate) fn set_speaks_h2(&self, h2: bool) {
        if self.speaks_h2.swap(h2, Relaxed) != h2 {
            tracing::debug!(endpoint = %self.addr, h2, "protocol chosen by ALPN");
        }
    }

    /// A read or write failure on a TLS connection that TLS itself raised (an alert from the
    /// endpoint, such as a refused client certificate under TLS 1.3, which arrives after the
    /// handshake), as the TLS failure it is, counted.
    pub(crate) fn tls_fault(&self, e: UpstreamError) -> UpstreamError {
        let Some(tls) = &self.tls else { return e };
        let failure = match &e {
            UpstreamError::Read(source) | UpstreamError::Write { source, .. } => TlsFailure::of(source),
            _ => None,
        };
        let Some(failure) = failure else { return e };
        let (source, sent) = match e {
            UpstreamError::Read(source) => (source, true),
            UpstreamError::Write { source, sent } => (source, sent),
            other => return other,
        };
        self.tls_stats.failed(failure);
        UpstreamError::Tls { server_name: tls.name_text.clone(), failure, source, sent }
    }

    /// Requests in flight to this endpoint.
    pub fn inflight(&self) -> u32 {
        self.inflight.load(Relaxed)
    }

    /// Result of the active health check (true when no check runs).
    pub fn healthy(&self) -> bool {
        self.healthy.load(Relaxed)
    }

    /// Whether passive health has ejected the endpoint right now.
    pub fn ejected(&self) -> bool {
        self.ejected_until_ms.load(Relaxed) > now_ms()
    }

    /// Idle connections held by all workers.
    pub fn idle_connections(&self) -> usize {
        self.pools.iter().map(|p| p.lock().map_or(0, |v| v.len())).sum()
    }

    pub(crate) fn set_healthy(&self, healthy: bool) {
        if self.healthy.swap(healthy, Relaxed) != healthy {
            tracing::warn!(endpoint = %self.addr, healthy, "active health check changed state");
        }
    }

    /// Records a successful exchange and, when the balancer uses it, its time to response head.
    pub fn record_success(&self, elapsed: Option<Duration>) {
        if self.consecutive_failures.load(Relaxed) != 0 {
            self.consecutive_failures.store(0, Relaxed);
        }
        if let Some(elapsed) = elapsed {
            self.observe_latency(elapsed);
        }
    }

    /// Records a failed exchange; ejects after `eject_after` consecutive failures.
    pub fn record_failure(&self, eject_after: u32, eject_for: Duration) {
        self.stats.failures.fetch_add(1, Relaxed);
        let n = self.consecutive_failures.fetch_add(1, Relaxed) + 1;
        if eject_after > 0 && n >= eject_after {
            self.consecutive_failures.store(0, Relaxed);
            let until = now_ms() + u64::try_from(eject_for.as_millis()).unwrap_or(u64::MAX / 2);
            self.ejected_until_ms.store(until, Relaxed);
            self.stats.ejections.fetch_add(1, Relaxed);
            tracing::warn!(endpoint = %self.addr, failures = n, eject_for = ?eject_for, "endpoint ejected");
        }
    }

    fn observe_latency(&self, elapsed: Duration) {
        let rtt = elapsed.as_micros() as f64;
        let now = now_ms();
        let prev = self.ewma_us.load(Relaxed) as f64;
        let at = self.ewma_at_ms.swap(now, Relaxed);
        // Peak-sensitive: a slower sample replaces the average at once; faster ones decay it.
        let next = if rtt > prev {
            rtt
        } else {
            let w = (-(now.saturating_sub(at) as f64) / EWMA_TAU_MS).exp();
            prev * w + rtt * (1.0 - w)
        };
        self.ewma_us.store(next as u64, Relaxed);
    }

    /// The balancer's cost: latency estimate times the load it would join.
    pub(crate) fn ewma_cost(&self, weight: u32) -> f64 {
        let lat = self.ewma_us.load(Relaxed) as f64 + 1.0;
        lat * f64::from(self.inflight.load(Relaxed) + 1) / f64::from(weight)
    }

    /// The EWMA latency estimate, microseconds.
    pub fn ewma_micros(&self) -> u64 {
        self.ewma_us.load(Relaxed)
    }

    pub(crate) fn my_pool(&self) -> &Mutex<Vec<Idle>> {
        let i = worker_index();
        &self.pools[i % self.pools.len()]
    }

    /// Drops this worker's idle connections older than `idle_timeout` or already closed.
    pub(crate) fn sweep_idle(&self, idle_timeout: Duration) {
        if let Ok(mut pool) = self.my_pool().lock() {
            pool.retain_mut(|idle| idle.fresh(idle_timeout));
        }
    }
}
