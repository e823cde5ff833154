//! Service discovery, off the request path: the host names and SRV names of upstream targets are
//! resolved with hickory-resolver on the node's control thread, each again when its answer's TTL
//! (clamped by `resolver.min_ttl` and `max_ttl`) runs out. A changed answer is published to the
//! upstreams that use the name ([`Upstream::refresh`]), the way a reload publishes a snapshot:
//! requests in flight keep the endpoints they started with. A failed lookup keeps the last good
//! answer and is tried again after `resolver.failure_retry`.

#![forbid(unsafe_code)]

mod stats;

pub use stats::{NameStats, Stats};

use gatehouse_config as config;
use gatehouse_upstream::{Answer, Answers, Query, Registry, ServiceRecord, Upstream};
use hickory_resolver::config::{LookupIpStrategy, NameServerConfig, ResolverConfig, ResolverOpts};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::rr::RData;
use hickory_resolver::TokioResolver;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Why the resolver could not be set up.
#[derive(Debug)]
pub struct SetupError(hickory_resolver::net::NetError);

impl std::fmt::Display for SetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot set up the DNS resolver (reading /etc/resolv.conf): {}", self.0)
    }
}

impl std::error::Error for SetupError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// What the discovery loop knows and follows.
struct State {
    settings: config::Resolver,
    resolver: Option<Arc<TokioResolver>>,
    answers: Answers,
    /// When each followed query is asked next.
    due: HashMap<Query, Instant>,
    /// The current snapshot's upstreams that have named targets.
    watched: Vec<Arc<Upstream>>,
}

/// The node's resolver and the answers it has found.
pub struct Discovery {
    state: Mutex<State>,
    registry: Arc<Registry>,
    wake: Notify,
    stats: Arc<Stats>,
}

impl Discovery {
    /// A discovery with `settings`, publishing into upstreams whose endpoint state is in
    /// `registry`. The resolver itself is made on first use, so a configuration without named
    /// targets never reads `/etc/resolv.conf`.
    pub fn new(settings: &config::Resolver, registry: Arc<Registry>) -> Arc<Discovery> {
        Arc::new(Discovery {
            state: Mutex::new(State {
                settings: settings.clone(),
                resolver: None,
                answers: Answers::new(),
                due: HashMap::new(),
                watched: Vec::new(),
            }),
            registry,
            wake: Notify::new(),
            stats: Arc::new(Stats::default()),
        })
    }

    /// Counters by name, for the metrics.
    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The answers known now, to build a snapshot with.
    pub fn answers(&self) -> Answers {
        self.lock().answers.clone()
    }

    /// Takes new resolver settings (a reload): a changed section makes a new resolver and asks
    /// every name again.
    pub fn configure(&self, settings: &config::Resolver) {
        let mut st = self.lock();
        if st.settings == *settings {
            return;
        }
        st.settings = settings.clone();
        st.resolver = None;
        let now = Instant::now();
        st.due.values_mut().for_each(|d| *d = now);
        drop(st);
        self.wake.notify_one();
    }

    /// Resolves the names of `config` that have no answer yet, all at once, before its snapshot
    /// is built: a new node, or a reload that adds a name, starts with endpoints. Bounded by the
    /// resolver's timeout and attempts; a name that does not resolve in time is left to the loop.
    pub async fn prime(&self, config: &config::Config) {
        let queries: Vec<Query> = {
            let st = self.lock();
            let mut qs: Vec<Query> = config
                .upstreams
                .values()
                .flat_map(|u| u.targets.iter().filter_map(|t| Query::of(&t.address)))
                .filter(|q| !matches!(st.answers.get(q), Some(Answer::Addresses(_) | Answer::Services(_))))
                .collect();
            qs.sort();
            qs.dedup();
            qs
        };
        if !queries.is_empty() {
            self.ask(&queries, true).await;
        }
    }

    /// Asks `queries` all at once and records each outcome; `false` when no resolver could be
    /// made. `priming`: for a configuration about to be applied, which waits for it, so each
    /// lookup is bounded by the resolver's timeout × attempts; the loop relies on the resolver's
    /// own timeouts.
    async fn ask(&self, queries: &[Query], priming: bool) -> bool {
        let Some((resolver, settings)) = self.resolver() else { return false };
        let bound = priming.then(|| settings.timeout.0 * settings.attempts.max(1) + Duration::from_millis(100));
        let handles: Vec<_> = queries
            .iter()
            .map(|q| {
                let (resolver, q) = (resolver.clone(), q.clone());
                tokio::spawn(async move {
                    let found = match bound {
                        Some(b) => tokio::time::timeout(b, lookup(&resolver, &q))
                            .await
                            .unwrap_or_else(|_| Err("timed out".to_string())),
                        None => lookup(&resolver, &q).await,
                    };
                    (q, found)
                })
            })
            .collect();
        for h in handles {
            if let Ok((q, found)) = h.await {
                self.record(q, found, &settings, priming);
            }
        }
        true
    }

