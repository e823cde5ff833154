//! What the nodes of a cluster share through Redis: ticket keys, TLS sessions and certificates.
//!
//! Everything a node writes is sealed (AES-256-GCM) with a key derived from the cluster secret,
//! one key per purpose, and session ids are stored under a keyed hash, so Redis never holds a
//! usable secret or a session id in the clear. Keys are hash-tagged with the prefix
//! (`{gatehouse}:tls:…`), so Redis Cluster keeps them in one slot.
//!
//! Redis is never waited on inside rustls: sessions are fetched before rustls runs, within the
//! command timeout, and written after the handshake in a task of their own. When Redis is away,
//! nodes go on with what they hold, count the errors and log them once per interval.

use crate::stats::TlsStats;
use crate::ticket::{KeyMaterial, Ticketer, NAME_LEN};
use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use aws_lc_rs::hkdf::{Salt, HKDF_SHA256};
use aws_lc_rs::hmac;
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use gatehouse_redis::{Client, ClientOptions};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Errors are logged at most once per this interval (and counted always).
const LOG_INTERVAL_MS: u64 = 10_000;
/// How long a rotation lock is held at most.
const ROTATION_LOCK_MS: u64 = 10_000;

/// What a sealed value is for; each purpose has its own key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// TLS sessions.
    Sessions,
    /// The ticket key ring.
    Tickets,
    /// Certificate bundles (they hold private keys).
    Certificates,
    /// Configuration drafts and revisions (they hold app secrets).
    Revisions,
}

/// What Redis said about a session.
#[derive(Debug, PartialEq, Eq)]
pub enum Fetched {
    /// The session.
    Found(Vec<u8>),
    /// Redis holds none (never stored, expired, or already taken).
    Missing,
    /// Redis could not be asked.
    Unavailable,
}

/// The cluster's Redis and keys.
pub struct Cluster {
    client: Client,
    options: ClientOptions,
    prefix: String,
    sessions: LessSafeKey,
    tickets: LessSafeKey,
    certificates: LessSafeKey,
    revisions: LessSafeKey,
    ids: hmac::Key,
    rng: SystemRandom,
    stats: Arc<TlsStats>,
    last_log_ms: AtomicU64,
    started: Instant,
    /// A moving average of this node's Redis command latency, microseconds (each command moves it
    /// an eighth of the way to its own latency).
    latency_ewma_us: AtomicU64,
}

/// Bounds of [`Cluster::late_write_wait`].
const LATE_WRITE_WAIT_MIN: Duration = Duration::from_micros(500);
const LATE_WRITE_WAIT_MAX: Duration = Duration::from_millis(10);

/// Asks `fetch`; if it is [`Fetched::Missing`], waits `wait` and asks once more, counting a
/// session found then in `stats.sessions_fetched_late`.
async fn settled<F, Fut, W, WFut>(mut fetch: F, wait: W, stats: &TlsStats) -> Fetched
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Fetched>,
    W: FnOnce() -> WFut,
    WFut: std::future::Future<Output = ()>,
{
    let first = fetch().await;
    if first != Fetched::Missing {
        return first;
    }
    wait().await;
    let second = fetch().await;
    if matches!(second, Fetched::Found(_)) {
        stats.sessions_fetched_late.inc();
    }
    second
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster").field("prefix", &self.prefix).field("connected", &self.client.is_connected()).finish()
    }
}

fn derive(secret: &[u8], label: &'static [u8]) -> Result<LessSafeKey, String> {
    let prk = Salt::new(HKDF_SHA256, b"gatehouse cluster v1").extract(secret);
    let labels = [label];
    let okm = prk.expand(&labels, &AES_256_GCM).map_err(|_| "key derivation failed".to_string())?;
    Ok(LessSafeKey::new(UnboundKey::from(okm)))
}

