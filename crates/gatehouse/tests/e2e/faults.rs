//! Faults under load: a backend or Redis killed while traffic flows, a backend that accepts and
//! never answers, and one that resets the connection in the middle of a response body.

use crate::common::{settled, simple, start, targets, Cluster, Traffic, HOST, SETTLE};
use gatehouse_testkit::{http_get, metric_value, Backend, Fault, RawBackend};
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn a_backend_killed_under_load_costs_no_request() {
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let gw = start(&simple(&format!("balance: round_robin, retries: 2, targets: {}", targets(&[&a, &b]))));
    settled(&gw);
    let traffic = Traffic::start(gw.addr("http"));
    let before = b.request_count();
    assert!(before > 0, "both backends serve before the kill");
    // Its listener and every connection to it close, requests in flight included.
    drop(b);
    traffic.progress("the kill");
    traffic.progress("the kill, again");
    let served_by_a = a.request_count();
    let (steady, churn) = traffic.finish("a backend kill");
    assert!(steady.ok + churn.ok > 100, "{steady:?} {churn:?}");
    assert!(a.request_count() >= served_by_a, "the survivor carries the load");
}

#[test]
fn redis_killed_under_load_degrades_and_recovers() {
    let mut c = Cluster::new();
    let yaml = format!(
        r#"{head}services:
  open: {{ path: /open, upstream: u, rate_limits: [{{ limit: 1000000, key: client_ip, scope: cluster }}] }}
  tight: {{ path: /tight, upstream: u, rate_limits: [{{ limit: 1, interval: 1h, key: client_ip, scope: cluster }}] }}
"#,
        head = c.node_head(),
    );
    let gw = start(&yaml);
    settled(&gw);
    let get = |path: &str| http_get(gw.addr("http"), HOST, path, &[]).status;
    assert_eq!((get("/tight/x"), get("/tight/x")), (200, 429), "the cluster limit holds with Redis up");
    let errors =
        || metric_value(&gw.metrics(), "gatehouse_gateway_limiter_errors_total{service=\"open\"}").unwrap_or(0.0);
    let traffic = Traffic::start_at(gw.addr("http"), HOST, "/open/x");

    c.redis.stop();
    traffic.progress("Redis stopped");
    traffic.progress("Redis stopped, again");
    assert!(errors() >= 1.0, "limiter errors are counted while Redis is away");
    assert_eq!(get("/tight/x"), 200, "with Redis away the limit fails open");

    c.redis.restart();
    // Recovered: decisions come from Redis again, so the error count stops growing while traffic
    // goes on.
    let deadline = Instant::now() + SETTLE;
    loop {
        let seen = errors();
        traffic.progress("Redis restarted");
        if errors() == seen {
            break;
        }
        assert!(Instant::now() < deadline, "limiter errors go on after Redis came back");
    }
    assert_eq!((get("/tight/x"), get("/tight/x")), (200, 429), "the cluster limit holds again");
    let (steady, churn) = traffic.finish("a Redis outage");
    assert!(steady.ok + churn.ok > 300, "{steady:?} {churn:?}");
}

#[test]
fn a_backend_that_never_answers_times_out() {
    let silent = RawBackend::start(Fault::Silent);
    let gw = start(&simple(&format!("targets: [\"{}\"], retries: 0, timeouts: {{read: 300ms}}", silent.addr())));
    for (method, body) in [("GET", &b""[..]), ("POST", &b"payload"[..])] {
        let started = Instant::now();
        let resp = gatehouse_testkit::http_request(gw.addr("http"), method, HOST, "/", &[], body)
            .unwrap_or_else(|e| panic!("{method}: no answer: {e}"));
        let took = started.elapsed();
        assert_eq!(resp.status, 504, "{method}: {resp:?}");
        assert!(took >= Duration::from_millis(250) && took < Duration::from_secs(3), "{method}: 504 after {took:?}");
    }
    assert!(silent.accepted() >= 1);
    // The gateway is not tied up by the connections it gave up on.
    let ok = Backend::start("ok");
    let gw2 = start(&simple(&format!("targets: {}", targets(&[&ok]))));
    assert_eq!(http_get(gw2.addr("http"), HOST, "/", &[]).status, 200);
}

/// Runs curl against `url` with `args`, bounded in time; its exit code and how long it took.
fn curl_exit(args: &[&str], url: &str) -> (Option<i32>, Duration) {
    let started = Instant::now();
    let out = Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "--noproxy", "*", "--max-time", "10"])
        .args(args)
        .arg(url)
        .output()
        .expect("run curl");
    (out.status.code(), started.elapsed())
}

#[test]
fn a_backend_reset_mid_body_gives_the_client_a_clean_error() {
    for chunked in [false, true] {
        let bad = RawBackend::start(Fault::ResetMidBody { chunked });
        let good = Backend::start("good");
        let yaml = format!(
            "{}upstreams:\n  bad: {{targets: [\"{}\"], retries: 0}}\n  good: {{targets: {}}}\nsites:\n  main:\n    hosts: [\"{HOST}\"]\n    routes: [{{path: /bad, upstream: bad}}, {{path: /, upstream: good}}]\n",
            crate::common::head("protocol: auto"),
            bad.addr(),
            targets(&[&good])
        );
        let gw = start(&yaml);
        let url = format!("http://{}/bad", gw.addr("http"));
        let host = format!("host: {HOST}");
        // HTTP/1.1: the response is cut short (curl: 18, partial file), never completed or hung.
        let (code, took) = curl_exit(&["-H", &host], &url);
        assert_eq!(code, Some(18), "HTTP/1.1, chunked {chunked}: curl exit {code:?} after {took:?}");
        assert!(took < Duration::from_secs(5), "HTTP/1.1 took {took:?}");
        // HTTP/2: the stream is reset (curl: 92, stream error; or 18), the connection lives on.
        let (code, took) = curl_exit(&["--http2-prior-knowledge", "-H", &host], &url);
        assert!(matches!(code, Some(92) | Some(18)), "HTTP/2, chunked {chunked}: curl exit {code:?}");
        assert!(took < Duration::from_secs(5), "HTTP/2 took {took:?}");
        assert!(bad.accepted() >= 2);
        // The gateway goes on serving.
        assert_eq!(http_get(gw.addr("http"), HOST, "/", &[]).status, 200);
    }
}
