//! TLS sessions stored by one node and fetched by another through a real 3-master Redis Cluster:
//! each session's key carries its own hash tag, so 10,000 sessions spread over every master.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use gatehouse_cluster::{Cluster, RedisStats};
use gatehouse_redis::{ClientOptions, Deployment};
use gatehouse_testkit::RedisCluster;
use gatehouse_tls::cluster::{fetch_session, store_session, Fetched};
use std::sync::Arc;
use std::time::Duration;

const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef-sessions";
const SESSIONS: usize = 10_000;

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
    rt.block_on(async {
        for i in 0..SESSIONS {
            store_session(
                &a,
                format!("session-{i}").into_bytes(),
                format!("state {i}").as_bytes(),
                Duration::from_secs(300),
            );
        }
    });
    // The stores run on the runtime while the test counts keys beside it.
    let spread = rt.block_on(async {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let r = redis.clone();
            let spread: Vec<u64> = tokio::task::spawn_blocking(move || r.keys_per_master())
                .await
                .unwrap()
                .into_iter()
                .map(|(_, keys)| keys)
                .collect();
            if spread.iter().sum::<u64>() >= SESSIONS as u64 {
                return spread;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the sessions did not all land: {spread:?}, {} errors",
                a.stats().errors.load(std::sync::atomic::Ordering::Relaxed)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
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