impl Cluster {
    /// Connects (in the background) to the Redis at `url`; `secret` must be at least 32 bytes.
    pub fn new(
        url: &str,
        prefix: &str,
        secret: &[u8],
        connect_timeout: Duration,
        command_timeout: Duration,
        stats: Arc<TlsStats>,
    ) -> Result<Arc<Self>, String> {
        if secret.len() < 32 {
            return Err(format!("the cluster secret has {} bytes; at least 32 are needed", secret.len()));
        }
        let mut options = ClientOptions::from_url(url).map_err(|e| format!("redis.url: {e}"))?;
        options.connect_timeout = connect_timeout;
        options.command_timeout = command_timeout;
        let ids_prk = Salt::new(HKDF_SHA256, b"gatehouse cluster v1").extract(secret);
        let ids_okm = ids_prk.expand(&[b"session ids"], hmac::HMAC_SHA256).map_err(|_| "key derivation failed")?;
        Ok(Arc::new(Cluster {
            client: Client::new(options.clone()),
            options,
            prefix: prefix.to_string(),
            sessions: derive(secret, b"sessions")?,
            tickets: derive(secret, b"ticket keys")?,
            certificates: derive(secret, b"certificates")?,
            revisions: derive(secret, b"revisions")?,
            ids: hmac::Key::from(ids_okm),
            rng: SystemRandom::new(),
            stats,
            last_log_ms: AtomicU64::new(0),
            started: Instant::now(),
            latency_ewma_us: AtomicU64::new(0),
        }))
    }

    /// The Redis client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Waits until the client is connected, for at most the connect timeout (for command-line
    /// tools, which have nothing to do without Redis).
    pub async fn connected(&self) -> Result<(), String> {
        let deadline = Instant::now() + self.options.connect_timeout + Duration::from_millis(500);
        while !self.client.is_connected() {
            if Instant::now() >= deadline {
                return Err(format!("cannot reach redis at {}", self.options.addr));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(())
    }

    /// Connection settings, for subscriptions of their own.
    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    /// A key under the cluster prefix: `{prefix}:rest`.
    pub fn key(&self, rest: &str) -> String {
        format!("{{{}}}:{rest}", self.prefix)
    }

    fn aead(&self, purpose: Purpose) -> &LessSafeKey {
        match purpose {
            Purpose::Sessions => &self.sessions,
            Purpose::Tickets => &self.tickets,
            Purpose::Certificates => &self.certificates,
            Purpose::Revisions => &self.revisions,
        }
    }

    /// `nonce ‖ ciphertext ‖ tag`, bound to `aad`.
    pub fn seal(&self, purpose: Purpose, aad: &[u8], plain: &[u8]) -> Option<Vec<u8>> {
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).ok()?;
        let mut body = plain.to_vec();
        self.aead(purpose)
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(aad), &mut body)
            .ok()?;
        let mut out = Vec::with_capacity(NONCE_LEN + body.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&body);
        Some(out)
    }

    /// Opens what [`Cluster::seal`] sealed with the same purpose and `aad`.
    pub fn open(&self, purpose: Purpose, aad: &[u8], sealed: &[u8]) -> Option<Vec<u8>> {
        if sealed.len() < NONCE_LEN {
            return None;
        }
        let (nonce, body) = sealed.split_at(NONCE_LEN);
        let mut buf = body.to_vec();
        let n = self
            .aead(purpose)
            .open_in_place(Nonce::try_assume_unique_for_key(nonce).ok()?, Aad::from(aad), &mut buf)
            .ok()?
            .len();
        buf.truncate(n);
        Some(buf)
    }

    /// Counts a Redis failure and logs it unless one was logged within the last interval.
    pub fn failed(&self, what: &str, e: &gatehouse_redis::Error) {
        self.stats.redis_errors.inc();
        let now = self.started.elapsed().as_millis() as u64 + LOG_INTERVAL_MS;
        let last = self.last_log_ms.load(Relaxed);
        if now.saturating_sub(last) >= LOG_INTERVAL_MS
            && self.last_log_ms.compare_exchange(last, now, Relaxed, Relaxed).is_ok()
        {
            tracing::warn!(operation = what, error = %e, "redis unavailable; going on with local state (logged once per 10 s)");
        }
    }

    /// Counts one command's latency.
    pub fn timed(&self, started: Instant) {
        let us = started.elapsed().as_micros() as u64;
        self.stats.redis_commands.inc();
        self.stats.redis_latency_us.fetch_add(us, Relaxed);
        // Racing updates may lose one sample: an average does not need every one.
        let old = self.latency_ewma_us.load(Relaxed);
        self.latency_ewma_us.store(old - old / 8 + us / 8, Relaxed);
    }

