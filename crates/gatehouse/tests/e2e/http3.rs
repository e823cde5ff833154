//! HTTP/3 with two independent real QUIC and HTTP/3 clients, aioquic's (`tests/h3/client.py`)
//! and quic-go's (`tests/h3/goclient`, built with `go` on first use): the listener's
//! certificates per SNI (an unknown name refused), GET and POST with bodies, a 10 MB download,
//! 100 requests at once on one connection, a request reaching the backend as it does over HTTP/2,
//! `Alt-Svc` on the TCP answers, sessions resumed across two nodes sharing Redis, a reload and a
//! stop during requests, and a flood of first flights met with Retry. CI installs aioquic and Go;
//! elsewhere the tests say they were skipped, unless `CI` is set.

use crate::common::{start, targets, Cluster};
use crate::tls::{certificates, Pki};
use gatehouse_testkit::{curl, metric_value, Backend, Gateway};
use gatehouse_tls::issue::{Algorithm, Authority};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

fn client_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/h3/client.py")
}

/// Whether aioquic is there; without it (and without `CI`) a test is skipped.
pub(crate) fn aioquic(test: &str) -> bool {
    crate::common::python_has("aioquic", test)
}

/// Runs the HTTP/3 client against `port` with `args`; what it printed.
pub(crate) fn h3(port: u16, args: &[&str]) -> Value {
    let mut cmd = Command::new("python3");
    cmd.arg(client_script()).args(["--port", &port.to_string()]).args(args);
    json_of(cmd)
}

/// What a client printed: one JSON object.
fn json_of(mut cmd: Command) -> Value {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("client output {text:?} ({e}); stderr: {}", String::from_utf8_lossy(&out.stderr)))
}

/// The responses of a client run that connected; panics with its error otherwise.
pub(crate) fn responses(v: &Value) -> &Vec<Value> {
    assert!(v.get("error").is_none(), "HTTP/3 client failed: {v}");
    assert_eq!(v["alpn"], "h3", "{v}");
    v["responses"].as_array().expect("responses")
}

fn sha256(data: &[u8]) -> String {
    use std::fmt::Write;
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, data);
    digest.as_ref().iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

struct Site {
    pki: Pki,
    backend: Backend,
    gw: Gateway,
    /// Its configuration, to write again with a change.
    yaml: String,
}

impl Site {
    /// A gateway with an HTTP/3 listener serving two certificates (no default one) in front of
    /// one backend.
    fn start() -> Site {
        Site::start_with("")
    }

    /// The same with top-level settings `head` (lines of YAML) added.
    fn start_with(head: &str) -> Site {
        let pki = Pki::new();
        let shop = pki.issue(&["shop.test"], Algorithm::EcdsaP256, "shop.pem", None);
        let other = pki.issue(&["*.other.test"], Algorithm::Rsa2048, "other.pem", None);
        let backend = Backend::start("b");
        let yaml = format!(
            "workers: 2\n{head}shutdown_grace: 10s\nadmin: {{bind: \"127.0.0.1:0\"}}\ntls:\n{}\nlisteners:\n  https: {{bind: \"127.0.0.1:0\", tls: {{}}, http3: true}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n  s: {{hosts: [\"*\"], routes: [{{path: /, upstream: u}}]}}\n",
            certificates(&[&shop, &other]),
            targets(&[&backend])
        );
        let gw = start(&yaml);
        Site { pki, backend, gw, yaml }
    }

    /// Runs the client for `sni` in the background; its output when joined.
    fn h3_later(&self, sni: &str, args: &[&str]) -> std::thread::JoinHandle<Value> {
        let (port, sni, ca) = (self.port(), sni.to_string(), self.ca());
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        std::thread::spawn(move || h3_verified(port, &sni, &ca, &args.iter().map(String::as_str).collect::<Vec<_>>()))
    }

    /// Waits until the backend has received `n` requests.
    fn received(&self, n: usize) {
        crate::tls::eventually("the backend received the request", || self.backend.request_count() >= n);
    }

    fn port(&self) -> u16 {
        self.gw.addr("https").port()
    }

    fn ca(&self) -> String {
        self.pki.ca_file().display().to_string()
    }

    /// The client run for `sni`, verified against the test CA.
    fn h3(&self, sni: &str, args: &[&str]) -> Value {
        h3_verified(self.port(), sni, &self.ca(), args)
    }
}

/// The HTTP/3 client's run against `port` for `sni`, the certificate checked against `ca`.
fn h3_verified(port: u16, sni: &str, ca: &str, args: &[&str]) -> Value {
    h3(port, &[&["--sni", sni, "--ca", ca], args].concat())
}