    /// Follows the named targets of these upstreams (the snapshot just installed); names no
    /// longer used are forgotten.
    pub fn watch(&self, upstreams: impl Iterator<Item = Arc<Upstream>>) {
        let mut st = self.lock();
        st.watched = upstreams.filter(|u| u.queries().next().is_some()).collect();
        let used: Vec<Query> = st.watched.iter().flat_map(|u| u.queries().collect::<Vec<_>>()).collect();
        st.due.retain(|q, _| used.contains(q));
        st.answers.retain(|q, _| used.contains(q));
        self.stats.retain(|name| used.iter().any(|q| q.name() == name));
        let now = Instant::now();
        for q in used {
            st.due.entry(q).or_insert(now);
        }
        // An answer that changed between the snapshot's build and now reached only the old
        // snapshot's upstreams: bring these up to date.
        let (watched, answers) = (st.watched.clone(), st.answers.clone());
        drop(st);
        for u in watched {
            u.refresh(&self.registry, &answers);
        }
        self.wake.notify_one();
    }

    /// The loop: asks each followed name when it is due, until the task is aborted.
    pub async fn run(self: Arc<Self>) {
        loop {
            let (due_now, next) = {
                let st = self.lock();
                let now = Instant::now();
                let due_now: Vec<Query> = st.due.iter().filter(|(_, at)| **at <= now).map(|(q, _)| q.clone()).collect();
                (due_now, st.due.values().min().copied())
            };
            if due_now.is_empty() {
                match next {
                    Some(at) => {
                        tokio::select! {
                            _ = tokio::time::sleep_until(at.into()) => {}
                            _ = self.wake.notified() => {}
                        }
                    }
                    None => self.wake.notified().await,
                }
                continue;
            }
            if !self.ask(&due_now, false).await {
                // No resolver could be made: ask again after the retry interval.
                self.postpone(&due_now);
            }
        }
    }

    fn postpone(&self, queries: &[Query]) {
        let mut st = self.lock();
        let at = Instant::now() + st.settings.failure_retry.0;
        for q in queries {
            st.due.insert(q.clone(), at);
        }
    }

    /// The resolver, made now if need be; `None` (logged) when the system configuration cannot be
    /// read.
    fn resolver(&self) -> Option<(Arc<TokioResolver>, config::Resolver)> {
        let mut st = self.lock();
        if st.resolver.is_none() {
            match build(&st.settings) {
                Ok(r) => st.resolver = Some(Arc::new(r)),
                Err(e) => {
                    tracing::warn!(error = %e, "no DNS resolver: named upstream targets keep their last answers");
                    return None;
                }
            }
        }
        st.resolver.clone().map(|r| (r, st.settings.clone()))
    }

    /// Takes one lookup's outcome: a new answer is published to the upstreams that use it; a
    /// failure keeps the last good one. `priming`: asked for a configuration about to be applied,
    /// whose names are not followed yet.
    fn record(&self, q: Query, found: Result<(Answer, Duration), String>, settings: &config::Resolver, priming: bool) {
        let mut st = self.lock();
        if !priming && !st.due.contains_key(&q) {
            // No longer followed: a reload removed it while it was being asked.
            return;
        }
        let now = Instant::now();
        let changed = match found {
            Ok((answer, ttl)) => {
                let wait = ttl.clamp(settings.min_ttl.0, settings.max_ttl.0);
                st.due.insert(q.clone(), now + wait);
                self.stats.resolved(q.name(), count(&answer));
                let changed = st.answers.get(&q) != Some(&answer);
                if changed {
                    tracing::info!(name = q.name(), answer = ?answer, "DNS answer changed");
                }
                st.answers.insert(q.clone(), answer);
                changed
            }
            Err(why) => {
                st.due.insert(q.clone(), now + settings.failure_retry.0);
                self.stats.failed(q.name());
                let kept = matches!(st.answers.get(&q), Some(Answer::Addresses(_) | Answer::Services(_)));
                tracing::warn!(name = q.name(), error = %why, kept_last_answer = kept, retry_in = ?settings.failure_retry.0, "DNS lookup failed");
                if kept {
                    false
                } else {
                    let answer = Answer::Unresolved(why);
                    let changed = st.answers.get(&q) != Some(&answer);
                    st.answers.insert(q.clone(), answer);
                    changed
                }
            }
        };
        if changed {
            let answers = st.answers.clone();
            let users: Vec<Arc<Upstream>> =
                st.watched.iter().filter(|u| u.queries().any(|uq| uq == q)).cloned().collect();
            drop(st);
            for u in users {
                u.refresh(&self.registry, &answers);
            }
        }
    }
}

