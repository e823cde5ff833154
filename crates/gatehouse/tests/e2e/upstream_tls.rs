//! TLS to upstreams, against a real nginx (and HAProxy, for a backend that refuses a handshake
//! without a client certificate): verified TLS 1.2 and 1.3 with a private CA, refusals for an
//! untrusted CA, a wrong name and an expired certificate (502, the reason in the log and in a
//! metric), client certificates, HTTP/2 chosen by ALPN, pooled connections, session resumption
//! seen by the backend, and health checks over the same TLS.

use crate::common::{check, head, start, HOST, SETTLE};
use crate::tls::Pki;
use gatehouse_testkit::{http_get, metric_value, wait_until, Gateway, Nginx};
use gatehouse_tls::issue::Algorithm;
use std::path::Path;

/// nginx with one HTTPS server on `{port0}` for `cert`; `extra` adds server directives.
fn https_backend(cert: &Path, extra: &str) -> Nginx {
    let c = cert.display();
    let keepalive = if extra.contains("keepalive_requests") { "" } else { "keepalive_requests 10000;" };
    Nginx::start(
        &format!(
            "server {{\n listen 127.0.0.1:{{port0}} ssl http2;\n ssl_certificate {c};\n ssl_certificate_key {c};\n\
             ssl_protocols TLSv1.2 TLSv1.3;\n ssl_session_cache shared:SSL:1m;\n {extra}\n\
             access_log {{dir}}/access.log test;\n {keepalive}\n\
             location / {{ return 200 \"tls backend\\n\"; }}\n}}\n"
        ),
        1,
    )
}

/// The gateway in front of `backend` with upstream settings `upstream` (flow-map entries after
/// the targets).
fn gateway(backend: &Nginx, upstream: &str) -> Gateway {
    start(&format!(
        "{}upstreams:\n  u: {{targets: [\"127.0.0.1:{}\"], {upstream}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}]}}\n",
        head(""),
        backend.port(0)
    ))
}

fn get(gw: &Gateway) -> gatehouse_testkit::Response {
    http_get(gw.addr("http"), HOST, "/", &[])
}

/// The backend's access log once it holds `n` lines (nginx writes a line after its response is
/// sent, so a client can see the answer before the line is there).
fn logged(backend: &Nginx, n: usize) -> Vec<String> {
    wait_until(SETTLE, || Some(backend.access_log()).filter(|l| l.len() >= n))
        .unwrap_or_else(|| panic!("nginx logged {n} requests: {:?}", backend.access_log()))
}

fn tls_metric(gw: &Gateway, series: &str) -> f64 {
    metric_value(&gw.metrics(), series).unwrap_or(0.0)
}

fn series(name: &str, backend: &Nginx, extra: &str) -> String {
    format!("{name}{{upstream=\"u\",endpoint=\"127.0.0.1:{}\"{extra}}}", backend.port(0))
}

#[test]
fn verified_tls_1_2_and_1_3_with_a_private_ca() {
    let pki = Pki::new();
    let cert = pki.issue(&["backend.test"], Algorithm::EcdsaP256, "backend.pem", None);
    let backend = https_backend(&cert, "");
    let ca = pki.ca_file();
    // AES-128-GCM with SHA-256 is offered first (a backend that follows the client's order, as
    // nginx does by default, takes it).
    for (version, seen, cipher) in
        [("tls1.2", "TLSv1.2", "ECDHE-ECDSA-AES128-GCM-SHA256"), ("tls1.3", "TLSv1.3", "TLS_AES_128_GCM_SHA256")]
    {
        let gw = gateway(
            &backend,
            &format!("tls: {{ca: \"{}\", server_name: backend.test, versions: [{version}]}}", ca.display()),
        );
        let r = get(&gw);
        assert_eq!(r.status, 200, "{version}: {}", gw.stderr());
        assert_eq!(r.text(), "tls backend\n");
        let log = logged(&backend, if version == "tls1.2" { 1 } else { 2 });
        let last = log.last().expect("nginx logged the request");
        assert!(last.contains(&format!(" {seen}- ")), "{version}: {last}");
        assert!(last.ends_with(&format!(" cipher={cipher}")), "{version}: {last}");
        // `Host` is the client's (host_header: preserve), not the TLS name.
        assert!(last.contains(&format!(" {HOST} ")), "{last}");
        assert_eq!(
            tls_metric(&gw, &series("gatehouse_upstream_tls_handshakes_total", &backend, ",kind=\"full\"")),
            1.0
        );
        assert_eq!(tls_metric(&gw, &series("gatehouse_upstream_tls_handshake_seconds_count", &backend, "")), 1.0);
    }
}

