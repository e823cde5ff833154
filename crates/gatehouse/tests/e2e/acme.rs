//! ACME against a real CA (Pebble, with pebble-challtestsrv resolving every name to 127.0.0.1):
//! certificates issued by HTTP-01 and TLS-ALPN-01 and served to curl with Pebble's chain; three
//! nodes on one Redis ordering each name once, answering validations for each other's orders;
//! an ordering node killed mid-order, its name finished by another.

use crate::common::{check, start, targets, Cluster, SETTLE};
use gatehouse_testkit::{curl, free_port, metric_value, wait_until, Backend, Gateway, Pebble, PebbleOptions, TempDir};
use std::time::Duration;

/// Longest wait for a certificate: an order with Pebble's validation takes about a second, a
/// node waiting out a dead node's lock up to its 30 s life.
pub(crate) const ISSUED: Duration = Duration::from_secs(90);

/// `tls.acme` for `pebble`, `names` and `challenges` (YAML flow list).
pub(crate) fn acme_section(pebble: &Pebble, names: &[String], challenges: &str) -> String {
    format!(
        "  acme:\n    directory: \"{}\"\n    ca: \"{}\"\n    email: ops@example.com\n    challenges: {challenges}\n    names: [{}]\n",
        pebble.directory(),
        pebble.directory_ca().display(),
        names.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", ")
    )
}

/// A node whose site redirects plain HTTP to HTTPS, with `http` and `https` on the validation ports (shared with other nodes through
/// SO_REUSEPORT, as behind an L4 balancer), and `mine`, a TLS listener of its own for checks.
fn node_yaml(head: &str, store: &str, acme: &str, ports: (u16, u16), backend: &Backend) -> String {
    format!(
        "{head}tls:\n  store: {store}\n  negative_cache_ttl: 100ms\n{acme}listeners:\n  http: {{bind: \"127.0.0.1:{}\"}}\n  https: {{bind: \"127.0.0.1:{}\", tls: {{}}}}\n  mine: {{bind: \"127.0.0.1:0\", tls: {{}}}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n  s: {{hosts: [\"*\"], https_redirect: true, routes: [{{path: /, upstream: u}}]}}\n",
        ports.0,
        ports.1,
        targets(&[backend])
    )
}

/// The head of a one-worker node with an admin listener for metrics.
const ONE_WORKER: &str = "workers: 1\nadmin: {bind: \"127.0.0.1:0\"}\n";

/// Node `n{id}` of `cluster`, its store and ACME state in the cluster's Redis.
fn cluster_node(cluster: &Cluster, id: u32, acme: &str, ports: (u16, u16)) -> Gateway {
    let head =
        format!("workers: 1\nadmin: {{bind: \"127.0.0.1:0\"}}\n{}node: {{id: n{id}}}\n", cluster.redis_section());
    start(&node_yaml(&head, "{redis: true}", acme, ports, &cluster.backend))
}

/// One node with `head`, a directory store (rescanned every 100 ms) and `acme`.
fn one_node(head: &str, acme: &str, store: &TempDir, ports: (u16, u16), backend: &Backend) -> Gateway {
    let dir = format!("{{dir: \"{}\", scan_interval: 100ms}}", store.path().display());
    start(&node_yaml(head, &dir, acme, ports, backend))
}

/// Whether `gw`'s listener `mine` serves `name` with a certificate that verifies against `root`
/// (curl's own verification) and proxies the request.
fn serves(gw: &Gateway, name: &str, root: &std::path::Path) -> bool {
    serves_at(gw.addr("mine").port(), name, root)
}

