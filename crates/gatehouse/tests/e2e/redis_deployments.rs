//! Two gateway nodes on each Redis deployment operators run: a 3-master Redis Cluster with a
//! replica each (the nodes seeded with a replica, which owns no slot), a Sentinel group, and a
//! TLS-only Redis with client certificates and an ACL user whose password is in a file. On each:
//! sessions made on node A resume on node B (TLS 1.2 by session id and by ticket, TLS 1.3 by
//! ticket), a certificate imported through one node serves on both, and a release reaches both.

use crate::common::{start, targets};
use crate::control::{admin_section, Api};
use crate::tls::{cert_cli, eventually, s_client, s_client_with, Pki};
use gatehouse_testkit::{
    metric_value, Backend, Gateway, RedisCluster, RedisSentinels, RedisServer, RedisTlsFiles, TempDir, SENTINEL_MASTER,
};
use gatehouse_tls::issue::Algorithm;
use serde_json::Value;
use std::path::Path;

const REQUEST: &str = "GET / HTTP/1.1\r\nHost: shop.test\r\nConnection: close\r\n\r\n";

/// The Redis of a test, kept running for its length.
enum Redis {
    Cluster(RedisCluster),
    Sentinels(RedisSentinels),
    Tls(RedisServer, RedisTlsFiles),
}

impl Redis {
    /// The body of the `redis:` section (after `secret_file`) that reaches this deployment.
    fn settings(&self, dir: &TempDir) -> String {
        let list = |nodes: Vec<String>| nodes.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", ");
        match self {
            Redis::Cluster(c) => {
                // A replica as the only seed: it owns no slot, so every command is redirected.
                let replica = c.nodes.iter().find(|n| n.cli(&["ROLE"]).starts_with("slave")).expect("a replica");
                format!("cluster: [\"{}\"]", replica.addr())
            }
            Redis::Sentinels(s) => format!("sentinel: {{master: {SENTINEL_MASTER}, nodes: [{}]}}", list(s.nodes())),
            Redis::Tls(server, files) => {
                std::fs::write(dir.join("redis-password"), "acl-pass-77\n").expect("write the password file");
                format!(
                    "url: \"{}\", username: gatehouse, password_file: \"{}\", tls: {{ca: \"{}\", cert: \"{}\", key: \"{}\"}}",
                    server.url(),
                    dir.join("redis-password").display(),
                    files.ca.display(),
                    files.client_cert.display(),
                    files.client_key.display()
                )
            }
        }
    }
}

struct Nodes {
    dir: TempDir,
    backend: Backend,
    redis_yaml: String,
}

impl Nodes {
    fn new(redis: &Redis) -> Nodes {
        let dir = TempDir::new();
        std::fs::write(dir.join("secret"), "0123456789abcdef0123456789abcdef-deployments\n").expect("write the secret");
        let redis_yaml = format!(
            "redis: {{secret_file: \"{}\", command_timeout: 500ms, {}}}\n",
            dir.join("secret").display(),
            redis.settings(&dir)
        );
        Nodes { dir, backend: Backend::start("b"), redis_yaml }
    }

    fn config(&self, id: &str) -> String {
        format!(
            "workers: 2\n{}{}node: {{id: {id}}}\ncontrol: {{dir: \"{}\", poll_interval: 500ms}}\ntls:\n  store: {{redis: true}}\n  negative_cache_ttl: 100ms\n  tickets: cluster\n  session_cache: redis\nlisteners:\n  http: {{bind: \"127.0.0.1:0\"}}\n  https: {{bind: \"127.0.0.1:0\", tls: {{}}}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n  s: {{hosts: [\"*\"], routes: [{{path: /, upstream: u}}]}}\n",
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
    let sess = sess.to_str().unwrap_or_default();
    let mut first = vec!["-servername", "shop.test", "-sess_out", sess];
    first.extend_from_slice(args);
    let made = s_client_with(from, &first, Some(REQUEST));
    assert!(made.ok && made.has("New, TLS"), "{}", made.out);
    let mut again = vec!["-servername", "shop.test", "-sess_in", sess];
    again.extend_from_slice(args);
    s_client_with(to, &again, Some(REQUEST)).has("Reused, TLS")
}

fn applied(gw: &mut Gateway, revision: u64) {
    loop {
        let ev = gw.wait_event("applied", crate::common::SETTLE);
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
fn a_tls_redis_with_an_acl_user() {
    let dir = TempDir::new();
    let files = RedisTlsFiles::make(&dir);
    let server = RedisServer::start_tls(&files, "acl-pass-77");
    two_nodes_share_everything(&Redis::Tls(server, files));
}
