//! Logs operators manage: `SIGUSR1` reopens the access log and the process log after logrotate
//! moved them, the process log as JSON lines in a file, its level changed from the admin API and
//! by a reload.

use crate::common::{start, targets, HOST, SETTLE};
use crate::control::{admin_section, Api};
use gatehouse_testkit::{http_get, wait_until, Backend, Load, TempDir};
use serde_json::{json, Value};

fn site(b: &Backend) -> String {
    format!(
        "listeners:\n  http: {{bind: \"127.0.0.1:0\"}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}]}}\n",
        targets(&[b])
    )
}

fn lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_string).collect()
}

/// Under load, both logs are moved as logrotate does (`mv`, then `SIGUSR1`): every request has
/// its access line in the moved file or the new one, none twice; lines after the signal are in
/// the new files; the process log is JSON lines throughout.
#[test]
fn sigusr1_reopens_both_logs_after_a_move_under_load_losing_no_line() {
    let b = Backend::start("b");
    let dir = TempDir::new();
    let (access, process) = (dir.join("access.log"), dir.join("gatehouse.log"));
    let yaml = format!(
        "workers: 2\nadmin: {{bind: \"127.0.0.1:0\"}}\nlog: {{format: json, level: info, path: \"{}\"}}\naccess_log: {{path: \"{}\", format: json}}\n{}",
        process.display(),
        access.display(),
        site(&b)
    );
    let gw = start(&yaml);
    let addr = gw.addr("http");
    // The process log went to the file, as JSON: the ready line is there.
    let ready = wait_until(SETTLE, || lines(&process).into_iter().find(|l| l.contains("gatehouse ready")))
        .expect("the ready line in the process log");
    let v: Value = serde_json::from_str(&ready).unwrap_or_else(|e| panic!("not JSON ({e}): {ready}"));
    assert_eq!((v["level"].as_str(), v["message"].as_str()), (Some("INFO"), Some("gatehouse ready")), "{v}");
    assert!(v["timestamp"].is_string() && v["workers"] == 2, "{v}");
    assert!(gw.stderr().is_empty(), "nothing on stderr: {}", gw.stderr());

    let load = Load::start(addr, HOST, "/", 4, 1_000);
    wait_until(SETTLE, || (load.completed() >= 400).then_some(())).expect("the load is under way");
    let (access_old, process_old) = (dir.join("access.log.1"), dir.join("gatehouse.log.1"));
    std::fs::rename(&access, &access_old).expect("mv access.log");
    std::fs::rename(&process, &process_old).expect("mv gatehouse.log");
    gw.signal("USR1");
    wait_until(SETTLE, || lines(&process).iter().any(|l| l.contains("process log reopened")).then_some(()))
        .unwrap_or_else(|| panic!("no reopen in the new process log; the old one: {:?}", lines(&process_old)));
    assert!(lines(&process_old).iter().any(|l| l.contains("access log reopened")), "{:?}", lines(&process_old));
    // Requests after the reopen: their lines go to the new file.
    for i in 0..5 {
        assert_eq!(http_get(addr, HOST, &format!("/after/{i}"), &[]).status, 200);
    }
    let report = load.wait();
    assert_eq!((report.ok, report.failed), (4_000, 0), "{report:?}");
    let want = report.ok as usize + 5;
    let (old, new) = wait_until(SETTLE, || {
        let (old, new) = (lines(&access_old), lines(&access));
        (old.len() + new.len() >= want).then_some((old, new))
    })
    .unwrap_or_else(|| {
        panic!("fewer than {want} access lines: {} + {}", lines(&access_old).len(), lines(&access).len())
    });
    assert_eq!(old.len() + new.len(), want, "every request logged once");
    assert!(!old.is_empty(), "lines before the move stay in the moved file");
    for i in 0..5 {
        let uri = format!("\"/after/{i}\"");
        assert!(new.iter().any(|l| l.contains(&uri)), "{uri} in the new file");
        assert!(!old.iter().any(|l| l.contains(&uri)), "{uri} not in the moved file");
    }
    for l in lines(&process_old).iter().chain(lines(&process).iter()) {
        let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("process log line not JSON ({e}): {l}"));
        assert!(v["level"].is_string() && v["message"].is_string(), "{l}");
    }
}