/// Whether the TLS listener on `port` serves `name` verified against `root`.
fn serves_at(port: u16, name: &str, root: &std::path::Path) -> bool {
    let out = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
        .arg(root)
        .args(["--resolve", &format!("{name}:{port}:127.0.0.1"), &format!("https://{name}:{port}/")])
        .output()
        .expect("run curl");
    let ok = out.status.success() && out.stdout == b"200";
    if !ok {
        eprintln!(
            "curl {name} on {port}: {} {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    ok
}

/// Orders the nodes saw fail.
fn failed_orders(nodes: &[&Gateway]) -> usize {
    nodes.iter().map(|gw| metric(gw, "gatehouse_acme_orders_total{result=\"failed\"}")).sum::<f64>() as usize
}

fn metric(gw: &Gateway, series: &str) -> f64 {
    let resp = gatehouse_testkit::http_get(gw.admin(), "127.0.0.1", "/metrics", &[]);
    metric_value(&String::from_utf8_lossy(&resp.body), series).unwrap_or(0.0)
}

/// One node, a directory store: `name` issued by `challenge` and served with Pebble's chain.
/// Gives Pebble, the gateway (its admin API open to `control::TOKEN`), the root, and what must
/// live as long as the gateway serves (the store, the backend).
fn issue_one(challenge: &str, name: &str) -> (Pebble, Gateway, std::path::PathBuf, (TempDir, Backend)) {
    let (http, https) = (free_port(), free_port());
    let pebble = Pebble::start(&PebbleOptions::new(http, https));
    let store = TempDir::new();
    let backend = Backend::start("b");
    let acme = acme_section(&pebble, &[name.to_string()], &format!("[{challenge}]"));
    // The API's revisions and audit log in the store's directory (hidden from the store), not
    // in the working directory.
    let head = format!(
        "workers: 1\n{}control: {{dir: \"{}\"}}\n",
        crate::control::admin_section(""),
        store.join(".control").display()
    );
    let gw = one_node(&head, &acme, &store, (http, https), &backend);
    let root = pebble.issuing_root();
    let served = wait_until(ISSUED, || serves(&gw, name, &root).then_some(()));
    assert!(served.is_some(), "{name} not served\n--- gateway ---\n{}\n--- pebble ---\n{}", gw.stderr(), pebble.log());
    assert_eq!(pebble.issued(), 1, "one certificate");
    assert_eq!(pebble.orders(), 1, "one order\n{}", gw.stderr());
    assert_eq!(failed_orders(&[&gw]), 0);
    let series = format!("gatehouse_acme_challenges_total{{type=\"{challenge}\",result=\"answered\"}}");
    assert!(metric(&gw, &series) >= 1.0, "{series}");
    assert_eq!(metric(&gw, "gatehouse_acme_orders_total{result=\"valid\"}"), 1.0);
    // The account is kept beside the certificates, private; the bundle too.
    let kept: Vec<_> = std::fs::read_dir(store.join(".acme"))
        .expect(".acme")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("account-"))
        .collect();
    assert_eq!(kept.len(), 1, "one account file");
    use std::os::unix::fs::PermissionsExt;
    let mode = kept[0].metadata().expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "account file mode");
    // The site redirects plain HTTP to HTTPS, challenges excepted (answered before it): the
    // validation above went through, and a token no order published gets the gateway's 404, not
    // a redirect, and is not forwarded.
    let r = curl(&[&format!("http://127.0.0.1:{http}/page")]);
    assert_eq!(r.status, 308, "{r:?}");
    let r = curl(&[&format!("http://127.0.0.1:{http}/.well-known/acme-challenge/nothing-here")]);
    assert_eq!(r.status, 404);
    assert!(backend.requests().iter().all(|q| !q.uri.contains("acme-challenge")), "a challenge request was forwarded");
    (pebble, gw, root, (store, backend))
}

/// Also seen by operators: the admin API and `gatehouse cert list` show the source, the next
/// renewal; "renew now" renews.
#[test]
fn acme_http01_issues_and_serves() {
    let name = "http01.example.com";
    let (pebble, gw, root, _kept) = issue_one("http-01", name);
    let api = crate::control::Api::new(&gw);
    let (s, acme) = api.call("GET", "/acme", None, serde_json::Value::Null);
    assert_eq!((s, acme["enabled"].as_bool()), (200, Some(true)), "{acme}");
    let kept = &acme["names"][name];
    assert_eq!(kept["source"], "acme", "{acme}");
    assert!(kept["next_renewal"].is_string() && kept["not_after"].is_string(), "{acme}");
    assert!(kept["last_error"].is_null(), "{acme}");
    let (_, certs) = api.call("GET", "/certificates", None, serde_json::Value::Null);
    assert_eq!(certs["certificates"][0]["source"], "acme", "{certs}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .args(["cert", "--config"])
        .arg(gw.dir().join("gatehouse.yaml"))
        .arg("list")
        .output()
        .expect("run gatehouse cert list");
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && listed.contains(name) && listed.contains("\tacme\trenews "), "{listed}");
    // Renew now: a second order, a new certificate served.
    let first = served_serial(&gw, name).expect("a serial");
    assert_eq!(api.call("POST", &format!("/acme/{name}/renew"), None, serde_json::Value::Null).0, 202);
    let renewed = wait_until(ISSUED, || served_serial(&gw, name).filter(|s| *s != first));
    assert!(renewed.is_some(), "not renewed\n{}", gw.stderr());
    assert_eq!(pebble.issued(), 2);
    assert!(serves(&gw, name, &root));
    assert_eq!(api.call("POST", "/acme/other.example.com/renew", None, serde_json::Value::Null).0, 404);
}

#[test]
fn acme_tls_alpn01_issues_and_serves() {
    issue_one("tls-alpn-01", "alpn.example.com");
}

