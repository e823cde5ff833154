//! Two gateway nodes on each Redis deployment operators run: a 3-master Redis Cluster with a
//! replica each (the nodes seeded with a replica, which owns no slot), a Sentinel group, and a
//! TLS-only Redis with client certificates and an ACL user whose password is in a file, and a
//! Sentinel group over TLS with ACL users on both the data nodes and the Sentinels. On each:
//! sessions made on node A resume on node B (TLS 1.2 by session id and by ticket, TLS 1.3 by
//! ticket), a certificate imported through one node serves on both, and a release reaches both.
//! On the Cluster, three nodes hold a cluster rate limit to ±5 % and the keys of sessions and
//! counters spread over every master. Killing the Cluster's or the Sentinels' master under load
//! fails no request and no handshake, and sharing resumes after the promotion; so does adding a
//! master to the Cluster and rebalancing the slots onto it, which fails no Redis command at all.

use crate::common::{start, targets, Traffic};
use crate::control::{admin_section, Api};
use crate::tls::{cert_cli, eventually, handshake_loop, s_client, s_client_with, Handshake, Pki};
use gatehouse_testkit::{
    metric_value, Backend, Gateway, HttpConn, Load, LoadReport, RedisCluster, RedisSentinels, RedisServer,
    RedisTlsFiles, TempDir, SENTINEL_MASTER,
};
use gatehouse_tls::issue::Algorithm;
use serde_json::Value;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// The plan's cluster-wide limit per hour (the burst is all a test of a few seconds sees).
const LIMIT: u64 = 600;

/// Cluster-scoped limits: a plan for app `shop`, one counter per client address (failing open),
/// and one per `x-user` header value.
const SERVICES: &str = "services:\n  svc: {path: /svc, upstream: u, auth: app_key}\n  ip: {path: /ip, upstream: u, rate_limits: [{limit: 100000, interval: 1h, key: client_ip, scope: cluster}]}\n  closed: {path: /closed, upstream: u, rate_limits: [{limit: 100000, interval: 1h, key: client_ip, scope: cluster, on_redis_error: closed}]}\n  users: {path: /users, upstream: u, rate_limits: [{limit: 100, interval: 24h, key: \"header:x-user\", scope: cluster, headers: true}]}\napps:\n  shop: {key: K-shop, grants: {svc: gold}}\nplans:\n  gold: {rate_limits: [{limit: 600, interval: 1h, scope: cluster}]}\n";

const REQUEST: &str = "GET / HTTP/1.1\r\nHost: shop.test\r\nConnection: close\r\n\r\n";

/// The Redis of a test, kept running for its length.
enum Redis {
    Plain(RedisServer),
    Cluster(RedisCluster),
    Sentinels(RedisSentinels),
    Tls(RedisServer, RedisTlsFiles),
    SentinelsTls(RedisSentinels, RedisTlsFiles),
}

/// `tls: {...}` with the test CA and the client certificate.
fn tls_yaml(files: &RedisTlsFiles) -> String {
    format!(
        "tls: {{ca: \"{}\", cert: \"{}\", key: \"{}\"}}",
        files.ca.display(),
        files.client_cert.display(),
        files.client_key.display()
    )
}

/// Writes a password file in `dir`; its path.
fn password_file(dir: &TempDir, name: &str, password: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("{password}\n")).expect("write the password file");
    path.display().to_string()
}

impl Redis {
    /// The body of the `redis:` section (after `secret_file`) that reaches this deployment.
    fn settings(&self, dir: &TempDir) -> String {
        let list = |nodes: Vec<String>| nodes.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", ");
        match self {
            Redis::Plain(server) => format!("url: \"{}\"", server.url()),
            Redis::Cluster(c) => {
                // A replica as the only seed: it owns no slot, so every command is redirected.
                let replica = c.nodes.iter().find(|n| n.cli(&["ROLE"]).starts_with("slave")).expect("a replica");
                format!("cluster: [\"{}\"]", replica.addr())
            }
            Redis::Sentinels(s) => format!("sentinel: {{master: {SENTINEL_MASTER}, nodes: [{}]}}", list(s.nodes())),
            Redis::Tls(server, files) => format!(
                "url: \"{}\", username: gatehouse, password_file: \"{}\", {}",
                server.url(),
                password_file(dir, "redis-password", "acl-pass-77"),
                tls_yaml(files)
            ),
            Redis::SentinelsTls(s, files) => format!(
                "sentinel: {{master: {SENTINEL_MASTER}, nodes: [{}], username: watcher, password_file: \"{}\"}}, \
                 username: gatehouse, password_file: \"{}\", {}",
                list(s.nodes()),
                password_file(dir, "sentinel-password", "watch-pass-3"),
                password_file(dir, "redis-password", "acl-pass-77"),
                tls_yaml(files)
            ),
        }
    }
}