#[test]
fn untrusted_wrong_name_and_expired_certificates_give_502_with_the_reason() {
    let pki = Pki::new();
    let other = Pki::new();
    let good = pki.issue(&["backend.test"], Algorithm::EcdsaP256, "backend.pem", None);
    let expired = pki.ca.issue(&["backend.test"], Algorithm::EcdsaP256, -2).expect("issue");
    let expired_file = pki.dir.join("expired.pem");
    std::fs::write(&expired_file, expired).expect("write");
    let cases = [
        (&good, other.ca_file(), "backend.test", "untrusted", "upstream certificate not trusted for backend.test"),
        (&good, pki.ca_file(), "api.internal", "wrong_name", "upstream certificate not valid for api.internal"),
        (&expired_file, pki.ca_file(), "backend.test", "expired", "upstream certificate for backend.test expired"),
    ];
    for (cert, ca, name, reason, message) in cases {
        let backend = https_backend(cert, "");
        let mut gw =
            gateway(&backend, &format!("tls: {{ca: \"{}\", server_name: \"{name}\"}}, retries: 0", ca.display()));
        let r = get(&gw);
        assert_eq!(r.status, 502, "{reason}");
        assert!(backend.access_log().is_empty(), "{reason}: nothing reaches the backend");
        let failures = series("gatehouse_upstream_tls_failures_total", &backend, &format!(",reason=\"{reason}\""));
        assert_eq!(tls_metric(&gw, &failures), 1.0, "{reason}");
        let (_, _) = gw.terminate();
        let log = gw.stderr();
        assert!(log.contains(message), "{reason}: the log names the reason: {log}");
    }
}

#[test]
fn an_mtls_backend_gets_the_client_certificate() {
    let pki = Pki::new();
    let cert = pki.issue(&["backend.test"], Algorithm::EcdsaP256, "backend.pem", None);
    let client = pki.issue(&["gatehouse-client"], Algorithm::EcdsaP256, "client.pem", None);
    let ca = pki.ca_file();
    let backend = https_backend(&cert, &format!("ssl_client_certificate {};\n ssl_verify_client on;", ca.display()));
    // Without a certificate nginx answers 400 itself (it does not fail the handshake).
    let gw = gateway(&backend, &format!("tls: {{ca: \"{}\", server_name: backend.test}}", ca.display()));
    assert_eq!(get(&gw).status, 400);
    let gw = gateway(
        &backend,
        &format!(
            "tls: {{ca: \"{0}\", server_name: backend.test, cert: \"{1}\", key: \"{1}\"}}",
            ca.display(),
            client.display()
        ),
    );
    let r = get(&gw);
    assert_eq!(r.status, 200, "{}", gw.stderr());
    let log = logged(&backend, 2);
    assert!(log[1].contains("CN=gatehouse-client"), "{log:?}");
}

