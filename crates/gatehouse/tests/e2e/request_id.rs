//! Request ids: made or kept by the gateway, sent to the backend, echoed to the client and written
//! to the access log, for proxied answers, refusals and upstream errors alike, over HTTP/1.1 and
//! HTTP/2.

use crate::common::{head, start, targets, HOST};
use gatehouse_testkit::{curl, Backend, Gateway, HttpConn, Response, TempDir};
use serde_json::Value;
use std::collections::HashSet;

/// Upstream `u` on `backend` for `/`, upstream `gone` on a closed port for `/gone/`, and service
/// `api` on `/api` (app key `K-shop`, one request an hour) on site `main`; `top` goes first.
fn config(top: &str, backend: &Backend) -> String {
    let dead = Backend::closed_port();
    format!(
        r#"{top}{head}upstreams:
  u: {{ targets: {t} }}
  gone: {{ targets: ["{dead}"], retries: 0 }}
sites:
  main: {{ hosts: ["{HOST}"], routes: [{{ path: /, upstream: u }}, {{ path: /gone/, upstream: gone }}] }}
services:
  api: {{ path: /api, upstream: u, auth: app_key }}
apps:
  shop: {{ key: K-shop, grants: {{ api: gold }} }}
plans:
  gold: {{ rate_limits: [{{ limit: 1, interval: 1h }}] }}
"#,
        head = head(""),
        t = targets(&[backend]),
    )
}

/// The access log's file name in the test's directory.
const LOG: &str = "access.log";

/// A backend, and a gateway in front of it with `extra` settings and an access log in `format`
/// written in the returned directory.
fn start_logged(format: &str, extra: &str) -> (Backend, TempDir, Gateway) {
    let backend = Backend::start("b");
    let dir = TempDir::new();
    let top = format!("access_log: {{ path: \"{}\", format: {format} }}\n{extra}", dir.join(LOG).display());
    let gw = start(&config(&top, &backend));
    (backend, dir, gw)
}

fn is_generated(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Stops the gateway (every buffered log line is written on the way out) and returns the log.
fn finish(mut gw: Gateway, dir: &TempDir) -> String {
    let (status, events) = gw.terminate();
    assert!(status.success(), "exit status {status}; events {events:?}");
    std::fs::read_to_string(dir.join(LOG)).expect("the access log file exists")
}

/// The combined line for `path` (the request line's target), split into its last two quoted
/// fields: the upstream and the request id.
fn combined_tail<'a>(text: &'a str, path: &str) -> (&'a str, &'a str) {
    let needle = format!("\"GET {path} HTTP/1.1\"");
    let line = text.lines().find(|l| l.contains(&needle)).unwrap_or_else(|| panic!("no line for {path}:\n{text}"));
    let fields: Vec<&str> = line.rsplitn(5, '"').collect();
    // Quoted fields end the line: `"upstream" "id"`, so from the right: "", id, " ", upstream.
    assert_eq!((fields[0], fields[2]), ("", " "), "{line}");
    (fields[3], fields[1])
}

#[test]
fn ids_are_made_or_kept_and_reach_backend_client_and_log() {
    let (backend, dir, gw) = start_logged("combined", "");
    let mut conn = HttpConn::open(gw.addr("http")).expect("connect");
    let mut get = |path: &str, sent: &[(&str, &str)]| -> Response {
        let resp = conn.get(HOST, path, sent).expect("GET");
        assert_eq!(resp.status, 200, "{path}: {resp:?}");
        resp
    };
    let fresh = [get("/fresh/1", &[]), get("/fresh/2", &[]), get("/fresh/3", &[])];
    let kept = get("/kept", &[("X-Request-Id", "client-trace:42/a_b")]);
    let spaced = get("/spaced", &[("X-Request-Id", "two words")]);
    let long = "x".repeat(129);
    let too_long = get("/too-long", &[("X-Request-Id", &long)]);

    let seen = backend.requests();
    assert_eq!(seen.len(), 6, "{seen:?}");
    let sent_upstream: Vec<Vec<&str>> = seen.iter().map(|r| r.header_all("x-request-id")).collect();
    let answers: Vec<&Response> = fresh.iter().chain([&kept, &spaced, &too_long]).collect();
    for ((upstream, resp), r) in sent_upstream.iter().zip(&answers).zip(&seen) {
        assert_eq!(upstream.len(), 1, "exactly one id reaches the backend: {r:?}");
        assert_eq!(resp.header("x-request-id"), Some(upstream[0]), "the client sees the id the backend got: {r:?}");
    }
    assert_eq!(sent_upstream[3], ["client-trace:42/a_b"], "a well-formed incoming id is kept");
    for i in [0, 1, 2, 4, 5] {
        assert!(is_generated(sent_upstream[i][0]), "{}: {:?}", seen[i].uri, sent_upstream[i]);
    }
    let distinct: HashSet<&str> = sent_upstream.iter().map(|v| v[0]).collect();
    assert_eq!(distinct.len(), 6, "ids differ between requests: {sent_upstream:?}");

    drop(conn);
    let text = finish(gw, &dir);
    let paths = ["/fresh/1", "/fresh/2", "/fresh/3", "/kept", "/spaced", "/too-long"];
    for (path, upstream) in paths.iter().zip(&sent_upstream) {
        let (endpoint, id) = combined_tail(&text, path);
        assert_eq!(endpoint, backend.addr().to_string(), "{path}");
        assert_eq!(id, upstream[0], "the log names the id the backend got for {path}");
    }
}