    /// How long a session that another node has just made may take to reach Redis: twice this
    /// node's moving average of command latency, within 0.5–10 ms. The other node stores the
    /// session in the background while its client is already on its way here, so a client that
    /// moves at once can ask before the write has landed (Redis on a loaded machine: milliseconds).
    pub fn late_write_wait(&self) -> Duration {
        Duration::from_micros(self.latency_ewma_us.load(Relaxed).saturating_mul(2))
            .clamp(LATE_WRITE_WAIT_MIN, LATE_WRITE_WAIT_MAX)
    }

    fn session_key(&self, id: &[u8]) -> String {
        let tag = hmac::sign(&self.ids, id);
        self.key(&format!("tls:sess:{}", crate::ticket::hex(&tag.as_ref()[..16])))
    }

    /// Fetches a session stored by any node; `take` removes it (single-use TLS 1.3 tickets).
    pub async fn fetch_session(&self, id: &[u8], take: bool) -> Fetched {
        let key = self.session_key(id);
        let started = Instant::now();
        let got = if take { self.client.getdel(&key).await } else { self.client.get(&key).await };
        self.timed(started);
        match got {
            Ok(Some(sealed)) => self.open(Purpose::Sessions, id, &sealed).map_or(Fetched::Missing, Fetched::Found),
            Ok(None) => Fetched::Missing,
            Err(e) => {
                self.failed("fetch session", &e);
                Fetched::Unavailable
            }
        }
    }

    /// [`Cluster::fetch_session`], asked once more after [`Cluster::late_write_wait`] if Redis
    /// holds none: the session may be on its way from the node that made it. The second answer is
    /// final, so a session that never was costs one wait of about two Redis round trips.
    pub async fn fetch_session_settled(&self, id: &[u8], take: bool) -> Fetched {
        settled(|| self.fetch_session(id, take), || tokio::time::sleep(self.late_write_wait()), &self.stats).await
    }

