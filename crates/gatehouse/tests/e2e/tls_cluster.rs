//! Two gateway nodes sharing a real `redis-server`: sessions made on node A resume on node B
//! (TLS 1.2 by ticket and by session id, TLS 1.3 by ticket, stateless or single-use stateful),
//! ticket keys rotate across the cluster, Redis going away degrades to local state, and
//! certificates imported into Redis serve on every node.

use crate::common::{settled, start, targets, Cluster, SETTLE};
use crate::tls::{cert_cli as cli, certificates, eventually, handshake_loop, s_client, s_client_with, serial, Pki};
use gatehouse_testkit::{metric_value, Gateway, TempDir};
use gatehouse_tls::issue::Algorithm;
use std::time::Instant;

const REQUEST: &str = "GET / HTTP/1.1\r\nHost: node.test\r\nConnection: close\r\n\r\n";

/// The TLS nodes of a test cluster.
trait Node {
    fn config(&self, tls: &str) -> String;
    fn node(&self, tls: &str) -> Gateway;
}

impl Node for Cluster {
    /// A node's configuration; `tls` is the body of the `tls:` section.
    fn config(&self, tls: &str) -> String {
        format!(
            "workers: 2\nadmin: {{bind: \"127.0.0.1:0\"}}\n{}tls:\n{tls}\nlisteners:\n  https: {{bind: \"127.0.0.1:0\", tls: {{}}}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n  s: {{hosts: [\"*\"], routes: [{{path: /, upstream: u}}]}}\n",
            self.redis_section(),
            targets(&[&self.backend])
        )
    }

    fn node(&self, tls: &str) -> Gateway {
        let gw = start(&self.config(tls));
        settled(&gw);
        gw
    }
}

fn port(gw: &Gateway) -> u16 {
    gw.addr("https").port()
}

/// Makes a session on `from` (saved to `sess`) and returns whether it resumed on `to`.
fn resumes(from: u16, to: u16, sess: &str, args: &[&str]) -> bool {
    let mut first = vec!["-servername", "node.test", "-sess_out", sess];
    first.extend_from_slice(args);
    let made = s_client_with(from, &first, Some(REQUEST));
    assert!(made.ok && made.has("New, TLS"), "{}", made.out);
    resumes_saved(to, sess, args)
}

fn resumes_saved(to: u16, sess: &str, args: &[&str]) -> bool {
    let mut again = vec!["-servername", "node.test", "-sess_in", sess];
    again.extend_from_slice(args);
    s_client_with(to, &again, Some(REQUEST)).has("Reused, TLS")
}

#[test]
fn sessions_made_on_one_node_resume_on_another() {
    let pki = Pki::new();
    let cert = pki.issue(&["node.test"], Algorithm::EcdsaP256, "node.pem", None);
    let c = Cluster::new();
    let certs = certificates(&[&cert]);
    let sess = c.dir.join("s.pem");
    let sess = sess.to_str().unwrap_or_default();

    // Stateless tickets under the cluster's shared keys.
    let a = c.node(&format!("{certs}\n  tickets: cluster\n  session_cache: redis"));
    let b = c.node(&format!("{certs}\n  tickets: cluster\n  session_cache: redis"));
    for _ in 0..5 {
        assert!(resumes(port(&a), port(&b), sess, &["-tls1_3"]), "TLS 1.3 ticket from A resumes on B");
        assert!(resumes(port(&b), port(&a), sess, &["-tls1_2"]), "TLS 1.2 ticket from B resumes on A");
        assert!(resumes(port(&a), port(&b), sess, &["-tls1_2", "-no_ticket"]), "TLS 1.2 session id from A on B");
    }
    let mb = b.metrics();
    assert!(metric_value(&mb, "gatehouse_tls_sessions_fetched_total").unwrap_or(0.0) >= 5.0, "{mb}");
    drop((a, b));

    // Without tickets, TLS 1.3 tickets are stateful and used once across the cluster.
    let a = c.node(&format!("{certs}\n  tickets: off\n  session_cache: redis"));
    let b = c.node(&format!("{certs}\n  tickets: off\n  session_cache: redis"));
    assert!(resumes(port(&a), port(&b), sess, &["-tls1_3"]), "stateful TLS 1.3 ticket from A resumes on B");
    assert!(!resumes_saved(port(&a), sess, &["-tls1_3"]), "the ticket was used on B; A must not take it again");
    assert!(resumes(port(&b), port(&a), sess, &["-tls1_2"]), "TLS 1.2 session id from B resumes on A");
}