/// Three nodes on one Redis, given the same names: each name ordered exactly once across them,
/// every node serves every name, and no validation found a node without the answer, wherever the
/// (shared) port sent it.
fn cluster_run(names: usize, challenge: &str) {
    let (http, https) = (free_port(), free_port());
    let pebble = Pebble::start(&PebbleOptions::new(http, https));
    let cluster = Cluster::new();
    let names: Vec<String> = (0..names).map(|i| format!("n{i}.cluster.example.com")).collect();
    let acme = acme_section(&pebble, &names, &format!("[{challenge}]"));
    let nodes: Vec<Gateway> = (1..=3).map(|id| cluster_node(&cluster, id, &acme, (http, https))).collect();
    let root = pebble.issuing_root();
    let valid = |gw: &Gateway| metric(gw, "gatehouse_acme_orders_total{result=\"valid\"}");
    let done = wait_until(ISSUED * 2, || (nodes.iter().map(valid).sum::<f64>() as usize >= names.len()).then_some(()));
    let logs = || nodes.iter().map(Gateway::stderr).collect::<Vec<_>>().join("\n---\n");
    assert!(done.is_some(), "not every name issued\n{}", logs());
    // Each name ordered and issued exactly once across the cluster, through Pebble's refused
    // nonces (5 %, each request sent again).
    assert_eq!(pebble.issued(), names.len(), "each name issued once across the cluster");
    assert_eq!(pebble.orders(), names.len(), "each name ordered once across the cluster\n{}", logs());
    assert_eq!(failed_orders(&nodes.iter().collect::<Vec<_>>()), 0, "{}", logs());
    // One account for the cluster: made by one node, read by the others, sealed in Redis.
    let made = logs().lines().filter(|l| l.contains("ACME account made")).count();
    assert_eq!(made, 1, "accounts made across the cluster\n{}", logs());
    let keys = cluster.redis.cli(&["--scan", "--pattern", "*acme:account:*"]);
    assert_eq!(keys.lines().count(), 1, "{keys}");
    let stored = cluster.redis.cli(&["GET", keys.trim()]);
    assert!(!stored.contains("key_pkcs8") && !stored.contains("my-account"), "the account is not sealed: {stored}");
    let refused: f64 = nodes.iter().map(|gw| metric(gw, "gatehouse_acme_refused_nonces_total")).sum();
    assert!(refused > 0.0, "Pebble refused no nonce: the retry was not tried");
    for gw in &nodes {
        for name in &names {
            assert!(serves(gw, name, &root), "{name} not served by a node");
        }
    }
    let answered = format!("gatehouse_acme_challenges_total{{type=\"{challenge}\",result=\"answered\"}}");
    let unknown = format!("gatehouse_acme_challenges_total{{type=\"{challenge}\",result=\"unknown\"}}");
    let placed: Vec<f64> = nodes.iter().map(valid).collect();
    let answers: Vec<f64> = nodes.iter().map(|gw| metric(gw, &answered)).collect();
    assert_eq!(nodes.iter().map(|gw| metric(gw, &unknown)).sum::<f64>(), 0.0, "a validation found no answer");
    // Pebble validates each challenge from three perspectives; a node that answered more than
    // three per order it placed answered for orders other nodes placed.
    assert!(
        placed.iter().zip(&answers).any(|(p, a)| *a > 3.0 * p),
        "no node answered for another's order: orders {placed:?}, answers {answers:?}"
    );
}

#[test]
fn acme_cluster_orders_each_name_once_tls_alpn01() {
    cluster_run(200, "tls-alpn-01");
}

#[test]
fn acme_cluster_orders_each_name_once_http01() {
    cluster_run(200, "http-01");
}

/// The node holding a name's order lock dies mid-order: the lock expires and another node
/// orders the name and serves it.
#[test]
fn acme_order_taken_over_when_the_ordering_node_dies() {
    let (http, https) = (free_port(), free_port());
    let mut options = PebbleOptions::new(http, https);
    options.nonce_reject_percent = 0;
    let pebble = Pebble::start_slow(&options);
    let cluster = Cluster::new();
    let name = "takeover.example.com".to_string();
    let acme = acme_section(&pebble, std::slice::from_ref(&name), "[http-01]");
    let node = |id: u32| cluster_node(&cluster, id, &acme, (http, https));
    let first = node(1);
    let placed = wait_until(ISSUED, || (pebble.orders() == 1).then_some(()));
    assert!(placed.is_some(), "no order placed\n{}", first.stderr());
    first.signal("KILL");
    let second = node(2);
    let root = pebble.issuing_root();
    let served = wait_until(ISSUED, || serves(&second, &name, &root).then_some(()));
    assert!(served.is_some(), "{name} not taken over\n{}\n--- pebble ---\n{}", second.stderr(), pebble.log());
    assert_eq!(pebble.orders(), 2, "the dead node's order, then the one that finished");
    assert_eq!(metric(&second, "gatehouse_acme_orders_total{result=\"valid\"}"), 1.0);
}

