//! Binary upgrade on SIGUSR2: a new process takes over the listening sockets, the old one drains,
//! and clients see no failed request; a new process that cannot start leaves the old one serving.

use crate::common::{head, settled, start, targets, Traffic, HOST};
use gatehouse_testkit::{http_get, Backend};

fn config(backends: &[&Backend]) -> String {
    format!(
        "{}upstreams:\n  u: {{targets: {}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}]}}\n",
        head(""),
        targets(backends)
    )
}

#[test]
fn binary_upgrades_under_load_lose_no_request() {
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut gw = start(&config(&[&a, &b]));
    settled(&gw);
    let port = gw.addr("http");
    let admin = gw.admin();
    let traffic = Traffic::start(port);
    let mut pids = vec![gw.pid()];
    for i in 1..=3 {
        let ev = gw.upgrade();
        assert_eq!(ev["event"], "upgraded", "upgrade {i}: {ev}");
        assert!(!pids.contains(&gw.pid()), "upgrade {i}: pid {} was seen before: {pids:?}", gw.pid());
        pids.push(gw.pid());
        assert_eq!(gw.addr("http"), port, "upgrade {i} moved the listener");
        assert_eq!(gw.admin(), admin, "upgrade {i} moved the admin listener");
        let status = http_get(admin, "127.0.0.1", "/status", &[]);
        assert_eq!(status.status, 200);
        let doc: serde_json::Value = serde_json::from_str(&status.text()).expect("status JSON");
        assert_eq!(doc["pid"], gw.pid(), "the admin socket is served by the new process: {doc}");
        // Traffic flows through the new process before the next upgrade.
        traffic.progress(&format!("upgrade {i}"));
    }
    let (steady, churn) = traffic.finish("upgrades");
    assert!(steady.ok >= 150 && churn.ok >= 30, "{steady:?} {churn:?}");

    let (status, events) = gw.terminate();
    assert!(status.success(), "{status}");
    assert!(events.iter().any(|e| e["event"] == "stopped"), "the last process drained and stopped: {events:?}");
}

#[test]
fn a_new_process_that_cannot_start_leaves_the_old_one_serving() {
    let a = Backend::start("a");
    let good = config(&[&a]);
    let mut gw = start(&good);
    settled(&gw);
    let (port, pid) = (gw.addr("http"), gw.pid());
    gw.write_config(&format!("{good}upstreams: {{}}\n"));
    let ev = gw.upgrade();
    assert_eq!(ev["event"], "upgrade_failed", "{ev}");
    assert!(ev["error"].as_str().is_some_and(|e| e.contains("exited before it was ready")), "{ev}");
    assert_eq!(gw.pid(), pid);
    for _ in 0..20 {
        assert_eq!(http_get(port, HOST, "/", &[]).status, 200, "the old process stopped serving");
    }
    // Mended, the upgrade goes through.
    gw.write_config(&good);
    let ev = gw.upgrade();
    assert_eq!(ev["event"], "upgraded", "{ev}");
    assert_ne!(gw.pid(), pid);
    assert_eq!(http_get(gw.addr("http"), HOST, "/", &[]).status, 200);
}