#[test]
fn ticket_keys_rotate_across_the_cluster_and_old_keys_keep_opening() {
    let pki = Pki::new();
    let cert = pki.issue(&["node.test"], Algorithm::EcdsaP256, "node.pem", None);
    let c = Cluster::new();
    let tls = format!("{}\n  tickets: cluster\n  ticket_rotation: 1s\n  ticket_window: 30s", certificates(&[&cert]));
    let a = c.node(&tls);
    let b = c.node(&tls);
    let sess = c.dir.join("s.pem");
    let sess = sess.to_str().unwrap_or_default();
    let made = s_client_with(port(&a), &["-servername", "node.test", "-sess_out", sess, "-tls1_3"], Some(REQUEST));
    assert!(made.ok, "{}", made.out);
    // Both nodes follow the ring as one node rotates it.
    for gw in [&a, &b] {
        gw.wait_metric(SETTLE, |m| metric_value(m, "gatehouse_tls_ticket_keys").unwrap_or(0.0) >= 3.0);
    }
    assert!(resumes_saved(port(&b), sess, &["-tls1_3"]), "a ticket sealed two rotations ago still opens");
}

#[test]
fn with_redis_gone_handshakes_go_on_and_sharing_resumes_when_it_returns() {
    let pki = Pki::new();
    let cert = pki.issue(&["node.test"], Algorithm::EcdsaP256, "node.pem", None);
    let mut c = Cluster::new();
    let tls = format!("{}\n  tickets: off\n  session_cache: redis", certificates(&[&cert]));
    let a = c.node(&tls);
    let b = c.node(&tls);
    let sess = c.dir.join("s.pem");
    let sess = sess.to_str().unwrap_or_default();
    // Handshakes run on through the whole outage: Redis killed, then back.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = handshake_loop(port(&a), "node.test", &pki.ca.cert_pem(), stop.clone());
    // Each full TLS 1.3 handshake stores its (stateful) ticket in Redis.
    a.wait_metric(SETTLE, |m| metric_value(m, "gatehouse_tls_redis_commands_total").unwrap_or(0.0) >= 10.0);
    c.redis.stop();
    for _ in 0..20 {
        let h = s_client(port(&a), &["-servername", "node.test"]);
        assert!(h.ok, "handshakes go on without Redis: {}", h.out);
    }
    // The node's own sessions still resume on it.
    assert!(resumes(port(&a), port(&a), sess, &["-tls1_2", "-no_ticket"]), "local resumption without Redis");
    let m = a.metrics();
    assert!(metric_value(&m, "gatehouse_tls_redis_errors_total").unwrap_or(0.0) >= 1.0, "{m}");
    assert!(a.stderr().matches("redis unavailable").count() <= 2, "logged once per interval");

    c.redis.restart();
    // The nodes reconnect by themselves; sharing works again.
    eventually("cross-node resumption works again", || resumes(port(&a), port(&b), sess, &["-tls1_2", "-no_ticket"]));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (ok, errors) = load.join().expect("load thread");
    eprintln!("{ok} handshakes while Redis was killed and restarted; {} failed", errors.len());
    assert!(errors.is_empty(), "{} failed handshakes, first: {:?}", errors.len(), errors.first());
}