#[test]
fn requests_over_http3_go_the_request_path() {
    if !aioquic("requests_over_http3_go_the_request_path") {
        return;
    }
    let site = Site::start();
    let dir = site.pki.dir.path();

    // GET, on each certificate's name; the client checks the certificate against the name.
    for sni in ["shop.test", "www.other.test"] {
        let v = site.h3(sni, &["--path", "/a?x=1"]);
        let r = &responses(&v)[0];
        assert_eq!(r["status"], 200, "{sni}: {r}");
        // The server's SETTINGS: no QPACK dynamic table, so no blocked streams (both absent,
        // that is 0: RFC 9204 §5); the header section limit is max_header_bytes (64 KiB).
        let settings = &v["settings"];
        for qpack in ["1", "7"] {
            assert!(settings[qpack].is_null() || settings[qpack] == 0, "{settings}");
        }
        assert_eq!(settings["6"], 65_536, "{settings}");
    }
    let seen = site.backend.requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].path_and_query(), "/a?x=1");
    assert_eq!(seen[0].header("host"), Some("shop.test"));
    assert_eq!(seen[1].header("host"), Some("www.other.test"));

    // Header values whose Huffman code is longer than they are go as plain literals (RFC 9204
    // §4.1.2), both ways; those that shrink go Huffman-coded. Both kinds arrive intact.
    const ODD: &str = "{}<>^|~\\`{}<>^|~";
    const PLAIN: &str = "text/plain; charset=utf-8, www.example.com";
    site.backend.add_response_header("x-odd", ODD);
    site.backend.add_response_header("x-plain", PLAIN);
    site.backend.clear();
    let v = site.h3(
        "shop.test",
        &["--path", "/odd", "--header", &format!("x-odd:{ODD}"), "--header", &format!("x-plain:{PLAIN}")],
    );
    let r = &responses(&v)[0];
    assert_eq!(r["status"], 200, "{v}");
    assert_eq!(r["headers"]["x-odd"][0], ODD, "{v}");
    assert_eq!(r["headers"]["x-plain"][0], PLAIN, "{v}");
    let seen = site.backend.requests();
    assert_eq!(seen[0].header("x-odd"), Some(ODD));
    assert_eq!(seen[0].header("x-plain"), Some(PLAIN));
    site.backend.clear();

    // A name no certificate serves: refused, nothing forwarded.
    let v = site.h3("nothing.test", &["--path", "/refused"]);
    assert!(v.get("error").is_some(), "a handshake for an unknown name succeeded: {v}");
    assert_eq!(site.backend.request_count(), 0);

    // POST with a 1 MB body: it arrives whole.
    let body: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    let file = dir.join("post.bin");
    std::fs::write(&file, &body).expect("write the body");
    let v =
        site.h3("shop.test", &["--method", "POST", "--path", "/upload", "--body-file", &file.display().to_string()]);
    assert_eq!(responses(&v)[0]["status"], 200, "{v}");
    let posted = site.backend.requests().pop().expect("the POST");
    assert_eq!(posted.method, "POST");
    assert_eq!(posted.body.len(), body.len());
    assert_eq!(sha256(&posted.body), sha256(&body));

    // A 10 MB download, whole.
    let big: Vec<u8> = (0..10_000_000u32).map(|i| (i % 253) as u8).collect();
    site.backend.set_body(big.clone());
    let v = site.h3("shop.test", &["--path", "/big"]);
    let r = &responses(&v)[0];
    assert_eq!(r["status"], 200);
    assert_eq!(r["length"], 10_000_000, "{}", r["headers"]);
    assert_eq!(r["sha256"], sha256(&big));
    site.backend.set_body(bytes::Bytes::from_static(b"small\n"));

    // 100 requests at once on one connection (the listener's default `quic.max_streams`).
    site.backend.clear();
    let v = site.h3("shop.test", &["--path", "/many", "--repeat", "100"]);
    let all = responses(&v);
    assert_eq!(all.len(), 100);
    assert!(all.iter().all(|r| r["status"] == 200), "{v}");
    assert_eq!(site.backend.request_count(), 100);
}

/// The backend sees a request that came over HTTP/3 exactly as one that came over HTTP/2.
#[test]
fn a_request_over_http3_reaches_the_backend_as_over_http2() {
    if !aioquic("a_request_over_http3_reaches_the_backend_as_over_http2") {
        return;
    }
    let site = Site::start();
    let port = site.port().to_string();
    let resolve = format!("shop.test:{port}:127.0.0.1");
    let url = format!("https://shop.test:{port}/same/path?q=1");
    let ca = site.ca();
    let r = curl(&[
        "--http2",
        "--cacert",
        &ca,
        "--resolve",
        &resolve,
        "-H",
        "user-agent: t/1",
        "-H",
        "Accept:",
        "-H",
        "x-custom: a",
        &url,
    ]);
    assert_eq!(r.status, 200);
    assert_eq!(r.version, "HTTP/2");
    let authority = format!("shop.test:{port}");
    let v = site.h3(
        "shop.test",
        &[
            "--authority",
            &authority,
            "--path",
            "/same/path?q=1",
            "--header",
            "user-agent:t/1",
            "--header",
            "x-custom:a",
        ],
    );
    assert_eq!(responses(&v)[0]["status"], 200, "{v}");
    let seen = site.backend.requests();
    assert_eq!(seen.len(), 2);
    let (over_h2, over_h3) = (&seen[0], &seen[1]);
    assert_eq!(over_h2.method, over_h3.method);
    assert_eq!(over_h2.path_and_query(), over_h3.path_and_query());
    assert_eq!(over_h2.version, over_h3.version);
    // Each request has its own id; everything else is the same.
    let sorted = |r: &gatehouse_testkit::Recorded| {
        let mut h: Vec<_> = r.headers.iter().filter(|(k, _)| k != "x-request-id").cloned().collect();
        h.sort();
        h
    };
    assert!(over_h3.header("x-request-id").is_some());
    assert_eq!(sorted(over_h2), sorted(over_h3), "headers at the backend differ");
}

#[test]
fn alt_svc_advertises_http3_on_tcp_answers() {
    let site = Site::start();
    let port = site.port();
    let resolve = format!("shop.test:{port}:127.0.0.1");
    let url = format!("https://shop.test:{port}/");
    let expected = format!("h3=\":{port}\"; ma=86400");
    for version in ["--http1.1", "--http2"] {
        let r = curl(&[version, "--cacert", &site.ca(), "--resolve", &resolve, &url]);
        assert_eq!(r.status, 200);
        assert_eq!(r.header("alt-svc"), Some(expected.as_str()), "{version}");
    }
}

