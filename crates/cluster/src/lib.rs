//! The cluster's Redis, shared by every node: the client, the key prefix, and sealing.
//!
//! Everything a node writes there is sealed (AES-256-GCM) with a key derived from the cluster
//! secret, one key per [`Purpose`] (TLS sessions, the ticket key ring, certificate bundles,
//! configuration revisions), and ids a client chose are stored under a keyed hash, so Redis never
//! holds a usable secret or a session id in the clear. Keys start with the prefix
//! (`gatehouse:…`), and each carries a hash tag that names the thing it belongs to (one TLS
//! session, one rate-limit counter, one certificate name), so on a Redis Cluster they spread
//! over every shard; what must stay together (the ticket key ring and its lock, the control
//! plane's revisions) shares one tag. The table of keys is in `docs/config.md`.
//!
//! When Redis is away, the users of a [`Cluster`] go on with what they hold: every failure is
//! counted ([`RedisStats`]) and logged at most once per interval ([`Cluster::failed`]).

#![forbid(unsafe_code)]

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

/// Why the cluster's Redis cannot be used.
#[derive(Debug)]
#[non_exhaustive]
pub enum ClusterError {
    /// The cluster secret is shorter than 32 bytes.
    ShortSecret {
        /// Its length.
        len: usize,
    },
    /// The `redis` settings cannot work.
    Redis(gatehouse_redis::Error),
    /// HKDF refused to derive a key (never for a 32-byte output).
    KeyDerivation,
    /// No connection within the connect timeout.
    Unreachable {
        /// The address tried.
        addr: String,
    },
}

impl std::fmt::Display for ClusterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClusterError::ShortSecret { len } => {
                write!(f, "the cluster secret has {len} bytes; at least 32 are needed")
            }
            ClusterError::Redis(e) => write!(f, "redis: {e}"),
            ClusterError::KeyDerivation => f.write_str("key derivation failed"),
            ClusterError::Unreachable { addr } => write!(f, "cannot reach redis at {addr}"),
        }
    }
}

impl std::error::Error for ClusterError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClusterError::Redis(e) => Some(e),
            _ => None,
        }
    }
}

/// Counters of this node's Redis commands, read by `/metrics`.
#[derive(Debug, Default)]
pub struct RedisStats {
    /// Commands sent.
    pub commands: AtomicU64,
    /// Their total latency, microseconds.
    pub latency_us: AtomicU64,
    /// Commands that failed (unreachable, timeout, error reply).
    pub errors: AtomicU64,
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
    /// Digests of app keys (`key_hmac`).
    app_keys: hmac::Key,
    rng: SystemRandom,
    stats: Arc<RedisStats>,
    last_log_ms: AtomicU64,
    started: Instant,
    /// A moving average of this node's Redis command latency, microseconds (each command moves it
    /// an eighth of the way to its own latency).
    latency_ewma_us: AtomicU64,
}

/// Bounds of [`Cluster::late_write_wait`].
const LATE_WRITE_WAIT_MIN: Duration = Duration::from_micros(500);
const LATE_WRITE_WAIT_MAX: Duration = Duration::from_millis(10);

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster").field("prefix", &self.prefix).field("connected", &self.client.is_connected()).finish()
    }
}

fn derive(secret: &[u8], label: &'static [u8]) -> Result<LessSafeKey, ClusterError> {
    let prk = Salt::new(HKDF_SHA256, b"gatehouse cluster v1").extract(secret);
    let labels = [label];
    let okm = prk.expand(&labels, &AES_256_GCM).map_err(|_| ClusterError::KeyDerivation)?;
    Ok(LessSafeKey::new(UnboundKey::from(okm)))
}

impl Cluster {
    /// Whether `secret` can be the cluster secret (at least 32 bytes), as [`Cluster::new`] judges
    /// it; `gatehouse check` asks this too.
    pub fn check_secret(secret: &[u8]) -> Result<(), ClusterError> {
        if secret.len() < 32 {
            return Err(ClusterError::ShortSecret { len: secret.len() });
        }
        Ok(())
    }

    /// Connects (in the background, on the current runtime) to the Redis of `options`; `secret`
    /// must be at least 32 bytes.
    pub fn new(
        options: ClientOptions,
        prefix: &str,
        secret: &[u8],
        stats: Arc<RedisStats>,
    ) -> Result<Arc<Self>, ClusterError> {
        Cluster::check_secret(secret)?;
        let ids_prk = Salt::new(HKDF_SHA256, b"gatehouse cluster v1").extract(secret);
        let ids_okm = ids_prk.expand(&[b"session ids"], hmac::HMAC_SHA256).map_err(|_| ClusterError::KeyDerivation)?;
        Ok(Arc::new(Cluster {
            client: Client::new(options.clone()).map_err(ClusterError::Redis)?,
            options,
            prefix: prefix.to_string(),
            sessions: derive(secret, b"sessions")?,
            tickets: derive(secret, b"ticket keys")?,
            certificates: derive(secret, b"certificates")?,
            revisions: derive(secret, b"revisions")?,
            ids: hmac::Key::from(ids_okm),
            app_keys: hmac::Key::from(
                ids_prk.expand(&[b"app keys"], hmac::HMAC_SHA256).map_err(|_| ClusterError::KeyDerivation)?,
            ),
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
    pub async fn connected(&self) -> Result<(), ClusterError> {
        let deadline = Instant::now() + self.options.connect_timeout + Duration::from_millis(500);
        while !self.client.is_connected() {
            if Instant::now() >= deadline {
                return Err(ClusterError::Unreachable { addr: self.options.deployment.to_string() });
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(())
    }

    /// The counters of this node's Redis commands.
    pub fn stats(&self) -> &RedisStats {
        &self.stats
    }

    /// Connection settings, for subscriptions of their own.
    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    /// A key under the cluster prefix: `prefix:rest`. `rest` carries the key's hash tag
    /// (`tls:sess:{id}`); without one, the whole key picks the slot.
    pub fn key(&self, rest: &str) -> String {
        format!("{}:{rest}", self.prefix)
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
        self.stats.errors.fetch_add(1, Relaxed);
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
        self.stats.commands.fetch_add(1, Relaxed);
        self.stats.latency_us.fetch_add(us, Relaxed);
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

    /// An app key's `key_hmac`: HMAC-SHA-256 under a key of its own derived from the cluster
    /// secret, so a stored digest says nothing about a key without the secret.
    pub fn app_key_mac(&self, key: &[u8]) -> [u8; 32] {
        let tag = hmac::sign(&self.app_keys, key);
        let mut out = [0u8; 32];
        out.copy_from_slice(tag.as_ref());
        out
    }

    /// `id` under the cluster's keyed hash (HMAC-SHA-256, truncated to 128 bits), so an id a
    /// client sent (a TLS session id) is never a Redis key in the clear.
    pub fn keyed_id(&self, id: &[u8]) -> [u8; 16] {
        let tag = hmac::sign(&self.ids, id);
        let mut out = [0u8; 16];
        out.copy_from_slice(&tag.as_ref()[..16]);
        out
    }
}
