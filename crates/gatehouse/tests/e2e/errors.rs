//! Upstream failures seen by the client: the status, how fast it comes, and a body that tells the
//! client nothing about the inside.

use crate::common::{simple, start, targets, HOST};
use gatehouse_testkit::{http_get, Backend, Response};
use std::time::{Duration, Instant};

/// Checks that an error body is the short generic text for its status.
fn assert_generic_body(resp: &Response) {
    let text = resp.text();
    assert!(text.len() < 64, "error body is not short: {text:?}");
    assert!(text.starts_with(&resp.status.to_string()), "error body does not start with the status: {text:?}");
    let lower = text.to_ascii_lowercase();
    for leak in ["127.0.0.1", "refused", "os error", "timed out", "error:", "hyper", "connect"] {
        assert!(!lower.contains(leak), "error body leaks `{leak}`: {text:?}");
    }
}

#[test]
fn a_slow_upstream_gives_504_after_the_read_timeout() {
    let b = Backend::start("slow");
    b.set_delay(Duration::from_secs(3));
    let gw = start(&simple(&format!("targets: {}, retries: 0, timeouts: {{read: 300ms}}", targets(&[&b]))));
    let started = Instant::now();
    let resp = http_get(gw.addr("http"), HOST, "/", &[]);
    let took = started.elapsed();
    assert_eq!(resp.status, 504, "{resp:?}");
    assert!(took < Duration::from_secs(2), "504 came after {took:?}");
    assert!(took >= Duration::from_millis(250), "504 came before the read timeout: {took:?}");
    assert_generic_body(&resp);
}

#[test]
fn a_dead_upstream_gives_502() {
    let dead = Backend::closed_port();
    let gw = start(&simple(&format!("targets: [\"{dead}\"]")));
    let resp = http_get(gw.addr("http"), HOST, "/", &[]);
    assert_eq!(resp.status, 502, "{resp:?}");
    assert_generic_body(&resp);
}

#[test]
fn an_upstream_5xx_is_passed_through_unchanged() {
    let b = Backend::start("failing");
    b.set_status(500);
    let gw = start(&simple(&format!("targets: {}", targets(&[&b]))));
    let resp = http_get(gw.addr("http"), HOST, "/", &[]);
    assert_eq!(resp.status, 500, "{resp:?}");
    assert_eq!(resp.text(), "failing", "the upstream's own body is passed through");
    assert_eq!(b.request_count(), 1, "a 500 not listed in retry_on_status is not retried");
}

#[test]
fn a_timed_out_get_is_retried_on_another_endpoint() {
    let (slow, fast) = (Backend::start("slow"), Backend::start("fast"));
    slow.set_delay(Duration::from_secs(3));
    let gw = start(&simple(&format!(
        "balance: round_robin, retries: 1, timeouts: {{read: 300ms}}, passive_health: {{failures: 0}}, targets: {}",
        targets(&[&slow, &fast])
    )));
    let mut conn = gatehouse_testkit::HttpConn::open(gw.addr("http")).expect("connect");
    for i in 0..2 {
        let resp = conn.get(HOST, "/", &[]).unwrap_or_else(|e| panic!("GET {i}: {e}"));
        assert_eq!((resp.status, resp.text().as_str()), (200, "fast"), "GET {i}");
    }
    assert!(slow.request_count() >= 1, "round robin never tried the slow endpoint");
    let resp = conn.request("POST", HOST, "/", &[], b"once").expect("POST");
    let resp2 = conn.request("POST", HOST, "/", &[], b"once").expect("POST");
    let mut got = [resp.status, resp2.status];
    got.sort_unstable();
    assert_eq!(got, [200, 504], "a POST that timed out is never replayed");
}

#[test]
fn retry_on_status_retries_idempotent_requests_only() {
    let (bad, good) = (Backend::start("bad"), Backend::start("good"));
    bad.set_status(500);
    let gw = start(&simple(&format!(
        "balance: round_robin, retries: 1, retry_on_status: [500], passive_health: {{failures: 0}}, targets: {}",
        targets(&[&bad, &good])
    )));
    let mut conn = gatehouse_testkit::HttpConn::open(gw.addr("http")).expect("connect");
    for i in 0..6 {
        let resp = conn.get(HOST, "/", &[]).unwrap_or_else(|e| panic!("GET {i}: {e}"));
        assert_eq!((resp.status, resp.text().as_str()), (200, "good"), "GET {i}");
    }
    let mut posts: Vec<u16> = (0..4)
        .map(|i| conn.request("POST", HOST, "/", &[], b"x").unwrap_or_else(|e| panic!("POST {i}: {e}")).status)
        .collect();
    posts.sort_unstable();
    assert_eq!(posts, [200, 200, 500, 500], "a POST with a body is never retried on status");

    good.set_status(500);
    let resp = conn.get(HOST, "/", &[]).expect("GET");
    assert_eq!(resp.status, 500, "when every endpoint answers a retryable status, the last answer is passed on");
}