#[test]
fn alt_svc_is_off_or_set_by_the_listener() {
    let backend = Backend::start("b");
    let pki = Pki::new();
    let cert = pki.issue(&["shop.test"], Algorithm::EcdsaP256, "shop.pem", None);
    let gw = start(&format!(
        "workers: 1\ntls:\n{}\nlisteners:\n  off: {{bind: \"127.0.0.1:0\", tls: {{}}, http3: true, alt_svc: \"off\"}}\n  own: {{bind: \"127.0.0.1:0\", tls: {{}}, alt_svc: 'h3=\":443\"; ma=3600'}}\n  plain: {{bind: \"127.0.0.1:0\"}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n  s: {{hosts: [\"*\"], routes: [{{path: /, upstream: u}}]}}\n",
        certificates(&[&cert]),
        targets(&[&backend])
    ));
    let get = |listener: &str, scheme: &str| {
        let port = gw.addr(listener).port();
        let resolve = format!("shop.test:{port}:127.0.0.1");
        let url = format!("{scheme}://shop.test:{port}/");
        curl(&["--cacert", &pki.ca_file().display().to_string(), "--resolve", &resolve, &url])
    };
    assert_eq!(get("off", "https").header("alt-svc"), None);
    assert_eq!(get("own", "https").header("alt-svc"), Some("h3=\":443\"; ma=3600"));
    assert_eq!(get("plain", "http").header("alt-svc"), None);
}

/// HSTS over HTTP/3 as over TCP: the listener's policy, the site's before it.
#[test]
fn hsts_is_sent_over_http3() {
    if !aioquic("hsts_is_sent_over_http3") {
        return;
    }
    let backend = Backend::start("b");
    let pki = Pki::new();
    let cert = pki.issue(&["strict.test", "other.test"], Algorithm::EcdsaP256, "hsts.pem", None);
    let gw = start(&format!(
        "workers: 1\ntls:\n{}\nlisteners:\n  https: {{bind: \"127.0.0.1:0\", tls: {{}}, http3: true, hsts: {{max_age: 2h}}}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n  strict: {{hosts: [strict.test], hsts: {{include_subdomains: true, preload: true}}, routes: [{{path: /, upstream: u}}]}}\n  other: {{hosts: [other.test], routes: [{{path: /, upstream: u}}]}}\n",
        certificates(&[&cert]),
        targets(&[&backend])
    ));
    let ca = pki.ca_file().display().to_string();
    for (sni, expected) in
        [("strict.test", "max-age=31536000; includeSubDomains; preload"), ("other.test", "max-age=7200")]
    {
        let v = h3_verified(gw.addr("https").port(), sni, &ca, &["--path", "/"]);
        let r = &responses(&v)[0];
        assert_eq!(r["status"], 200, "{v}");
        assert_eq!(r["headers"]["strict-transport-security"][0], expected, "{sni}: {v}");
    }
}

/// A node of `cluster` (cluster-wide tickets) serving `cert` over HTTP/3, with more `tls` settings
/// and more settings of its listener.
fn cluster_node(cluster: &Cluster, cert: &std::path::Path, id: &str, tls: &str, listener: &str) -> Gateway {
    start(&format!(
        "workers: 2\nadmin: {{bind: \"127.0.0.1:0\"}}\n{}node: {{id: {id}}}\ntls:\n{}\n  tickets: cluster{tls}\nlisteners:\n  https: {{bind: \"127.0.0.1:0\", tls: {{}}, http3: true{listener}}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n  s: {{hosts: [\"*\"], routes: [{{path: /, upstream: u}}]}}\n",
        cluster.redis_section(),
        certificates(&[cert]),
        targets(&[&cluster.backend])
    ))
}

/// A session made over QUIC on node A resumes on node B: the ticket is sealed with the cluster's
/// ticket keys, shared through Redis.
#[test]
fn quic_sessions_resume_across_two_nodes() {
    if !aioquic("quic_sessions_resume_across_two_nodes") {
        return;
    }
    let (cluster, pki) = (Cluster::new(), Pki::new());
    let cert = pki.issue(&["shop.test"], Algorithm::EcdsaP256, "shop.pem", None);
    let node = |id: &str| cluster_node(&cluster, &cert, id, "", "");
    let (a, b) = (node("a"), node("b"));
    let ca = pki.ca_file().display().to_string();
    let ticket = pki.dir.join("quic-ticket");
    let ticket = ticket.display().to_string();
    let on = |gw: &Gateway, args: &[&str]| h3_verified(gw.addr("https").port(), "shop.test", &ca, args);
    let first = on(&a, &["--session-out", &ticket]);
    assert_eq!(responses(&first)[0]["status"], 200);
    assert_eq!(first["resumed"], false);
    assert_eq!(first["ticket"], true, "node A sent no ticket: {first}");
    for (name, gw) in [("A", &a), ("B", &b)] {
        let again = on(gw, &["--session-in", &ticket]);
        assert_eq!(responses(&again)[0]["status"], 200);
        assert_eq!(again["resumed"], true, "the session did not resume on node {name}: {again}");
    }
}

