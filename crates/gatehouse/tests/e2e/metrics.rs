//! Observability: request counters on the admin listener and the JSON access log.

use crate::common::{head, settled, start, targets, HOST};
use gatehouse_testkit::{http_get, metric_value, raw, Backend, HttpConn, TempDir};
use serde_json::Value;

#[test]
fn requests_are_counted_by_route_and_status_class() {
    let a = Backend::start("a");
    let dead = Backend::closed_port();
    let gw = start(&format!(
        "{}upstreams:\n  u: {{targets: {}}}\n  gone: {{targets: [\"{dead}\"]}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}, {{path: /gone/, upstream: gone}}]}}\n",
        head(""),
        targets(&[&a]),
    ));
    let mut conn = HttpConn::open(gw.addr("http")).expect("connect");
    for _ in 0..7 {
        assert_eq!(conn.get(HOST, "/", &[]).expect("GET /").status, 200);
    }
    for _ in 0..3 {
        assert_eq!(conn.get(HOST, "/gone/x", &[]).expect("GET /gone/x").status, 502);
    }
    for _ in 0..2 {
        assert_eq!(http_get(gw.addr("http"), "unknown.test", "/", &[]).status, 404);
    }
    let m = gw.metrics();
    let value = |series: &str| metric_value(&m, series);
    assert_eq!(value("gatehouse_requests_total{route=\"main:/\",status=\"2xx\"}"), Some(7.0), "{m}");
    assert_eq!(value("gatehouse_requests_total{route=\"main:/\",status=\"5xx\"}"), Some(0.0), "{m}");
    assert_eq!(value("gatehouse_requests_total{route=\"main:/gone/\",status=\"5xx\"}"), Some(3.0), "{m}");
    assert_eq!(value("gatehouse_unrouted_requests_total"), Some(2.0), "{m}");
    let upstream_requests = format!("gatehouse_upstream_requests_total{{upstream=\"u\",endpoint=\"{}\"}}", a.addr());
    assert_eq!(value(&upstream_requests), Some(7.0), "{m}");
}

#[test]
fn malformed_requests_are_counted_as_bad_requests_not_as_unrouted() {
    let a = Backend::start("a");
    let gw = start(&format!(
        "{}upstreams:\n  u: {{targets: {}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}]}}\n",
        head(""),
        targets(&[&a]),
    ));
    // Refused by the proxy (two Host headers), then by the HTTP parser (not a request line).
    for bytes in [format!("GET / HTTP/1.1\r\nHost: {HOST}\r\nHost: x.test\r\n\r\n"), "HELLO\r\n\r\n".to_string()] {
        let reply = raw(gw.addr("http"), bytes.as_bytes());
        assert!(reply.starts_with("HTTP/1.1 400"), "{bytes:?} got {reply:?}");
    }
    let m = gw.metrics();
    let value = |series: &str| metric_value(&m, series);
    assert_eq!(value("gatehouse_unrouted_requests_total"), Some(0.0), "a 400 is not an unrouted (404) request: {m}");
    assert_eq!(value("gatehouse_bad_requests_total"), Some(2.0), "both malformed requests count: {m}");
}

#[test]
fn json_access_log_has_one_line_per_request() {
    let a = Backend::start("a");
    let dir = TempDir::new();
    let log = dir.join("access.log");
    let gw_yaml = format!(
        "access_log: {{path: \"{}\", format: json}}\n{}upstreams:\n  u: {{targets: {}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}]}}\n",
        log.display(),
        head(""),
        targets(&[&a]),
    );
    let mut gw = start(&gw_yaml);
    settled(&gw);
    let mut conn = HttpConn::open(gw.addr("http")).expect("connect");
    for i in 0..5 {
        assert_eq!(conn.get(HOST, &format!("/log/{i}?q={i}"), &[]).expect("GET").status, 200);
    }
    assert_eq!(http_get(gw.addr("http"), "unknown.test", "/nowhere", &[]).status, 404);
    drop(conn);
    let (status, events) = gw.terminate();
    assert!(status.success(), "exit status {status}; events {events:?}");

    let text = std::fs::read_to_string(&log).expect("the access log file exists");
    let lines: Vec<Value> =
        text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))).collect();
    let mut seen: Vec<(String, u64)> = lines
        .iter()
        .map(|v| (v["uri"].as_str().unwrap_or_default().to_string(), v["status"].as_u64().unwrap_or_default()))
        .collect();
    seen.sort();
    let mut want: Vec<(String, u64)> = (0..5).map(|i| (format!("/log/{i}?q={i}"), 200)).collect();
    want.push(("/nowhere".to_string(), 404));
    want.sort();
    assert_eq!(seen, want, "access log:\n{text}");
    assert!(lines.iter().all(|v| v["method"] == "GET" && v["client"] == "127.0.0.1"), "{text}");
}
