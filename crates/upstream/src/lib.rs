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
mod h2_client;
mod health;
mod io;
mod members;
mod pool;
mod proxy_header;
mod random;
mod registry;
mod response;
mod sessions;
mod tls;

pub use balance::{cookie, key_hash, Balancer, SelectKey};
pub use body::{BodyTimeout, BodyTooLarge, BoxError, RequestBody};
pub use breaker::{Breaker, BreakerSettings, BreakerState};
pub use endpoint::{Endpoint, EndpointState, EndpointStats};
pub use error::{Retry, UpstreamError};
pub use health::{run_health_checks, HealthCheckSpec};
pub use io::{TimedIo, UpstreamIo};
pub use members::{Answer, Answers, Members, Query, ServiceRecord};
pub use pool::{Lease, SendFailure};
pub use proxy_header::Origin;
pub use random::stable_hash;
pub use registry::{Registry, Transport};
pub use response::{UpstreamBody, UpstreamBodyError};
pub use tls::{TlsClient, TlsFailure, TlsSetupError, TlsStats};

use arc_swap::ArcSwap;
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
    /// HTTP/2 PING after this long without a frame from the endpoint, while streams are open.
    pub ping_interval: Option<Duration>,
    /// A PING unanswered for this long closes the HTTP/2 connection.
    pub ping_timeout: Duration,
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
    /// The gRPC statuses that count as the endpoint's failures, one bit each (bit 14:
    /// UNAVAILABLE).
    pub grpc_failures: u32,
    /// How long an ejected endpoint is skipped.
    pub eject_for: Duration,
    /// Circuit breaker of each endpoint.
    pub breaker: Option<BreakerSettings>,
    /// PROXY protocol header opening each connection.
    pub send_proxy_protocol: Option<config::ProxyProtocolVersion>,
}

/// An upstream's members: fixed when every target is an IP literal (read with no atomic
/// operation), swappable when a target is resolved by name.
#[derive(Debug)]
enum MemberSet {
    Fixed(Arc<Members>),
    Named(ArcSwap<Members>),
}

/// An upstream's members as one request reads them ([`Upstream::members`]).
#[derive(Debug)]
pub enum MembersRef<'a> {
    /// Targets that are all IP literals.
    Fixed(&'a Members),
    /// The current answer for named targets, held until the request is done with it.
    Named(arc_swap::Guard<Arc<Members>>),
}

impl std::ops::Deref for MembersRef<'_> {
    type Target = Members;

    #[inline]
    fn deref(&self) -> &Members {
        match self {
            MembersRef::Fixed(m) => m,
            MembersRef::Named(g) => g,
        }
    }
}

/// A compiled upstream pool, part of a configuration snapshot. Its settings are immutable; its
/// [`Members`] (endpoints and balancer) are swapped whole when a host name's addresses change.
#[derive(Debug)]
pub struct Upstream {
    /// Name from the configuration.
    pub name: Arc<str>,
    /// Request-path settings.
    pub settings: Settings,
    /// Active health check, if configured.
    pub health_check: Option<HealthCheckSpec>,
    members: MemberSet,
    targets: Box<[config::Target]>,
    tls: Option<TlsClient>,
    balance: config::Balance,
    hash_key: Option<config::HashKey>,
}

