//! The TLS state the nodes of a cluster share through its Redis ([`Cluster`]): sessions and the
//! ticket key ring, sealed with the cluster's per-purpose keys.
//!
//! Redis is never waited on inside rustls: sessions are fetched before rustls runs, within the
//! command timeout, and written after the handshake in a task of their own. When Redis is away,
//! nodes go on with what they hold.

use crate::stats::TlsStats;
use crate::ticket::{KeyMaterial, Ticketer, NAME_LEN};
use gatehouse_cluster::{Cluster, Purpose};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a rotation lock is held at most.
const ROTATION_LOCK_MS: u64 = 10_000;

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

fn session_key(cluster: &Cluster, id: &[u8]) -> String {
    cluster.key(&format!("tls:sess:{{{}}}", data_encoding::HEXLOWER.encode(&cluster.keyed_id(id))))
}

/// Fetches a session stored by any node; `take` removes it (single-use TLS 1.3 tickets).
pub async fn fetch_session(cluster: &Cluster, id: &[u8], take: bool) -> Fetched {
    let key = session_key(cluster, id);
    let started = Instant::now();
    let got = if take { cluster.client().getdel(&key).await } else { cluster.client().get(&key).await };
    cluster.timed(started);
    match got {
        Ok(Some(sealed)) => cluster.open(Purpose::Sessions, id, &sealed).map_or(Fetched::Missing, Fetched::Found),
        Ok(None) => Fetched::Missing,
        Err(e) => {
            cluster.failed("fetch session", &e);
            Fetched::Unavailable
        }
    }
}

/// [`fetch_session`], asked once more after [`Cluster::late_write_wait`] if Redis
/// holds none: the session may be on its way from the node that made it. The second answer is
/// final, so a session that never was costs one wait of about two Redis round trips.
///
/// Both asks and the wait together take at most `redis.command_timeout`: a handshake never waits
/// longer than that on Redis ([`Fetched::Unavailable`] then).
pub async fn fetch_session_settled(cluster: &Cluster, id: &[u8], take: bool, stats: &TlsStats) -> Fetched {
    let both = settled(|| fetch_session(cluster, id, take), || tokio::time::sleep(cluster.late_write_wait()), stats);
    tokio::time::timeout(cluster.options().command_timeout, both).await.unwrap_or(Fetched::Unavailable)
}

/// Stores a session for the other nodes, in a task of its own on the current runtime.
pub fn store_session(cluster: &Arc<Cluster>, id: Vec<u8>, value: &[u8], ttl: Duration) {
    let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
    let Some(sealed) = cluster.seal(Purpose::Sessions, &id, value) else { return };
    let this = cluster.clone();
    rt.spawn(async move {
        if let Err(e) = put_sealed(&this, &id, &sealed, ttl).await {
            this.failed("store session", &e);
        }
    });
}

/// Stores a session for the other nodes and waits for Redis to have it (what
/// [`store_session`]'s task does, for benchmarks and tools).
pub async fn put_session(
    cluster: &Cluster,
    id: &[u8],
    value: &[u8],
    ttl: Duration,
) -> Result<(), gatehouse_redis::Error> {
    let sealed = cluster
        .seal(Purpose::Sessions, id, value)
        .ok_or_else(|| gatehouse_redis::Error::Protocol("cannot seal the session".into()))?;
    put_sealed(cluster, id, &sealed, ttl).await
}

async fn put_sealed(cluster: &Cluster, id: &[u8], sealed: &[u8], ttl: Duration) -> Result<(), gatehouse_redis::Error> {
    let key = session_key(cluster, id);
    let started = Instant::now();
    let r = cluster.client().set_px(&key, sealed, ttl.as_millis().max(1) as u64).await;
    cluster.timed(started);
    r
}

async fn read_ring(cluster: &Cluster) -> Result<Vec<KeyMaterial>, gatehouse_redis::Error> {
    let started = Instant::now();
    let got = cluster.client().get(cluster.key("tls:{tickets}:ring")).await;
    cluster.timed(started);
    let Some(sealed) = got? else { return Ok(Vec::new()) };
    let Some(plain) = cluster.open(Purpose::Tickets, b"ticket keys", &sealed) else {
        tracing::error!("the ticket keys in Redis do not open with this node's cluster secret");
        return Ok(Vec::new());
    };
    Ok(plain.chunks(NAME_LEN + 32 + 8).filter_map(KeyMaterial::from_bytes).collect())
}

/// One round of ticket-key sharing: read the ring; if its newest key is older than `rotation`
/// (or there is none), rotate it under a lock; return the ring, newest first.
async fn ticket_round(
    cluster: &Cluster,
    now: u64,
    rotation: Duration,
    window: Duration,
) -> Result<Vec<KeyMaterial>, gatehouse_redis::Error> {
    let ring = read_ring(cluster).await?;
    let stale = ring.first().is_none_or(|k| now.saturating_sub(k.created) >= rotation.as_secs());
    if !stale {
        return Ok(ring);
    }
    let lock = cluster.key("tls:{tickets}:lock");
    if !cluster.client().set_nx_px(&lock, b"1", ROTATION_LOCK_MS).await? {
        // Another node is rotating; its ring is read next round.
        return Ok(ring);
    }
    let ring = read_ring(cluster).await?;
    let still_stale = ring.first().is_none_or(|k| now.saturating_sub(k.created) >= rotation.as_secs());
    let result = if still_stale {
        match KeyMaterial::generate(now) {
            Some(fresh) => {
                let mut next = vec![fresh];
                next.extend(ring.into_iter().filter(|k| now.saturating_sub(k.created) < window.as_secs()));
                let plain: Vec<u8> = next.iter().flat_map(KeyMaterial::to_bytes).collect();
                if let Some(sealed) = cluster.seal(Purpose::Tickets, b"ticket keys", &plain) {
                    cluster
                        .client()
                        .set_px(cluster.key("tls:{tickets}:ring"), &sealed, window.as_millis() as u64)
                        .await?;
                    tracing::info!(keys = next.len(), "rotated the cluster's ticket key");
                }
                Ok(next)
            }
            None => Ok(ring),
        }
    } else {
        Ok(ring)
    };
    let _ = cluster.client().del(&[lock.as_str()]).await;
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
    cluster: Arc<Cluster>,
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
        let mut round = ticket_round(&cluster, now, rotation, window).await;
        // An empty ring means another node holds the rotation lock: its ring is moments away.
        for _ in 0..40 {
            if !matches!(&round, Ok(ring) if ring.is_empty()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            round = ticket_round(&cluster, now, rotation, window).await;
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
                cluster.failed("ticket keys", &e);
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