#[test]
fn acme_check_refuses_what_cannot_work() {
    let dir = TempDir::new();
    let yaml = format!(
        "listeners:\n  https: {{bind: \"127.0.0.1:0\", tls: {{}}}}\nupstreams:\n  u: {{targets: [\"127.0.0.1:9\"]}}\nsites:\n  s: {{hosts: [\"*\"], routes: [{{path: /, upstream: u}}]}}\ntls:\n  store: {{dir: \"{}\"}}\n  acme:\n    directory: https://ca.example/dir\n    ca: \"{}\"\n    challenges: [http-01]\n    names: [\"*.apps.example.com\", \"Www.example.com\", localhost]\n    eab: {{kid: k1, hmac_key_file: \"{}\"}}\n",
        dir.path().display(),
        dir.join("missing-ca.pem").display(),
        dir.join("missing-hmac").display()
    );
    let (ok, err) = check(&yaml);
    assert!(!ok, "{err}");
    for expected in [
        "tls.acme.names[0]: `*.apps.example.com`: a wildcard can only be validated by dns-01",
        "tls.acme.names[1]: `Www.example.com` is not a lower-case host name",
        "tls.acme.names[2]: `localhost`: public CAs issue for domain names only",
        "tls.acme.challenges: none can be answered",
    ] {
        assert!(err.contains(expected), "missing {expected:?} in:\n{err}");
    }
    // With the configuration right, the files it names are read, as `run` reads them.
    let fixed = yaml
        .replace("[\"*.apps.example.com\", \"Www.example.com\", localhost]", "[www.example.com]")
        .replace("challenges: [http-01]", "challenges: [tls-alpn-01]");
    let (ok, err) = check(&fixed);
    assert!(!ok, "{err}");
    assert!(err.contains("tls.acme.ca: cannot read"), "{err}");
    assert!(err.contains("tls.acme.eab.hmac_key_file: cannot read"), "{err}");

    // The issue's own example, with a TSIG key file as tsig-keygen writes it: valid.
    let key = dir.join("tsig.key");
    std::fs::write(
        &key,
        "key \"gatehouse\" {\n\talgorithm hmac-sha256;\n\tsecret \"c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA==\";\n};\n",
    )
    .expect("write the key");
    let listeners = "listeners:\n  http: {bind: \"127.0.0.1:0\"}\n  https: {bind: \"127.0.0.1:0\", tls: {}}\nupstreams:\n  u: {targets: [\"127.0.0.1:9\"]}\nsites:\n  s: {hosts: [\"*\"], routes: [{path: /, upstream: u}]}\n";
    let example = format!(
        "{listeners}tls:\n  store: {{dir: \"{}\"}}\n  acme:\n    directory: https://acme-v02.api.letsencrypt.org/directory\n    email: ops@example.com\n    challenges: [tls-alpn-01, http-01]\n    dns01: {{ rfc2136: {{ server: \"127.0.0.1:53\", zone: example.com, key_name: gatehouse, key_algorithm: hmac-sha256, key_file: \"{}\" }} }}\n    names: [\"www.example.com\", \"*.apps.example.com\"]\n    renew_before: 30d\n    on_demand:\n      ask: \"http://127.0.0.1:9000/allowed\"\n      allow: [\"*.customers.example.com\"]\n      rate: {{ limit: 20, interval: 1m }}\n",
        dir.path().display(),
        key.display()
    );
    let (ok, err) = check(&example);
    assert!(ok, "the issue's example refused:\n{err}");
    // Each part of it broken: every error listed at once.
    let broken = example
        .replace("challenges: [tls-alpn-01, http-01]", "challenges: [dns-01, http-01, http-01]")
        .replace("server: \"127.0.0.1:53\"", "server: ns1.example.com")
        .replace("key_name: gatehouse,", "key_name: \"\",")
        .replace("\"www.example.com\"", "\"www.example.org\"")
        .replace("http://127.0.0.1:9000/allowed", "127.0.0.1:9000/allowed")
        .replace("limit: 20", "limit: 0");
    let (ok, err) = check(&broken);
    assert!(!ok, "{err}");
    for expected in [
        "tls.acme.challenges[2]: `http-01` is listed twice",
        "tls.acme.dns01.rfc2136.server: `ns1.example.com` is not IP:port",
        "tls.acme.dns01.rfc2136.key_name: must not be empty",
        "tls.acme.names[0]: `www.example.org` is outside the dns01 zone `example.com`",
        "tls.acme.on_demand.ask: expected an http:// or https:// URL",
        "tls.acme.on_demand.rate: `limit` and `interval` must be more than zero",
    ] {
        assert!(err.contains(expected), "missing {expected:?} in:\n{err}");
    }
    // dns-01 with no dns01; on-demand that would order any name; an unreadable TSIG key.
    let open: String = example.lines().filter(|l| !l.starts_with("    dns01:")).map(|l| format!("{l}\n")).collect();
    let open = open
        .replace("names: [\"www.example.com\", \"*.apps.example.com\"]", "names: [\"www.example.com\"]")
        .replace("challenges: [tls-alpn-01, http-01]", "challenges: [dns-01]")
        .replace("      ask: \"http://127.0.0.1:9000/allowed\"\n", "")
        .replace("      allow: [\"*.customers.example.com\"]\n", "");
    let (ok, err) = check(&open);
    assert!(!ok, "{err}");
    for expected in ["tls.acme.challenges: `dns-01` needs `dns01`", "tls.acme.on_demand: set `ask`, `allow` or both"] {
        assert!(err.contains(expected), "missing {expected:?} in:\n{err}");
    }
    std::fs::remove_file(&key).expect("remove the key");
    let (ok, err) = check(&example);
    assert!(!ok, "{err}");
    assert!(err.contains("tls.acme.dns01.rfc2136.key_file: cannot read"), "{err}");
}

/// The serial of the certificate `gw`'s listener `mine` serves for `name`, as openssl reads it.
fn served_serial(gw: &Gateway, name: &str) -> Option<String> {
    let port = gw.addr("mine").port();
    let script = format!(
        "openssl s_client -connect 127.0.0.1:{port} -servername {name} </dev/null 2>/dev/null | openssl x509 -noout -serial"
    );
    let out = std::process::Command::new("sh").args(["-c", &script]).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    text.strip_prefix("serial=").map(str::to_string)
}

/// One node, a directory store, certificates of Pebble's `shortlived` profile, made to last
/// `validity` seconds.
fn short_lived(validity: u64, name: &str) -> (Pebble, TempDir, Backend, Gateway) {
    let (http, https) = (free_port(), free_port());
    let mut options = PebbleOptions::new(http, https);
    options.short_validity = validity;
    let pebble = Pebble::start(&options);
    let store = TempDir::new();
    let backend = Backend::start("b");
    // The CA's profile of short certificates, asked for by name.
    let acme = acme_section(&pebble, &[name.to_string()], "[tls-alpn-01]") + "    profile: shortlived\n";
    let gw = one_node(ONE_WORKER, &acme, &store, (http, https), &backend);
    (pebble, store, backend, gw)
}