impl Upstream {
    /// Compiles one upstream, taking endpoint state from the registry and the addresses of its
    /// named targets from `answers`; reads the TLS files.
    pub fn new(
        name: &str,
        cfg: &config::Upstream,
        registry: &Registry,
        answers: &Answers,
    ) -> Result<Self, TlsSetupError> {
        let tls = cfg.tls.as_ref().map(|t| TlsClient::new(t, cfg.protocol)).transpose()?;
        let settings = Settings {
            protocol: match (cfg.protocol, &cfg.tls) {
                (config::UpstreamProtocol::Http1, _) | (config::UpstreamProtocol::Auto, None) => Protocol::Http1,
                (config::UpstreamProtocol::Http2, _) => Protocol::Http2,
                (config::UpstreamProtocol::Auto, Some(_)) => Protocol::Auto,
            },
            max_idle: cfg.keepalive.max_idle,
            idle_timeout: cfg.keepalive.idle_timeout.0,
            ping_interval: Some(cfg.keepalive.ping_interval.0).filter(|d| !d.is_zero()),
            ping_timeout: cfg.keepalive.ping_timeout.0,
            connect_timeout: cfg.timeouts.connect.0,
            read_timeout: cfg.timeouts.read.0,
            write_timeout: cfg.timeouts.write.0,
            retries: cfg.retries,
            retry_on_status: cfg.retry_on_status.clone().into(),
            eject_after: cfg.passive_health.failures,
            eject_for: cfg.passive_health.eject.0,
            grpc_failures: cfg.passive_health.grpc_failures.iter().fold(0, |mask, c| mask | 1 << c.0),
            breaker: cfg.circuit_breaker.as_ref().map(BreakerSettings::new),
            send_proxy_protocol: cfg.send_proxy_protocol,
        };
        let health_check = cfg.health_check.as_ref().map(HealthCheckSpec::from_config);
        if cfg.tls.as_ref().is_some_and(|t| !t.verify) {
            tracing::warn!(upstream = name, "TLS to the upstream does not verify certificates (`tls.verify: false`)");
        }
        let mut upstream = Upstream {
            name: name.into(),
            settings,
            health_check,
            members: MemberSet::Fixed(Arc::default()),
            targets: cfg.targets.clone().into(),
            tls,
            balance: cfg.balance,
            hash_key: cfg.hash_key.clone(),
        };
        let first = Arc::new(upstream.compile_members(registry, answers));
        let named = upstream.queries().next().is_some();
        upstream.members = match named {
            false => MemberSet::Fixed(first),
            true => MemberSet::Named(ArcSwap::new(first)),
        };
        Ok(upstream)
    }