/// A reload while a request is under way on a QUIC connection (the listener kept, a route added)
/// leaves the connection and the request alone: the 10 MB answer arrives whole, and the new route
/// serves at once on the same port.
#[test]
fn a_reload_during_a_download_lets_it_finish() {
    if !aioquic("a_reload_during_a_download_lets_it_finish") {
        return;
    }
    let mut site = Site::start();
    let big: Vec<u8> = (0..10_000_000u32).map(|i| (i % 241) as u8).collect();
    site.backend.set_body(big.clone());
    // The backend holds the answer for a while: the reload happens while it is under way.
    site.backend.set_delay(std::time::Duration::from_millis(1500));
    let download = site.h3_later("shop.test", &["--path", "/big"]);
    site.received(1);
    let yaml = site
        .yaml
        .replace("routes: [{path: /, upstream: u}]", "routes: [{path: /, upstream: u}, {path: /new, upstream: u}]")
        .replace("http3: true}", "http3: true, max_connections: 5000, quic: {max_streams: 50}}");
    assert_ne!(yaml.matches("max_streams").count(), 0);
    site.gw.write_config(&yaml);
    let ev = site.gw.reload();
    assert_eq!(ev["event"], "reloaded", "{ev}");
    let v = download.join().expect("the download");
    let r = &responses(&v)[0];
    assert_eq!(r["status"], 200, "{v}");
    assert_eq!(r["length"], 10_000_000);
    assert_eq!(r["sha256"], sha256(&big));
    site.backend.set_delay(std::time::Duration::ZERO);
    site.backend.set_body(bytes::Bytes::from_static(b"small\n"));
    let v = site.h3("shop.test", &["--path", "/new/x"]);
    assert_eq!(responses(&v)[0]["status"], 200, "{v}");
}

/// On SIGTERM a QUIC connection with a request under way gets GOAWAY, and the request is
/// answered whole before the process exits.
#[test]
fn a_stop_lets_an_open_stream_finish() {
    if !aioquic("a_stop_lets_an_open_stream_finish") {
        return;
    }
    let mut site = Site::start();
    site.backend.set_body(vec![7u8; 200_000]);
    site.backend.set_delay(std::time::Duration::from_millis(1000));
    let request = site.h3_later("shop.test", &["--path", "/slow"]);
    site.received(1);
    let (status, events) = site.gw.terminate();
    assert!(status.success(), "{status}: {events:?}");
    let v = request.join().expect("the request");
    let r = &responses(&v)[0];
    assert_eq!(r["status"], 200, "{v}");
    assert_eq!(r["length"], 200_000);
}

/// Thousands of new connections that never finish their handshakes (their first flights sent as
/// fast as a script can): the worker asks new clients to prove their address (Retry) instead of
/// starting handshakes for them, and a real client still gets its answers meanwhile.
#[test]
fn a_flood_of_initial_packets_is_met_with_retry() {
    if !aioquic("a_flood_of_initial_packets_is_met_with_retry") {
        return;
    }
    let site = Site::start();
    let port = site.port();
    let flood = std::thread::spawn(move || {
        let out = Command::new("python3")
            .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/h3/flood.py"))
            .args(["--port", &port.to_string(), "--sni", "shop.test", "--count", "3000", "--seconds", "20"])
            .output()
            .expect("run the flood");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        serde_json::from_str::<Value>(text.trim()).unwrap_or_else(|e| panic!("flood said {text:?}: {e}"))
    });
    // Served throughout: a client arriving during the flood proves its address and is answered.
    let mut served = 0;
    while !flood.is_finished() {
        let v = site.h3("shop.test", &["--path", "/during"]);
        assert_eq!(responses(&v)[0]["status"], 200, "{v}");
        served += 1;
    }
    let flood = flood.join().expect("the flood");
    let metrics = site.gw.metrics();
    let retries = gatehouse_testkit::metric_value(&metrics, "gatehouse_quic_retries_total").unwrap_or(0.0);
    let handshakes = gatehouse_testkit::metric_value(&metrics, "gatehouse_quic_handshakes_total{kind=\"full\"}");
    eprintln!(
        "flood: {flood}; {served} requests served meanwhile; retries sent {retries}; full handshakes {handshakes:?}"
    );
    assert!(flood["sent"].as_u64().unwrap_or(0) >= 1000, "{flood}");
    assert!(flood["retries"].as_u64().unwrap_or(0) > 0, "no Retry came back: {flood}");
    assert!(retries > 0.0);
    assert!(served > 0);
    let v = site.h3("shop.test", &["--path", "/after"]);
    assert_eq!(responses(&v)[0]["status"], 200, "{v}");
}

/// The quic-go client, built once per test run (`go build`); `None` (the test skipped) without Go,
/// unless `CI` is set.
fn go_client(test: &str) -> Option<PathBuf> {
    static BUILT: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/h3/goclient");
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("gatehouse-h3client");
        let go = ["go", "/usr/local/go/bin/go"]
            .into_iter()
            .find(|g| Command::new(g).arg("version").output().is_ok_and(|o| o.status.success()))?;
        let status = Command::new(go).arg("build").arg("-o").arg(&out).arg(".").current_dir(&dir).status();
        match status {
            Ok(s) if s.success() => Some(out),
            other => {
                eprintln!("go build of the quic-go client failed: {other:?}");
                None
            }
        }
    });
    if built.is_none() {
        assert!(std::env::var_os("CI").is_none(), "{test}: the quic-go client is needed but CI is set");
        eprintln!("{test}: skipped, no go to build the quic-go client");
    }
    built.clone()
}

/// The quic-go client's run against `site` for `host`.
fn go_h3(client: &std::path::Path, site: &Site, host: &str, args: &[&str]) -> Value {
    let addr = format!("127.0.0.1:{}", site.port());
    let mut cmd = Command::new(client);
    cmd.args(["-addr", &addr, "-host", host, "-ca", &site.ca()]).args(args);
    json_of(cmd)
}