/// A certificate valid for two minutes is renewed in the CA's window (ARI) while clients keep
/// making new verified handshakes: none fails, and the served serial changes.
#[test]
fn acme_renews_in_the_window_with_no_failed_handshake() {
    let name = "renew.example.com";
    let (pebble, _store, _backend, gw) = short_lived(120, name);
    let root = pebble.issuing_root();
    assert!(wait_until(ISSUED, || serves(&gw, name, &root).then_some(())).is_some(), "{}", gw.stderr());
    let first = served_serial(&gw, name).expect("a serial");
    // New verified connections from four clients at once, until a renewed certificate is served
    // (bounded: the old one expires after 120 s).
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
    let (done, handshakes, failed) = (AtomicBool::new(false), AtomicUsize::new(0), AtomicUsize::new(0));
    let port = gw.addr("mine").port();
    let renewed = std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                while !done.load(Relaxed) {
                    handshakes.fetch_add(1, Relaxed);
                    if !serves_at(port, name, &root) {
                        failed.fetch_add(1, Relaxed);
                    }
                }
            });
        }
        let renewed = wait_until(Duration::from_secs(150), || {
            handshakes.fetch_add(1, Relaxed);
            if !serves(&gw, name, &root) {
                failed.fetch_add(1, Relaxed);
            }
            served_serial(&gw, name).filter(|s| *s != first)
        });
        done.store(true, Relaxed);
        renewed
    });
    assert!(renewed.is_some(), "not renewed\n{}\n--- pebble ---\n{}", gw.stderr(), pebble.log());
    let (handshakes, failed) = (handshakes.into_inner(), failed.into_inner());
    assert_eq!(failed, 0, "{failed} of {handshakes} handshakes failed\n{}", gw.stderr());
    assert!(handshakes > 100, "{handshakes} handshakes");
    assert_eq!(pebble.issued(), 2, "the first certificate and the renewal");
    assert_eq!(metric(&gw, "gatehouse_acme_orders_total{result=\"valid\"}"), 2.0);
    // The renewal was placed in the CA's window, naming the certificate it replaces (RFC 9773
    // §5; Pebble refuses a `replaces` that names no certificate of the account).
    let issued: Vec<String> =
        gw.stderr().lines().filter(|l| l.contains("ACME certificate issued")).map(str::to_string).collect();
    assert_eq!(issued.len(), 2, "{}", gw.stderr());
    assert!(issued[0].contains("replaces=\"-\"") || issued[0].contains("replaces=-"), "{}", issued[0]);
    assert!(!issued[1].contains("replaces=\"-\"") && issued[1].contains("replaces="), "{}", issued[1]);
}

/// With the CA gone, the stored certificate keeps serving, and the failed renewal is logged with
/// its retry.
#[test]
fn acme_ca_away_keeps_the_old_certificate_and_retries() {
    let name = "away.example.com";
    let (mut pebble, _store, _backend, gw) = short_lived(60, name);
    let root = pebble.issuing_root();
    assert!(wait_until(ISSUED, || serves(&gw, name, &root).then_some(())).is_some(), "{}", gw.stderr());
    let first = served_serial(&gw, name).expect("a serial");
    pebble.stop();
    // Renewal falls due within the first five sixths of the 60 s: it fails and is logged.
    let logged = wait_until(Duration::from_secs(70), || {
        gw.stderr()
            .lines()
            .find(|l| l.contains("ACME certificate not obtained") && l.contains("retry_in_s"))
            .map(str::to_string)
    });
    assert!(logged.is_some(), "no failure logged\n{}", gw.stderr());
    assert!(logged.unwrap_or_default().contains(name));
    assert_eq!(served_serial(&gw, name).as_deref(), Some(first.as_str()), "the stored certificate still serves");
    assert!(metric(&gw, "gatehouse_acme_orders_total{result=\"failed\"}") >= 1.0);
    // The certificate expires with the CA still away: logged as an error and counted once, at
    // its expiry (the retry after a failure comes no later than it).
    let expired =
        wait_until(Duration::from_secs(70), || (metric(&gw, "gatehouse_acme_expired_total") >= 1.0).then_some(()));
    assert!(expired.is_some(), "expiry not counted\n{}", gw.stderr());
    let logged = gw.stderr().lines().filter(|l| l.contains("certificate expired with no renewal in place")).count();
    assert_eq!(logged, 1, "{}", gw.stderr());
    assert_eq!(metric(&gw, "gatehouse_acme_expired_total"), 1.0, "each certificate counted once");
}

/// An `ask` endpoint: 200 for names starting with `yes`, 403 for the others; counts the asks in
/// `asks.log` beside it.
fn ask_endpoint(dir: &TempDir) -> crate::common::PeerProcess {
    let script = r#"
import http.server, sys, urllib.parse
log = open(sys.argv[1], "a")
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        q = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
        name = q.get("domain", [""])[0]
        log.write(name + "\n"); log.flush()
        self.send_response(200 if name.startswith("yes") else 403)
        self.send_header("content-length", "0"); self.end_headers()
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;
    crate::common::PeerProcess::spawn(
        std::process::Command::new("python3").args(["-c", script]).arg(dir.join("asks.log")),
        "the ask endpoint",
    )
}