/// HAProxy with `verify required` refuses a client without a certificate by an alert: under TLS 1.3
/// the alert comes after the client's side of the handshake is done, on the first read.
#[test]
fn a_backend_that_refuses_the_handshake_gives_502_refused() {
    let pki = Pki::new();
    let cert = pki.issue(&["backend.test"], Algorithm::EcdsaP256, "backend.pem", None);
    let ca = pki.ca_file();
    for version in ["tls1.2", "tls1.3"] {
        let haproxy = gatehouse_testkit::Haproxy::start(&format!(
            "frontend fe\n  mode http\n  bind 127.0.0.1:{{port0}} ssl crt {} ca-file {} verify required\n  http-request return status 200\n",
            cert.display(),
            ca.display()
        ));
        let mut gw = start(&format!(
            "{}upstreams:\n  u: {{targets: [\"127.0.0.1:{}\"], retries: 0, tls: {{ca: \"{}\", server_name: backend.test, versions: [{version}]}}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}]}}\n",
            head(""),
            haproxy.port(0),
            ca.display()
        ));
        let r = get(&gw);
        assert_eq!(r.status, 502, "{version}");
        let refused = format!(
            "gatehouse_upstream_tls_failures_total{{upstream=\"u\",endpoint=\"127.0.0.1:{}\",reason=\"refused\"}}",
            haproxy.port(0)
        );
        assert_eq!(metric_value(&gw.metrics(), &refused), Some(1.0), "{version}");
        let (_, _) = gw.terminate();
        assert!(gw.stderr().contains("upstream backend.test refused the TLS session"), "{version}: {}", gw.stderr());
    }
}

#[test]
fn alpn_chooses_http2_and_forced_protocols_hold() {
    let pki = Pki::new();
    let cert = pki.issue(&["backend.test"], Algorithm::EcdsaP256, "backend.pem", None);
    let backend = https_backend(&cert, "");
    let ca = pki.ca_file();
    for (i, (protocol, seen)) in
        [("auto", "HTTP/2.0"), ("http2", "HTTP/2.0"), ("http1", "HTTP/1.1")].into_iter().enumerate()
    {
        let gw = gateway(
            &backend,
            &format!("protocol: {protocol}, tls: {{ca: \"{}\", server_name: backend.test}}", ca.display()),
        );
        for _ in 0..3 {
            assert_eq!(get(&gw).status, 200, "{protocol}: {}", gw.stderr());
        }
        let log = logged(&backend, 3 * (i + 1));
        let last = log.last().expect("logged");
        assert!(last.contains(&format!(" {seen} ")), "{protocol}: {last}");
        assert!(last.contains(&format!(" {HOST} ")), "{protocol}: the authority is the client's host: {last}");
        // Three requests, at most one connection per worker, one full handshake.
        assert!(tls_metric(&gw, &series("gatehouse_upstream_connections_total", &backend, "")) <= 2.0, "{protocol}");
        assert_eq!(
            tls_metric(&gw, &series("gatehouse_upstream_tls_handshakes_total", &backend, ",kind=\"full\"")),
            1.0
        );
    }
}

