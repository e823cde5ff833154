//! Certificate resolution for the whole process: the certificates named in the configuration
//! (always in memory), then the store, through a bounded cache.
//!
//! ```text
//! name ─► fixed index (exact) ─► cache/store (exact) ─► fixed index (*.parent) ─► cache/store (*.parent)
//! ```
//! An exact name wins over a wildcard wherever each lives. Store results, found or not, are cached
//! under their index key; a change in the store drops the keys it touched and moves
//! [`Certs::generation`] on, which tells workers to look again.

use crate::bundle::{Bundle, BundleError};
use crate::dir::DirStore;
use crate::index::{wildcard_parent, Index, Pair};
use crate::redis_store::RedisStore;
use crate::stats::TlsStats;
use arc_swap::ArcSwap;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

/// How often every file of the directory store is looked at, to see files changed in place
/// (files added, removed or renamed in are seen at every `scan_interval`).
const FULL_SCAN_INTERVAL: Duration = Duration::from_secs(30);

/// Cache and store settings.
#[derive(Debug, Clone)]
pub struct CertsOptions {
    /// Index keys kept in the cache.
    pub cache_size: usize,
    /// How long a name the store does not hold is remembered as missing.
    pub negative_ttl: Duration,
    /// How often the directory store is rescanned.
    pub scan_interval: Duration,
}

impl Default for CertsOptions {
    fn default() -> Self {
        CertsOptions {
            cache_size: 100_000,
            negative_ttl: Duration::from_secs(10),
            scan_interval: Duration::from_secs(2),
        }
    }
}

#[derive(Debug, Clone)]
enum Slot {
    Found(Arc<Pair>),
    Missing(Instant),
    /// Found once, and since announced changed (or changes may have been missed): looked up again
    /// on next use, and served as it was while the store cannot answer (Redis away). Holds when the
    /// store last failed to answer for it.
    Stale(Arc<Pair>, Option<Instant>),
}

impl Slot {
    /// What is left of a cached lookup once the store says it may have changed.
    fn outdated(self) -> Option<Slot> {
        match self {
            Slot::Found(p) | Slot::Stale(p, _) => Some(Slot::Stale(p, None)),
            Slot::Missing(_) => None,
        }
    }
}

/// The store could not answer (Redis unreachable or timing out).
#[derive(Debug)]
pub struct Unavailable;

/// Where certificates not named in the configuration are looked up.
#[derive(Debug)]
pub enum Store {
    /// A watched directory.
    Dir(DirStore),
    /// The cluster's Redis.
    Redis(RedisStore),
}

/// Resolves names to certificates.
#[derive(Debug)]
pub struct Certs {
    fixed: ArcSwap<Index>,
    dir: Option<Arc<DirStore>>,
    redis: Option<RedisStore>,
    /// Set when the directory's first scan is done; until then a miss waits for it.
    dir_ready: AtomicBool,
    dir_scanned: tokio::sync::Notify,
    /// When every file of the directory was last looked at.
    last_full_scan: Mutex<Option<Instant>>,
    cache: Mutex<HashMap<Box<str>, Slot>>,
    generation: AtomicU64,
    options: CertsOptions,
    /// Counters.
    pub stats: Arc<TlsStats>,
}

fn now_secs() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