/// On-demand certificates: a name `allow` covers is issued at its first handshake; 100
/// concurrent handshakes for a new name make one order; a name the ask endpoint refuses never
/// reaches the CA (asked once, the refusal remembered); the rate holds.
#[test]
fn acme_on_demand_issues_allowed_names_at_their_first_handshake() {
    let (http, https) = (free_port(), free_port());
    // Pebble refuses 5 % of nonces here too: each refused request is sent again within the
    // handshake's order.
    let pebble = Pebble::start(&PebbleOptions::new(http, https));
    let store = TempDir::new();
    let backend = Backend::start("b");
    let ask = ask_endpoint(&store);
    let acme = acme_section(&pebble, &[], "[tls-alpn-01]")
        + &format!(
            "    on_demand:\n      allow: [\"*.od.example.com\"]\n      ask: \"http://127.0.0.1:{}/check\"\n      rate: {{limit: 3, interval: 1h}}\n",
            ask.port
        );
    let gw = one_node("workers: 2\nadmin: {bind: \"127.0.0.1:0\"}\n", &acme, &store, (http, https), &backend);
    let root = pebble.issuing_root();
    // Allowed by pattern: issued within the first handshake.
    assert!(serves(&gw, "a.od.example.com", &root), "{}\n{}", gw.stderr(), pebble.log());
    assert_eq!(pebble.orders(), 1);
    // 100 concurrent first handshakes for one new name: one order, every handshake served.
    let served = std::thread::scope(|s| {
        let port = gw.addr("mine").port();
        let root = &root;
        let handles: Vec<_> = (0..100).map(|_| s.spawn(move || serves_at(port, "many.od.example.com", root))).collect();
        handles.into_iter().map(|h| h.join().unwrap_or(false)).filter(|ok| *ok).count()
    });
    assert_eq!(served, 100, "{}", gw.stderr());
    assert_eq!(pebble.orders(), 2, "one order for 100 concurrent handshakes");
    // Allowed by the ask endpoint.
    assert!(serves(&gw, "yes.customer.test", &root), "{}", gw.stderr());
    assert_eq!(pebble.orders(), 3);
    // Refused by it: no certificate (the listener has no default: the handshake ends with
    // `unrecognized_name`), no order, asked once for both handshakes.
    assert_eq!(handshake_alert(&gw, "no.customer.test"), Some(UNRECOGNIZED_NAME), "{}", gw.stderr());
    assert!(!serves(&gw, "no.customer.test", &root));
    assert_eq!(pebble.orders(), 3, "a refused name reached the CA");
    let asks = std::fs::read_to_string(store.join("asks.log")).unwrap_or_default();
    assert_eq!(asks.lines().filter(|l| *l == "no.customer.test").count(), 1, "the refusal is remembered: {asks}");
    // The rate (3 per hour) is used up: an allowed name is refused at once, without an order.
    assert_eq!(handshake_alert(&gw, "b.od.example.com"), Some(UNRECOGNIZED_NAME), "{}", gw.stderr());
    assert_eq!(pebble.orders(), 3, "over the rate, no order");
    assert!(gw.stderr().contains("over tls.acme.on_demand.rate"), "{}", gw.stderr());
    // The ask endpoint gone: refused (and logged), never ordered.
    drop(ask);
    assert!(!serves(&gw, "yes-but-nobody-answers.customer.test", &root));
    assert!(gw.stderr().contains("the on-demand ask endpoint did not answer; refused"), "{}", gw.stderr());
    assert_eq!(pebble.orders(), 3);
    // Names that are not a CA's to issue never get that far.
    assert!(!serves(&gw, "localhost", &root));
    // Each decision counted; the CA's answer times measured; the kept certificates gauged.
    for (decision, at_least) in [("allowed", 3.0), ("refused", 2.0), ("over_rate", 1.0), ("not_a_name", 1.0)] {
        let series = format!("gatehouse_acme_on_demand_total{{decision=\"{decision}\"}}");
        assert!(metric(&gw, &series) >= at_least, "{series}");
    }
    assert!(metric(&gw, "gatehouse_acme_request_duration_seconds_count{}") >= 10.0);
    let gauged = wait_until(SETTLE, || {
        let total: f64 = ["7d", "30d", "90d", "later"]
            .iter()
            .map(|w| metric(&gw, &format!("gatehouse_acme_certificates{{expires_within=\"{w}\"}}")))
            .sum();
        (total == 3.0).then_some(())
    });
    assert!(gauged.is_some(), "three kept certificates by days to expiry");
    // The issued names are recorded, so a restarted manager renews them.
    let recorded = std::fs::read_to_string(store.join(".acme/on-demand-names")).unwrap_or_default();
    for name in ["a.od.example.com", "many.od.example.com", "yes.customer.test"] {
        assert!(recorded.lines().any(|l| l == name), "{name} not recorded: {recorded}");
    }
}

/// The `unrecognized_name` alert (RFC 8446 §6.2).
const UNRECOGNIZED_NAME: u32 = 112;

