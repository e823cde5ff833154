//! Select and connect stages: an [`Upstream`] is a compiled pool of endpoints with a balancer; its
//! [`EndpointState`]s (counters, health, idle connections) live in a [`Registry`] keyed by upstream
//! name and address, so they survive configuration reloads for endpoints that did not change.

#![forbid(unsafe_code)]

mod balance;
mod body;
mod breaker;
mod endpoint;
mod error;
mod h1;
mod health;
mod io;
mod pool;
mod random;
mod registry;
mod response;
mod tls;

pub use balance::{Balancer, SelectKey};
pub use body::{BodyTimeout, BodyTooLarge, BoxError, RequestBody};
pub use breaker::{Breaker, BreakerSettings, BreakerState};
pub use endpoint::{Endpoint, EndpointState, EndpointStats};
pub use error::{Retry, UpstreamError};
pub use health::{run_health_checks, HealthCheckSpec};
pub use io::{TimedIo, UpstreamIo};
pub use pool::{Lease, SendFailure};
pub use registry::Registry;
pub use response::{UpstreamBody, UpstreamBodyError};
pub use tls::{TlsClient, TlsFailure, TlsSetupError, TlsStats};

use gatehouse_clock::now_ms;
use gatehouse_config as config;
use std::sync::Arc;
use std::time::Duration;

/// The HTTP version spoken to an upstream's endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1, pooled connections.
    Http1,
    /// HTTP/2, one multiplexed connection per endpoint and worker.
    Http2,
    /// Whichever the endpoint chooses by ALPN (HTTP/1.1 in plain text).
    Auto,
}

/// Per-upstream settings used on the request path.
#[derive(Debug, Clone)]
pub struct Settings {
    /// HTTP version to the endpoints.
    pub protocol: Protocol,
    /// Idle connections kept per endpoint and worker.
    pub max_idle: usize,
    /// Idle connections older than this are closed.
    pub idle_timeout: Duration,
    /// TCP connect timeout.
    pub connect_timeout: Duration,
    /// Response head timeout, and the longest gap between two body reads.
    pub read_timeout: Duration,
    /// Longest time one write to the endpoint may stay blocked.
    pub write_timeout: Duration,
    /// Further attempts after a failure.
    pub retries: u32,
    /// Statuses that count as failures for idempotent requests.
    pub retry_on_status: Box<[u16]>,
    /// Consecutive failures that eject an endpoint (0: never).
    pub eject_after: u32,
    /// How long an ejected endpoint is skipped.
    pub eject_for: Duration,
    /// Circuit breaker of each endpoint.
    pub breaker: Option<BreakerSettings>,
}

/// A compiled upstream pool: immutable, part of a configuration snapshot.
#[derive(Debug)]
pub struct Upstream {
    /// Name from the configuration.
    pub name: Arc<str>,
    /// Endpoints, in configuration order.
    pub endpoints: Box<[Endpoint]>,
    /// Balancing policy with its precomputed tables.
    pub balancer: Balancer,
    /// Request-path settings.
    pub settings: Settings,
    /// Active health check, if configured.
    pub health_check: Option<HealthCheckSpec>,
}

