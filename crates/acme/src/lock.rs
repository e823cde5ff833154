//! One order per name at a time, across the cluster: a lock per name in Redis
//! (`{prefix}:acme:lock:{NAME}`, `SET NX PX` with a random token), kept alive while the order runs
//! and released by compare-and-delete, so a node never frees a lock another node holds. A node
//! that dies mid-order stops keeping its lock alive; it expires and another node takes the name
//! over. Without Redis the same calls take a lock in this process.

use crate::error::AcmeError;
use gatehouse_cluster::Cluster;
use gatehouse_redis::Script;
use std::collections::HashSet;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;

/// How long a lock lives unless kept alive.
pub(crate) const LOCK_TTL: Duration = Duration::from_secs(30);

/// How often a held lock is kept alive.
const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// How often a taken lock is tried again by [`Locks::wait`].
const RETRY: Duration = Duration::from_millis(500);

static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end")
});

static EXTEND: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end",
    )
});

/// Where locks are taken.
#[derive(Debug, Clone)]
pub enum Locks {
    /// In this process.
    Local(Arc<Mutex<HashSet<String>>>),
    /// In the cluster's Redis.
    Redis(Arc<Cluster>),
}

/// A held lock; [`Guard::release`] frees it (dropping it frees a local lock, and leaves a Redis
/// lock to expire).
#[derive(Debug)]
pub struct Guard {
    name: String,
    token: String,
    locks: Locks,
    keep_alive: Option<JoinHandle<()>>,
}

fn token() -> String {
    let mut bytes = [0u8; 16];
    if aws_lc_rs::rand::fill(&mut bytes).is_err() {
        // Unique enough for a lock: the time and the process.
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        bytes[..8].copy_from_slice(&(t.as_nanos() as u64).to_le_bytes());
        bytes[8..12].copy_from_slice(&std::process::id().to_le_bytes());
    }
    data_encoding::HEXLOWER.encode(&bytes)
}

impl Locks {
    /// Locks in `cluster`'s Redis, or in this process without one.
    pub fn new(cluster: Option<Arc<Cluster>>) -> Locks {
        match cluster {
            Some(c) => Locks::Redis(c),
            None => Locks::Local(Arc::default()),
        }
    }

    /// The cluster's Redis, when locks are taken there.
    pub fn cluster(&self) -> Option<&Arc<Cluster>> {
        match self {
            Locks::Redis(c) => Some(c),
            Locks::Local(_) => None,
        }
    }

    fn key(cluster: &Cluster, name: &str) -> String {
        cluster.key(&format!("acme:lock:{{{name}}}"))
    }

    /// Takes the lock of `name` if it is free.
    pub async fn try_take(&self, name: &str) -> Result<Option<Guard>, AcmeError> {
        let token = token();
        let keep_alive = match self {
            Locks::Local(held) => {
                if !held.lock().unwrap_or_else(|p| p.into_inner()).insert(name.to_string()) {
                    return Ok(None);
                }
                None
            }
            Locks::Redis(cluster) => {
                let key = Self::key(cluster, name);
                let ttl = LOCK_TTL.as_millis() as u64;
                if !cluster.client().set_nx_px(&key, &token, ttl).await.map_err(AcmeError::Redis)? {
                    return Ok(None);
                }
                let (cluster, token) = (cluster.clone(), token.clone());
                Some(tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(KEEP_ALIVE).await;
                        let ttl = ttl.to_string();
                        match cluster.client().eval(&EXTEND, &[&key], &[token.as_str(), ttl.as_str()]).await {
                            Ok(v) if v.as_int() == Some(1) => {}
                            Ok(_) => {
                                tracing::warn!(lock = %key, "the ACME order lock was lost (expired while Redis was away?)");
                                return;
                            }
                            Err(e) => cluster.failed("keep an ACME order lock", &e),
                        }
                    }
                }))
            }
        };
        Ok(Some(Guard { name: name.to_string(), token, locks: self.clone(), keep_alive }))
    }

    /// Takes the lock of `name`, waiting while another holder has it (at most twice its life,
    /// after which a holder that stopped keeping it alive has lost it).
    pub async fn wait(&self, name: &str) -> Result<Guard, AcmeError> {
        let deadline = tokio::time::Instant::now() + LOCK_TTL * 2;
        loop {
            if let Some(g) = self.try_take(name).await? {
                return Ok(g);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(AcmeError::Local(format!("the lock of {name} stayed taken")));
            }
            tokio::time::sleep(RETRY).await;
        }
    }
}

impl Guard {
    /// Frees the lock, if this holder still has it.
    pub async fn release(mut self) {
        if let Some(k) = self.keep_alive.take() {
            k.abort();
        }
        if let Locks::Redis(cluster) = &self.locks {
            let key = Locks::key(cluster, &self.name);
            if let Err(e) = cluster.client().eval(&RELEASE, &[&key], &[&self.token]).await {
                // It expires by itself.
                cluster.failed("release an ACME order lock", &e);
            }
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(k) = self.keep_alive.take() {
            k.abort();
        }
        if let Locks::Local(held) = &self.locks {
            held.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.name);
        }
    }
}