/// The TLS alert `gw`'s listener `mine` ends a handshake for `name` with, as openssl reports it
/// (`SSL alert number N`), or `None` when the handshake completes.
fn handshake_alert(gw: &Gateway, name: &str) -> Option<u32> {
    let port = gw.addr("mine").port();
    let out = std::process::Command::new("openssl")
        .args(["s_client", "-connect", &format!("127.0.0.1:{port}"), "-servername", name])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run openssl");
    let text = String::from_utf8_lossy(&out.stderr);
    let number = text.split("SSL alert number ").nth(1)?;
    number.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// On-demand certificates across a cluster: three nodes on one Redis, each given a third of 90
/// concurrent first handshakes for one new name, make one order and all serve it; the rate is
/// the cluster's (two orders per hour: a third name on a node that has ordered nothing is
/// refused).
#[test]
fn acme_on_demand_across_a_cluster_orders_once_and_shares_the_rate() {
    let (http, https) = (free_port(), free_port());
    let pebble = Pebble::start(&PebbleOptions::new(http, https));
    let cluster = Cluster::new();
    let acme = acme_section(&pebble, &[], "[tls-alpn-01]")
        + "    on_demand:\n      allow: [\"*.odc.example.com\"]\n      rate: {limit: 2, interval: 1h}\n";
    let nodes: Vec<Gateway> = (1..=3).map(|id| cluster_node(&cluster, id, &acme, (http, https))).collect();
    let root = pebble.issuing_root();
    let logs = || nodes.iter().map(Gateway::stderr).collect::<Vec<_>>().join("\n---\n");
    let served = std::thread::scope(|s| {
        let root = &root;
        let handles: Vec<_> = (0..90)
            .map(|i| {
                let port = nodes[i % 3].addr("mine").port();
                s.spawn(move || serves_at(port, "one.odc.example.com", root))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or(false)).filter(|ok| *ok).count()
    });
    assert_eq!(served, 90, "{}", logs());
    assert_eq!(pebble.orders(), 1, "one order for 90 handshakes on three nodes\n{}", logs());
    assert!(serves(&nodes[1], "two.odc.example.com", &root), "{}", logs());
    assert_eq!(pebble.orders(), 2);
    // Node 3 has placed no order of its own; the cluster has placed two. A handshake refused
    // for another reason (the store not read within the 300 ms command timeout of a loaded
    // machine) is logged as such, and the name is asked for again.
    let over_rate = wait_until(ISSUED, || {
        assert_eq!(handshake_alert(&nodes[2], "three.odc.example.com"), Some(UNRECOGNIZED_NAME));
        nodes[2].stderr().contains("over tls.acme.on_demand.rate").then_some(())
    });
    assert!(over_rate.is_some(), "{}", nodes[2].stderr());
    assert_eq!(pebble.orders(), 2, "over the cluster's rate, no order\n{}", logs());
    for gw in &nodes {
        for name in ["one.odc.example.com", "two.odc.example.com"] {
            assert!(serves(gw, name, &root), "{name} not served by every node");
        }
    }
}

/// Pebble refusing half the nonces: every refused request is sent again, and the name is
/// issued by one order that did not fail.
#[test]
fn acme_orders_through_refused_nonces() {
    let (http, https) = (free_port(), free_port());
    let mut options = PebbleOptions::new(http, https);
    options.nonce_reject_percent = 50;
    let name = "nonces.example.com";
    let (pebble, gw, _kept) = served_by_one_node(&options, (http, https), name, "[http-01]");
    let refused = metric(&gw, "gatehouse_acme_refused_nonces_total");
    assert!(refused >= 3.0, "Pebble refused {refused} nonces");
    assert_eq!(pebble.orders(), 1, "{}", gw.stderr());
    assert_eq!(failed_orders(&[&gw]), 0, "{}", gw.stderr());
    assert!(!gw.stderr().contains("no ACME account"), "the account was made at the first try: {}", gw.stderr());
}

/// A Pebble started with `options`, and one node (listening on `ports`, answering `challenges`)
/// that has `name` issued and serves it; panics if it does not within [`ISSUED`]. The store and
/// the backend last as long as the last item.
fn served_by_one_node(
    options: &PebbleOptions,
    ports: (u16, u16),
    name: &str,
    challenges: &str,
) -> (Pebble, Gateway, (TempDir, Backend)) {
    let pebble = Pebble::start(options);
    let store = TempDir::new();
    let backend = Backend::start("b");
    let acme = acme_section(&pebble, &[name.to_string()], challenges);
    let gw = one_node(ONE_WORKER, &acme, &store, ports, &backend);
    let root = pebble.issuing_root();
    let served = wait_until(ISSUED, || serves(&gw, name, &root).then_some(()));
    assert!(served.is_some(), "{name} not served\n{}\n--- pebble ---\n{}", gw.stderr(), pebble.log());
    (pebble, gw, (store, backend))
}

/// Challenge types are tried in the configured order: http-01 first fails (the CA reaches
/// nothing on its port), and a new order at once answers with tls-alpn-01.
#[test]
fn acme_failed_challenge_type_gives_way_to_the_next() {
    let (http, https) = (free_port(), free_port());
    let options = PebbleOptions::new(free_port(), https);
    let name = "next.example.com";
    let (pebble, gw, _kept) = served_by_one_node(&options, (http, https), name, "[http-01, tls-alpn-01]");
    let line =
        gw.stderr().lines().find(|l| l.contains("ordering again with the next challenge type")).map(str::to_string);
    let line = line.unwrap_or_else(|| panic!("no fallback logged\n{}", gw.stderr()));
    for part in [name, "http-01 validation failed", "next=\"tls-alpn-01\""] {
        assert!(line.contains(part), "{part:?} missing from {line}");
    }
    assert_eq!(pebble.orders(), 2, "the failed http-01 order, then the tls-alpn-01 one");
    for (kind, result, n) in [("http-01", "invalid", 1.0), ("tls-alpn-01", "valid", 1.0), ("http-01", "valid", 0.0)] {
        let series = format!("gatehouse_acme_validations_total{{type=\"{kind}\",result=\"{result}\"}}");
        assert_eq!(metric(&gw, &series), n, "{series}");
    }
    assert_eq!(metric(&gw, "gatehouse_acme_orders_total{result=\"failed\"}"), 1.0);
    assert!(!gw.stderr().contains("ACME certificate not obtained"), "{}", gw.stderr());
}

/// DNS-01 through RFC 2136: a wildcard and a plain name issued with TXT records added at a real
/// Knot DNS (TSIG-signed updates) that Pebble queries, and removed afterwards; the wildcard
/// serves a name under it.
#[test]
fn acme_dns01_issues_a_wildcard_through_rfc2136_updates() {
    let knot = gatehouse_testkit::Knot::start("dns.example.test");
    let mut options = PebbleOptions::new(free_port(), free_port());
    options.dns = Some(knot.addr());
    let pebble = Pebble::start(&options);
    let store = TempDir::new();
    let backend = Backend::start("b");
    let names = ["*.apps.dns.example.test".to_string(), "www.dns.example.test".to_string()];
    let acme = acme_section(&pebble, &names, "[dns-01]")
        + &format!(
            "    dns01:\n      rfc2136: {{server: \"{}\", zone: dns.example.test, key_name: {}, key_algorithm: hmac-sha256, key_file: \"{}\"}}\n",
            knot.addr(),
            gatehouse_testkit::KNOT_KEY_NAME,
            knot.key_file().display()
        );
    let gw = one_node(ONE_WORKER, &acme, &store, (free_port(), free_port()), &backend);
    let root = pebble.issuing_root();
    for name in ["a.apps.dns.example.test", "b.apps.dns.example.test", "www.dns.example.test"] {
        let served = wait_until(ISSUED, || serves(&gw, name, &root).then_some(()));
        assert!(served.is_some(), "{name} not served\n{}\n--- knot ---\n{}", gw.stderr(), knot.log());
    }
    assert_eq!(pebble.issued(), 2, "the wildcard and the plain name");
    assert_eq!(metric(&gw, "gatehouse_acme_orders_total{result=\"valid\"}"), 2.0);
    assert_eq!(metric(&gw, "gatehouse_acme_validations_total{type=\"dns-01\",result=\"valid\"}"), 2.0);
    // The records are gone once the orders are over.
    let gone = wait_until(Duration::from_secs(10), || {
        (knot.txt("_acme-challenge.apps.dns.example.test").is_empty()
            && knot.txt("_acme-challenge.www.dns.example.test").is_empty())
        .then_some(())
    });
    assert!(gone.is_some(), "TXT records left behind\n{}", knot.log());
}

/// A CA that requires an external account binding: without `eab` no account is made (the CA's
/// problem logged); with it, the account is bound and the name issued.
#[test]
fn acme_external_account_binding() {
    let (http, https) = (free_port(), free_port());
    let mut options = PebbleOptions::new(http, https);
    let key = "zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W";
    options.eab = vec![("kid-1".into(), key.into())];
    let pebble = Pebble::start(&options);
    let backend = Backend::start("b");
    let name = "eab.example.com";
    let run = |eab: &str| {
        let store = TempDir::new();
        let acme = acme_section(&pebble, &[name.to_string()], "[tls-alpn-01]") + eab;
        (one_node(ONE_WORKER, &acme, &store, (http, https), &backend), store)
    };
    let (without, _s1) = run("");
    let refused =
        wait_until(ISSUED, || without.stderr().lines().find(|l| l.contains("no ACME account")).map(str::to_string));
    assert!(refused.is_some_and(|l| l.contains("externalAccountRequired")), "{}", without.stderr());
    drop(without);
    let dir = TempDir::new();
    std::fs::write(dir.join("hmac"), format!("{key}\n")).expect("write the key");
    let (with, _s2) = run(&format!("    eab: {{kid: kid-1, hmac_key_file: \"{}\"}}\n", dir.join("hmac").display()));
    let root = pebble.issuing_root();
    let served = wait_until(ISSUED, || serves(&with, name, &root).then_some(()));
    assert!(served.is_some(), "{}\n{}", with.stderr(), pebble.log());
}

/// A validation that fails (the CA reaches nothing on the HTTP-01 port) is logged once per try
/// with the name, the order, the challenge and the CA's problem document, and counted.
#[test]
fn acme_failed_validation_is_logged_with_the_cas_problem() {
    let (http, https) = (free_port(), free_port());
    // Pebble validates HTTP-01 on a port nothing listens on.
    let pebble = Pebble::start(&PebbleOptions::new(free_port(), https));
    let store = TempDir::new();
    let backend = Backend::start("b");
    let acme = acme_section(&pebble, &["fail.example.com".to_string()], "[http-01]");
    let gw = one_node(ONE_WORKER, &acme, &store, (http, https), &backend);
    let line = wait_until(ISSUED, || {
        gw.stderr().lines().find(|l| l.contains("ACME certificate not obtained")).map(str::to_string)
    });
    let line = line.unwrap_or_else(|| panic!("no failure logged\n{}", gw.stderr()));
    for part in [
        "fail.example.com",
        "order https://127.0.0.1:",
        "http-01 validation failed",
        "urn:ietf:params:acme:error:",
        "retry_in_s=30",
    ] {
        assert!(line.contains(part), "{part:?} missing from {line}");
    }
    assert!(metric(&gw, "gatehouse_acme_orders_total{result=\"failed\"}") >= 1.0);
}
