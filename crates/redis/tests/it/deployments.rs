//! The deployments operators run, each real: a Redis Cluster of three masters with a replica each,
//! a Sentinel group, and a TLS-only Redis with client certificates and an ACL user.

use crate::support::{eventually, next_event};
use gatehouse_redis::{Client, ClientOptions, Deployment, Error, Event, Script, Tls};
use gatehouse_testkit::{RedisCluster, RedisSentinels, RedisServer, RedisTlsFiles, TempDir, SENTINEL_MASTER};
use std::time::{Duration, Instant};

fn options(deployment: Deployment) -> ClientOptions {
    ClientOptions {
        deployment,
        connect_timeout: Duration::from_millis(500),
        command_timeout: Duration::from_millis(500),
        reconnect_min: Duration::from_millis(20),
        reconnect_max: Duration::from_millis(200),
        health_check_interval: Duration::from_millis(200),
        ..ClientOptions::default()
    }
}

#[tokio::test]
async fn a_cluster_reached_through_a_seed_that_owns_no_slot() {
    let cluster = tokio::task::spawn_blocking(|| RedisCluster::start(3, 1)).await.unwrap();
    // A replica owns no slot: every command is redirected from it.
    let replica = cluster.nodes.iter().find(|n| n.cli(&["ROLE"]).starts_with("slave")).expect("a replica").addr();
    let client = Client::connect(options(Deployment::Cluster { nodes: vec![replica.clone()] })).await.unwrap();

    for i in 0..300 {
        client.set_px(format!("t:{{k{i}}}"), i.to_string(), 60_000).await.unwrap();
    }
    for i in (0..300).step_by(37) {
        assert_eq!(client.get(format!("t:{{k{i}}}")).await.unwrap().as_deref(), Some(i.to_string().as_bytes()));
    }
    let spread = tokio::task::spawn_blocking(move || {
        let spread = cluster.keys_per_master();
        (cluster, spread)
    });
    let (cluster, spread) = spread.await.unwrap();
    assert_eq!(spread.len(), 3, "{spread:?}");
    assert!(spread.iter().all(|&(_, keys)| keys >= 50), "keys spread over every master: {spread:?}");

    // A script on one slot's keys, sent by EVALSHA to the slot's master (EVAL the first time).
    let incr = Script::new("return redis.call('INCRBY', KEYS[1], ARGV[1]) + redis.call('INCRBY', KEYS[2], ARGV[1])");
    for _ in 0..3 {
        client.eval(&incr, &["s:{a}:x", "s:{a}:y"], &["2"]).await.unwrap();
    }
    assert_eq!(client.eval(&incr, &["s:{b}:x", "s:{b}:y"], &["1"]).await.unwrap().as_int(), Some(2));
    match client.eval(&incr, &["s:{a}:x", "s:{b}:y"], &["1"]).await {
        Err(Error::Server(msg)) => assert!(msg.contains("CROSSSLOT") || msg.contains("slot"), "{msg}"),
        other => panic!("a script over two slots must fail: {other:?}"),
    }

    // Classic pub/sub: a subscription on one node hears what is published through another.
    let seed = cluster.nodes[0].addr();
    let mut sub = Client::subscribe(options(Deployment::Cluster { nodes: vec![seed] }), &["news"]).unwrap();
    assert_eq!(next_event(&mut sub).await, Event::Subscribed);
    client.publish("news", "hello").await.unwrap();
    match next_event(&mut sub).await {
        Event::Message(m) => assert_eq!(&m.payload[..], b"hello"),
        other => panic!("expected the message, got {other:?}"),
    }
    drop(cluster);
}