#[test]
fn pooled_connections_are_reused_and_new_ones_resume_the_session() {
    let pki = Pki::new();
    let cert = pki.issue(&["backend.test"], Algorithm::EcdsaP256, "backend.pem", None);
    let backend = https_backend(&cert, "");
    let ca = pki.ca_file();
    let tls = |v: &str| format!("tls: {{ca: \"{}\", server_name: backend.test, versions: [{v}]}}", ca.display());

    // Keep-alive: twenty requests, one connection per worker (two), one full handshake; the
    // other worker's connection resumes the first's session.
    let gw = gateway(&backend, &tls("tls1.3"));
    for _ in 0..20 {
        assert_eq!(get(&gw).status, 200);
    }
    let connections = tls_metric(&gw, &series("gatehouse_upstream_connections_total", &backend, ""));
    assert!(connections <= 2.0, "{connections}");
    assert_eq!(tls_metric(&gw, &series("gatehouse_upstream_tls_handshakes_total", &backend, ",kind=\"full\"")), 1.0);
    let resumed = tls_metric(&gw, &series("gatehouse_upstream_tls_handshakes_total", &backend, ",kind=\"resumed\""));
    assert_eq!(resumed, connections - 1.0);
    logged(&backend, 20);
    drop(gw);

    // No pool: every request opens a connection, and all but the first resume (tickets under TLS
    // 1.3, tickets or session ids under TLS 1.2), as the backend sees.
    for version in ["tls1.2", "tls1.3"] {
        let before = backend.access_log().len();
        let gw = gateway(&backend, &format!("keepalive: {{max_idle: 0}}, {}", tls(version)));
        for _ in 0..6 {
            assert_eq!(get(&gw).status, 200);
        }
        let log = logged(&backend, before + 6);
        let reused: Vec<bool> = log[before..].iter().map(|l| l.contains(" r- ")).collect();
        assert_eq!(reused.len(), 6, "{version}: {log:?}");
        // The first is a full handshake; the endpoint's session cache is shared by the workers.
        assert_eq!(reused, [false, true, true, true, true, true], "{version}");
        let resumed =
            tls_metric(&gw, &series("gatehouse_upstream_tls_handshakes_total", &backend, ",kind=\"resumed\""));
        assert_eq!(resumed, 5.0, "{version}");
    }
}

#[test]
fn health_checks_go_over_the_upstreams_tls() {
    let pki = Pki::new();
    let cert = pki.issue(&["backend.test"], Algorithm::EcdsaP256, "backend.pem", None);
    let backend = https_backend(&cert, "");
    let ca = pki.ca_file();
    let gw = gateway(
        &backend,
        &format!(
            "tls: {{ca: \"{}\", server_name: backend.test}}, health_check: {{path: /health, interval: 100ms, timeout: 2s}}",
            ca.display()
        ),
    );
    let checked = wait_until(SETTLE, || {
        backend.access_log().iter().any(|l| l.contains("gatehouse-health-check") && l.contains("TLSv1.3")).then_some(())
    });
    assert!(checked.is_some(), "a health check reaches the backend over TLS: {:?}", backend.access_log());
    assert_eq!(tls_metric(&gw, &series("gatehouse_upstream_healthy", &backend, "")), 1.0);
    assert_eq!(get(&gw).status, 200);
}

#[test]
fn check_reads_the_upstream_tls_files() {
    let (ok, err) = check("listeners:\n  http: {bind: \"127.0.0.1:0\"}\nupstreams:\n  u: {targets: [\"127.0.0.1:1\"], tls: {ca: /nonexistent/ca.pem, cert: /nonexistent/c.pem, key: /nonexistent/k.pem}}\nsites:\n  main: {hosts: [\"*\"], routes: [{path: /, upstream: u}]}\n");
    assert!(!ok);
    assert!(err.contains("upstreams.u.tls.ca: cannot read /nonexistent/ca.pem"), "{err}");
}

/// A target written by name is verified for that name, with no `server_name`, and sends it as SNI.
#[test]
fn a_named_target_is_verified_for_its_name() {
    let pki = Pki::new();
    let cert = pki.issue(&["backend.test"], Algorithm::EcdsaP256, "backend.pem", None);
    let backend = https_backend(&cert, "");
    let dns = gatehouse_testkit::DnsServer::start(
        &[("backend.test", "127.0.0.1".parse().expect("ip")), ("other.test", "127.0.0.1".parse().expect("ip"))],
        &[],
    );
    let config = |name: &str| {
        format!(
            "{}resolver: {{nameservers: [\"{}\"]}}\nupstreams:\n  u: {{targets: [\"{name}:{}\"], retries: 0, tls: {{ca: \"{}\"}}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}]}}\n",
            head(""),
            dns.addr(),
            backend.port(0),
            pki.ca_file().display()
        )
    };
    let gw = start(&config("backend.test"));
    assert_eq!(get(&gw).status, 200, "{}", gw.stderr());
    let mut gw = start(&config("other.test"));
    assert_eq!(get(&gw).status, 502);
    let (_, _) = gw.terminate();
    assert!(gw.stderr().contains("upstream certificate not valid for other.test"), "{}", gw.stderr());
}

