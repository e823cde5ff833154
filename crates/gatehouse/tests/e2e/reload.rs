//! Configuration reloads on SIGHUP: under load, with a broken file, and with listeners coming and
//! going.

use crate::common::{head, settled, simple, start, targets, weighted, Traffic, HOST, SETTLE};
use gatehouse_testkit::{connect_refused, http_get, metric_value, wait_until, Backend, Load};

#[test]
fn reloads_under_load_lose_no_request() {
    let (a, b, c) = (Backend::start("a"), Backend::start("b"), Backend::start("c"));
    let site = |routes: &str| format!("sites:\n  main: {{hosts: [\"{HOST}\"], routes: {routes}}}\n");
    let variants = [
        format!(
            "{}upstreams:\n  u: {{targets: {}}}\n{}",
            head(""),
            targets(&[&a, &b]),
            site("[{path: /, upstream: u}]")
        ),
        // Also changes a listener setting, so the listener's accept tasks restart on its sockets.
        format!(
            "{}upstreams:\n  u: {{targets: {}}}\n{}",
            head("keepalive_timeout: 60s"),
            weighted(&[(&a, 3), (&b, 1)]),
            site("[{path: /, upstream: u}]")
        ),
        format!(
            "{}upstreams:\n  u: {{targets: {}}}\n  v: {{targets: {}}}\n{}",
            head(""),
            targets(&[&a, &b]),
            targets(&[&c]),
            site("[{path: /, upstream: u}, {path: /extra/, upstream: v}]")
        ),
        format!("{}upstreams:\n  u: {{targets: {}}}\n{}", head(""), targets(&[&c]), site("[{path: /, upstream: u}]")),
    ];
    let mut gw = start(&variants[0]);
    settled(&gw);
    let port = gw.addr("http");
    let traffic = Traffic::start(port);
    for i in 1..=100u64 {
        gw.write_config(&variants[i as usize % variants.len()]);
        let ev = gw.reload();
        assert_eq!(ev["event"], "reloaded", "reload {i}: {ev}");
        assert_eq!(ev["generation"], i + 1, "reload {i}: {ev}");
        assert_eq!(ev["listeners"]["http"], port.to_string(), "reload {i} moved the listener: {ev}");
        // Traffic runs on each configuration before the next one.
        traffic.progress(&format!("reload {i}"));
    }
    let (steady, churn) = traffic.finish("100 reloads");
    assert!(steady.ok >= 5_000 && churn.ok >= 1_000, "{steady:?} {churn:?}");
    assert!(c.request_count() > 0, "the swapped-in target never served");
}

#[test]
fn a_broken_reload_keeps_the_running_configuration() {
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut gw = start(&simple(&format!("targets: {}", targets(&[&a]))));
    settled(&gw);
    let broken = format!(
        "{}upstreams:\n  u: {{targets: [{{address: \"{}\", weight: 0}}]}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: nowhere}}]}}\n",
        head(""),
        b.addr()
    );
    gw.write_config(&broken);
    let ev = gw.reload();
    assert_eq!(ev["event"], "reload_failed", "{ev}");
    assert_eq!(ev["generation"], 1, "{ev}");
    let errors = ev["errors"].to_string();
    for path in ["upstreams.u.targets[0].weight", "sites.main.routes[0].upstream"] {
        assert!(errors.contains(path), "reload_failed does not mention {path}: {ev}");
    }
    let resp = http_get(gw.addr("http"), HOST, "/", &[]);
    assert_eq!((resp.status, resp.text().as_str()), (200, "a"), "the old configuration no longer serves");
    let metrics = gw.metrics();
    assert_eq!(metric_value(&metrics, "gatehouse_config_reload_failures_total"), Some(1.0));
    assert_eq!(metric_value(&metrics, "gatehouse_config_generation"), Some(1.0));

    gw.write_config(&simple(&format!("targets: {}", targets(&[&b]))));
    let ev = gw.reload();
    assert_eq!((ev["event"].as_str(), ev["generation"].as_u64()), (Some("reloaded"), Some(2)), "{ev}");
    let resp = http_get(gw.addr("http"), HOST, "/", &[]);
    assert_eq!((resp.status, resp.text().as_str()), (200, "b"), "the fixed configuration is in force");
}