#[test]
fn refusals_and_upstream_errors_carry_the_id() {
    let (backend, dir, gw) = start_logged("json", "");
    let mut conn = HttpConn::open(gw.addr("http")).expect("connect");
    let cases = [
        ("/api/unauthorized", vec![], 401),
        ("/api/first", vec![("x-app-key", "K-shop")], 200),
        ("/api/limited", vec![("x-app-key", "K-shop")], 429),
        ("/gone/x", vec![("x-request-id", "trace-from-client")], 502),
        ("/gone/y", vec![], 502),
    ];
    let mut ids = Vec::new();
    for (path, sent, status) in &cases {
        let resp = conn.get(HOST, path, sent).expect("GET");
        assert_eq!(resp.status, *status, "{path}: {resp:?}");
        let id = resp.header("x-request-id").unwrap_or_else(|| panic!("{path}: no id on the answer: {resp:?}"));
        ids.push(id.to_string());
    }
    assert_eq!(ids[3], "trace-from-client", "a 502 keeps the client's id");
    for i in [0, 1, 2, 4] {
        assert!(is_generated(&ids[i]), "{}: {}", cases[i].0, ids[i]);
    }
    assert_eq!(backend.request_count(), 1, "only the admitted request was forwarded");
    assert_eq!(backend.requests()[0].header("x-request-id"), Some(ids[1].as_str()));

    drop(conn);
    let text = finish(gw, &dir);
    let lines: Vec<Value> =
        text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))).collect();
    for ((path, _, status), id) in cases.iter().zip(&ids) {
        let line = lines.iter().find(|v| v["uri"] == *path).unwrap_or_else(|| panic!("no line for {path}:\n{text}"));
        assert_eq!(line["status"], *status, "{line}");
        assert_eq!(line["request_id"], id.as_str(), "{line}");
    }
}

#[test]
fn http2_requests_carry_the_id_too() {
    let backend = Backend::start("b");
    let gw = start(&config("", &backend));
    let url = format!("http://{}/h2", gw.addr("http"));
    let host = format!("Host: {HOST}");
    let fresh = curl(&["--http2-prior-knowledge", &url, "-H", &host]);
    let kept = curl(&["--http2-prior-knowledge", &url, "-H", &host, "-H", "X-Request-Id: h2-trace"]);
    for resp in [&fresh, &kept] {
        assert_eq!((resp.version.as_str(), resp.status), ("HTTP/2", 200), "{resp:?}");
    }
    let seen = backend.requests();
    assert_eq!(seen.len(), 2, "{seen:?}");
    let fresh_id = seen[0].header("x-request-id").unwrap_or_default();
    assert!(is_generated(fresh_id), "{:?}", seen[0]);
    assert_eq!(fresh.header("x-request-id"), Some(fresh_id));
    assert_eq!(seen[1].header_all("x-request-id"), ["h2-trace"]);
    assert_eq!(kept.header("x-request-id"), Some("h2-trace"));
}