/// A slot half-moved from one master to another, as `redis-cli --cluster reshard` leaves it
/// between two `MIGRATE`s: the keys that moved are reached through `ASK` (scripts too), the ones
/// that did not stay on the old master, a new key goes to the new one; once the slot has moved,
/// `MOVED` takes every command there.
#[tokio::test]
async fn a_slot_being_migrated_is_followed_by_ask_then_moved() {
    let cluster = tokio::task::spawn_blocking(|| RedisCluster::start(3, 0)).await.unwrap();
    let client = Client::connect(options(Deployment::Cluster { nodes: cluster.seeds(1) })).await.unwrap();
    let key = |i: usize| format!("m:{{moving}}:{i}");
    for i in 0..100 {
        client.set(key(i), i.to_string()).await.unwrap();
    }
    let incr = Script::new("return redis.call('INCRBY', KEYS[1], ARGV[1])");
    // The script is known to the old master only.
    client.eval(&incr, &["m:{moving}:counter"], &["1"]).await.unwrap();
    let (cluster, slot, from, to, moved) = tokio::task::spawn_blocking(move || {
        let slot = cluster.slot_of("m:{moving}");
        let from = cluster.master_of("m:{moving}");
        let to = (0..cluster.nodes.len()).find(|&i| i != from).expect("another master");
        let moved = cluster.begin_migration(slot, from, to, 60);
        (cluster, slot, from, to, moved)
    })
    .await
    .unwrap();
    assert_eq!(moved, 60);
    let on = |cluster: &RedisCluster, node: usize| {
        cluster.nodes[node].cli(&["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()]).trim().to_string()
    };
    assert_eq!((on(&cluster, from), on(&cluster, to)), ("41".into(), "60".into()), "the slot is split");

    for i in 0..100 {
        let value = client.get(key(i)).await.unwrap_or_else(|e| panic!("GET {} mid-migration: {e}", key(i)));
        assert_eq!(value.as_deref(), Some(i.to_string().as_bytes()));
    }
    for i in 0..100 {
        client.set(key(i), format!("{i}b")).await.unwrap_or_else(|e| panic!("SET {} mid-migration: {e}", key(i)));
    }
    client.set("m:{moving}:new", "fresh").await.unwrap();
    let mut counter = None;
    for _ in 0..5 {
        counter = client.eval(&incr, &["m:{moving}:counter"], &["1"]).await.unwrap().as_int();
    }
    assert_eq!(counter, Some(6), "the script ran on the counter wherever it was");
    // The counter (one of the 41 left) moved with its script's first ASK-ed write or stayed; the
    // new key went to the new master either way.
    assert_eq!(on(&cluster, from).parse::<u32>().unwrap() + on(&cluster, to).parse::<u32>().unwrap(), 102);
    assert!(on(&cluster, to).parse::<u32>().unwrap() >= 61, "the new key went to the new master");

    let cluster = tokio::task::spawn_blocking(move || {
        cluster.finish_migration(slot, from, to);
        cluster
    })
    .await
    .unwrap();
    assert_eq!(on(&cluster, from), "0");
    for i in 0..100 {
        assert_eq!(client.get(key(i)).await.unwrap().as_deref(), Some(format!("{i}b").as_bytes()));
    }
    assert_eq!(client.eval(&incr, &["m:{moving}:counter"], &["1"]).await.unwrap().as_int(), Some(7));
    assert_eq!(cluster.master_of("m:{moving}"), to);
}

/// A fourth master joins a loaded Cluster and `redis-cli --cluster rebalance` moves a quarter of
/// the slots (and their keys) to it while four tasks write, read and run a script on 2,000 keys:
/// no command fails, and the new master ends up serving its share.
#[tokio::test]
async fn a_master_added_and_rebalanced_under_load() {
    let cluster = tokio::task::spawn_blocking(|| RedisCluster::start(3, 0)).await.unwrap();
    let client = Client::connect(options(Deployment::Cluster { nodes: cluster.seeds(1) })).await.unwrap();
    const KEYS: usize = 2000;
    for i in 0..KEYS {
        client.set(format!("r:{{{i}}}"), "0").await.unwrap();
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let incr = Script::new("return redis.call('INCRBY', KEYS[1], ARGV[1])");
    let mut tasks = Vec::new();
    for t in 0..4usize {
        let (client, stop, incr) = (client.clone(), stop.clone(), incr.clone());
        tasks.push(tokio::spawn(async move {
            let (mut ok, mut evals, mut failed) = (0u64, 0u64, Vec::new());
            // Bounded: stops when the rebalance is done, or after 400,000 commands.
            let mut i = t;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) && ok + (failed.len() as u64) < 400_000 {
                let key = format!("r:{{{}}}", i % KEYS);
                let result = match i % 3 {
                    0 => client.eval(&incr, &[key.as_str()], &["1"]).await.map(drop),
                    1 => client.get(&key).await.map(drop),
                    _ => client.set_px(format!("r:{{{}}}:side", i % KEYS), "x", 60_000).await,
                };
                match result {
                    Ok(()) => {
                        ok += 1;
                        evals += u64::from(i % 3 == 0);
                    }
                    Err(e) => failed.push(format!("{key}: {e}")),
                }
                i += 7;
            }
            (ok, evals, failed)
        }));
    }
    let (cluster, added, out) = tokio::task::spawn_blocking(move || {
        let mut cluster = cluster;
        let added = cluster.add_master();
        let out = cluster.rebalance();
        (cluster, added, out)
    })
    .await
    .unwrap();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (mut ok, mut evals, mut failed) = (0, 0, Vec::new());
    for t in tasks {
        let (o, e, f) = t.await.unwrap();
        ok += o;
        evals += e;
        failed.extend(f);
    }
    // "Moving 1366 slots from 127.0.0.1:P to 127.0.0.1:Q"
    let moved: u32 =
        out.lines().filter_map(|l| l.strip_prefix("Moving ")?.split_whitespace().next()?.parse::<u32>().ok()).sum();
    let new_keys = cluster.nodes[added].cli(&["DBSIZE"]).trim().parse::<u64>().unwrap_or(0);
    let spread = cluster.keys_per_master();
    eprintln!(
        "rebalance under load: {moved} slots moved, {ok} commands ok, {} failed; keys per master {spread:?}",
        failed.len()
    );
    assert!(moved > 0, "{out}");
    assert!(failed.is_empty(), "{} failed, first: {:?}", failed.len(), &failed[..failed.len().min(5)]);
    assert!(new_keys > 300, "the new master serves its share: {new_keys} keys");
    // Every increment landed exactly once (none lost, none applied twice by a redirection).
    let mut total = 0;
    for i in 0..KEYS {
        let v = client.get(format!("r:{{{i}}}")).await.unwrap().unwrap_or_default();
        total += std::str::from_utf8(&v).unwrap_or("0").parse::<u64>().unwrap_or(0);
    }
    assert_eq!(total, evals, "increments counted against scripts that returned");
}

#[tokio::test]
async fn a_cluster_master_killed_fails_its_slots_fast_until_a_replica_takes_over() {
    let mut cluster = tokio::task::spawn_blocking(|| RedisCluster::start(3, 1)).await.unwrap();
    let client = Client::connect(options(Deployment::Cluster { nodes: cluster.seeds(3) })).await.unwrap();
    let key = "f:{victim}";
    client.set(key, "1").await.unwrap();
    let (mut cluster, owner) = tokio::task::spawn_blocking(move || {
        let owner = cluster.master_of(key);
        cluster.kill(owner);
        (cluster, owner)
    })
    .await
    .unwrap();
    // Until the failover, commands on the dead master's slots fail within the command timeout;
    // none hangs.
    let start = Instant::now();
    let _ = client.get(key).await;
    assert!(start.elapsed() < Duration::from_secs(2), "took {:?}", start.elapsed());
    cluster = tokio::task::spawn_blocking(move || {
        cluster.wait_failover();
        cluster
    })
    .await
    .unwrap();
    let promoted = Instant::now();
    eventually(Duration::from_secs(5), "commands on the failed slots work again", || async {
        client.set(key, "2").await.is_ok()
    })
    .await;
    eprintln!("cluster: back {:?} after the failover completed", promoted.elapsed());
    assert!(!cluster.nodes[owner].is_running());
}

/// Writes, kills the group's master, and checks that writes reach the promoted replica within
/// 5 s, that the replica had the data, and that the subscription hears the new master.
async fn followed_through_a_failover(mut group: RedisSentinels, opts: ClientOptions) {
    let client = Client::connect(opts.clone()).await.unwrap();
    let mut sub = Client::subscribe(opts, &["changes"]).unwrap();
    assert_eq!(next_event(&mut sub).await, Event::Subscribed);
    client.set("before", "1").await.unwrap();

    let (group_back, new_port) = tokio::task::spawn_blocking(move || {
        let port = group.fail_over();
        (group, port)
    })
    .await
    .unwrap();
    group = group_back;
    let promoted = Instant::now();
    eventually(Duration::from_secs(5), "writes reach the new master", || async {
        client.set("after", "2").await.is_ok()
    })
    .await;
    eprintln!("sentinel: back {:?} after the promotion", promoted.elapsed());
    let master = group.master().expect("the new master");
    assert_eq!(master.port(), new_port);
    assert!(master.cli(&["GET", "before"]).contains('1'), "the replica had the master's data");
    assert!(master.cli(&["GET", "after"]).contains('2'));
    assert_eq!(next_event(&mut sub).await, Event::Reconnected);
    eventually(Duration::from_secs(5), "the subscription hears the new master", || async {
        client.publish("changes", "x").await.is_ok_and(|n| n == 1)
    })
    .await;
}

#[tokio::test]
async fn a_sentinel_group_is_followed_through_a_failover() {
    let group = tokio::task::spawn_blocking(RedisSentinels::start).await.unwrap();
    let opts = options(Deployment::Sentinel { master: SENTINEL_MASTER.into(), nodes: group.nodes() });
    followed_through_a_failover(group, opts).await;
}

/// The test CA and client certificate as client options.
fn client_tls(files: &RedisTlsFiles) -> Tls {
    let read = |p: &std::path::PathBuf| std::fs::read(p).unwrap();
    Tls {
        ca: Some(read(&files.ca)),
        cert: Some(read(&files.client_cert)),
        key: Some(read(&files.client_key)),
        server_name: None,
    }
}

#[tokio::test]
async fn a_sentinel_group_over_tls_with_acl_users_is_followed_through_a_failover() {
    let dir = TempDir::new();
    let files = RedisTlsFiles::make(&dir);
    let tls = client_tls(&files);
    let group =
        tokio::task::spawn_blocking(move || RedisSentinels::start_tls(&files, "data-pw", "watch-pw")).await.unwrap();
    let nodes = group.nodes();
    let opts = |sentinel_password: &str| ClientOptions {
        tls: Some(tls.clone()),
        username: Some("gatehouse".into()),
        password: Some("data-pw".into()),
        sentinel_username: Some("watcher".into()),
        sentinel_password: Some(sentinel_password.into()),
        ..options(Deployment::Sentinel { master: SENTINEL_MASTER.into(), nodes: nodes.clone() })
    };
    // The Sentinels refuse a wrong password of their own.
    assert!(Client::connect(opts("wrong")).await.is_err(), "a wrong Sentinel password was taken");
    followed_through_a_failover(group, opts("watch-pw")).await;
}

#[tokio::test]
async fn tls_with_a_client_certificate_and_an_acl_user() {
    let dir = TempDir::new();
    let files = RedisTlsFiles::make(&dir);
    let server = RedisServer::start_tls(&files, "s3cret-acl");
    let tls = client_tls(&files);
    let with = |tls: Tls, password: &str| ClientOptions {
        tls: Some(tls),
        username: Some("gatehouse".into()),
        password: Some(password.into()),
        ..ClientOptions { connect_timeout: Duration::from_secs(2), ..ClientOptions::from_url(&server.url()).unwrap() }
    };

    let client = Client::connect(with(tls.clone(), "s3cret-acl")).await.unwrap();
    client.set("k", "v").await.unwrap();
    let mut sub = Client::subscribe(with(tls.clone(), "s3cret-acl"), &["c"]).unwrap();
    assert_eq!(next_event(&mut sub).await, Event::Subscribed);
    client.publish("c", "over tls").await.unwrap();
    assert!(matches!(next_event(&mut sub).await, Event::Message(m) if &m.payload[..] == b"over tls"));
    // The certificate names redis.test too: checked against that name instead of the address.
    let named = Tls { server_name: Some("redis.test".into()), ..tls.clone() };
    Client::connect(with(named, "s3cret-acl")).await.unwrap().ping().await.unwrap();

    // Refused: a wrong password, a name the certificate does not hold, a CA that did not sign
    // it, no client certificate.
    assert!(matches!(Client::connect(with(tls.clone(), "wrong")).await, Err(Error::Server(_))));
    for (what, bad) in [
        ("wrong name", Tls { server_name: Some("other.test".into()), ..tls.clone() }),
        ("system roots", Tls { ca: None, ..tls.clone() }),
        ("no client certificate", Tls { cert: None, key: None, ..tls.clone() }),
    ] {
        let result = Client::connect(with(bad, "s3cret-acl")).await;
        assert!(result.is_err(), "{what}: connected");
    }
}
