//! Admit stage, keys of OpenID providers: a service that trusts an identity provider verifies its tokens with the
//! key set the provider publishes (a JWKS, found by OpenID Connect Discovery or given as a URL). The set is fetched
//! off the request path by one task per provider and swapped in whole; requests read it without a lock.
//!
//! ```text
//! refresher task: [discovery ─►] GET jwks_uri ─► jwk::KeySet::parse ─► current (ArcSwap)
//!                 every `refresh`, sooner on Cache-Control max-age (never under `min_refetch`);
//!                 a failed fetch keeps the last good set, is counted and logged, retried.
//! request:        current has the token's kid ─► verify
//!                 no set yet, or an unknown kid ─► wake the task (at most once per `min_refetch`)
//!                                                  and wait for that fetch (bounded by `timeout`)
//! ```
//!
//! The task holds the source weakly: when no configuration uses the provider any more, it stops.

#![forbid(unsafe_code)]

mod fetch;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use gatehouse_jwt::jwk::KeySet;
use gatehouse_telemetry::Counter;
use tokio::sync::{watch, Notify};

pub use fetch::check_url;

/// Calls from the admit stage to other services (external authorization), on the same client as
/// the key sets.
pub mod callout {
    pub use crate::fetch::{call, client, Answer, CallError, Client};
}

/// Where the key set is found.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Source {
    /// `{issuer}/.well-known/openid-configuration` names it (its `issuer` must be this one).
    Discovery {
        /// The issuer URL, as tokens carry it in `iss`.
        issuer: String,
    },
    /// This URL serves it.
    Uri(String),
}

/// How one provider's key set is fetched and kept.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Where the set is.
    pub source: Source,
    /// Longest a set is used before it is fetched again.
    pub refresh: Duration,
    /// Shortest time between fetches (a short `max-age`, unknown key ids, retries after a failure).
    pub min_refetch: Duration,
    /// Longest one request to the provider may take.
    pub timeout: Duration,
    /// The CAs of the provider's certificate; `None`: the system's roots.
    pub roots: Option<rustls::RootCertStore>,
}

/// What happened to a provider's key set, for `/metrics`.
#[derive(Debug, Default)]
pub struct Stats {
    /// Fetches that brought a usable set.
    pub fetched: Counter,
    /// Fetches that failed (the last good set, if any, stays in use).
    pub failed: Counter,
    /// Fetches asked for by a token whose `kid` the set did not have.
    pub unknown_kid_fetches: Counter,
    /// Usable keys in the set in use.
    pub keys: AtomicU64,
    /// Whether the last fetch failed while an older set is in use.
    pub stale: AtomicBool,
}

/// One provider's key set and the task that keeps it fresh.
#[derive(Debug)]
pub struct KeySource {
    settings: Settings,
    /// For logs and metrics: the issuer or the URL.
    pub label: String,
    current: ArcSwapOption<KeySet>,
    wake: Arc<Notify>,
    /// Fetches finished, successful or not; requests waiting for one watch it.
    done: watch::Sender<u64>,
    /// Whether a fetch is under way (then a request waits for it rather than asking for another).
    fetching: AtomicBool,
    /// When a request last asked for a fetch, or a fetch last failed: no request asks for another within
    /// `min_refetch` of either. (A scheduled fetch that succeeded does not count, so a new key is fetched the first
    /// time a token names it.)
    last_demand: Mutex<Option<Instant>>,
    /// Counters.
    pub stats: Stats,
}

impl KeySource {
    /// A source for `settings`; with a runtime, its refresher task starts there and fetches at once. Without one
    /// (`gatehouse check`), it never fetches.
    ///
    /// `seed` is a set to serve until the first fetch succeeds: the set of the source this one
    /// replaces (a reload that changed how the same provider is fetched), so that a provider down
    /// at that moment costs no token.
    pub fn start(settings: Settings, runtime: Option<&tokio::runtime::Handle>, seed: Option<Arc<KeySet>>) -> Arc<Self> {
        let label = match &settings.source {
            Source::Discovery { issuer } => issuer.clone(),
            Source::Uri(uri) => uri.clone(),
        };
        let source = Arc::new(KeySource {
            settings,
            label,
            current: ArcSwapOption::new(seed),
            wake: Arc::new(Notify::new()),
            done: watch::channel(0).0,
            // The task's first act is a fetch: requests arriving before it runs wait for that one.
            fetching: AtomicBool::new(runtime.is_some()),
            last_demand: Mutex::new(None),
            stats: Stats::default(),
        });
        if let Some(rt) = runtime {
            rt.spawn(refresher(Arc::downgrade(&source), source.wake.clone()));
        }
        source
    }