impl Certs {
    /// Certificates from `fixed` bundles and an optional directory store, counted in `stats`.
    pub fn new(
        fixed: Vec<Arc<Bundle>>,
        store: Option<Store>,
        options: CertsOptions,
        stats: Arc<TlsStats>,
    ) -> Arc<Self> {
        let (dir, redis) = match store {
            Some(Store::Dir(d)) => (Some(d), None),
            Some(Store::Redis(r)) => (None, Some(r)),
            None => (None, None),
        };
        Arc::new(Certs {
            fixed: ArcSwap::from_pointee(Index::new(&fixed)),
            dir_ready: AtomicBool::new(dir.is_none()),
            dir: dir.map(Arc::new),
            redis,
            dir_scanned: tokio::sync::Notify::new(),
            last_full_scan: Mutex::new(None),
            cache: Mutex::new(HashMap::new()),
            generation: AtomicU64::new(0),
            options,
            stats,
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Box<str>, Slot>> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Moves on whenever any certificate may have changed; workers compare it with what they
    /// cached under.
    pub fn generation(&self) -> u64 {
        self.generation.load(Relaxed)
    }

    /// Certificates in memory (configured, or loaded from the store) whose validity ends before
    /// `deadline` (Unix seconds), each counted once.
    pub fn expiring_before(&self, deadline: i64) -> usize {
        let mut seen: std::collections::HashSet<*const Bundle> = std::collections::HashSet::new();
        let mut count = |pair: &Pair| {
            for b in pair.bundles() {
                let ptr = Arc::as_ptr(b);
                if b.facts.not_after < deadline {
                    seen.insert(ptr);
                }
            }
        };
        for pair in self.fixed.load().pairs() {
            count(pair);
        }
        for slot in self.lock().values() {
            if let Slot::Found(pair) | Slot::Stale(pair, _) = slot {
                count(pair);
            }
        }
        seen.len()
    }

    /// Replaces the certificates named in the configuration (on reload).
    pub fn set_fixed(&self, fixed: Vec<Arc<Bundle>>) {
        self.fixed.store(Arc::new(Index::new(&fixed)));
        self.generation.fetch_add(1, Relaxed);
    }

    /// Marks what the cache holds for `keys` (changed in the store) to be looked up again.
    pub fn invalidate<'a>(&self, keys: impl IntoIterator<Item = &'a str>) {
        let mut cache = self.lock();
        for k in keys {
            if let Some(slot) = cache.remove(k).and_then(Slot::outdated) {
                cache.insert(k.into(), slot);
            }
        }
        drop(cache);
        self.generation.fetch_add(1, Relaxed);
    }

    /// The first name of the configured certificate, when exactly one bundle is configured.
    pub fn sole_fixed_name(&self) -> Option<String> {
        let fixed = self.fixed.load();
        let mut bundles = fixed.pairs().flat_map(|p| p.bundles());
        let first = bundles.next()?.clone();
        if bundles.any(|b| !Arc::ptr_eq(b, &first)) {
            return None;
        }
        first.facts.names.first().cloned()
    }

    /// Whether certificates not named in the configuration are looked up in a store.
    pub fn has_store(&self) -> bool {
        self.dir.is_some() || self.redis.is_some()
    }

    /// The certificates for `name` (normalised) among those in memory now (configured, or loaded
    /// from the store before), without waiting: `None` when they would have to be looked up.
    pub fn resolve_now(&self, name: &str) -> Option<Arc<Pair>> {
        let now = |key: &str| {
            if let Some(p) = self.fixed.load().get_key(key) {
                return Some(p.clone());
            }
            match self.lock().get(key) {
                Some(Slot::Found(p) | Slot::Stale(p, _)) => Some(p.clone()),
                _ => None,
            }
        };
        now(name).or_else(|| now(&format!("*.{}", wildcard_parent(name)?)))
    }

    /// The certificates for `name` (normalised), or `None` when neither the configuration nor
    /// the store holds one.
    pub async fn resolve(&self, name: &str) -> Option<Arc<Pair>> {
        if let Some(found) = self.resolve_key(name).await {
            return Some(found);
        }
        let parent = wildcard_parent(name)?;
        self.resolve_key(&format!("*.{parent}")).await
    }

    async fn resolve_key(&self, key: &str) -> Option<Arc<Pair>> {
        if let Some(p) = self.fixed.load().get_key(key) {
            return Some(p.clone());
        }
        if self.dir.is_none() && self.redis.is_none() {
            return None;
        }
        let cached = self.lock().get(key).cloned();
        let stale = match cached {
            Some(Slot::Found(p)) => {
                self.stats.cert_cache_hits.inc();
                return Some(p);
            }
            Some(Slot::Missing(at)) if at.elapsed() < self.options.negative_ttl => {
                self.stats.cert_cache_hits.inc();
                return None;
            }
            // The store failed to answer for it a moment ago: serve what it was.
            Some(Slot::Stale(p, Some(failed))) if failed.elapsed() < self.options.negative_ttl => {
                self.stats.cert_cache_hits.inc();
                return Some(p);
            }
            Some(Slot::Stale(p, _)) => Some(p),
            _ => None,
        };
        self.stats.cert_cache_misses.inc();
        let found = match self.load(key).await {
            Ok(found) => found,
            Err(Unavailable) => {
                // A store that cannot answer changes nothing: a certificate it served before
                // goes on serving (Redis away, or a failover under way).
                if let Some(p) = stale {
                    self.lock().insert(key.into(), Slot::Stale(p.clone(), Some(Instant::now())));
                    return Some(p);
                }
                None
            }
        };
        let mut cache = self.lock();
        if cache.len() >= self.options.cache_size {
            // Full: drop about a tenth, in the map's own (arbitrary) order.
            let drop: Vec<Box<str>> = cache.keys().take(self.options.cache_size / 10 + 1).cloned().collect();
            for k in drop {
                cache.remove(&k);
            }
        }
        let slot = match &found {
            Some(p) => Slot::Found(p.clone()),
            None => Slot::Missing(Instant::now()),
        };
        cache.insert(key.into(), slot);
        found
    }

    /// What the store holds for the index key `key` (`name` or `*.parent`) now, read from the
    /// store past the cache (which it leaves as it is); `Err` when the store cannot answer.
    pub async fn stored(&self, key: &str) -> Result<Option<Arc<Pair>>, Unavailable> {
        self.load(key).await
    }

    /// What the store holds for `key`; `Err` when it cannot answer.
    async fn load(&self, key: &str) -> Result<Option<Arc<Pair>>, Unavailable> {
        if let Some(redis) = &self.redis {
            return match redis.load(key, now_secs()).await {
                Ok(loaded) => Ok(self.assemble(key, loaded)),
                Err(e) => {
                    self.stats.cert_load_errors.inc();
                    tracing::debug!(name = key, error = %e, "certificate lookup failed");
                    Err(Unavailable)
                }
            };
        }
        Ok(self.load_from_dir(key).await)
    }

    async fn load_from_dir(&self, key: &str) -> Option<Arc<Pair>> {
        let dir = self.dir.as_ref()?;
        while !self.dir_ready.load(Relaxed) {
            let wait = self.dir_scanned.notified();
            if self.dir_ready.load(Relaxed) {
                break;
            }
            wait.await;
        }
        let files = dir.files_for(key);
        if files.is_empty() {
            return None;
        }
        // Reading files and parsing keys blocks: off the worker's event loop.
        let loaded = tokio::task::spawn_blocking(move || {
            let now = now_secs();
            files.iter().map(|f| DirStore::load(f, now)).collect::<Vec<Result<Arc<Bundle>, BundleError>>>()
        })
        .await
        .ok()?;
        self.assemble(key, loaded)
    }

    /// The pair made of a store's bundles for `key`, counting loads and refusals.
    fn assemble(&self, key: &str, loaded: Vec<Result<Arc<Bundle>, BundleError>>) -> Option<Arc<Pair>> {
        let mut pair = Pair::default();
        for b in loaded {
            match b {
                Ok(b) => {
                    self.stats.cert_loads.inc();
                    pair.put(b);
                }
                Err(e) => {
                    self.stats.cert_load_errors.inc();
                    tracing::error!(name = key, error = %e, "stored certificate cannot be loaded");
                }
            }
        }
        (!pair.is_empty()).then(|| Arc::new(pair))
    }

    /// Runs one directory scan and applies its changes. The first scan only reads names;
    /// later ones check changed files whole before accepting them.
    pub fn scan_dir(&self) {
        let Some(dir) = &self.dir else { return };
        let first = !self.dir_ready.load(Relaxed);
        let started = Instant::now();
        let full = {
            let mut last = self.last_full_scan.lock().unwrap_or_else(|p| p.into_inner());
            let due = last.is_none_or(|t| t.elapsed() >= FULL_SCAN_INTERVAL);
            if due {
                *last = Some(started);
            }
            due
        };
        match dir.scan(!first, full) {
            Ok(changes) => {
                if !changes.names.is_empty() {
                    self.invalidate(changes.names.iter().map(String::as_str));
                }
                if first {
                    tracing::info!(dir = %dir.dir().display(), files = dir.len(), ms = started.elapsed().as_millis() as u64, "certificate directory indexed");
                }
            }
            Err(e) => tracing::warn!(dir = %dir.dir().display(), error = %e, "cannot scan the certificate directory"),
        }
        if first {
            self.dir_ready.store(true, Relaxed);
            self.dir_scanned.notify_waiters();
        }
    }

    /// Marks every cached lookup to be looked up again (the store may have changed in ways not
    /// announced).
    pub fn invalidate_all(&self) {
        let mut cache = self.lock();
        let old = std::mem::take(&mut *cache);
        cache.extend(old.into_iter().filter_map(|(k, slot)| Some((k, slot.outdated()?))));
        drop(cache);
        self.generation.fetch_add(1, Relaxed);
    }

    /// Follows the Redis store's change announcements, on the current runtime, until the last
    /// reference to `certs` is gone.
    fn follow_redis(certs: &Arc<Self>, redis: &RedisStore) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
        let sub = match gatehouse_redis::Client::subscribe(redis.cluster().options().clone(), &[redis.channel()]) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "cannot follow certificate changes");
                return;
            }
        };
        let weak = Arc::downgrade(certs);
        rt.spawn(async move {
            let mut sub = sub;
            while let Some(event) = sub.next().await {
                let Some(certs) = weak.upgrade() else { return };
                match event {
                    gatehouse_redis::Event::Message(m) => {
                        let text = String::from_utf8_lossy(&m.payload).into_owned();
                        certs.invalidate(text.lines());
                    }
                    gatehouse_redis::Event::Reconnected => certs.invalidate_all(),
                    gatehouse_redis::Event::Subscribed => {}
                }
            }
        });
    }

    /// Follows the store's changes: the directory is scanned now and then every `scan_interval`
    /// on a thread of its own; Redis announcements are followed on the current runtime. Both stop
    /// when the last reference to `certs` is gone.
    pub fn watch(certs: &Arc<Self>) {
        if let Some(redis) = &certs.redis {
            Self::follow_redis(certs, redis);
        }
        if certs.dir.is_none() {
            return;
        }
        let weak: Weak<Self> = Arc::downgrade(certs);
        let interval = certs.options.scan_interval;
        let spawned = std::thread::Builder::new().name("gatehouse-certs".into()).spawn(move || loop {
            let Some(certs) = weak.upgrade() else { return };
            certs.scan_dir();
            drop(certs);
            std::thread::sleep(interval);
        });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the certificate directory watcher");
        }
    }
}
