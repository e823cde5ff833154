//! Certificates in the cluster's Redis, shared by every node.
//!
//! ```text
//! {prefix}:certs:bundle:<id>   sealed PEM (chain and key), id = first 16 bytes of its SHA-256, hex
//! {prefix}:certs:name:<key>    hash: ecdsa → id, rsa → id   (key = name or *.parent)
//! {prefix}:certs:ids           set of bundle ids
//! {prefix}:certs:changed       channel: index keys whose bundles changed, one per line
//! ```
//! Nodes look a name up when a handshake first needs it and cache the answer; a message on the
//! channel drops the cached keys it names, and a reconnect of the subscription drops them all.

use crate::bundle::{self, Bundle, BundleError, Facts, KeyKind};
use aws_lc_rs::digest::{digest, SHA256};
use gatehouse_cluster::{Cluster, Purpose};
use std::sync::Arc;
use std::time::Instant;

/// The Redis certificate store.
#[derive(Debug, Clone)]
pub struct RedisStore {
    cluster: Arc<Cluster>,
}

fn kind_field(kind: KeyKind) -> &'static str {
    match kind {
        KeyKind::Ecdsa => "ecdsa",
        KeyKind::Rsa | KeyKind::Other => "rsa",
    }
}

/// Why the Redis certificate store could not do what was asked.
#[derive(Debug)]
#[non_exhaustive]
pub enum RedisStoreError {
    /// Redis could not be asked, or refused.
    Redis(gatehouse_redis::Error),
    /// A stored bundle does not open with this node's cluster secret.
    Sealed {
        /// The bundle's id.
        id: String,
    },
    /// A bundle was refused on import, or a stored one no longer reads as a bundle.
    Bundle(BundleError),
    /// A bundle could not be sealed for storing.
    CannotSeal,
    /// The task that parses loaded bundles off the event loop did not finish.
    Parse(tokio::task::JoinError),
}

impl std::fmt::Display for RedisStoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RedisStoreError::Redis(e) => write!(f, "redis: {e}"),
            RedisStoreError::Sealed { id } => write!(f, "bundle {id} does not open with this node's cluster secret"),
            RedisStoreError::Bundle(e) => e.fmt(f),
            RedisStoreError::CannotSeal => f.write_str("cannot seal the bundle"),
            RedisStoreError::Parse(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for RedisStoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RedisStoreError::Redis(e) => Some(e),
            RedisStoreError::Bundle(e) => Some(e),
            RedisStoreError::Parse(e) => Some(e),
            RedisStoreError::Sealed { .. } | RedisStoreError::CannotSeal => None,
        }
    }
}

impl RedisStore {
    /// A store in `cluster`'s Redis.
    pub fn new(cluster: Arc<Cluster>) -> Self {
        RedisStore { cluster }
    }

    /// The channel announcing changes.
    pub fn channel(&self) -> String {
        self.cluster.key("certs:changed")
    }

    /// The cluster.
    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    fn bundle_key(&self, id: &str) -> String {
        self.cluster.key(&format!("certs:bundle:{{{id}}}"))
    }

    fn name_key(&self, key: &str) -> String {
        self.cluster.key(&format!("certs:name:{{{key}}}"))
    }

    /// The PEM of bundle `id`, opened.
    async fn pem(&self, id: &str) -> Result<Option<Vec<u8>>, RedisStoreError> {
        let started = Instant::now();
        let sealed = self.cluster.client().get(self.bundle_key(id)).await;
        self.cluster.timed(started);
        let sealed = sealed.map_err(|e| {
            self.cluster.failed("load certificate", &e);
            RedisStoreError::Redis(e)
        })?;
        let Some(sealed) = sealed else { return Ok(None) };
        match self.cluster.open(Purpose::Certificates, id.as_bytes(), &sealed) {
            Some(pem) => Ok(Some(pem)),
            None => Err(RedisStoreError::Sealed { id: id.into() }),
        }
    }

    /// Bundle ids serving the index key `key` (`name` or `*.parent`).
    async fn ids_for(&self, key: &str) -> Result<Vec<(String, String)>, RedisStoreError> {
        let started = Instant::now();
        let fields = self.cluster.client().hgetall(self.name_key(key)).await;
        self.cluster.timed(started);
        let fields = fields.map_err(|e| {
            self.cluster.failed("look up certificate", &e);
            RedisStoreError::Redis(e)
        })?;
        Ok(fields
            .into_iter()
            .map(|(k, v)| (String::from_utf8_lossy(&k).into_owned(), String::from_utf8_lossy(&v).into_owned()))
            .collect())
    }

    /// Loads and checks the bundles for an index key (none when Redis holds none); `Err` when
    /// Redis cannot be asked.
    pub async fn load(&self, key: &str, now: i64) -> Result<Vec<Result<Arc<Bundle>, BundleError>>, RedisStoreError> {
        let ids = self.ids_for(key).await?;
        let mut pems = Vec::new();
        for (_, id) in ids {
            if let Some(pem) = self.pem(&id).await? {
                pems.push((id, pem));
            }
        }
        // Parsing keys is CPU work: off the worker's event loop.
        tokio::task::spawn_blocking(move || {
            pems.into_iter()
                .map(|(id, pem)| {
                    bundle::parse(&pem, None, now).map(|(b, _)| Arc::new(b)).map_err(|e| e.at(format!("bundle {id}")))
                })
                .collect()
        })
        .await
        .map_err(RedisStoreError::Parse)
    }