    /// The set in use, if a fetch has ever succeeded.
    pub fn current(&self) -> Option<Arc<KeySet>> {
        self.current.load_full()
    }

    /// The set to verify a token naming `kid` with. When there is no set yet, or it lacks `kid`, this waits for a
    /// fetch: the one under way, or a new one if none was asked for within `min_refetch`. `None`: no set could be
    /// had (the provider has never answered).
    pub async fn keys(&self, kid: Option<&str>) -> Option<Arc<KeySet>> {
        let set = self.current.load_full();
        let missing = match (&set, kid) {
            (None, _) => true,
            (Some(s), Some(kid)) => !s.has_kid(kid),
            (Some(_), None) => false,
        };
        if !missing {
            return set;
        }
        let mut done = self.done.subscribe();
        if self.demand(set.is_some()) {
            // Discovery and the key set, each bounded by `timeout`.
            let bound = self.settings.timeout.saturating_mul(2).saturating_add(Duration::from_millis(100));
            let _ = tokio::time::timeout(bound, done.changed()).await;
        }
        // A fetch may have ended since the first look.
        self.current.load_full()
    }

    /// Asks for a fetch unless one is under way; `false` when none will come (one was asked for within
    /// `min_refetch`).
    fn demand(&self, for_unknown_kid: bool) -> bool {
        if self.fetching.load(Relaxed) {
            return true;
        }
        let mut last = self.last_demand.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|t| t.elapsed() < self.settings.min_refetch) {
            return false;
        }
        *last = Some(Instant::now());
        if for_unknown_kid {
            self.stats.unknown_kid_fetches.inc();
        }
        self.wake.notify_one();
        true
    }

    /// One fetch; the delay until the next.
    async fn fetch_once(&self, client: &fetch::Client, failures: &mut u32) -> Duration {
        self.fetching.store(true, Relaxed);
        let result = fetch::key_set(client, &self.settings).await;
        let floor = self.settings.min_refetch.max(Duration::from_secs(1));
        let next = match result {
            Ok((set, max_age)) => {
                for s in set.skipped() {
                    tracing::debug!(provider = %self.label, kid = ?s.kid, reason = s.reason, "key set: key not used");
                }
                let changed = self.current.load().as_deref().map(KeySet::len) != Some(set.len());
                if changed || self.stats.stale.load(Relaxed) {
                    tracing::info!(provider = %self.label, keys = set.len(), "key set fetched");
                }
                self.stats.keys.store(set.len() as u64, Relaxed);
                self.stats.stale.store(false, Relaxed);
                self.stats.fetched.inc();
                self.current.store(Some(Arc::new(set)));
                *failures = 0;
                max_age.unwrap_or(self.settings.refresh).clamp(floor, self.settings.refresh.max(floor))
            }
            Err(e) => {
                self.stats.failed.inc();
                *self.last_demand.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
                let kept = self.current.load().as_deref().map(KeySet::len);
                self.stats.stale.store(kept.is_some(), Relaxed);
                match kept {
                    Some(keys) => tracing::warn!(provider = %self.label, error = %e, keys,
                        "key set fetch failed; the last good set stays in use"),
                    None => tracing::warn!(provider = %self.label, error = %e,
                        "key set fetch failed; tokens of this provider are refused until one succeeds"),
                }
                *failures = failures.saturating_add(1);
                floor.saturating_mul(1 << (*failures - 1).min(6)).min(self.settings.refresh.max(floor))
            }
        };
        self.fetching.store(false, Relaxed);
        self.done.send_modify(|n| *n += 1);
        next
    }
}

impl Drop for KeySource {
    /// Wakes the task so that it sees the source gone and stops.
    fn drop(&mut self) {
        self.wake.notify_one();
    }
}

/// Keeps one source's set fresh while the source lives.
async fn refresher(source: Weak<KeySource>, wake: Arc<Notify>) {
    let client = match source.upgrade() {
        Some(s) => match fetch::client(s.settings.roots.clone()) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(provider = %s.label, error = %e, "key set: no HTTP client; tokens of this provider are refused");
                s.fetching.store(false, Relaxed);
                s.done.send_modify(|n| *n += 1);
                return;
            }
        },
        None => return,
    };
    let mut failures = 0;
    loop {
        let Some(s) = source.upgrade() else { return };
        let next = s.fetch_once(&client, &mut failures).await;
        drop(s);
        tokio::select! {
            () = tokio::time::sleep(next) => {}
            () = wake.notified() => {}
        }
    }
}

#[cfg(test)]
mod tests;
