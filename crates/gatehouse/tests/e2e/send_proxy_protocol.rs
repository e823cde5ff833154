//! PROXY protocol towards upstreams (`send_proxy_protocol`), against a real nginx that requires it
//! (`listen ... proxy_protocol`): the backend learns the client's address from the header; a
//! connection that named one client carries only that client connection's requests; health
//! checks send a header that names no client.

use crate::common::{check, head, start, HOST, SETTLE};
use gatehouse_testkit::{curl, metric_value, wait_until, Gateway, Nginx};

/// nginx that requires a PROXY header on `{port0}`.
fn backend() -> Nginx {
    Nginx::start(
        "server {\n listen 127.0.0.1:{port0} proxy_protocol;\n access_log {dir}/access.log test;\n keepalive_requests 10000;\n location / { return 200 \"pp backend\\n\"; }\n}\n",
        1,
    )
}

fn gateway(backend: &Nginx, upstream: &str) -> Gateway {
    start(&format!(
        "{}upstreams:\n  u: {{targets: [\"127.0.0.1:{}\"], {upstream}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}]}}\n",
        head(""),
        backend.port(0)
    ))
}

/// The backend's access log once it has `n` lines.
fn logged(backend: &Nginx, n: usize) -> Vec<String> {
    wait_until(SETTLE, || Some(backend.access_log()).filter(|l| l.len() >= n))
        .unwrap_or_else(|| panic!("nginx logged {n} requests: {:?} {}", backend.access_log(), backend.error_log()))
}

fn field<'a>(line: &'a str, name: &str) -> &'a str {
    line.split_whitespace().find_map(|w| w.strip_prefix(name)).unwrap_or("")
}

#[test]
fn the_backend_sees_the_client_and_a_connection_serves_one_client() {
    for version in ["v1", "v2"] {
        let backend = backend();
        let gw = gateway(&backend, &format!("send_proxy_protocol: {version}"));
        let url = format!("http://{HOST}:{}/", gw.addr("http").port());
        let resolve = format!("{HOST}:{}:127.0.0.1", gw.addr("http").port());
        // Two requests on one client connection from 127.0.0.2, then one from 127.0.0.3.
        let r = curl(&["--resolve", &resolve, "--interface", "127.0.0.2", &url, &url]);
        assert_eq!(r.status, 200, "{version}");
        let r = curl(&["--resolve", &resolve, "--interface", "127.0.0.3", &url]);
        assert_eq!(r.status, 200, "{version}");
        let log = logged(&backend, 3);
        let clients: Vec<&str> = log.iter().map(|l| field(l, "pp=")).collect();
        assert_eq!(clients, ["127.0.0.2", "127.0.0.2", "127.0.0.3"], "{version}: {log:?}");
        let conns: Vec<&str> = log.iter().map(|l| field(l, "c=")).collect();
        assert_eq!(conns[0], conns[1], "{version}: one client connection, one upstream connection: {log:?}");
        assert_ne!(conns[1], conns[2], "{version}: another client never gets that connection: {log:?}");
    }
}

#[test]
fn health_checks_send_a_header_that_names_no_client() {
    for version in ["v1", "v2"] {
        let backend = backend();
        let gw = gateway(
            &backend,
            &format!("send_proxy_protocol: {version}, health_check: {{path: /health, interval: 100ms, timeout: 2s}}"),
        );
        let seen = wait_until(SETTLE, || {
            backend.access_log().iter().any(|l| l.contains("gatehouse-health-check")).then_some(())
        });
        assert!(seen.is_some(), "{version}: {:?} {}", backend.access_log(), backend.error_log());
        let series = format!("gatehouse_upstream_healthy{{upstream=\"u\",endpoint=\"127.0.0.1:{}\"}}", backend.port(0));
        assert_eq!(metric_value(&gw.metrics(), &series), Some(1.0), "{version}");
    }
}

#[test]
fn http2_upstreams_cannot_send_it() {
    let (ok, err) = check(
        "listeners:\n  http: {bind: \"127.0.0.1:0\"}\nupstreams:\n  u: {targets: [\"127.0.0.1:1\"], protocol: http2, send_proxy_protocol: v2}\n",
    );
    assert!(!ok);
    assert!(err.contains("upstreams.u.send_proxy_protocol: needs `protocol: http1`"), "{err}");
}