/// Twenty clients at once, each request on a new upstream connection: after the first wave of full
/// handshakes, connections resume. rustls' own cache keeps 8 tickets per name, each used once, and
/// ran dry here; the endpoint's store keeps `session_cache` of them.
#[test]
fn a_burst_of_new_upstream_connections_resumes() {
    let pki = Pki::new();
    let cert = pki.issue(&["backend.test"], Algorithm::EcdsaP256, "backend.pem", None);
    let backend = https_backend(&cert, "");
    let gw = gateway(
        &backend,
        &format!(
            "keepalive: {{max_idle: 0}}, tls: {{ca: \"{}\", server_name: backend.test, versions: [tls1.3]}}",
            pki.ca_file().display()
        ),
    );
    let report = gatehouse_testkit::Load::run(gw.addr("http"), HOST, "/", 20, 15);
    assert_eq!((report.ok, report.failed), (300, 0), "{report:?}");
    let full = tls_metric(&gw, &series("gatehouse_upstream_tls_handshakes_total", &backend, ",kind=\"full\""));
    let resumed = tls_metric(&gw, &series("gatehouse_upstream_tls_handshakes_total", &backend, ",kind=\"resumed\""));
    assert_eq!(full + resumed, 300.0);
    // At most the first wave (one per client) is full.
    assert!(full <= 25.0, "full {full}, resumed {resumed}");
}

/// A traced request's attempt over TLS says whether its handshake resumed, over HTTP/1.1 and
/// HTTP/2: the first of three new connections is a full handshake, the others resume. (Each
/// request gets a new connection: no idle HTTP/1.1 connection is kept, and the backend ends an
/// HTTP/2 connection after one request.)
#[test]
fn traced_attempts_say_whether_their_tls_session_resumed() {
    let Some(jaeger) = gatehouse_testkit::Jaeger::start() else { return };
    let pki = Pki::new();
    let cert = pki.issue(&["backend.test"], Algorithm::EcdsaP256, "backend.pem", None);
    let backend = https_backend(&cert, "keepalive_requests 1;");
    for (n, protocol) in ["http1", "http2"].into_iter().enumerate() {
        let tracing = crate::traces::tracing_section(&format!("http://{}", jaeger.otlp_http), "http", "gw-tls", "");
        let gw = start(&format!(
            "{}{tracing}upstreams:\n  u: {{targets: [\"127.0.0.1:{}\"], protocol: {protocol}, keepalive: {{max_idle: 0}}, tls: {{ca: \"{}\", server_name: backend.test}}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}]}}\n",
            head(""),
            backend.port(0),
            pki.ca_file().display()
        ));
        let mut resumed = Vec::new();
        for i in 0..3u32 {
            let trace = format!("{:032x}", 0x7af0_0000u128 + u128::from(i) + 16 * n as u128);
            let tp = format!("00-{trace}-b7ad6b7169203331-01");
            assert_eq!(http_get(gw.addr("http"), HOST, "/", &[("traceparent", &tp)]).status, 200);
            let t = jaeger.trace(&trace, 2, std::time::Duration::from_secs(15)).expect("the trace in Jaeger");
            let attempt = t["spans"]
                .as_array()
                .and_then(|s| s.iter().find(|s| gatehouse_testkit::span_tag(s, "span.kind") == Some(&"client".into())))
                .cloned()
                .expect("the attempt's span");
            assert_eq!(gatehouse_testkit::span_tag(&attempt, "url.scheme"), Some(&"https".into()), "{attempt}");
            resumed.push(gatehouse_testkit::span_tag(&attempt, "tls.resumed").and_then(serde_json::Value::as_bool));
        }
        assert_eq!(resumed, [Some(false), Some(true), Some(true)], "{protocol}");
    }
}