#[test]
fn listeners_are_added_and_removed_by_reload() {
    let a = Backend::start("a");
    let upstreams = format!("upstreams:\n  u: {{targets: {}}}\n", targets(&[&a]));
    let sites = format!("sites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}]}}\n");
    let one = format!("{}{upstreams}{sites}", head(""));
    let two = format!("{}  extra: {{bind: \"127.0.0.1:0\"}}\n{upstreams}{sites}", head(""));
    let mut gw = start(&one);
    settled(&gw);
    let http = gw.addr("http");

    gw.write_config(&two);
    let ev = gw.reload();
    assert_eq!(ev["event"], "reloaded", "{ev}");
    assert_eq!(ev["listeners"]["http"], http.to_string(), "{ev}");
    let extra: std::net::SocketAddr =
        ev["listeners"]["extra"].as_str().and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("no extra: {ev}"));
    assert_eq!(http_get(extra, HOST, "/", &[]).status, 200, "the added listener serves");

    gw.write_config(&one);
    let ev = gw.reload();
    assert_eq!(ev["event"], "reloaded", "{ev}");
    assert!(ev["listeners"].get("extra").is_none(), "{ev}");
    assert!(
        wait_until(SETTLE, || connect_refused(extra).then_some(())).is_some(),
        "the removed listener {extra} still accepts connections"
    );
    assert_eq!(http_get(http, HOST, "/", &[]).status, 200, "the kept listener still serves");
}

#[test]
fn a_reload_that_cannot_bind_keeps_everything_running() {
    let a = Backend::start("a");
    let mut gw = start(&simple(&format!("targets: {}", targets(&[&a]))));
    settled(&gw);
    let http = gw.addr("http");
    // The backend's own port is taken, so the new listener cannot bind; it sorts after `http`, whose
    // settings change too, so `http` has been taken apart by the time the bind fails.
    let taken = format!(
        "{}  zzz: {{bind: \"{}\"}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}]}}\n",
        head("keepalive_timeout: 60s"),
        a.addr(),
        targets(&[&a]),
    );
    gw.write_config(&taken);
    let ev = gw.reload();
    assert_eq!(ev["event"], "reload_failed", "{ev}");
    assert!(ev["errors"].to_string().contains(&a.addr().to_string()), "the error names the address: {ev}");
    assert_eq!(gw.generation(), 1);
    assert_eq!(http_get(http, HOST, "/", &[]).status, 200, "the running listener was lost");
    let status = http_get(gw.admin(), "127.0.0.1", "/status", &[]);
    let doc: serde_json::Value = serde_json::from_slice(&status.body).expect("/status is JSON");
    assert_eq!(doc["generation"], 1, "{doc}");
    assert_eq!(doc["listeners"]["http"], http.to_string(), "{doc}");
}

#[test]
fn watch_reloads_when_the_file_changes() {
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let mut gw = start(&format!("watch: true\n{}", simple(&format!("targets: {}", targets(&[&a])))));
    assert_eq!(http_get(gw.addr("http"), HOST, "/", &[]).text(), "a");
    gw.write_config(&format!("watch: true\n{}", simple(&format!("targets: {}", targets(&[&b])))));
    let ev = gw.wait_event("reloaded", SETTLE);
    assert_eq!(ev["generation"], 2, "{ev}");
    assert_eq!(http_get(gw.addr("http"), HOST, "/", &[]).text(), "b");
}

#[test]
fn signals_right_after_ready_are_handled() {
    // `ready` tells a supervisor that it may now signal the process: a SIGHUP sent the moment `ready`
    // is read must reload, and a SIGTERM must drain and exit 0, never kill the process. The window
    // is narrow, so there are many rounds, while a neighbour gateway under load keeps the CPUs busy
    // as on a real host.
    let a = Backend::start("a");
    let yaml = simple(&format!("targets: {}", targets(&[&a])));
    let busy = start(&yaml);
    let load = Load::start(busy.addr("http"), HOST, "/", 8, 1_000_000);
    for round in 0..20 {
        let mut gw = start(&yaml);
        let ev = gw.reload();
        assert_eq!(ev["event"], "reloaded", "round {round}: {ev}");
    }
    for round in 0..20 {
        let mut gw = start(&yaml);
        let (status, events) = gw.terminate();
        assert!(status.success(), "round {round}: SIGTERM right after ready ended the process with {status}");
        assert!(events.iter().any(|e| e["event"] == "stopped"), "round {round}: {events:?}");
    }
    let report = load.stop();
    assert_eq!(report.failed, 0, "{report:?}");
}