fn count(answer: &Answer) -> usize {
    match answer {
        Answer::Addresses(ips) => ips.len(),
        Answer::Services(records) => records.iter().map(|r| r.addrs.len()).sum(),
        Answer::Unresolved(_) => 0,
    }
}

/// A resolver for `settings`: their name servers, or the system's.
fn build(settings: &config::Resolver) -> Result<TokioResolver, SetupError> {
    let mut builder = if settings.nameservers.is_empty() {
        TokioResolver::builder_tokio().map_err(SetupError)?
    } else {
        let servers = settings
            .nameservers
            .iter()
            .map(|addr| {
                let mut ns = NameServerConfig::udp_and_tcp(addr.ip());
                for c in &mut ns.connections {
                    c.port = addr.port();
                }
                ns
            })
            .collect();
        TokioResolver::builder_with_config(
            ResolverConfig::from_parts(None, vec![], servers),
            TokioRuntimeProvider::default(),
        )
    };
    let opts: &mut ResolverOpts = builder.options_mut();
    opts.timeout = settings.timeout.0;
    opts.attempts = settings.attempts as usize;
    opts.ip_strategy = match settings.prefer {
        config::IpPreference::Ipv4 => LookupIpStrategy::Ipv4thenIpv6,
        config::IpPreference::Ipv6 => LookupIpStrategy::Ipv6thenIpv4,
        config::IpPreference::Both => LookupIpStrategy::Ipv4AndIpv6,
    };
    // The cache must not hold an answer past the time it is asked again.
    opts.positive_max_ttl = Some(settings.max_ttl.0);
    opts.negative_max_ttl = Some(settings.failure_retry.0);
    builder.build().map_err(SetupError)
}

/// Asks one query: the answer and how long it is valid.
async fn lookup(resolver: &TokioResolver, q: &Query) -> Result<(Answer, Duration), String> {
    match q {
        Query::Host(name) => {
            let (ips, valid) = lookup_host(resolver, name).await?;
            Ok((Answer::Addresses(ips), valid))
        }
        Query::Srv(name) => {
            let found = resolver.srv_lookup(name.as_str()).await.map_err(|e| e.to_string())?;
            let valid = found.valid_until().saturating_duration_since(Instant::now());
            let records: Vec<_> = found
                .answers()
                .iter()
                .filter_map(|r| match &r.data {
                    RData::SRV(srv) => Some(srv.clone()),
                    _ => None,
                })
                .collect();
            // RFC 2782: only the lowest priority is used; the others are for when all of it
            // is gone, which health checks and ejection already handle among these.
            let Some(top) = records.iter().map(|r| r.priority).min() else {
                return Err("no SRV records".into());
            };
            let mut out = Vec::new();
            let mut shortest = valid;
            for r in records.iter().filter(|r| r.priority == top) {
                let host = r.target.to_ascii();
                let host = host.trim_end_matches('.').to_ascii_lowercase();
                let addrs = match lookup_host(resolver, &host).await {
                    Ok((ips, v)) => {
                        shortest = shortest.min(v);
                        ips
                    }
                    Err(e) => {
                        tracing::warn!(srv = %name, host, error = %e, "SRV target did not resolve");
                        continue;
                    }
                };
                out.push(ServiceRecord { host, port: r.port, weight: r.weight, addrs });
            }
            if out.is_empty() {
                return Err("no SRV target resolved".into());
            }
            out.sort_by(|a, b| (&a.host, a.port).cmp(&(&b.host, b.port)));
            Ok((Answer::Services(out), shortest))
        }
    }
}

/// The addresses of a host name, sorted (an answer in another order is the same answer), and how
/// long they are valid.
async fn lookup_host(resolver: &TokioResolver, name: &str) -> Result<(Vec<IpAddr>, Duration), String> {
    let found = resolver.lookup_ip(name).await.map_err(|e| e.to_string())?;
    let valid = found.valid_until().saturating_duration_since(Instant::now());
    let mut ips: Vec<IpAddr> = found.iter().collect();
    ips.sort();
    ips.dedup();
    if ips.is_empty() {
        return Err("no address".into());
    }
    Ok((ips, valid))
}