#[test]
fn the_echoed_id_replaces_every_one_the_backend_sent() {
    // The backend's own ids, in two lines and another letter case, beside headers that pass.
    let backend = Backend::start("b");
    backend.add_response_header("X-Request-ID", "backend-1");
    backend.add_response_header("x-request-id", "backend-2");
    backend.add_response_header("X-Kept", "yes");
    let gw = start(&config("", &backend));
    let mut conn = HttpConn::open(gw.addr("http")).expect("connect");
    let h1 = conn.get(HOST, "/", &[]).expect("GET");
    let url = format!("http://{}/", gw.addr("http"));
    let h2 = curl(&["--http2-prior-knowledge", &url, "-H", &format!("Host: {HOST}")]);
    let seen = backend.requests();
    assert_eq!(seen.len(), 2, "{seen:?}");
    for (resp, sent) in [(&h1.headers, &seen[0]), (&h2.headers, &seen[1])] {
        let ids: Vec<_> = resp.iter().filter(|(n, _)| n == "x-request-id").map(|(_, v)| v.as_str()).collect();
        assert_eq!(ids, [sent.header("x-request-id").unwrap_or_default()], "{resp:?}");
        assert!(is_generated(ids[0]), "{resp:?}");
        assert!(resp.iter().any(|(n, v)| n == "x-kept" && v == "yes"), "{resp:?}");
    }
}

#[test]
fn a_custom_header_untrusted_and_unechoed() {
    let backend = Backend::start("b");
    backend.add_response_header("X-Trace-Id", "from-backend");
    let top = "forwarding: { request_id: { header: X-Trace-Id, trust_incoming: false, echo: false } }\n";
    let gw = start(&config(top, &backend));
    let mut conn = HttpConn::open(gw.addr("http")).expect("connect");
    let resp = conn.get(HOST, "/", &[("x-trace-id", "client-chosen"), ("x-request-id", "other")]).expect("GET");
    assert_eq!(resp.status, 200, "{resp:?}");
    assert_eq!(resp.header("x-trace-id"), Some("from-backend"), "echo off: the backend's header passes unchanged");
    let seen = backend.requests();
    let sent = seen[0].header_all("x-trace-id");
    assert!(sent.len() == 1 && is_generated(sent[0]), "untrusted: the client's id is replaced: {:?}", seen[0]);
    assert_eq!(seen[0].header("x-request-id"), Some("other"), "another header is left alone");
}

#[test]
fn ids_off_leave_the_header_alone() {
    let (backend, dir, gw) = start_logged("combined", "forwarding: { request_id: off }\n");
    let mut conn = HttpConn::open(gw.addr("http")).expect("connect");
    let plain = conn.get(HOST, "/plain", &[]).expect("GET");
    let sent = conn.get(HOST, "/sent", &[("x-request-id", "two words")]).expect("GET");
    assert_eq!((plain.status, sent.status), (200, 200));
    assert_eq!(plain.header("x-request-id"), None, "{plain:?}");
    let seen = backend.requests();
    assert_eq!(seen[0].header("x-request-id"), None, "{:?}", seen[0]);
    assert_eq!(seen[1].header_all("x-request-id"), ["two words"], "passed through untouched: {:?}", seen[1]);
    drop(conn);
    let text = finish(gw, &dir);
    assert_eq!(combined_tail(&text, "/plain").1, "-", "{text}");
}

#[test]
fn a_retry_carries_the_same_id() {
    let (failing, working) = (Backend::start("failing"), Backend::start("working"));
    failing.set_status(503);
    let upstream = format!(
        "balance: round_robin, retries: 1, retry_on_status: [503], targets: {}",
        targets(&[&failing, &working])
    );
    let gw = start(&crate::common::simple(&upstream));
    let mut conn = HttpConn::open(gw.addr("http")).expect("connect");
    // Round robin starts at least one of the two requests on the failing endpoint.
    let answered: Vec<String> = (0..2)
        .map(|_| {
            let resp = conn.get(HOST, "/", &[]).expect("GET");
            assert_eq!(resp.status, 200, "{resp:?}");
            resp.header("x-request-id").unwrap_or_default().to_string()
        })
        .collect();
    let failed = failing.requests();
    assert!(!failed.is_empty(), "no request was retried");
    let reached: Vec<String> =
        working.requests().iter().filter_map(|r| r.header("x-request-id").map(str::to_string)).collect();
    assert_eq!(reached, answered, "the working endpoint answered both, with the ids the client saw");
    for r in &failed {
        let id = r.header("x-request-id").unwrap_or_default().to_string();
        assert!(answered.contains(&id), "the retry of {id} went out under another id: {answered:?}");
    }
}