/// The same through quic-go's client: GET on both names, a POST body, 100 requests at once, and
/// the unknown name refused.
#[test]
fn the_quic_go_client_is_served_too() {
    let Some(client) = go_client("the_quic_go_client_is_served_too") else { return };
    let site = Site::start();
    for host in ["shop.test", "www.other.test"] {
        let v = go_h3(&client, &site, host, &["-path", "/go?x=1"]);
        let r = &v["responses"][0];
        assert_eq!(r["status"], 200, "{host}: {v}");
        assert_eq!(r["proto"], "HTTP/3.0", "{v}");
    }
    let v = go_h3(&client, &site, "nothing.test", &["-path", "/refused"]);
    assert!(v["responses"][0]["error"].as_str().is_some_and(|e| !e.is_empty()), "an unknown name was served: {v}");

    let body: Vec<u8> = (0..300_000u32).map(|i| (i % 13) as u8).collect();
    let file = site.pki.dir.join("go-post.bin");
    std::fs::write(&file, &body).expect("write the body");
    site.backend.clear();
    let v = go_h3(
        &client,
        &site,
        "shop.test",
        &["-method", "POST", "-path", "/up", "-body-file", &file.display().to_string()],
    );
    assert_eq!(v["responses"][0]["status"], 200, "{v}");
    let posted = site.backend.requests().pop().expect("the POST");
    assert_eq!(sha256(&posted.body), sha256(&body));
    assert_eq!(posted.header("content-length"), Some("300000"));

    site.backend.clear();
    let v = go_h3(&client, &site, "shop.test", &["-path", "/many", "-n", "100"]);
    let all = v["responses"].as_array().expect("responses");
    assert!(all.iter().all(|r| r["status"] == 200), "{v}");
    assert_eq!(site.backend.request_count(), 100);
}

/// A body that does not match its `content-length` is malformed (RFC 9114 §4.1.2): never
/// forwarded whole, and the excess never reaches the endpoint as a request of its own; a
/// `content-length` that is not a number, or a connection-specific header, is answered 400.
#[test]
fn a_body_longer_or_shorter_than_its_length_is_refused() {
    if !aioquic("a_body_longer_or_shorter_than_its_length_is_refused") {
        return;
    }
    let site = Site::start();
    let dir = site.pki.dir.path();
    let smuggled = dir.join("smuggled.bin");
    std::fs::write(&smuggled, b"hello GET /smuggled HTTP/1.1\r\nHost: shop.test\r\n\r\n").expect("write");
    let short = dir.join("short.bin");
    std::fs::write(&short, b"hello").expect("write");
    for (file, length) in [(&smuggled, "5"), (&short, "100"), (&short, "5x")] {
        let v = site.h3(
            "shop.test",
            &[
                "--method",
                "POST",
                "--path",
                "/up",
                "--body-file",
                &file.display().to_string(),
                "--header",
                &format!("content-length:{length}"),
            ],
        );
        let status = v["responses"].get(0).and_then(|r| r["status"].as_u64());
        assert_ne!(status, Some(200), "content-length {length}: {v}");
    }
    // Connection-specific headers make a request malformed (RFC 9114 §4.2): 400, not forwarded.
    for header in ["transfer-encoding:chunked", "connection:close", "keep-alive:timeout=5", "te:gzip"] {
        let v = site.h3("shop.test", &["--path", "/hop", "--header", header]);
        let r = &responses(&v)[0];
        assert_eq!(r["status"], 400, "{header}: {v}");
        assert_eq!(r["text"], "400 Bad Request\n", "{v}");
    }
    let m = site.gw.metrics();
    // The content-length that is not a number, and the four headers.
    assert!(metric_value(&m, "gatehouse_bad_requests_total").unwrap_or(0.0) >= 5.0, "{m}");
    let v = site.h3("shop.test", &["--path", "/te", "--header", "te:trailers"]);
    assert_eq!(responses(&v)[0]["status"], 200, "{v}");
    // The excess never became a request, and no body arrived whole with a wrong length.
    let seen = site.backend.requests();
    assert!(seen.iter().all(|r| r.path_and_query() != "/smuggled"), "{seen:?}");
    assert!(seen.iter().filter(|r| r.method == "POST").all(|r| r.aborted), "{seen:?}");
    assert!(seen.iter().all(|r| r.path_and_query() != "/hop"), "{seen:?}");
    // The gateway goes on serving, on the same endpoint.
    let v = site.h3("shop.test", &["--path", "/after"]);
    assert_eq!(responses(&v)[0]["status"], 200, "{v}");
    assert!(site.backend.requests().iter().any(|r| r.path_and_query() == "/after"));
}

