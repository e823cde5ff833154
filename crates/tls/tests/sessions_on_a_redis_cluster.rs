//! TLS sessions stored by one node and fetched by another through a real 3-master Redis Cluster:
//! each session's key carries its own hash tag, so 10,000 sessions spread over every master.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use gatehouse_cluster::{Cluster, RedisStats};
use gatehouse_redis::{ClientOptions, Deployment};
use gatehouse_testkit::RedisCluster;
use gatehouse_tls::cluster::{fetch_session, store_session, Fetched};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef-sessions";
const SESSIONS: usize = 10_000;
const WAVE: usize = 500;

fn node(seeds: Vec<String>) -> Arc<Cluster> {
    let options = ClientOptions { deployment: Deployment::Cluster { nodes: seeds }, ..ClientOptions::default() };
    Cluster::new(options, "gatehouse", SECRET, Arc::new(RedisStats::default())).unwrap()
}

#[test]
fn ten_thousand_sessions_spread_over_every_master() {
    let redis = Arc::new(RedisCluster::start(3, 1));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (a, b) = rt.block_on(async {
        let (a, b) = (node(redis.seeds(1)), node(redis.seeds(3)));
        for n in [&a, &b] {
            n.connected().await.unwrap();
        }
        (a, b)
    });
    // Stores go out as handshakes make them, fire-and-forget, in waves of at most WAVE in flight
    // (a burst of all 10,000 at once only measures how fast a slow machine drains its queue within
    // the command timeout).
    rt.block_on(async {
        let stats = a.stats();
        let base = stats.commands.load(Relaxed);
        for wave in (0..SESSIONS).step_by(WAVE) {
            for i in wave..(wave + WAVE).min(SESSIONS) {
                store_session(
                    &a,
                    format!("session-{i}").into_bytes(),
                    format!("state {i}").as_bytes(),
                    Duration::from_secs(300),
                );
            }
            let done = base + (wave + WAVE).min(SESSIONS) as u64;
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            while stats.commands.load(Relaxed) < done {
                assert!(tokio::time::Instant::now() < deadline, "the stores up to {done} did not finish");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        assert_eq!(stats.errors.load(Relaxed), 0, "every store succeeds");
    });
    let spread: Vec<u64> = redis.keys_per_master().into_iter().map(|(_, keys)| keys).collect();
    assert_eq!(spread.iter().sum::<u64>(), SESSIONS as u64, "{spread:?}");
    eprintln!("{SESSIONS} sessions per master: {spread:?}");
    assert_eq!(spread.len(), 3);
    assert!(spread.iter().all(|&k| k >= SESSIONS as u64 / 4), "{spread:?}");

    // Node B, seeded differently, finds node A's sessions; a single-use one only once.
    rt.block_on(async {
        for i in (0..SESSIONS).step_by(997) {
            let id = format!("session-{i}");
            match fetch_session(&b, id.as_bytes(), false).await {
                Fetched::Found(state) => assert_eq!(state, format!("state {i}").into_bytes()),
                other => panic!("{id}: {other:?}"),
            }
        }
        assert!(matches!(fetch_session(&b, b"session-7", true).await, Fetched::Found(_)));
        assert!(matches!(fetch_session(&a, b"session-7", true).await, Fetched::Missing));
    });
}
