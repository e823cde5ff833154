//! WebSocket over HTTP/2 (RFC 8441) with real parts (`tests/websocket/peer.mjs`): a `ws` backend
//! over HTTP/1.1 behind the TLS listener, Debian's Chromium opening a WebSocket from a page it
//! loaded over HTTP/2, and Node's own HTTP/2 client sending an extended CONNECT. CI installs the
//! packages (`npm ci` in `tests/websocket`); elsewhere the tests say they were skipped, unless `CI`
//! is set.

use crate::common::{access_log_lines, start, PeerProcess};
use crate::tls::{certificates, Pki};
use gatehouse_testkit::Gateway;
use gatehouse_tls::issue::Algorithm;
use std::path::PathBuf;
use std::process::Command;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/websocket")
}

/// Whether the packages are installed; without them (and without `CI`) a test is skipped.
fn installed(test: &str) -> bool {
    let found = dir().join("node_modules/ws").is_dir() && dir().join("node_modules/playwright-core").is_dir();
    if !found {
        assert!(std::env::var_os("CI").is_none(), "tests/websocket needs `npm ci` but CI is set");
        eprintln!("{test}: skipped, run `npm ci --prefix crates/gatehouse/tests/websocket`");
    }
    found
}

/// The `ws` backend on a free port; it stops when dropped.
fn ws_backend() -> PeerProcess {
    PeerProcess::spawn(Command::new("node").arg(dir().join("peer.mjs")).arg("backend"), "the ws backend")
}

/// A `ws` backend, a test PKI, and a gateway in front ([`gateway`]) logging to the PKI's folder.
fn setup(upstream: &str) -> (PeerProcess, Pki, PathBuf, Gateway) {
    let backend = ws_backend();
    let pki = Pki::new();
    let log = pki.dir.join("access.log");
    let gw = gateway(&backend, &pki, &log, upstream);
    (backend, pki, log, gw)
}

/// A gateway whose TLS listener (HTTP/2 by ALPN) serves `localhost` from `backend`, with a JSON
/// access log at `log` and more upstream settings (`, protocol: http2`).
fn gateway(backend: &PeerProcess, pki: &Pki, log: &std::path::Path, upstream: &str) -> Gateway {
    let cert = pki.issue(&["localhost"], Algorithm::EcdsaP256, "ws.pem", None);
    start(&format!(
        "workers: 1\nadmin: {{bind: \"127.0.0.1:0\"}}\naccess_log: {{path: \"{}\", format: json}}\ntls:\n{}\nlisteners:\n  tls: {{bind: \"127.0.0.1:0\", tls: {{}}}}\nupstreams:\n  ws: {{targets: [\"127.0.0.1:{}\"]{upstream}}}\nsites:\n  s: {{hosts: [\"localhost\"], routes: [{{path: /, upstream: ws}}]}}\n",
        log.display(),
        certificates(&[&cert]),
        backend.port
    ))
}

fn run(args: &[&str]) -> serde_json::Value {
    let out = Command::new("node").arg(dir().join("peer.mjs")).args(args).output().expect("run node");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{args:?} failed: {text}{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{args:?} printed {text:?}: {e}"))
}

#[test]
fn chromium_opens_a_websocket_over_the_pages_http2_connection() {
    if !installed("chromium_opens_a_websocket_over_the_pages_http2_connection") {
        return;
    }
    let (_backend, _pki, log, gw) = setup("");
    let url = format!("https://localhost:{}/page.html", gw.addr("tls").port());
    let seen = run(&["browser", &url]);
    assert_eq!(seen["pageStatus"], 200, "{seen}");
    assert_eq!(seen["protocol"], "chat", "the subprotocol the backend chose: {seen}");
    assert_eq!(seen["echoes"], serde_json::json!(["one", "two", "long:70000"]), "{seen}");
    assert_eq!(seen["close"], 1000, "{seen}");
    let handshake = &seen["handshake"];
    // The backend saw an HTTP/1.1 upgrade with what the browser sent.
    assert_eq!(
        (&handshake["method"], &handshake["httpVersion"], &handshake["upgrade"], &handshake["version"]),
        (&"GET".into(), &"1.1".into(), &"websocket".into(), &"13".into()),
        "{seen}"
    );
    assert_eq!(handshake["protocol"], "chat", "{seen}");
    assert_eq!(handshake["origin"], format!("https://localhost:{}", gw.addr("tls").port()), "{seen}");
    assert_eq!(handshake["forwardedProto"], "https", "{seen}");
    // The page and the socket came over HTTP/2, the socket as RFC 8441's CONNECT; on one
    // connection.
    let lines = access_log_lines(&log, 2);
    let page = lines.iter().find(|l| l["uri"] == "/page.html").unwrap_or_else(|| panic!("{lines:?}"));
    let socket = lines.iter().find(|l| l["uri"] == "/ws").unwrap_or_else(|| panic!("{lines:?}"));
    assert_eq!((&page["protocol"], &page["status"]), (&"HTTP/2.0".into(), &200.into()), "{lines:?}");
    assert_eq!(
        (&socket["method"], &socket["protocol"], &socket["status"]),
        (&"CONNECT".into(), &"HTTP/2.0".into(), &101.into()),
        "{lines:?}"
    );
    let accepted = gatehouse_testkit::metric_value(&gw.metrics(), "gatehouse_connections_accepted_total");
    assert_eq!(accepted, Some(1.0), "one client connection for the page and its socket");
}

/// Node's HTTP/2 client's extended CONNECT to `/ws` through the TLS listener, as it saw it.
fn h2_client(gw: &Gateway, pki: &Pki) -> serde_json::Value {
    let origin = format!("https://localhost:{}", gw.addr("tls").port());
    let ca = pki.ca_file();
    run(&["h2", &origin, ca.to_str().expect("utf-8 path")])
}

#[test]
fn an_http2_client_sends_an_extended_connect() {
    if !installed("an_http2_client_sends_an_extended_connect") {
        return;
    }
    let (_backend, pki, _log, gw) = setup("");
    let seen = h2_client(&gw, &pki);
    assert_eq!(seen["enableConnectProtocol"], true, "SETTINGS_ENABLE_CONNECT_PROTOCOL: {seen}");
    assert_eq!((&seen["status"], &seen["protocol"]), (&200.into(), &"chat".into()), "{seen}");
    assert_eq!(seen["echo"], "over one stream", "{seen}");
    assert_eq!(seen["handshake"]["upgrade"], "websocket", "{seen}");
}

#[test]
fn a_websocket_over_http2_to_an_http2_upstream_is_not_implemented() {
    if !installed("a_websocket_over_http2_to_an_http2_upstream_is_not_implemented") {
        return;
    }
    let (_backend, pki, log, gw) = setup(", protocol: http2");
    let seen = h2_client(&gw, &pki);
    assert_eq!(seen["status"], 501, "{seen}");
    let lines = access_log_lines(&log, 1);
    assert_eq!((&lines[0]["method"], &lines[0]["status"]), (&"CONNECT".into(), &501.into()), "{lines:?}");
}