struct Nodes {
    dir: TempDir,
    backend: Backend,
    redis_yaml: String,
    command_timeout: &'static str,
}

impl Nodes {
    /// Nodes whose Redis commands time out after 500 ms: a killed server is noticed soon.
    fn new(redis: &Redis) -> Nodes {
        Nodes::with_command_timeout(redis, "500ms")
    }

    fn with_command_timeout(redis: &Redis, command_timeout: &'static str) -> Nodes {
        let dir = TempDir::new();
        std::fs::write(dir.join("secret"), "0123456789abcdef0123456789abcdef-deployments\n").expect("write the secret");
        let mut n = Nodes { dir, backend: Backend::start("b"), redis_yaml: String::new(), command_timeout };
        n.move_to(redis);
        n
    }

    /// The same nodes (secret, state directories, backend) pointed at another Redis.
    fn move_to(&mut self, redis: &Redis) {
        self.redis_yaml = format!(
            "redis: {{secret_file: \"{}\", command_timeout: {}, {}}}\n",
            self.dir.join("secret").display(),
            self.command_timeout,
            redis.settings(&self.dir)
        );
    }

    fn config(&self, id: &str) -> String {
        format!(
            "workers: 2\n{}{}node: {{id: {id}}}\ncontrol: {{dir: \"{}\", poll_interval: 500ms}}\ntls:\n  store: {{redis: true}}\n  negative_cache_ttl: 100ms\n  tickets: cluster\n  session_cache: redis\nlisteners:\n  http: {{bind: \"127.0.0.1:0\"}}\n  https: {{bind: \"127.0.0.1:0\", tls: {{}}}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n  s: {{hosts: [\"*\"], routes: [{{path: /, upstream: u}}]}}\n{SERVICES}",
            admin_section(""),
            self.redis_yaml,
            self.dir.join(id).display(),
            targets(&[&self.backend])
        )
    }

    fn node(&self, id: &str) -> (Gateway, std::path::PathBuf) {
        let yaml = self.config(id);
        let file = self.dir.join(&format!("{id}.yaml"));
        std::fs::write(&file, &yaml).expect("write the node's configuration");
        (start(&yaml), file)
    }
}

fn port(gw: &Gateway) -> u16 {
    gw.addr("https").port()
}

fn resumes(from: u16, to: u16, sess: &Path, args: &[&str]) -> bool {
    match try_resume(from, to, sess, args) {
        Ok(reused) => reused,
        Err(made) => panic!("{}", made.out),
    }
}

/// Makes a session on `from` (saved to `sess`): whether it resumed on `to`, or the handshake on
/// `from` when that failed.
fn try_resume(from: u16, to: u16, sess: &Path, args: &[&str]) -> Result<bool, Handshake> {
    let sess = sess.to_str().unwrap_or_default();
    let mut first = vec!["-servername", "shop.test", "-sess_out", sess];
    first.extend_from_slice(args);
    let made = s_client_with(from, &first, Some(REQUEST));
    if !made.ok {
        return Err(made);
    }
    assert!(made.has("New, TLS"), "{}", made.out);
    let mut again = vec!["-servername", "shop.test", "-sess_in", sess];
    again.extend_from_slice(args);
    Ok(s_client_with(to, &again, Some(REQUEST)).has("Reused, TLS"))
}

