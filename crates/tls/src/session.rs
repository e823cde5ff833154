//! The server session cache: TLS 1.2 session ids and TLS 1.3 stateful tickets (single use).
//!
//! rustls asks the cache synchronously in the middle of a handshake, so the cache answers from
//! memory only. Entries live `ttl`; when the cache is full the oldest tenth is dropped.

use gatehouse_cluster::Cluster;
use rustls::server::StoresServerSessions;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

struct Entry {
    value: Vec<u8>,
    stored: Instant,
}

/// A bounded session cache in memory, optionally shared with the cluster: every session stored
/// is also written to Redis (in the background), and the handshake fetches a session it does not
/// hold from Redis before rustls asks for it.
pub struct SessionCache {
    map: Mutex<HashMap<Vec<u8>, Entry>>,
    capacity: usize,
    ttl: Duration,
    remote: Option<Arc<Cluster>>,
}

impl std::fmt::Debug for SessionCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionCache").field("capacity", &self.capacity).field("ttl", &self.ttl).finish()
    }
}

impl SessionCache {
    /// A cache of at most `capacity` sessions, each kept `ttl`.
    pub fn new(capacity: usize, ttl: Duration) -> Self {
        SessionCache { map: Mutex::new(HashMap::new()), capacity: capacity.max(1), ttl, remote: None }
    }

    /// A cache that also shares its sessions through `cluster`.
    pub fn shared(capacity: usize, ttl: Duration, cluster: Arc<Cluster>) -> Self {
        SessionCache { remote: Some(cluster), ..SessionCache::new(capacity, ttl) }
    }

    /// The cluster sessions are shared with.
    pub fn remote(&self) -> Option<&Arc<Cluster>> {
        self.remote.as_ref()
    }

    /// Whether a live session is held under `key`.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.lock().get(key).is_some_and(|e| e.stored.elapsed() < self.ttl)
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Vec<u8>, Entry>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stores `value` under `key`, as if rustls had (used when a session arrives from the cluster).
    pub fn insert(&self, key: Vec<u8>, value: Vec<u8>) {
        let mut map = self.lock();
        if map.len() >= self.capacity && !map.contains_key(&key) {
            let mut ages: Vec<(Instant, Vec<u8>)> = map.iter().map(|(k, e)| (e.stored, k.clone())).collect();
            ages.sort_unstable_by_key(|(t, _)| *t);
            for (_, k) in ages.into_iter().take(self.capacity / 10 + 1) {
                map.remove(&k);
            }
        }
        map.insert(key, Entry { value, stored: Instant::now() });
    }

    /// Number of sessions held (expired ones included until they are dropped).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no session is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How long entries live.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }
}

impl StoresServerSessions for SessionCache {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        if let Some(cluster) = &self.remote {
            crate::cluster::store_session(cluster, key.clone(), &value, self.ttl);
        }
        self.insert(key, value);
        true
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        let map = self.lock();
        let e = map.get(key)?;
        (e.stored.elapsed() < self.ttl).then(|| e.value.clone())
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        let e = self.lock().remove(key)?;
        (e.stored.elapsed() < self.ttl).then_some(e.value)
    }

    fn can_cache(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_keeps_take_removes_and_capacity_holds() {
        let c = SessionCache::new(10, Duration::from_secs(60));
        assert!(c.put(b"a".to_vec(), b"1".to_vec()));
        assert_eq!(c.get(b"a"), Some(b"1".to_vec()));
        assert_eq!(c.get(b"a"), Some(b"1".to_vec()));
        assert_eq!(c.take(b"a"), Some(b"1".to_vec()));
        assert_eq!(c.take(b"a"), None);
        for i in 0..100u32 {
            c.put(i.to_be_bytes().to_vec(), vec![1]);
        }
        assert!(c.len() <= 10);
        // The newest survives eviction.
        assert!(c.get(&99u32.to_be_bytes()).is_some());
    }

    #[test]
    fn expired_entries_are_not_served() {
        let c = SessionCache::new(10, Duration::ZERO);
        c.put(b"a".to_vec(), b"1".to_vec());
        assert_eq!(c.get(b"a"), None);
        assert_eq!(c.take(b"a"), None);
    }
}