/// Certificates the configuration does not name come from the store on first use, over QUIC as
/// over TCP: the very first HTTP/3 handshake for a name gets its certificate, loaded while the
/// handshake waits. quic-go offers a post-quantum key share, so its ClientHello takes two
/// Initial packets; every client is sent a Retry first, so the name is found again under the
/// connection id it first used.
#[test]
fn the_first_quic_handshake_for_a_name_loads_its_certificate_from_the_store() {
    if !aioquic("the_first_quic_handshake_for_a_name_loads_its_certificate_from_the_store") {
        return;
    }
    let pki = Pki::new();
    let store = gatehouse_testkit::TempDir::new();
    pki.issue(&["first.test"], Algorithm::EcdsaP256, "first.pem", Some(store.path()));
    pki.issue(&["second.test"], Algorithm::Rsa2048, "second.pem", Some(store.path()));
    let backend = Backend::start("b");
    let gw = start(&format!(
        "workers: 2\nadmin: {{bind: \"127.0.0.1:0\"}}\ntls:\n  store: {{dir: \"{}\"}}\nlisteners:\n  https: {{bind: \"127.0.0.1:0\", tls: {{}}, http3: true, quic: {{retry: always}}}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n  s: {{hosts: [\"*\"], routes: [{{path: /, upstream: u}}]}}\n",
        store.path().display(),
        targets(&[&backend])
    ));
    let (port, ca) = (gw.addr("https").port(), pki.ca_file().display().to_string());
    let misses = |gw: &Gateway| metric_value(&gw.metrics(), "gatehouse_tls_cert_lookups_total{result=\"miss\"}");
    assert_eq!(misses(&gw), Some(0.0), "nothing loaded before the first handshake");

    let v = h3_verified(port, "first.test", &ca, &["--path", "/first"]);
    assert_eq!(responses(&v)[0]["status"], 200, "{v}");
    assert_eq!(misses(&gw), Some(1.0), "first.test was loaded from the store");

    if let Some(client) = go_client("the_first_quic_handshake_for_a_name_loads_its_certificate_from_the_store") {
        let addr = format!("127.0.0.1:{port}");
        let mut cmd = Command::new(client);
        cmd.args(["-addr", &addr, "-host", "second.test", "-ca", &ca, "-pq", "-path", "/second"]);
        let v = json_of(cmd);
        assert_eq!(v["responses"][0]["status"], 200, "{v}");
        assert_eq!(misses(&gw), Some(2.0), "second.test was loaded from the store");
    }
    // A name the store does not hold either: refused, nothing forwarded.
    let before = backend.request_count();
    let v = h3_verified(port, "none.test", &ca, &["--path", "/refused"]);
    assert!(v.get("error").is_some(), "a handshake for an unknown name succeeded: {v}");
    assert_eq!(backend.request_count(), before);
    assert_eq!(backend.requests()[0].path_and_query(), "/first");
    let m = gw.metrics();
    assert!(metric_value(&m, "gatehouse_quic_retries_total").unwrap_or(0.0) >= 2.0, "{m}");
}

/// A site that verifies client certificates does so over QUIC: a client presenting one its CA
/// signed is served, and the backend is told who it is; without one, or with another CA's, the
/// handshake is refused. A site without `client_auth` on the same listener asks for none.
#[test]
fn a_site_verifies_client_certificates_over_quic() {
    if !aioquic("a_site_verifies_client_certificates_over_quic") {
        return;
    }
    let pki = Pki::new();
    let clients = Authority::new("Client CA").expect("client CA");
    let client_ca = pki.dir.join("clients.pem");
    std::fs::write(&client_ca, clients.cert_pem()).expect("write");
    let alice = pki.dir.join("alice.pem");
    std::fs::write(&alice, clients.issue(&["alice.client"], Algorithm::EcdsaP256, 30).expect("issue")).expect("write");
    let mallory = pki.dir.join("mallory.pem");
    std::fs::write(&mallory, pki.ca.issue(&["mallory.client"], Algorithm::EcdsaP256, 30).expect("issue"))
        .expect("write");
    let cert = pki.issue(&["secure.test", "open.test"], Algorithm::EcdsaP256, "sites.pem", None);
    let backend = Backend::start("b");
    let gw = start(&format!(
        "workers: 2\nadmin: {{bind: \"127.0.0.1:0\"}}\ntls:\n{}\nlisteners:\n  https: {{bind: \"127.0.0.1:0\", tls: {{}}, http3: true}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n  secure: {{hosts: [secure.test], client_auth: {{ca: \"{}\"}}, routes: [{{path: /, upstream: u}}]}}\n  open: {{hosts: [open.test], routes: [{{path: /, upstream: u}}]}}\n",
        certificates(&[&cert]),
        targets(&[&backend]),
        client_ca.display()
    ));
    let (port, ca) = (gw.addr("https").port(), pki.ca_file().display().to_string());
    let alice_arg = alice.display().to_string();

    let v = h3_verified(port, "secure.test", &ca, &["--cert", &alice_arg, "--header", "x-client-verify: FORGED"]);
    assert_eq!(responses(&v)[0]["status"], 200, "{v}");
    let seen = backend.requests();
    let last = seen.last().expect("forwarded");
    assert_eq!(last.header("x-client-verify"), Some("SUCCESS"));
    assert_eq!(last.header("x-client-cert-subject"), Some("CN=alice.client"));

    // No certificate, or another CA's: refused, nothing forwarded.
    let mallory_arg = mallory.display().to_string();
    for args in [&["--path", "/none"][..], &["--path", "/wrong", "--cert", &mallory_arg]] {
        let v = h3_verified(port, "secure.test", &ca, args);
        let refused = v.get("error").is_some() || responses(&v).iter().all(|r| r["status"] != 200);
        assert!(refused, "{args:?} was served: {v}");
    }
    assert_eq!(backend.request_count(), 1);

    // The open site asks for no certificate.
    let v = h3_verified(port, "open.test", &ca, &["--path", "/open"]);
    assert_eq!(responses(&v)[0]["status"], 200, "{v}");
    assert_eq!(backend.request_count(), 2);

    if let Some(client) = go_client("a_site_verifies_client_certificates_over_quic") {
        let addr = format!("127.0.0.1:{port}");
        let mut cmd = Command::new(client);
        cmd.args(["-addr", &addr, "-host", "secure.test", "-ca", &ca, "-pq", "-cert", &alice_arg, "-path", "/go"]);
        let v = json_of(cmd);
        assert_eq!(v["responses"][0]["status"], 200, "{v}");
        let last = backend.requests().pop().expect("forwarded");
        assert_eq!(last.header("x-client-cert-subject"), Some("CN=alice.client"));
    }
    let m = gw.metrics();
    assert!(metric_value(&m, "gatehouse_quic_handshake_failures_total").unwrap_or(0.0) >= 1.0, "{m}");
}