fn applied(gw: &mut Gateway, revision: u64) {
    loop {
        let ev = gw.wait_event("applied", crate::common::APPLY_WAIT);
        if ev["revision"].as_u64() == Some(revision) {
            return;
        }
    }
}

/// What every deployment must carry for two nodes.
fn two_nodes_share_everything(redis: &Redis) {
    let n = Nodes::new(redis);
    let pki = Pki::new();
    let (mut a, a_config) = n.node("a");
    let (mut b, _) = n.node("b");

    // A certificate imported through node A's command line serves on both nodes.
    let cert = pki.issue(&["shop.test"], Algorithm::EcdsaP256, "shop.pem", None);
    let (ok, out, err) = cert_cli(&a_config, &["import", cert.to_str().unwrap_or_default()]);
    assert!(ok, "{out}{err}");
    for gw in [&a, &b] {
        eventually("the imported certificate serves", || s_client(port(gw), &["-servername", "shop.test"]).ok);
    }

    // Sessions made on one node resume on the other, every time.
    let sess = n.dir.join("s.pem");
    let rounds = 5;
    let mut reused = 0;
    for _ in 0..rounds {
        reused += usize::from(resumes(port(&a), port(&b), &sess, &["-tls1_3"]));
        reused += usize::from(resumes(port(&b), port(&a), &sess, &["-tls1_2"]));
        reused += usize::from(resumes(port(&a), port(&b), &sess, &["-tls1_2", "-no_ticket"]));
    }
    eprintln!("{reused} of {} cross-node resumptions reused", rounds * 3);
    assert_eq!(reused, rounds * 3, "every session resumes on the other node");
    let m = b.metrics();
    assert!(metric_value(&m, "gatehouse_tls_sessions_fetched_total").unwrap_or(0.0) >= rounds as f64, "{m}");

    // A release through node A's API reaches both nodes.
    let api = Api::new(&a);
    let r = api.commit("baseline");
    assert_eq!(api.call("POST", &format!("/revisions/{r}/release"), None, Value::Null).0, 200);
    applied(&mut a, r);
    applied(&mut b, r);
}

#[test]
fn a_redis_cluster_seeded_with_a_replica() {
    let cluster = RedisCluster::start(3, 1);
    let redis = Redis::Cluster(cluster);
    two_nodes_share_everything(&redis);
    let Redis::Cluster(cluster) = &redis else { return };
    // The keys are spread: every master holds some.
    let spread = cluster.keys_per_master();
    eprintln!("keys per master: {spread:?}");
    assert!(spread.iter().filter(|&&(_, keys)| keys > 0).count() >= 2, "{spread:?}");
}

#[test]
fn a_sentinel_group() {
    two_nodes_share_everything(&Redis::Sentinels(RedisSentinels::start()));
}

#[test]
fn a_sentinel_group_over_tls_with_acl_users() {
    let dir = TempDir::new();
    let files = RedisTlsFiles::make(&dir);
    let group = RedisSentinels::start_tls(&files, "acl-pass-77", "watch-pass-3");
    two_nodes_share_everything(&Redis::SentinelsTls(group, files));
}

#[test]
fn a_tls_redis_with_an_acl_user() {
    let dir = TempDir::new();
    let files = RedisTlsFiles::make(&dir);
    let server = RedisServer::start_tls(&files, "acl-pass-77");
    two_nodes_share_everything(&Redis::Tls(server, files));
}

fn ok(r: &LoadReport) -> u64 {
    r.statuses.get(&200).copied().unwrap_or(0)
}