impl Upstream {
    /// Compiles one upstream, taking endpoint state from the registry; reads the TLS files.
    pub fn new(name: &str, cfg: &config::Upstream, registry: &Registry) -> Result<Self, TlsSetupError> {
        let tls = cfg.tls.as_ref().map(|t| TlsClient::new(t, cfg.protocol)).transpose()?;
        let endpoints: Box<[Endpoint]> = cfg
            .targets
            .iter()
            .map(|t| Endpoint {
                state: registry.endpoint(name, t.address, None, tls.as_ref()),
                weight: t.weight.max(1),
                max_conns: t.max_conns,
            })
            .collect();
        let balancer = Balancer::new(cfg.balance, cfg.hash_key.clone(), &endpoints);
        let settings = Settings {
            protocol: match (cfg.protocol, &cfg.tls) {
                (config::UpstreamProtocol::Http1, _) | (config::UpstreamProtocol::Auto, None) => Protocol::Http1,
                (config::UpstreamProtocol::Http2, _) => Protocol::Http2,
                (config::UpstreamProtocol::Auto, Some(_)) => Protocol::Auto,
            },
            max_idle: cfg.keepalive.max_idle,
            idle_timeout: cfg.keepalive.idle_timeout.0,
            connect_timeout: cfg.timeouts.connect.0,
            read_timeout: cfg.timeouts.read.0,
            write_timeout: cfg.timeouts.write.0,
            retries: cfg.retries,
            retry_on_status: cfg.retry_on_status.clone().into(),
            eject_after: cfg.passive_health.failures,
            eject_for: cfg.passive_health.eject.0,
            breaker: cfg.circuit_breaker.as_ref().map(BreakerSettings::new),
        };
        let health_check = cfg.health_check.as_ref().map(HealthCheckSpec::from_config);
        if cfg.tls.as_ref().is_some_and(|t| !t.verify) {
            tracing::warn!(upstream = name, "TLS to the upstream does not verify certificates (`tls.verify: false`)");
        }
        Ok(Upstream { name: name.into(), endpoints, balancer, settings, health_check })
    }

    /// Picks an available endpoint not in `tried`, or `None` when every endpoint is down, ejected,
    /// at its connection limit or already tried.
    pub fn select(&self, key: &SelectKey<'_>, tried: &[usize]) -> Option<usize> {
        let now = now_ms();
        let idx = self.balancer.select(&self.endpoints, key, tried, now)?;
        let Some(b) = &self.settings.breaker else { return Some(idx) };
        if self.endpoints[idx].state.breaker.admit(now, b.open_ms) {
            return Some(idx);
        }
        // Another request took the probe of this open breaker: choose among the others.
        let mut skip = tried.to_vec();
        skip.push(idx);
        while skip.len() <= self.endpoints.len() {
            let idx = self.balancer.select(&self.endpoints, key, &skip, now)?;
            if self.endpoints[idx].state.breaker.admit(now, b.open_ms) {
                return Some(idx);
            }
            skip.push(idx);
        }
        None
    }

    /// Records an exchange with endpoint `idx` that failed without an answer (connect error,
    /// timeout, broken exchange): for passive health and for the circuit breaker.
    pub fn record_failure(&self, idx: usize) {
        if let Some(ep) = self.endpoints.get(idx) {
            ep.state.record_failure(self.settings.eject_after, self.settings.eject_for);
        }
        self.record_outcome(idx, true);
    }

    /// Records the outcome of an exchange with endpoint `idx` for its circuit breaker: `failed`
    /// for a 5xx answer, a connect error or a timeout.
    pub fn record_outcome(&self, idx: usize, failed: bool) {
        let (Some(b), Some(ep)) = (&self.settings.breaker, self.endpoints.get(idx)) else { return };
        if failed {
            if ep.state.breaker.on_failure(now_ms(), b) {
                tracing::warn!(upstream = %self.name, endpoint = %ep.state.addr, open_for = ?Duration::from_millis(b.open_ms), "circuit breaker opened");
            }
        } else {
            ep.state.breaker.on_success();
        }
    }

    /// Whether the balancer reads request headers (so the caller keeps them for selection).
    pub fn balancer_needs_headers(&self) -> bool {
        matches!(
            &self.balancer,
            Balancer::ConsistentHash { key: config::HashKey::Header(_) | config::HashKey::Cookie(_), .. }
        )
    }

    /// Whether the balancer reads the request target.
    pub fn balancer_needs_uri(&self) -> bool {
        matches!(&self.balancer, Balancer::ConsistentHash { key: config::HashKey::Uri, .. })
    }

    /// Whether response times feed the balancer (only `ewma` uses them).
    pub fn tracks_latency(&self) -> bool {
        matches!(self.balancer, Balancer::Ewma)
    }

    /// Closes this worker's idle connections that outlived the idle timeout.
    pub fn sweep_idle(&self) {
        for ep in self.endpoints.iter() {
            ep.state.sweep_idle(self.settings.idle_timeout);
        }
    }
}