    /// Stores a session for the other nodes, in a task of its own on the current runtime.
    pub fn store_session(self: &Arc<Self>, id: Vec<u8>, value: &[u8], ttl: Duration) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
        let Some(sealed) = self.seal(Purpose::Sessions, &id, value) else { return };
        let this = self.clone();
        rt.spawn(async move {
            let key = this.session_key(&id);
            let started = Instant::now();
            let r = this.client.set_px(&key, &sealed, ttl.as_millis().max(1) as u64).await;
            this.timed(started);
            if let Err(e) = r {
                this.failed("store session", &e);
            }
        });
    }

    async fn read_ring(&self) -> Result<Vec<KeyMaterial>, gatehouse_redis::Error> {
        let started = Instant::now();
        let got = self.client.get(self.key("tls:ticket-keys")).await;
        self.timed(started);
        let Some(sealed) = got? else { return Ok(Vec::new()) };
        let Some(plain) = self.open(Purpose::Tickets, b"ticket keys", &sealed) else {
            tracing::error!("the ticket keys in Redis do not open with this node's cluster secret");
            return Ok(Vec::new());
        };
        Ok(plain.chunks(NAME_LEN + 32 + 8).filter_map(KeyMaterial::from_bytes).collect())
    }

    /// One round of ticket-key sharing: read the ring; if its newest key is older than `rotation`
    /// (or there is none), rotate it under a lock; return the ring, newest first.
    async fn ticket_round(
        &self,
        now: u64,
        rotation: Duration,
        window: Duration,
    ) -> Result<Vec<KeyMaterial>, gatehouse_redis::Error> {
        let ring = self.read_ring().await?;
        let stale = ring.first().is_none_or(|k| now.saturating_sub(k.created) >= rotation.as_secs());
        if !stale {
            return Ok(ring);
        }
        let lock = self.key("tls:ticket-keys:lock");
        if !self.client.set_nx_px(&lock, b"1", ROTATION_LOCK_MS).await? {
            // Another node is rotating; its ring is read next round.
            return Ok(ring);
        }
        let ring = self.read_ring().await?;
        let still_stale = ring.first().is_none_or(|k| now.saturating_sub(k.created) >= rotation.as_secs());
        let result = if still_stale {
            match KeyMaterial::generate(now) {
                Some(fresh) => {
                    let mut next = vec![fresh];
                    next.extend(ring.into_iter().filter(|k| now.saturating_sub(k.created) < window.as_secs()));
                    let plain: Vec<u8> = next.iter().flat_map(KeyMaterial::to_bytes).collect();
                    if let Some(sealed) = self.seal(Purpose::Tickets, b"ticket keys", &plain) {
                        self.client.set_px(self.key("tls:ticket-keys"), &sealed, window.as_millis() as u64).await?;
                        tracing::info!(keys = next.len(), "rotated the cluster's ticket key");
                    }
                    Ok(next)
                }
                None => Ok(ring),
            }
        } else {
            Ok(ring)
        };
        let _ = self.client.del(&[lock.as_str()]).await;
        result
    }

    /// Keeps `ticketer` on the cluster's ticket keys: every node reads the ring each `poll`, and
    /// one node (holding a lock) rotates it every `rotation`, keeping keys for `window`. While
    /// Redis is away, keys made locally carry on sealing, and stay able to open for `window` after
    /// the cluster's ring is back.
    ///
    /// `ready` is told once the first round is done (keys installed, or Redis found away), so a
    /// node can wait for the cluster's keys before it accepts connections.
    pub async fn run_tickets(
        self: Arc<Self>,
        ticketer: Arc<Ticketer>,
        rotation: Duration,
        window: Duration,
        poll: Duration,
        ready: tokio::sync::oneshot::Sender<()>,
    ) {
        let mut ready = Some(ready);
        // Keys made here while Redis was away, and the ring last installed.
        let mut local: Vec<KeyMaterial> = Vec::new();
        let mut current: Vec<KeyMaterial> = Vec::new();
        let mut tick = tokio::time::interval(poll);
        loop {
            tick.tick().await;
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
            let young = |k: &KeyMaterial| now.saturating_sub(k.created) < window.as_secs();
            local.retain(young);
            let mut round = self.ticket_round(now, rotation, window).await;
            // An empty ring means another node holds the rotation lock: its ring is moments away.
            for _ in 0..40 {
                if !matches!(&round, Ok(ring) if ring.is_empty()) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                round = self.ticket_round(now, rotation, window).await;
            }
            let next = match round {
                Ok(ring) if ring.is_empty() => continue,
                Ok(mut ring) => {
                    ring.extend(
                        local.iter().filter(|k| !ring.iter().any(|r| r.name == k.name)).cloned().collect::<Vec<_>>(),
                    );
                    ring
                }
                Err(e) => {
                    self.failed("ticket keys", &e);
                    let mut next = current.clone();
                    next.retain(young);
                    if next.first().is_none_or(|k| now.saturating_sub(k.created) >= rotation.as_secs()) {
                        if let Some(k) = KeyMaterial::generate(now) {
                            local.insert(0, k.clone());
                            next.insert(0, k);
                        }
                    }
                    next
                }
            };
            if next.iter().map(|k| k.name).ne(current.iter().map(|k| k.name)) {
                ticketer.install(&next);
                current = next;
            }
            if let Some(tx) = ready.take() {
                let _ = tx.send(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};

    /// Runs `settled` over `answers` (one per ask); what it returned, asks made, waits made.
    async fn run(answers: Vec<Fetched>) -> (Fetched, usize, usize, u64) {
        let stats = TlsStats::default();
        let answers = RefCell::new(answers.into_iter());
        let (asks, waits) = (Cell::new(0), Cell::new(0));
        let got = settled(
            || {
                asks.set(asks.get() + 1);
                let next = answers.borrow_mut().next().expect("asked more often than expected");
                async move { next }
            },
            || {
                waits.set(waits.get() + 1);
                async {}
            },
            &stats,
        )
        .await;
        (got, asks.get(), waits.get(), stats.sessions_fetched_late.get())
    }

    #[tokio::test]
    async fn a_missing_session_is_asked_for_once_more_after_a_wait() {
        let found = || Fetched::Found(b"s".to_vec());
        assert_eq!(run(vec![Fetched::Missing, found()]).await, (found(), 2, 1, 1));
        assert_eq!(run(vec![Fetched::Missing, Fetched::Missing]).await, (Fetched::Missing, 2, 1, 0));
        assert_eq!(run(vec![Fetched::Missing, Fetched::Unavailable]).await, (Fetched::Unavailable, 2, 1, 0));
        // Found at once, or Redis down: no second ask, no wait.
        assert_eq!(run(vec![found()]).await, (found(), 1, 0, 0));
        assert_eq!(run(vec![Fetched::Unavailable]).await, (Fetched::Unavailable, 1, 0, 0));
    }
}