#[test]
fn three_nodes_hold_a_cluster_limit_and_keys_spread_over_every_master() {
    let cluster = RedisCluster::start(3, 1);
    let redis = Redis::Cluster(cluster);
    let n = Nodes::new(&redis);
    let nodes: Vec<Gateway> = ["a", "b", "c"].iter().map(|id| n.node(id).0).collect();

    // 3,600 requests, 1,200 on each node from 4 concurrent clients each.
    let key = [("x-app-key", "K-shop")];
    let loads: Vec<Load> =
        nodes.iter().map(|gw| Load::start_with_headers(gw.addr("http"), "api.test", "/svc/x", &key, 4, 300)).collect();
    let reports: Vec<LoadReport> = loads.into_iter().map(Load::wait).collect();
    assert!(reports.iter().all(|r| r.failed == 0), "{reports:?}");
    let admitted: u64 = reports.iter().map(ok).sum();
    eprintln!(
        "cluster limit {LIMIT} on a 3-master Redis Cluster: admitted {admitted} ({:?} per node)",
        reports.iter().map(ok).collect::<Vec<_>>()
    );
    assert!((LIMIT * 95 / 100..=LIMIT * 105 / 100).contains(&admitted), "admitted {admitted}, limit {LIMIT} ±5%");
    assert!(reports.iter().all(|r| ok(r) > 0), "every node admitted some");

    // 1,000 counters, one per user (each lives until it drains: a day's limit keeps them), each in
    // its own slot, over all three masters.
    let mut conn = HttpConn::open(nodes[0].addr("http")).expect("connect");
    for i in 0..1000 {
        let user = format!("user-{i}");
        let r = conn.get("api.test", "/users/x", &[("x-user", user.as_str())]).expect("answer");
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let Redis::Cluster(cluster) = &redis else { return };
    let per_master: Vec<usize> = cluster
        .masters()
        .iter()
        .map(|m| m.cli(&["--scan", "--pattern", "gatehouse:rl:*{users:*"]).lines().count())
        .collect();
    eprintln!("1,000 rate-limit counters per master: {per_master:?}");
    assert_eq!(per_master.iter().sum::<usize>(), 1000);
    assert!(per_master.iter().all(|&k| k >= 200), "{per_master:?}");
}

/// What happens to the Redis while the nodes are under load.
#[derive(Clone, Copy, PartialEq)]
enum Change {
    /// The master (of the load's counter, on a Cluster) is killed; a replica is promoted.
    KillMaster,
    /// A fourth master joins the Cluster and `redis-cli --cluster rebalance` moves a quarter of
    /// the slots, keys and all, to it.
    AddMasterAndRebalance,
}

/// Changes the Redis under HTTP load (through a cluster rate limit) and full handshakes on node
/// A; no request and no handshake fails, and cross-node resumption works within 5 s of the
/// change. A killed master shows in the metrics; a rebalance shows nowhere: no Redis error.
fn master_killed_under_load(redis: &mut Redis) {
    changed_under_load(redis, Change::KillMaster);
}

fn changed_under_load(redis: &mut Redis, change: Change) {
    // A rebalance is judged on redirections followed, not on latency. With 500 ms, a CI run on
    // two cores (seven redis-servers, two gateways, the load and redis-cli) once counted 13
    // failed commands at one moment across three limits and the TLS state, the mark of one stall
    // rather than of a redirection not followed; the limiter's warning now says which error.
    let n = match change {
        Change::KillMaster => Nodes::new(redis),
        Change::AddMasterAndRebalance => Nodes::with_command_timeout(redis, "2s"),
    };
    let pki = Pki::new();
    let (a, a_config) = n.node("a");
    let (b, _) = n.node("b");
    let cert = pki.issue(&["shop.test"], Algorithm::EcdsaP256, "shop.pem", None);
    let (ok, out, err) = cert_cli(&a_config, &["import", cert.to_str().unwrap_or_default()]);
    assert!(ok, "{out}{err}");
    for gw in [&a, &b] {
        eventually("the imported certificate serves", || s_client(port(gw), &["-servername", "shop.test"]).ok);
    }
    let traffic = Traffic::start_at(a.addr("http"), "api.test", "/ip/x");
    let stop = Arc::new(AtomicBool::new(false));
    let handshakes = handshake_loop(port(&a), "shop.test", &pki.ca.cert_pem(), stop.clone());
    let errors_before = redis_errors(&a);
    // A limit that fails closed answers 200 or 503 throughout, never anything else.
    let closed_addr = a.addr("http");
    let closed_stop = stop.clone();
    let closed = std::thread::spawn(move || {
        let mut statuses = std::collections::BTreeMap::new();
        let deadline = Instant::now() + std::time::Duration::from_secs(60);
        while !closed_stop.load(Ordering::SeqCst) && Instant::now() < deadline {
            let status = gatehouse_testkit::http_get(closed_addr, "api.test", "/closed/x", &[]).status;
            *statuses.entry(status).or_insert(0u32) += 1;
        }
        statuses
    });

    match redis {
        Redis::Cluster(cluster) if change == Change::AddMasterAndRebalance => {
            // 200 per-user counters, one request each: they move with their slots and keep
            // their count.
            let users = |expected_remaining: &str| {
                let mut conn = HttpConn::open(a.addr("http")).expect("connect");
                for i in 0..200 {
                    let user = format!("user-{i}");
                    let r = conn.get("api.test", "/users/x", &[("x-user", user.as_str())]).expect("answer");
                    assert_eq!(r.status, 200, "{}", r.text());
                    assert_eq!(r.header("ratelimit-remaining"), Some(expected_remaining), "{user}");
                }
            };
            users("99");
            let added = cluster.add_master();
            cluster.rebalance();
            let moved = cluster.nodes[added].cli(&["--scan", "--pattern", "gatehouse:rl:*{users:*"]).lines().count();
            eprintln!("the added master serves {moved} of the 200 user counters after the rebalance");
            assert!(moved >= 20, "{moved}");
            users("98");
        }
        Redis::Cluster(cluster) => {
            // The master holding the load's rate-limit counter.
            let victim = cluster.nodes.iter().position(|n| {
                n.is_running()
                    && n.cli(&["ROLE"]).starts_with("master")
                    && !n.cli(&["--scan", "--pattern", "gatehouse:rl:*{ip:*"]).trim().is_empty()
            });
            cluster.kill(victim.expect("the counter's master"));
            cluster.wait_failover();
        }
        Redis::Sentinels(group) | Redis::SentinelsTls(group, _) => {
            group.fail_over();
        }
        Redis::Tls(..) | Redis::Plain(_) => unreachable!("a single server has no failover"),
    }
    let changed = Instant::now();
    traffic.progress("the change");
    let sess = n.dir.join("s.pem");
    // Within 5 s is the goal; the test allows 10 s so that a loaded machine does not fail it,
    // and prints what it took and what failed meanwhile.
    let mut failed_meanwhile = Vec::new();
    loop {
        match try_resume(port(&a), port(&b), &sess, &["-tls1_2", "-no_ticket"]) {
            Ok(true) => break,
            Ok(false) => {}
            Err(made) => failed_meanwhile.push(
                made.out.lines().filter(|l| l.contains("alert") || l.contains("error")).collect::<Vec<_>>().join(" "),
            ),
        }
        assert!(
            changed.elapsed() < std::time::Duration::from_secs(10),
            "no cross-node resumption 10 s after the change"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    eprintln!(
        "sharing back {:?} after the change; handshakes of the probe that failed meanwhile: {failed_meanwhile:?}",
        changed.elapsed()
    );
    stop.store(true, Ordering::SeqCst);
    let (done, failed) = handshakes.join().expect("the handshake thread");
    let closed = closed.join().expect("the fail-closed thread");
    eprintln!("fail-closed limit during the change: {closed:?}");
    assert!(closed.keys().all(|s| *s == 200 || *s == 503), "{closed:?}");
    eventually("the closed limit admits again after the change", || {
        gatehouse_testkit::http_get(a.addr("http"), "api.test", "/closed/x", &[]).status == 200
    });
    eprintln!("the closed limit admits again {:?} after the change", changed.elapsed());
    let (steady, churn) = traffic.finish("the change");
    eprintln!(
        "during the change: {} requests and {} new connections, all 200; {done} handshakes, {} failed; redis errors counted {}",
        steady.ok,
        churn.ok,
        failed.len(),
        redis_errors(&a) - errors_before
    );
    assert!(failed.is_empty(), "{} handshakes failed, first: {:?}", failed.len(), failed.first());
    match change {
        Change::KillMaster => assert!(redis_errors(&a) > errors_before, "the outage shows in the metrics"),
        Change::AddMasterAndRebalance => {
            assert_eq!(redis_errors(&a), errors_before, "no Redis command failed during the rebalance");
            assert!(closed.keys().all(|s| *s == 200), "{closed:?}");
        }
    }
}

/// Redis failures node `gw` counted: TLS sharing and rate limits.
fn redis_errors(gw: &Gateway) -> f64 {
    let m = gw.metrics();
    metric_value(&m, "gatehouse_tls_redis_errors_total").unwrap_or(0.0)
        + metric_value(&m, "gatehouse_gateway_limiter_errors_total{service=\"ip\"}").unwrap_or(0.0)
}

#[test]
fn a_cluster_master_killed_under_load() {
    master_killed_under_load(&mut Redis::Cluster(RedisCluster::start(3, 1)));
}

#[test]
fn a_cluster_rebalanced_onto_a_new_master_under_load() {
    changed_under_load(&mut Redis::Cluster(RedisCluster::start(3, 1)), Change::AddMasterAndRebalance);
}

#[test]
fn the_sentinels_master_killed_under_load_over_tls() {
    let dir = TempDir::new();
    let files = RedisTlsFiles::make(&dir);
    let group = RedisSentinels::start_tls(&files, "acl-pass-77", "watch-pass-3");
    master_killed_under_load(&mut Redis::SentinelsTls(group, files));
}

/// What a node holds in Redis is made again as it is used: nodes moved from one Redis to a Cluster
/// by their configuration alone resume each other's sessions, hold a cluster limit and follow a
/// release at once. Certificates in a Redis store are the operator's data: `gatehouse cert copy`
/// takes them from the old store to the new one.
#[test]
fn nodes_move_from_one_redis_to_a_cluster_by_configuration() {
    let single = Redis::Plain(RedisServer::start());
    let mut n = Nodes::new(&single);
    let pki = Pki::new();
    let certs = [
        pki.issue(&["shop.test"], Algorithm::EcdsaP256, "shop.pem", None),
        pki.issue(&["other.test", "*.other.test"], Algorithm::Rsa2048, "other.pem", None),
    ];
    let sess = n.dir.join("s.pem");
    let before_move = n.dir.join("before-move.yaml");
    let check = |n: &Nodes, moved: bool| {
        let (mut a, a_config) = n.node("a");
        let (mut b, _) = n.node("b");
        let (ok, out, err) = if moved {
            let to = a_config.to_str().unwrap_or_default();
            cert_cli(&before_move, &["copy", "--to", to])
        } else {
            std::fs::copy(&a_config, &before_move).expect("keep the configuration");
            let files: Vec<&str> = certs.iter().map(|c| c.to_str().unwrap_or_default()).collect();
            cert_cli(&a_config, &[&["import"], &files[..]].concat())
        };
        assert!(ok, "{out}{err}");
        if moved {
            eprintln!("{out}{err}");
            assert_eq!(out.lines().filter(|l| l.starts_with("copied ")).count(), 2, "{out}{err}");
        }
        for gw in [&a, &b] {
            for name in ["shop.test", "www.other.test"] {
                eventually("the certificate serves", || s_client(port(gw), &["-servername", name]).ok);
            }
        }
        assert!(resumes(port(&a), port(&b), &sess, &["-tls1_3"]));
        assert!(resumes(port(&b), port(&a), &sess, &["-tls1_2", "-no_ticket"]));
        let r = gatehouse_testkit::http_get(a.addr("http"), "api.test", "/ip/x", &[]);
        assert_eq!(r.status, 200, "{}", r.text());
        let api = Api::new(&a);
        let rev = api.commit("after the move");
        assert_eq!(api.call("POST", &format!("/revisions/{rev}/release"), None, Value::Null).0, 200);
        applied(&mut a, rev);
        applied(&mut b, rev);
    };
    check(&n, false);
    let cluster = Redis::Cluster(RedisCluster::start(3, 1));
    n.move_to(&cluster);
    check(&n, true);
    let Redis::Cluster(c) = &cluster else { return };
    assert!(c.keys_per_master().iter().all(|&(_, keys)| keys > 0), "{:?}", c.keys_per_master());
    drop(single);
}