/// 0-RTT, turned on (`quic.early_data`): a client resuming on another node of the cluster sends
/// its first requests with its handshake. A GET so sent reaches the backend with `Early-Data: 1`
/// (RFC 8470); a POST is answered 425 and never forwarded. Each ticket allowing 0-RTT is used
/// once across the cluster (taken from Redis by the node that sees it first), so a replayed
/// ClientHello resumes nowhere. Without 0-RTT, or after the handshake, no request is marked.
#[test]
fn early_data_across_two_nodes_is_forwarded_marked_and_only_for_safe_methods() {
    if !aioquic("early_data_across_two_nodes_is_forwarded_marked_and_only_for_safe_methods") {
        return;
    }
    let (cluster, pki) = (Cluster::new(), Pki::new());
    let cert = pki.issue(&["shop.test"], Algorithm::EcdsaP256, "shop.pem", None);
    let node = |id: &str, early: bool| {
        cluster_node(&cluster, &cert, id, "\n  session_cache: redis", &format!(", quic: {{early_data: {early}}}"))
    };
    let (a, b, off) = (node("a", true), node("b", true), node("c", false));
    let ca = pki.ca_file().display().to_string();
    let ticket = |n: u32| pki.dir.join(&format!("ticket-{n}")).display().to_string();
    let on = |gw: &Gateway, args: &[&str]| h3_verified(gw.addr("https").port(), "shop.test", &ca, args);
    let backend = &cluster.backend;
    let last = || backend.requests().pop().expect("forwarded");

    let first = on(&a, &["--session-out", &ticket(1), "--path", "/first"]);
    assert_eq!(responses(&first)[0]["status"], 200, "{first}");
    assert_eq!(last().header("early-data"), None);

    // On node B, in 0-RTT: the GET is served and marked.
    let get = on(&b, &["--session-in", &ticket(1), "--session-out", &ticket(2), "--early", "--path", "/early"]);
    assert_eq!((&get["resumed"], &get["early_data_accepted"]), (&Value::Bool(true), &Value::Bool(true)), "{get}");
    assert_eq!(responses(&get)[0]["status"], 200, "{get}");
    let seen = last();
    assert_eq!((seen.path_and_query().as_str(), seen.header("early-data")), ("/early", Some("1")));

    // The same ClientHello again, on node A: the ticket is spent, no resumption, no early data.
    let replay = on(&a, &["--session-in", &ticket(1), "--early", "--path", "/replayed"]);
    assert_eq!((&replay["resumed"], &replay["early_data_accepted"]), (&Value::Bool(false), &Value::Bool(false)));
    assert_eq!(responses(&replay)[0]["status"], 200, "{replay}");
    assert_eq!(last().header("early-data"), None, "sent again after a full handshake");

    // A POST in 0-RTT: 425, not forwarded.
    let body = pki.dir.join("post.bin");
    std::fs::write(&body, b"once").expect("write");
    let body = body.display().to_string();
    let before = backend.request_count();
    let post = ["--method", "POST", "--path", "/post", "--body-file", &body];
    let early_post =
        on(&b, &[&["--session-in", &ticket(2), "--session-out", &ticket(3), "--early"][..], &post].concat());
    assert_eq!(early_post["early_data_accepted"], true, "{early_post}");
    assert_eq!(responses(&early_post)[0]["status"], 425, "{early_post}");
    assert_eq!(backend.request_count(), before, "a POST from 0-RTT data was forwarded");
    let m = b.metrics();
    assert_eq!(metric_value(&m, "gatehouse_quic_handshakes_total{kind=\"0rtt\"}"), Some(2.0), "{m}");

    // The same POST after the handshake is served, unmarked.
    let late_post = on(&b, &[&["--session-in", &ticket(3), "--session-out", &ticket(4)][..], &post].concat());
    assert_eq!(late_post["resumed"], true, "{late_post}");
    assert_eq!(responses(&late_post)[0]["status"], 200, "{late_post}");
    let seen = last();
    assert_eq!((seen.method.as_str(), seen.header("early-data")), ("POST", None));

    // A node without 0-RTT takes none; the client sends its request again after the handshake.
    let plain = on(&off, &["--session-in", &ticket(4), "--early", "--path", "/late"]);
    assert_eq!(plain["early_data_accepted"], false, "{plain}");
    assert_eq!(responses(&plain)[0]["status"], 200, "{plain}");
    let seen = last();
    assert_eq!((seen.path_and_query().as_str(), seen.header("early-data")), ("/late", None));
}