    /// The endpoints as now known, and their balancer. A request reads them once and keeps them
    /// for all its attempts, so indexes stay valid while new answers are published.
    #[inline]
    pub fn members(&self) -> MembersRef<'_> {
        match &self.members {
            MemberSet::Fixed(m) => MembersRef::Fixed(m),
            MemberSet::Named(m) => MembersRef::Named(m.load()),
        }
    }

    /// The members, held for long (a health-check round): an `Arc` rather than a guard.
    pub fn members_full(&self) -> Arc<Members> {
        match &self.members {
            MemberSet::Fixed(m) => m.clone(),
            MemberSet::Named(m) => m.load_full(),
        }
    }

    /// The names this upstream's targets are resolved by.
    pub fn queries(&self) -> impl Iterator<Item = Query> + '_ {
        self.targets.iter().filter_map(|t| Query::of(&t.address))
    }

    /// Publishes the endpoints `answers` now give, when they differ from the current ones:
    /// endpoints that stay keep their state (health, breaker, latency, pooled connections); the
    /// ones that go are freed when the last request holding them ends. Returns whether anything
    /// changed.
    pub fn refresh(&self, registry: &Registry, answers: &Answers) -> bool {
        let MemberSet::Named(current) = &self.members else { return false };
        let next = self.compile_members(registry, answers);
        if next.same_as(&current.load()) {
            return false;
        }
        let added: Vec<&str> = next.endpoints.iter().map(|e| &*e.state.addr_text).collect();
        tracing::info!(upstream = %self.name, endpoints = ?added, unresolved = ?next.unresolved, "endpoints changed");
        current.store(Arc::new(next));
        true
    }

    fn compile_members(&self, registry: &Registry, answers: &Answers) -> Members {
        let transport = Transport { tls: self.tls.as_ref(), proxy_protocol: self.settings.send_proxy_protocol };
        members::compile(&self.name, &self.targets, transport, self.balance, &self.hash_key, registry, answers)
    }

    /// Picks an available endpoint of `m` not in `tried`, or `None` when every endpoint is down,
    /// ejected, at its connection limit or already tried.
    pub fn select(&self, m: &Members, key: &SelectKey<'_>, tried: &[usize]) -> Option<usize> {
        let now = now_ms();
        let idx = m.balancer.select(&m.endpoints, key, tried, now)?;
        let Some(b) = &self.settings.breaker else { return Some(idx) };
        if m.endpoints[idx].state.breaker.admit(now, b.open_ms) {
            return Some(idx);
        }
        // Another request took the probe of this open breaker: choose among the others.
        let mut skip = tried.to_vec();
        skip.push(idx);
        while skip.len() <= m.endpoints.len() {
            let idx = m.balancer.select(&m.endpoints, key, &skip, now)?;
            if m.endpoints[idx].state.breaker.admit(now, b.open_ms) {
                return Some(idx);
            }
            skip.push(idx);
        }
        None
    }

    /// Records an exchange with endpoint `idx` of `m` that failed without an answer (connect
    /// error, timeout, broken exchange): for passive health and for the circuit breaker.
    pub fn record_failure(&self, m: &Members, idx: usize) {
        if let Some(ep) = m.endpoints.get(idx) {
            ep.state.record_failure(self.settings.eject_after, self.settings.eject_for);
        }
        self.record_outcome(m, idx, true);
    }

    /// Whether an endpoint's answer with gRPC status `code` counts as its failure.
    pub fn grpc_failure(&self, code: u8) -> bool {
        code < 32 && self.settings.grpc_failures & (1 << code) != 0
    }

    /// Records the outcome of an exchange with `ep` judged after its answer began (by the gRPC
    /// status in its trailers), for ejection and its circuit breaker.
    pub fn record_late_outcome(&self, ep: &EndpointState, failed: bool) {
        if failed {
            ep.record_failure(self.settings.eject_after, self.settings.eject_for);
        } else {
            ep.record_success(None);
        }
        self.breaker_outcome(ep, failed);
    }

    /// Records the outcome of an exchange with endpoint `idx` of `m` for its circuit breaker:
    /// `failed` for a 5xx answer, a connect error or a timeout.
    pub fn record_outcome(&self, m: &Members, idx: usize, failed: bool) {
        if let Some(ep) = m.endpoints.get(idx) {
            self.breaker_outcome(&ep.state, failed);
        }
    }

    fn breaker_outcome(&self, ep: &EndpointState, failed: bool) {
        let Some(b) = &self.settings.breaker else { return };
        if failed {
            if ep.breaker.on_failure(now_ms(), b) {
                tracing::warn!(upstream = %self.name, endpoint = %ep.addr, open_for = ?Duration::from_millis(b.open_ms), "circuit breaker opened");
            }
        } else {
            ep.breaker.on_success();
        }
    }

    /// Whether the balancer reads request headers (so the caller keeps them for selection).
    pub fn balancer_needs_headers(&self) -> bool {
        matches!(
            (&self.balance, &self.hash_key),
            (config::Balance::ConsistentHash, Some(config::HashKey::Header(_) | config::HashKey::Cookie(_)))
        )
    }

    /// Whether the balancer reads the request target.
    pub fn balancer_needs_uri(&self) -> bool {
        matches!((&self.balance, &self.hash_key), (config::Balance::ConsistentHash, Some(config::HashKey::Uri)))
    }

    /// Whether response times feed the balancer (only `ewma` uses them).
    pub fn tracks_latency(&self) -> bool {
        self.balance == config::Balance::Ewma
    }

    /// Closes this worker's idle connections that outlived the idle timeout.
    pub fn sweep_idle(&self) {
        for ep in self.members().endpoints.iter() {
            ep.state.sweep_idle(self.settings.idle_timeout);
        }
    }
}
