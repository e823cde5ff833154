//! systemd integration: the sd_notify(3) messages a `Type=notify` unit relies on, read from a
//! real `NOTIFY_SOCKET` (a Unix datagram socket, as systemd makes one), and the shipped unit file
//! checked by `systemd-analyze verify`.

use crate::common::{targets, SETTLE};
use gatehouse_testkit::{Backend, Gateway, TempDir};
use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

/// The messages on `sock` until one holds `want` (each message's lines joined by `;`), within
/// `within`.
fn until(sock: &UnixDatagram, want: &str, within: Duration) -> Vec<String> {
    let deadline = Instant::now() + within;
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        let _ = sock
            .set_read_timeout(Some(deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1))));
        match sock.recv(&mut buf) {
            Ok(n) => {
                let msg = String::from_utf8_lossy(&buf[..n]).trim_end().replace('\n', ";");
                let done = msg.contains(want);
                seen.push(msg);
                if done {
                    return seen;
                }
            }
            Err(_) => break,
        }
    }
    panic!("no message with {want:?} within {within:?}; got {seen:?}");
}

#[test]
fn notifies_systemd_of_ready_reload_watchdog_and_stop() {
    let dir = TempDir::new();
    let path = dir.join("notify.sock");
    let sock = UnixDatagram::bind(&path).expect("bind the notify socket");
    let b = Backend::start("b");
    let yaml = format!(
        "workers: 1\nlisteners:\n  http: {{bind: \"127.0.0.1:0\"}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n  s: {{hosts: [\"*\"], routes: [{{path: /, upstream: u}}]}}\n",
        targets(&[&b])
    );
    let notify = path.to_string_lossy().into_owned();
    // WatchdogSec=200ms as systemd passes it.
    let mut gw = Gateway::start_with_env(
        env!("CARGO_BIN_EXE_gatehouse"),
        &yaml,
        &[("NOTIFY_SOCKET", notify.as_str()), ("WATCHDOG_USEC", "200000")],
    );
    let seen = until(&sock, "READY=1", SETTLE);
    assert!(seen.iter().any(|m| m.contains("READY=1") && m.contains("STATUS=serving")), "{seen:?}");
    until(&sock, "WATCHDOG=1", SETTLE);
    // A reload: RELOADING=1 with the monotonic clock, then READY=1.
    gw.write_config(&yaml);
    let reloaded = gw.reload();
    assert_eq!(reloaded["event"], "reloaded", "{reloaded}");
    let seen = until(&sock, "RELOADING=1", SETTLE);
    let reloading = seen.iter().find(|m| m.contains("RELOADING=1")).cloned().unwrap_or_default();
    assert!(reloading.contains("MONOTONIC_USEC="), "{reloading}");
    until(&sock, "READY=1", SETTLE);
    // Draining: STOPPING=1.
    gw.signal("TERM");
    until(&sock, "STOPPING=1", SETTLE);
}

#[test]
fn the_unit_file_passes_systemd_analyze_verify() {
    let Ok(out) = std::process::Command::new("systemd-analyze").arg("--version").output() else {
        assert!(std::env::var_os("CI").is_none(), "systemd-analyze is needed but CI is set");
        eprintln!("the_unit_file_passes_systemd_analyze_verify: skipped, no systemd-analyze");
        return;
    };
    assert!(out.status.success());
    let unit = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/systemd/gatehouse.service"))
        .expect("deploy/systemd/gatehouse.service");
    for want in [
        "Type=notify",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "CapabilityBoundingSet=CAP_NET_BIND_SERVICE",
        "ProtectSystem=strict",
        "StateDirectory=gatehouse",
        "LimitNOFILE=",
    ] {
        assert!(unit.contains(want), "the unit lacks {want}");
    }
    // verify wants the executables to exist: the one just built stands in for the installed one.
    let dir = TempDir::new();
    let path = dir.join("gatehouse.service");
    std::fs::write(&path, unit.replace("/usr/local/bin/gatehouse", env!("CARGO_BIN_EXE_gatehouse"))).expect("write");
    // The socket unit beside it, for socket activation.
    let socket = dir.join("gatehouse.socket");
    std::fs::copy(concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/systemd/gatehouse.socket"), &socket)
        .expect("deploy/systemd/gatehouse.socket");
    let out = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .arg(&socket)
        .output()
        .expect("run systemd-analyze");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && !said.contains("gatehouse."), "systemd-analyze verify:\n{said}");
}

/// Socket activation: `systemd-socket-activate` binds the listener's and the admin's addresses,
/// waits for a first connection, then execs the gateway with both sockets passed (`LISTEN_FDS`,
/// named by `--fdname`). The connection made before the gateway ran is served from the passed
/// socket's queue; the listener is found by name, the admin by address.
#[test]
fn serves_on_sockets_passed_by_systemd_socket_activation() {
    if std::process::Command::new("systemd-socket-activate").arg("--version").output().is_err() {
        assert!(std::env::var_os("CI").is_none(), "systemd-socket-activate is needed but CI is set");
        eprintln!("serves_on_sockets_passed_by_systemd_socket_activation: skipped, no systemd-socket-activate");
        return;
    }
    let b = Backend::start("b");
    let web: std::net::SocketAddr = format!("127.0.0.1:{}", gatehouse_testkit::free_port()).parse().expect("addr");
    let admin: std::net::SocketAddr = format!("127.0.0.1:{}", gatehouse_testkit::free_port()).parse().expect("addr");
    // The listener's configured address is not the passed socket's: it is taken by its name.
    let yaml = format!(
        "workers: 2\nadmin: {{bind: \"{admin}\"}}\nlisteners:\n  web: {{bind: \"127.0.0.1:0\"}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n  s: {{hosts: [\"*\"], routes: [{{path: /, upstream: u}}]}}\n",
        targets(&[&b])
    );
    // The first request, made once systemd-socket-activate listens and before the gateway runs;
    // it waits as long as the gateway is given to get ready (on a loaded machine the wrapper may
    // take more than a few seconds to listen, and without this connection it never starts the
    // gateway).
    let early = std::thread::spawn(move || {
        let mut conn =
            gatehouse_testkit::wait_until(Duration::from_secs(30), || std::net::TcpStream::connect(web).ok())
                .expect("systemd-socket-activate listens");
        use std::io::{Read, Write};
        conn.write_all(b"GET /early HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n").expect("send");
        conn.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        let mut answer = String::new();
        let _ = conn.read_to_string(&mut answer);
        answer
    });
    let (l_web, l_admin) = (format!("--listen={web}"), format!("--listen={admin}"));
    let mut gw = Gateway::start_under(
        &["systemd-socket-activate", &l_web, &l_admin, "--fdname=web:unknown"],
        env!("CARGO_BIN_EXE_gatehouse"),
        &yaml,
        &[],
    );
    assert_eq!(gw.addr("web"), web, "the listener serves on the passed socket");
    assert_eq!(gw.admin(), admin, "the admin serves on the passed socket bound to its address");
    let answer = early.join().expect("the early client");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("x-backend: b"), "{answer}");
    let r = gatehouse_testkit::http_get(web, "a.test", "/later", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(b.requests().len(), 2, "both requests reached the backend");
    let stderr = gw.stderr();
    assert!(stderr.contains("serving on a socket passed by systemd"), "{stderr}");
    assert!(!stderr.contains("no listener took"), "{stderr}");
    let (status, _) = gw.terminate();
    assert!(status.success(), "{status:?}");
}