    /// Checks and stores a bundle; it replaces, for each of its names, the bundle of the same key
    /// kind. Bundles left serving no name are deleted. Returns the bundle's facts.
    pub async fn import(&self, pem: &[u8], now: i64) -> Result<(Facts, Vec<String>), RedisStoreError> {
        let (b, warnings) = bundle::parse(pem, None, now).map_err(RedisStoreError::Bundle)?;
        let id = data_encoding::HEXLOWER.encode(&digest(&SHA256, pem).as_ref()[..16]);
        let sealed = self.cluster.seal(Purpose::Certificates, id.as_bytes(), pem).ok_or(RedisStoreError::CannotSeal)?;
        let client = self.cluster.client();
        let e = RedisStoreError::Redis;
        client.set(self.bundle_key(&id), &sealed).await.map_err(e)?;
        client.sadd(self.cluster.key("certs:ids"), &[id.as_str()]).await.map_err(e)?;
        let field = kind_field(b.facts.key);
        let mut replaced = Vec::new();
        for name in &b.facts.names {
            if let Some(old) = client.hget(self.name_key(name), field).await.map_err(e)? {
                let old = String::from_utf8_lossy(&old).into_owned();
                if old != id {
                    replaced.push(old);
                }
            }
            client.hset(self.name_key(name), &[(field, id.as_str())]).await.map_err(e)?;
        }
        for old in replaced {
            self.collect_if_unused(&old).await?;
        }
        self.announce(&b.facts.names).await;
        Ok((b.facts, warnings))
    }

    /// Deletes bundle `id` when no name points at it any more.
    async fn collect_if_unused(&self, id: &str) -> Result<(), RedisStoreError> {
        let Some(pem) = self.pem(id).await? else { return Ok(()) };
        let facts = facts_of(&pem)?;
        let client = self.cluster.client();
        for name in &facts.names {
            let fields = self.ids_for(name).await?;
            if fields.iter().any(|(_, v)| v == id) {
                return Ok(());
            }
        }
        client.del(&[self.bundle_key(id)]).await.map_err(RedisStoreError::Redis)?;
        client.srem(self.cluster.key("certs:ids"), &[id]).await.map_err(RedisStoreError::Redis)?;
        Ok(())
    }

    /// Removes every bundle serving the index key `key`, from all of their names. Returns the
    /// removed bundles' facts.
    pub async fn remove(&self, key: &str) -> Result<Vec<Facts>, RedisStoreError> {
        let client = self.cluster.client();
        let mut removed = Vec::new();
        for (_, id) in self.ids_for(key).await? {
            let Some(pem) = self.pem(&id).await? else { continue };
            let facts = facts_of(&pem)?;
            for name in &facts.names {
                for (field, v) in self.ids_for(name).await? {
                    if v == id {
                        client.hdel(self.name_key(name), &[field.as_str()]).await.map_err(RedisStoreError::Redis)?;
                    }
                }
            }
            client.del(&[self.bundle_key(&id)]).await.map_err(RedisStoreError::Redis)?;
            client.srem(self.cluster.key("certs:ids"), &[id.as_str()]).await.map_err(RedisStoreError::Redis)?;
            self.announce(&facts.names).await;
            removed.push(facts);
        }
        Ok(removed)
    }

    /// Every stored bundle's PEM (chain and key, opened), by id: what a copy to another store
    /// imports.
    pub async fn export(&self) -> Result<Vec<(String, Vec<u8>)>, RedisStoreError> {
        let ids =
            self.cluster.client().smembers(self.cluster.key("certs:ids")).await.map_err(RedisStoreError::Redis)?;
        let mut out = Vec::new();
        for id in ids {
            let id = String::from_utf8_lossy(&id).into_owned();
            if let Some(pem) = self.pem(&id).await? {
                out.push((id, pem));
            }
        }
        out.sort();
        Ok(out)
    }

    /// Every stored bundle's facts, by id.
    pub async fn list(&self) -> Result<Vec<(String, Facts)>, RedisStoreError> {
        let mut out = Vec::new();
        for (id, pem) in self.export().await? {
            out.push((id, facts_of(&pem)?));
        }
        out.sort_by(|a, b| a.1.names.cmp(&b.1.names));
        Ok(out)
    }

    async fn announce(&self, names: &[String]) {
        if let Err(e) = self.cluster.client().publish(self.channel(), names.join("\n")).await {
            self.cluster.failed("announce certificate change", &e);
        }
    }
}

/// Facts of a stored bundle, key kind included.
fn facts_of(pem: &[u8]) -> Result<Facts, RedisStoreError> {
    bundle::parse(pem, None, 0).map(|(b, _)| b.facts).map_err(RedisStoreError::Bundle)
}
