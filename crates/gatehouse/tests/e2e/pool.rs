//! Upstream connection reuse: keep-alive clients must not cost a new upstream connection per request.

use crate::common::{simple, start, targets, HOST};
use gatehouse_testkit::{metric_value, Backend, Load};

#[test]
fn upstream_connections_are_pooled() {
    let b = Backend::start("a");
    let gw = start(&simple(&format!("targets: {}", targets(&[&b]))));
    let report = Load::run(gw.addr("http"), HOST, "/", 10, 200);
    assert_eq!(report.failed, 0, "{report:?}");
    assert_eq!(report.statuses.get(&200), Some(&2000), "{report:?}");
    assert_eq!(b.request_count(), 2000);
    let opened = b.connections();
    assert!(opened <= 20, "2000 requests from 10 keep-alive clients opened {opened} upstream connections");
    let series = format!("gatehouse_upstream_connections_total{{upstream=\"u\",endpoint=\"{}\"}}", b.addr());
    assert_eq!(metric_value(&gw.metrics(), &series), Some(opened as f64), "the metric disagrees with the backend");
}

#[test]
fn upstream_connection_close_is_respected() {
    // The backend closes its connection after every response; a pooled connection must never be
    // reused after that, whatever the method.
    let b = Backend::start("a");
    b.add_response_header("Connection", "close");
    let gw = start(&simple(&format!("targets: {}", targets(&[&b]))));
    let mut conn = gatehouse_testkit::HttpConn::open(gw.addr("http")).expect("connect");
    for i in 0..50 {
        let resp = conn.get(HOST, "/", &[]).unwrap_or_else(|e| panic!("GET {i}: {e}"));
        assert_eq!(resp.status, 200, "GET {i}: {resp:?}");
    }
    for i in 0..20 {
        let resp = conn.request("POST", HOST, "/", &[], b"body").unwrap_or_else(|e| panic!("POST {i}: {e}"));
        assert_eq!(resp.status, 200, "POST {i}: {resp:?}");
    }
    assert_eq!(b.request_count(), 70);
    assert_eq!(b.connections(), 70, "one upstream connection per request when the backend closes each");
}
