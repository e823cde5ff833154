//! Failure handling: retries to another endpoint, passive ejection and active health checks.

use crate::common::{simple, start, targets, HOST, SETTLE};
use gatehouse_testkit::{metric_value, Backend, Gateway, HttpConn};
use std::collections::BTreeMap;

/// Sends `n` GETs on one keep-alive connection; returns the count of each status.
fn statuses(gw: &Gateway, n: usize) -> BTreeMap<u16, usize> {
    let mut conn = HttpConn::open(gw.addr("http")).expect("connect");
    let mut out = BTreeMap::new();
    for i in 0..n {
        let resp = conn.get(HOST, "/", &[]).unwrap_or_else(|e| panic!("request {i}: {e}"));
        *out.entry(resp.status).or_default() += 1;
        if conn.is_closed() {
            conn = HttpConn::open(gw.addr("http")).expect("reconnect");
        }
    }
    out
}

fn series(name: &str, upstream: &str, endpoint: std::net::SocketAddr) -> String {
    format!("{name}{{upstream=\"{upstream}\",endpoint=\"{endpoint}\"}}")
}

#[test]
fn retries_go_around_a_dead_endpoint() {
    let live = Backend::start("live");
    let dead = Backend::closed_port();
    let gw = start(&simple(&format!("retries: 1, targets: [\"{dead}\", \"{}\"]", live.addr())));
    assert_eq!(statuses(&gw, 100), BTreeMap::from([(200, 100)]));
    assert_eq!(live.request_count(), 100);
}

#[test]
fn a_post_that_was_never_sent_is_retried_with_its_body() {
    let live = Backend::start("live");
    let dead = Backend::closed_port();
    // Passive health off, so the dead endpoint is tried (and fails to connect) every other request.
    let gw = start(&simple(&format!(
        "retries: 1, passive_health: {{failures: 0}}, targets: [\"{dead}\", \"{}\"]",
        live.addr()
    )));
    let mut conn = HttpConn::open(gw.addr("http")).expect("connect");
    for i in 0..10 {
        let body = format!("payload-{i}");
        let resp = conn.request("POST", HOST, "/submit", &[], body.as_bytes()).expect("POST");
        assert_eq!(resp.status, 200, "POST {i}: {resp:?}");
    }
    let bodies: Vec<String> = live.requests().iter().map(|r| String::from_utf8_lossy(&r.body).into_owned()).collect();
    let want: Vec<String> = (0..10).map(|i| format!("payload-{i}")).collect();
    assert_eq!(bodies, want);
    let metrics = gw.metrics();
    let errors = metric_value(&metrics, &series("gatehouse_upstream_connect_errors_total", "u", dead));
    assert!(errors.is_some_and(|n| n >= 5.0), "the dead endpoint was not tried: {errors:?}");
}

#[test]
fn without_retries_a_dead_endpoint_gives_502s() {
    let live = Backend::start("live");
    let dead = Backend::closed_port();
    let gw = start(&simple(&format!(
        "retries: 0, balance: round_robin, passive_health: {{failures: 0}}, targets: [\"{dead}\", \"{}\"]",
        live.addr()
    )));
    let got = statuses(&gw, 20);
    assert_eq!(got, BTreeMap::from([(200, 10), (502, 10)]), "round robin over one dead and one live endpoint");
}

#[test]
fn passive_health_ejects_a_failing_endpoint() {
    let live = Backend::start("live");
    let dead = Backend::closed_port();
    let gw = start(&simple(&format!(
        "retries: 1, passive_health: {{failures: 1, eject: 30s}}, targets: [\"{dead}\", \"{}\"]",
        live.addr()
    )));
    let errors = series("gatehouse_upstream_connect_errors_total", "u", dead);
    assert_eq!(statuses(&gw, 2), BTreeMap::from([(200, 2)]));
    let before = metric_value(&gw.metrics(), &errors).expect("connect error metric");
    assert!(before >= 1.0, "round robin tried the dead endpoint first, yet no connect error was counted");
    assert_eq!(statuses(&gw, 50), BTreeMap::from([(200, 50)]));
    let metrics = gw.metrics();
    assert_eq!(metric_value(&metrics, &errors), Some(before), "an ejected endpoint was tried again");
    let healthy = metric_value(&metrics, &series("gatehouse_upstream_healthy", "u", dead));
    assert_eq!(healthy, Some(0.0), "an ejected endpoint is reported as not selectable");
}

#[test]
fn active_health_checks_take_endpoints_out_and_back() {
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let gw = start(&simple(&format!(
        "targets: {}, health_check: {{path: /healthz, interval: 100ms, timeout: 1s, rise: 1, fall: 1}}",
        targets(&[&a, &b])
    )));
    let healthy_a = series("gatehouse_upstream_healthy", "u", a.addr());
    let healthy_b = series("gatehouse_upstream_healthy", "u", b.addr());

    a.set_health(500);
    gw.wait_metric(SETTLE, |m| metric_value(m, &healthy_a) == Some(0.0));
    a.clear();
    b.clear();
    assert_eq!(statuses(&gw, 20), BTreeMap::from([(200, 20)]));
    assert_eq!((a.request_count(), b.request_count()), (0, 20), "an endpoint marked down still got requests");

    b.set_health(503);
    gw.wait_metric(SETTLE, |m| metric_value(m, &healthy_b) == Some(0.0));
    assert_eq!(statuses(&gw, 5), BTreeMap::from([(503, 5)]), "no healthy endpoint left");

    a.set_health(200);
    b.set_health(200);
    gw.wait_metric(SETTLE, |m| metric_value(m, &healthy_a) == Some(1.0) && metric_value(m, &healthy_b) == Some(1.0));
    a.clear();
    b.clear();
    assert_eq!(statuses(&gw, 20), BTreeMap::from([(200, 20)]));
    assert_eq!((a.request_count(), b.request_count()), (10, 10), "both endpoints are back in rotation");
    assert!(a.health_checks() > 0 && b.health_checks() > 0);
}