/// A binary upgrade (SIGUSR2) hands the UDP sockets to the new process: an HTTP/3 download under
/// way in the old process goes on to its end (the new process sends the old one the packets of
/// its connections), and new connections are the new process's.
#[test]
fn a_binary_upgrade_keeps_a_download_going() {
    if !aioquic("a_binary_upgrade_keeps_a_download_going") {
        return;
    }
    let mut site = Site::start();
    let port = site.port();
    let old_pid = site.gw.pid();
    let big: Vec<u8> = (0..10_000_000u32).map(|i| (i % 239) as u8).collect();
    site.backend.set_body(big.clone());
    // The backend holds the answer until the upgrade is done; the download then runs across it.
    site.backend.set_delay(std::time::Duration::from_millis(1500));
    let download = site.h3_later("shop.test", &["--path", "/big"]);
    site.received(1);
    let ev = site.gw.upgrade();
    assert_eq!(ev["event"], "upgraded", "{ev}");
    assert_ne!(site.gw.pid(), old_pid);
    assert_eq!(site.port(), port, "the upgrade moved the listener");
    let v = download.join().expect("the download");
    let r = &responses(&v)[0];
    assert_eq!(r["status"], 200, "{v}");
    assert_eq!(r["length"], 10_000_000);
    assert_eq!(r["sha256"], sha256(&big));
    let m = site.gw.metrics();
    let forwarded = metric_value(&m, "gatehouse_quic_forwarded_packets_total").unwrap_or(0.0);
    assert!(forwarded >= 10.0, "the old connection's packets did not go through the new process: {m}");

    // A new connection is served by the new process, on the same port.
    site.backend.set_delay(std::time::Duration::ZERO);
    site.backend.set_body(bytes::Bytes::from_static(b"small\n"));
    let v = site.h3("shop.test", &["--path", "/after"]);
    assert_eq!(responses(&v)[0]["status"], 200, "{v}");
    let m = site.gw.metrics();
    assert!(metric_value(&m, "gatehouse_http3_requests_total").unwrap_or(0.0) >= 1.0, "{m}");

    // Again, from the process that took over (its connections carry the next generation).
    site.backend.set_body(big.clone());
    site.backend.set_delay(std::time::Duration::from_millis(1500));
    let before = site.backend.request_count();
    let download = site.h3_later("shop.test", &["--path", "/big2"]);
    site.received(before + 1);
    let ev = site.gw.upgrade();
    assert_eq!(ev["event"], "upgraded", "{ev}");
    let v = download.join().expect("the second download");
    assert_eq!(responses(&v)[0]["sha256"], sha256(&big), "{v}");
    let m = site.gw.metrics();
    assert!(metric_value(&m, "gatehouse_quic_forwarded_packets_total").unwrap_or(0.0) >= 10.0, "{m}");
}

/// A client whose address changes (NAT rebinding) keeps its connection: its packets reach
/// whichever worker's socket the kernel's hash picks for the new address, and are handed to the
/// worker that has the connection (the socket's index is in the connection id), which validates
/// the new path and answers there. Sixteen moves across two workers' sockets.
#[test]
fn a_client_whose_address_changes_keeps_its_connection() {
    if !aioquic("a_client_whose_address_changes_keeps_its_connection") {
        return;
    }
    let site = Site::start();
    let v = site.h3("shop.test", &["--path", "/moving", "--rebind", "16"]);
    let all = responses(&v);
    assert_eq!(all.len(), 17, "{v}");
    assert!(all.iter().all(|r| r["status"] == 200), "{v}");
    assert_eq!(site.backend.request_count(), 17);
    let m = site.gw.metrics();
    assert_eq!(metric_value(&m, "gatehouse_quic_handshakes_total{kind=\"full\"}"), Some(1.0), "one connection: {m}");
    // The chance that sixteen new ports all hash to the first socket is 2^-16.
    assert!(metric_value(&m, "gatehouse_quic_steered_packets_total").unwrap_or(0.0) >= 1.0, "{m}");
}

/// With `reuse_port: false` one UDP socket serves HTTP/3 (on one worker), as one TCP socket
/// serves all workers: requests, and a client moving to new ports, are served.
#[test]
fn one_shared_socket_serves_http3_without_reuse_port() {
    if !aioquic("one_shared_socket_serves_http3_without_reuse_port") {
        return;
    }
    let site = Site::start_with("reuse_port: false\n");
    let v = site.h3("shop.test", &["--path", "/one", "--repeat", "10", "--rebind", "3"]);
    let all = responses(&v);
    assert_eq!(all.len(), 13, "{v}");
    assert!(all.iter().all(|r| r["status"] == 200), "{v}");
    let m = site.gw.metrics();
    assert_eq!(
        metric_value(&m, "gatehouse_quic_steered_packets_total"),
        Some(0.0),
        "one socket, nothing to steer: {m}"
    );
}

/// A request over HTTP/3 continues the client's trace like any other: its server span says
/// protocol 3, and the upstream gets the attempt's `traceparent`.
#[test]
fn http3_requests_are_traced() {
    if !aioquic("http3_requests_are_traced") {
        return;
    }
    let Some(jaeger) = gatehouse_testkit::Jaeger::start() else { return };
    let head = crate::traces::tracing_section(&format!("http://{}", jaeger.otlp_http), "http", "gw-h3", "");
    let site = Site::start_with(&head);
    let trace = "6af7651916cd43dd8448eb211c80319c";
    let v =
        site.h3("shop.test", &["--path", "/h3", "--header", &format!("traceparent:00-{trace}-b7ad6b7169203331-01")]);
    assert_eq!(responses(&v)[0]["status"], 200, "{v}");
    let t = jaeger.trace(trace, 2, std::time::Duration::from_secs(15)).expect("the HTTP/3 trace in Jaeger");
    let server = t["spans"]
        .as_array()
        .and_then(|s| s.iter().find(|s| gatehouse_testkit::span_tag(s, "span.kind") == Some(&"server".into())))
        .cloned()
        .expect("a server span");
    assert_eq!(gatehouse_testkit::span_tag(&server, "network.protocol.version"), Some(&"3".into()), "{server}");
    assert_eq!(gatehouse_testkit::span_tag(&server, "url.scheme"), Some(&"https".into()), "{server}");
    let r = site.backend.requests().into_iter().find(|r| r.uri.ends_with("/h3")).expect("received");
    let tp = r.headers.iter().find(|(k, _)| k == "traceparent").map(|(_, v)| v.clone()).unwrap_or_default();
    assert!(tp.starts_with(&format!("00-{trace}-")) && !tp.contains("b7ad6b7169203331"), "{tp}");
}