/// `PUT /api/v1/log-level` changes what the process log writes at once, without a reload; a
/// reload that changes `log.level` puts that in force, one that does not keeps the API's.
#[test]
fn the_log_level_changes_from_the_admin_api_and_on_reload() {
    let b = Backend::start("b");
    let yaml = |level: &str| format!("workers: 1\n{}log: {{level: {level}}}\n{}", admin_section(""), site(&b));
    let mut gw = start(&yaml("info"));
    let api = Api::new(&gw);
    let levels = |api: &Api| {
        let (s, v) = api.call("GET", "/log-level", None, Value::Null);
        assert_eq!(s, 200, "{v}");
        (v["level"].as_str().unwrap_or_default().to_string(), v["configured"].as_str().unwrap_or_default().to_string())
    };
    assert_eq!(levels(&api), ("info".to_string(), "info".to_string()));
    // A refused head logs at debug: not written at info.
    let refused = b"GET / HTTP/1.1\r\nHost: app.test\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n";
    assert!(gatehouse_testkit::raw(gw.addr("http"), refused).starts_with("HTTP/1.1 400"));
    let (s, v) = api.call("PUT", "/log-level", None, json!({"level": "debug"}));
    assert_eq!((s, v["level"].as_str(), v["configured"].as_str()), (200, Some("debug"), Some("info")), "{v}");
    // The change is logged at info: once it is on stderr, so is anything logged before it.
    wait_until(SETTLE, || gw.stderr().contains("process log level changed through the admin API").then_some(()))
        .expect("the change is logged");
    assert!(!gw.stderr().contains("request head refused"), "a debug line at info:\n{}", gw.stderr());
    assert!(gatehouse_testkit::raw(gw.addr("http"), refused).starts_with("HTTP/1.1 400"));
    wait_until(SETTLE, || gw.stderr().contains("request head refused").then_some(()))
        .unwrap_or_else(|| panic!("no debug line after PUT debug:\n{}", gw.stderr()));
    // Refusals: not a level, not the body, a read-only token.
    for (body, status) in
        [(json!({"level": "verbose"}), 422), (json!({"lvl": "debug"}), 422), (json!({"level": "info,=x"}), 422)]
    {
        let (s, v) = api.call("PUT", "/log-level", None, body.clone());
        assert_eq!(s, status, "{body}: {v}");
    }
    let viewer = Api { addr: gw.admin(), token: crate::control::READ_TOKEN.into() };
    assert_eq!(viewer.call("PUT", "/log-level", None, json!({"level": "trace"})).0, 403);
    assert_eq!(levels(&viewer).0, "debug", "refusals changed nothing");
    // A reload that does not change log.level keeps the API's level.
    gw.write_config(&yaml("info"));
    assert_eq!(gw.reload()["event"], "reloaded");
    assert_eq!(levels(&api), ("debug".to_string(), "info".to_string()));
    // One that changes it puts it in force.
    gw.write_config(&yaml("warn"));
    assert_eq!(gw.reload()["event"], "reloaded");
    assert_eq!(levels(&api), ("warn".to_string(), "warn".to_string()));
    // A broken level is refused with the rest of the file; the running one stays.
    gw.write_config(&yaml("loud"));
    let refused_reload = gw.reload();
    assert_eq!(refused_reload["event"], "reload_failed", "{refused_reload}");
    assert!(refused_reload.to_string().contains("log.level"), "{refused_reload}");
    assert_eq!(levels(&api), ("warn".to_string(), "warn".to_string()));
}
