//! Cluster rate limits: two real nodes sharing one real Redis admit the configured limit between
//! them under concurrent load, and a Redis that goes away fails open or closed as configured.

use crate::common::{settled, start, Cluster, SETTLE};
use gatehouse_testkit::{metric_value, Gateway, Load};
use std::time::Instant;

const HOST: &str = "api.test";
/// The plan's cluster-wide limit per hour; with an hour-long interval the test sees the burst
/// only (the steady rate adds one request per nine seconds).
const LIMIT: u64 = 400;

/// A gateway node of the test cluster.
fn node(c: &Cluster) -> Gateway {
    let yaml = format!(
        r#"{head}services:
  svc: {{ path: /svc, upstream: u, auth: app_key }}
  open: {{ path: /open, upstream: u, rate_limits: [{{ limit: 100000, key: client_ip, scope: cluster }}] }}
  closed:
    path: /closed
    upstream: u
    rate_limits: [{{ limit: 100000, key: client_ip, scope: cluster, on_redis_error: closed }}]
apps:
  shop: {{ key: K-shop, grants: {{ svc: gold }} }}
plans:
  gold: {{ rate_limits: [{{ limit: {LIMIT}, interval: 1h, scope: cluster }}] }}
"#,
        head = c.node_head(),
    );
    let gw = start(&yaml);
    settled(&gw);
    gw
}

#[test]
fn two_nodes_admit_the_cluster_limit_between_them() {
    let c = Cluster::new();
    let (a, b) = (node(&c), node(&c));
    let key = [("x-app-key", "K-shop")];
    // 2,400 requests, 1,200 on each node from 4 concurrent clients each.
    let on_a = Load::start_with_headers(a.addr("http"), HOST, "/svc/x", &key, 4, 300);
    let on_b = Load::start_with_headers(b.addr("http"), HOST, "/svc/x", &key, 4, 300);
    let (ra, rb) = (on_a.wait(), on_b.wait());
    assert_eq!(ra.failed + rb.failed, 0, "{:?} {:?}", ra.errors, rb.errors);
    let ok = |r: &gatehouse_testkit::LoadReport| r.statuses.get(&200).copied().unwrap_or(0);
    let limited = |r: &gatehouse_testkit::LoadReport| r.statuses.get(&429).copied().unwrap_or(0);
    let admitted = ok(&ra) + ok(&rb);
    eprintln!(
        "cluster limit {LIMIT}: admitted {admitted} (node A {}, node B {}), refused {}",
        ok(&ra),
        ok(&rb),
        limited(&ra) + limited(&rb)
    );
    assert_eq!(admitted + limited(&ra) + limited(&rb), 2400);
    let low = LIMIT * 95 / 100;
    let high = LIMIT * 105 / 100;
    assert!((low..=high).contains(&admitted), "admitted {admitted}, limit {LIMIT} ±5%");
    assert!(ok(&ra) > 0 && ok(&rb) > 0, "both nodes admitted some");
    assert_eq!(c.backend.request_count() as u64, admitted);
}

#[test]
fn redis_away_fails_open_or_closed_as_configured() {
    let mut c = Cluster::new();
    let gw = node(&c);
    let get = |path: &str| gatehouse_testkit::http_get(gw.addr("http"), HOST, path, &[]).status;
    assert_eq!((get("/open/x"), get("/closed/x")), (200, 200));
    c.redis.stop();
    assert_eq!(get("/open/x"), 200, "fail open");
    assert_eq!(get("/closed/x"), 503, "fail closed");
    let m = gw.metrics();
    for svc in ["open", "closed"] {
        let errors = metric_value(&m, &format!("gatehouse_gateway_limiter_errors_total{{service=\"{svc}\"}}"));
        assert!(errors.is_some_and(|n| n >= 1.0), "{svc}: {errors:?}");
    }
    assert_eq!(
        metric_value(&m, "gatehouse_gateway_denied_total{service=\"closed\",reason=\"limiter_unavailable\"}"),
        Some(1.0)
    );
    c.redis.restart();
    let deadline = Instant::now() + SETTLE;
    while get("/closed/x") != 200 {
        assert!(Instant::now() < deadline, "the closed limit did not recover after Redis came back");
        std::thread::yield_now();
    }
}