#[test]
fn certificates_imported_into_redis_serve_on_every_node() {
    let pki = Pki::new();
    let c = Cluster::new();
    let tls = "  store: {redis: true}\n  negative_cache_ttl: 100ms";
    let config = c.dir.join("node.yaml");
    std::fs::write(&config, c.config(tls)).expect("write");
    let a = c.node(tls);
    let b = c.node(tls);
    assert!(s_client(port(&a), &["-servername", "shop.test"]).has("unrecognized name"));

    let first = pki.issue(&["shop.test", "*.shop.test"], Algorithm::EcdsaP256, "shop1.pem", None);
    let (ok, out, err) = cli(&config, &["import", first.to_str().unwrap_or_default()]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("imported shop.test,*.shop.test\tecdsa"), "{out}");
    for gw in [&a, &b] {
        eventually("the imported certificate serves", || s_client(port(gw), &["-servername", "www.shop.test"]).ok);
    }
    let serial_1 = serial(&s_client(port(&b), &["-servername", "shop.test"])).expect("serial");

    // Replaced on one node's command line; both nodes serve the new one without a restart.
    let second = pki.issue(&["shop.test", "*.shop.test"], Algorithm::EcdsaP256, "shop2.pem", None);
    let (ok, _, err) = cli(&config, &["import", second.to_str().unwrap_or_default()]);
    assert!(ok, "{err}");
    for gw in [&a, &b] {
        eventually("the replacement serves", || {
            serial(&s_client(port(gw), &["-servername", "shop.test"])).is_some_and(|s| s != serial_1)
        });
    }

    // A bad bundle is refused and changes nothing.
    let bad = c.dir.join("bad.pem");
    let pem = std::fs::read_to_string(&second).expect("read");
    std::fs::write(&bad, pem.replace("-----BEGIN PRIVATE KEY-----", "-----BEGIN PRIVATE KEY-----\nAAAA"))
        .expect("write");
    let (ok, _, err) = cli(&config, &["import", bad.to_str().unwrap_or_default()]);
    assert!(!ok && err.contains("refused"), "{err}");
    assert!(s_client(port(&a), &["-servername", "shop.test"]).ok);

    let (ok, out, _) = cli(&config, &["list"]);
    assert!(ok && out.lines().count() == 1 && out.contains("shop.test"), "{out}");
    let (ok, out, _) = cli(&config, &["show", "api.shop.test"]);
    assert!(ok && out.contains("*.shop.test") && out.contains("issuer:"), "{out}");
    assert!(!out.contains("PRIVATE KEY") && !out.contains("BEGIN"), "show never prints key material: {out}");
    // Redis holds no key in the clear.
    let dump = c.redis.cli(&["--no-raw", "KEYS", "*"]);
    for key in dump.lines().filter(|l| l.contains("bundle")) {
        let key = key.trim_start_matches(|ch: char| ch.is_ascii_digit() || ch == ')' || ch == ' ').trim_matches('"');
        let value = c.redis.cli(&["GET", key]);
        assert!(!value.contains("PRIVATE KEY"), "bundle stored in the clear");
    }

    let (ok, out, err) = cli(&config, &["remove", "shop.test"]);
    assert!(ok && out.contains("removed"), "{out}{err}");
    for gw in [&a, &b] {
        eventually("the removed certificate stops serving", || {
            s_client(port(gw), &["-servername", "shop.test"]).has("unrecognized name")
        });
    }
}

/// 10,000 certificates in Redis: the gateway starts without loading them, and serves any of them
/// on demand. Start-up time and memory are reported.
#[test]
fn ten_thousand_certificates_in_redis() {
    let c = Cluster::new();
    let tls = "  store: {redis: true}";
    let config = c.dir.join("node.yaml");
    std::fs::write(&config, c.config(tls)).expect("write");
    // One CA-issued bundle per name, written as files and imported in batches by the CLI.
    let ca = gatehouse_tls::issue::Authority::new("Bulk CA").expect("CA");
    let files = TempDir::new();
    let total = 10_000;
    let started = Instant::now();
    let mut batch = Vec::new();
    for i in 0..total {
        let path = files.join(&format!("n{i}.pem"));
        std::fs::write(&path, ca.issue(&[&format!("n{i}.bulk.test")], Algorithm::EcdsaP256, 30).expect("issue"))
            .expect("write");
        batch.push(path.to_string_lossy().into_owned());
        if batch.len() == 1000 || i + 1 == total {
            let mut args = vec!["import"];
            args.extend(batch.iter().map(String::as_str));
            let (ok, _, err) = cli(&config, &args);
            assert!(ok, "{err}");
            batch.clear();
        }
    }
    eprintln!("10,000 certificates made and imported in {:?}", started.elapsed());

    let spawned = Instant::now();
    let gw = c.node(tls);
    let ready = spawned.elapsed();
    let rss_kb = std::fs::read_to_string(format!("/proc/{}/status", gw.pid()))
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .unwrap_or(0);
    eprintln!("with 10,000 certificates in Redis: ready in {ready:?}, RSS {} MB", rss_kb / 1024);
    for i in [0, 4242, 9999] {
        let h = s_client(port(&gw), &["-servername", &format!("n{i}.bulk.test")]);
        assert_eq!(h.subject_cn(), Some(format!("n{i}.bulk.test")), "{}", h.out);
    }
    let m = gw.metrics();
    assert_eq!(
        metric_value(&m, "gatehouse_tls_cert_loads_total"),
        Some(3.0),
        "only what handshakes asked for is loaded: {m}"
    );
}
