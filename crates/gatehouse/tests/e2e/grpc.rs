//! gRPC through the gateway with a real gRPC implementation on both sides (grpcio, the Python
//! binding of gRPC's C core): `tests/grpc/peer.py` is the server behind an `http2` upstream and
//! the client in front, through the h2c listener and through the TLS listener (ALPN h2). CI
//! installs grpcio; elsewhere the tests say they were skipped, unless `CI` is set.

use crate::common::start;
use crate::tls::{certificates, Pki};
use gatehouse_testkit::Backend;
use gatehouse_testkit::Gateway;
use gatehouse_tls::issue::Algorithm;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The authority the client asks for.
const AUTHORITY: &str = "grpc.test";

fn peer_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/grpc/peer.py")
}

/// Whether Python's grpcio is there; without it (and without `CI`) a test is skipped.
fn grpcio(test: &str) -> bool {
    crate::common::python_has("grpc", test)
}

/// A grpcio server on a free port; it stops when dropped.
type GrpcServer = crate::common::PeerProcess;

impl GrpcServer {
    fn start() -> GrpcServer {
        GrpcServer::start_with(None)
    }

    /// A server that writes what happened to calls (`cancelled`) to `events`.
    fn start_with(events: Option<&std::path::Path>) -> GrpcServer {
        GrpcServer::start_full(events, None)
    }

    /// A server over TLS with the certificate and key of `bundle`.
    fn start_tls(bundle: &std::path::Path) -> GrpcServer {
        GrpcServer::start_full(None, Some(bundle))
    }

    fn start_full(events: Option<&std::path::Path>, bundle: Option<&std::path::Path>) -> GrpcServer {
        let events = events.map_or_else(|| "-".into(), |e| e.as_os_str().to_owned());
        let mut cmd = Command::new("python3");
        cmd.arg(peer_script()).arg("server").arg(events).args(bundle);
        GrpcServer::spawn(&mut cmd, "the grpcio server")
    }
}

/// Waits until the server's events file says `n` calls were cancelled.
fn cancelled(events: &std::path::Path, n: usize) {
    let count = || std::fs::read_to_string(events).unwrap_or_default().lines().filter(|l| *l == "cancelled").count();
    gatehouse_testkit::wait_until(crate::common::SETTLE, || (count() == n).then_some(()))
        .unwrap_or_else(|| panic!("the server saw {} calls cancelled, not {n}", count()));
}

/// Runs the grpcio client's calls against `address` (TLS when `ca` is given) and returns what it
/// saw, as JSON.
fn client(address: &str, ca: Option<&std::path::Path>) -> serde_json::Value {
    run_client("client", address, ca)
}

/// Runs the client in `mode` (`client`, `streams`).
fn run_client(mode: &str, address: &str, ca: Option<&std::path::Path>) -> serde_json::Value {
    let mut cmd = Command::new("python3");
    cmd.arg(peer_script()).args([mode, address, AUTHORITY]);
    if let Some(ca) = ca {
        cmd.arg(ca);
    }
    let out = cmd.output().expect("run the grpcio client");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "client failed: {text}{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("client output {text:?}: {e}"))
}

/// A gateway with an h2c listener and a TLS listener for [`AUTHORITY`], in front of `server` as
/// an `http2` upstream.
fn gateway(server: &GrpcServer, pki: &Pki) -> Gateway {
    let cert = pki.issue(&[AUTHORITY], Algorithm::EcdsaP256, "grpc.pem", None);
    start(&format!(
        "workers: 2\nadmin: {{bind: \"127.0.0.1:0\"}}\ntls:\n{}\nlisteners:\n  h2c: {{bind: \"127.0.0.1:0\", protocol: h2c}}\n  tls: {{bind: \"127.0.0.1:0\", tls: {{}}}}\nupstreams:\n  g: {{targets: [\"127.0.0.1:{}\"], protocol: http2}}\nsites:\n  s: {{hosts: [\"*\"], routes: [{{path: /, upstream: g}}]}}\n",
        certificates(&[&cert]),
        server.port
    ))
}

/// The calls the client makes, as a real gRPC client sees them: the answer, metadata both ways,
/// the trailing metadata, an application's own error status, and calls after that error (an
/// application error is not an endpoint failure).
fn check_calls(seen: &serde_json::Value, via: &str) {
    let unary = &seen["unary"];
    assert_eq!(unary["code"], "OK", "{via}: {seen}");
    assert_eq!(unary["response"], "hello", "{via}: {seen}");
    assert_eq!(unary["initial"]["x-echo"], "metadata", "{via}: request metadata reached the server: {seen}");
    assert_eq!(unary["trailing"]["x-trailer"], "done", "{via}: trailing metadata came back: {seen}");
    let error = &seen["error"];
    assert_eq!(
        (&error["code"], &error["details"]),
        (&"INVALID_ARGUMENT".into(), &"asked to fail".into()),
        "{via}: {seen}"
    );
    assert_eq!(error["trailing"]["x-trailer"], "done", "{via}: {seen}");
    assert_eq!(seen["again"], serde_json::json!(["OK", "OK", "OK", "OK"]), "{via}: {seen}");
}

#[test]
fn unary_calls_pass_through_the_h2c_and_the_tls_listener() {
    if !grpcio("unary_calls_pass_through_the_h2c_and_the_tls_listener") {
        return;
    }
    let server = GrpcServer::start();
    let pki = Pki::new();
    let gw = gateway(&server, &pki);
    check_calls(&client(&gw.addr("h2c").to_string(), None), "h2c");
    check_calls(&client(&format!("localhost:{}", gw.addr("tls").port()), Some(&pki.ca_file())), "tls");
    // The endpoint's statuses, from its trailers: the application error and the successes.
    let m = gw.metrics();
    for (status, n) in [("OK", 10.0), ("INVALID_ARGUMENT", 2.0)] {
        let series = format!("gatehouse_grpc_responses_total{{route=\"s:/\",grpc_status=\"{status}\"}}");
        assert_eq!(gatehouse_testkit::metric_value(&m, &series), Some(n), "{series}\n{m}");
    }
}

/// Makes `calls` (method, message size, metadata) one after another over one cleartext channel
/// to `address`; what each got: `{"code", "details", ...}`.
fn calls(address: &str, calls: serde_json::Value) -> Vec<serde_json::Value> {
    let out = Command::new("python3")
        .arg(peer_script())
        .args(["calls", address, AUTHORITY, &calls.to_string()])
        .output()
        .expect("run the grpcio client");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "client failed: {text}{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("client output {text:?}: {e}"))
}

/// Every answer the gateway makes itself reaches a gRPC client as the gRPC status of the mapping
/// (docs/gateway.md), decoded by grpcio: no route, app key missing or unknown, ACL, rate limit,
/// message over `max_body`, upstream timeout, connect failure, no healthy endpoint.
#[test]
fn the_gateways_own_refusals_are_grpc_statuses() {
    if !grpcio("the_gateways_own_refusals_are_grpc_statuses") {
        return;
    }
    let server = GrpcServer::start();
    let dir = gatehouse_testkit::TempDir::new();
    let log = dir.join("access.log");
    let gw = start(&format!(
        r#"workers: 1
admin: {{bind: "127.0.0.1:0"}}
access_log: {{path: "{log}", format: json}}
listeners:
  h2c: {{bind: "127.0.0.1:0", protocol: h2c}}
upstreams:
  g: {{targets: ["127.0.0.1:{port}"], protocol: http2, timeouts: {{read: 500ms}}}}
  dead: {{targets: ["{closed}"], protocol: http2, retries: 0, passive_health: {{failures: 1, eject: 1h}}}}
services:
  echo:
    path: /test.Echo
    strip_prefix: false
    upstream: g
    auth: app_key
    max_body: 1k
    acl: {{deny: [{{paths: ["/Forbidden"]}}]}}
  dead:
    path: /test.Dead
    strip_prefix: false
    upstream: dead
apps:
  caller: {{key: K-caller, grants: {{echo: gold}}}}
plans:
  gold: {{rate_limits: [{{limit: 4, interval: 1h}}]}}
"#,
        port = server.port,
        closed = Backend::closed_port(),
        log = log.display(),
    ));
    let key = serde_json::json!({"x-app-key": "K-caller"});
    let seen = calls(
        &gw.addr("h2c").to_string(),
        serde_json::json!([
            {"method": "/other.Service/Method", "metadata": key},
            {"method": "/test.Echo/Unary"},
            {"method": "/test.Echo/Unary", "metadata": {"x-app-key": "K-nobody"}},
            {"method": "/test.Echo/Unary", "metadata": key},
            {"method": "/test.Echo/Forbidden", "metadata": key},
            {"method": "/test.Echo/Unary", "metadata": key, "size": 4096},
            {"method": "/test.Echo/Slow", "metadata": key},
            {"method": "/test.Echo/Unary", "metadata": key},
            {"method": "/test.Echo/Unary", "metadata": key},
            {"method": "/test.Dead/Unary"},
            {"method": "/test.Dead/Unary"},
        ]),
    );
    let got: Vec<(String, String)> = seen
        .iter()
        .map(|s| (s["code"].as_str().unwrap_or("?").to_string(), s["details"].as_str().unwrap_or("").to_string()))
        .collect();
    let want = [
        ("UNIMPLEMENTED", "no route"),
        ("UNAUTHENTICATED", "credentials are required"),
        ("UNAUTHENTICATED", "invalid credentials"),
        ("OK", ""),
        ("PERMISSION_DENIED", "not allowed"),
        ("RESOURCE_EXHAUSTED", "request body too large"),
        ("DEADLINE_EXCEEDED", "upstream timed out"),
        ("OK", ""),
        // The plan's fifth call in the hour (counted: OK, ACL-refused, too large, slow, OK).
        ("RESOURCE_EXHAUSTED", "too many requests"),
        ("UNAVAILABLE", "upstream connect failed"),
        ("UNAVAILABLE", "no healthy upstream"),
    ];
    let want: Vec<(String, String)> = want.iter().map(|(c, d)| (c.to_string(), d.to_string())).collect();
    assert_eq!(got, want, "{seen:?}");

    // Counted by route and status (the call without a route has none), and in the log.
    let m = gw.metrics();
    for (route, status, n) in [
        ("service:echo", "OK", 2.0),
        ("service:echo", "UNAUTHENTICATED", 2.0),
        ("service:echo", "PERMISSION_DENIED", 1.0),
        ("service:echo", "RESOURCE_EXHAUSTED", 2.0),
        ("service:echo", "DEADLINE_EXCEEDED", 1.0),
        ("service:dead", "UNAVAILABLE", 2.0),
    ] {
        let series = format!("gatehouse_grpc_responses_total{{route=\"{route}\",grpc_status=\"{status}\"}}");
        assert_eq!(gatehouse_testkit::metric_value(&m, &series), Some(n), "{series}\n{m}");
    }
    let logged: Vec<i64> =
        crate::common::access_log_lines(&log, 11).iter().map(|v| v["grpc_status"].as_i64().unwrap_or(-1)).collect();
    assert_eq!(logged, [12, 16, 16, 0, 7, 8, 4, 0, 8, 14, 14]);
}

/// Streaming calls flow message by message through both listeners: server streaming, client
/// streaming and bidirectional with 1,000 messages each way, a 4 MiB message, 1,000 concurrent
/// calls on one connection; and a call whose deadline passes ends as DEADLINE_EXCEEDED with its
/// upstream stream reset (the server sees the call cancelled).
#[test]
fn streams_large_messages_concurrency_and_deadlines() {
    if !grpcio("streams_large_messages_concurrency_and_deadlines") {
        return;
    }
    let dir = gatehouse_testkit::TempDir::new();
    let events = dir.join("events");
    let server = GrpcServer::start_with(Some(&events));
    let pki = Pki::new();
    let gw = gateway(&server, &pki);
    let tls = format!("localhost:{}", gw.addr("tls").port());
    for (via, address, ca) in [("h2c", gw.addr("h2c").to_string(), None), ("tls", tls, Some(pki.ca_file()))] {
        let seen = run_client("streams", &address, ca.as_deref());
        let want = serde_json::json!({
            "server_streaming": [1000, 100000, "00000999"],
            "client_streaming": "1000/8000",
            "bidirectional": [1000, true],
            "four_mib": true,
            "concurrent": 1000,
            "deadline": "DEADLINE_EXCEEDED",
        });
        assert_eq!(seen, want, "{via}");
    }
    cancelled(&events, 2);
}

/// Long streams are not cut by the timeouts of a request/response exchange: a client stream
/// whose parts come slower than `body_read_timeout` and last longer than the upstream's read
/// timeout passes (the wait for the answer counts from the last part), while a server that does
/// not answer within the read timeout is cut off. A service's `stream_timeout` bounds a server
/// stream (trailers with DEADLINE_EXCEEDED after the messages so far), and a `grpc-timeout` sent
/// by the client (here by curl, which keeps no deadline of its own) bounds the wait for the
/// answer (a trailers-only DEADLINE_EXCEEDED). Each time the upstream stream is reset, which the
/// server sees.
#[test]
fn long_streams_pass_and_deadlines_cut_calls_off() {
    if !grpcio("long_streams_pass_and_deadlines_cut_calls_off") {
        return;
    }
    let dir = gatehouse_testkit::TempDir::new();
    let events = dir.join("events");
    let server = GrpcServer::start_with(Some(&events));
    let gw = start(&format!(
        r#"workers: 1
admin: {{bind: "127.0.0.1:0"}}
listeners:
  h2c: {{bind: "127.0.0.1:0", protocol: h2c, body_read_timeout: 300ms}}
upstreams:
  g: {{targets: ["127.0.0.1:{port}"], protocol: http2, timeouts: {{read: 500ms}}}}
services:
  echo: {{path: /test.Echo, strip_prefix: false, upstream: g, stream_timeout: 1500ms}}
"#,
        port = server.port,
    ));
    let address = gw.addr("h2c").to_string();
    let seen = calls(
        &address,
        serde_json::json!([
            {"method": "/test.Echo/Count", "shape": "client", "messages": 3, "pause_ms": 350, "size": 3},
            {"method": "/test.Echo/Slow"},
            {"method": "/test.Echo/Trickle", "shape": "server", "size": 30},
        ]),
    );
    assert_eq!(seen[0], serde_json::json!({"code": "OK", "response": "3/9"}), "{seen:?}");
    assert_eq!(
        (&seen[1]["code"], &seen[1]["details"]),
        (&"DEADLINE_EXCEEDED".into(), &"upstream timed out".into()),
        "{seen:?}"
    );
    assert_eq!(
        (&seen[2]["code"], &seen[2]["details"]),
        (&"DEADLINE_EXCEEDED".into(), &"deadline exceeded".into()),
        "{seen:?}"
    );
    let received = seen[2]["received"].as_u64().unwrap_or(0);
    assert!((5..=16).contains(&received), "about 15 messages in the 1.5 s before the deadline: {seen:?}");

    // grpc-timeout from the client: one frame (not compressed, 5 bytes) to the slow method.
    let frame = dir.join("frame");
    std::fs::write(&frame, b"\0\0\0\0\x05hello").expect("write the frame");
    let url = format!("http://{address}/test.Echo/Slow");
    let data = format!("@{}", frame.display());
    let resp = gatehouse_testkit::curl(&[
        "--http2-prior-knowledge",
        "-H",
        "content-type: application/grpc",
        "-H",
        "te: trailers",
        "-H",
        "grpc-timeout: 300m",
        "--data-binary",
        &data,
        &url,
    ]);
    assert_eq!((resp.status, resp.header("grpc-status")), (200, Some("4")), "{resp:?}");
    // The header goes on to the backend (as Envoy passes it), whose gRPC library keeps the
    // same deadline from a moment later: the gateway's answer ("deadline exceeded") comes first
    // unless the gateway's worker was held up (a loaded machine), and then the backend's own
    // ("Deadline Exceeded", grpcio's) is passed on. Either is the client's deadline honoured.
    let message = resp.header("grpc-message");
    assert!(matches!(message, Some("deadline exceeded" | "Deadline Exceeded")), "{resp:?}");

    cancelled(&events, 3);
}

/// A gRPC backend over TLS (`protocol: http2` with `tls`: h2 by ALPN, the certificate verified
/// against a private CA for its name), reached from both listeners: unary calls with metadata and
/// an application error, and the streaming kinds.
#[test]
fn calls_reach_a_tls_backend_by_alpn() {
    if !grpcio("calls_reach_a_tls_backend_by_alpn") {
        return;
    }
    let pki = Pki::new();
    let backend_cert = pki.issue(&["grpc-backend.test"], Algorithm::EcdsaP256, "backend.pem", None);
    let server = GrpcServer::start_tls(&backend_cert);
    let cert = pki.issue(&[AUTHORITY], Algorithm::EcdsaP256, "grpc.pem", None);
    let gw = start(&format!(
        "workers: 2\nadmin: {{bind: \"127.0.0.1:0\"}}\ntls:\n{}\nlisteners:\n  h2c: {{bind: \"127.0.0.1:0\", protocol: h2c}}\n  tls: {{bind: \"127.0.0.1:0\", tls: {{}}}}\nupstreams:\n  g: {{targets: [\"127.0.0.1:{}\"], protocol: http2, tls: {{ca: \"{}\", server_name: grpc-backend.test}}}}\nsites:\n  s: {{hosts: [\"*\"], routes: [{{path: /, upstream: g}}]}}\n",
        certificates(&[&cert]),
        server.port,
        pki.ca_file().display()
    ));
    let tls = format!("localhost:{}", gw.addr("tls").port());
    check_calls(&client(&gw.addr("h2c").to_string(), None), "h2c to TLS");
    check_calls(&client(&tls, Some(&pki.ca_file())), "TLS to TLS");
    let seen = run_client("streams", &tls, Some(&pki.ca_file()));
    assert_eq!(seen["server_streaming"], serde_json::json!([1000, 100000, "00000999"]), "{seen}");
    assert_eq!(seen["client_streaming"], "1000/8000", "{seen}");
    assert_eq!(seen["bidirectional"], serde_json::json!([1000, true]), "{seen}");
    assert_eq!((seen["four_mib"].as_bool(), seen["concurrent"].as_u64()), (Some(true), Some(1000)), "{seen}");
}

/// An application's own error status is a success for passive health: the endpoint answered.
/// With `passive_health.grpc_failures: [UNAVAILABLE]`, that status counts as the endpoint's
/// failure, whether it comes in a trailers-only answer or in the trailers after messages: two
/// such calls eject the endpoint (`failures: 2`), and the next call finds no healthy one.
#[test]
fn chosen_grpc_statuses_count_as_endpoint_failures() {
    if !grpcio("chosen_grpc_statuses_count_as_endpoint_failures") {
        return;
    }
    let server = GrpcServer::start();
    let config = |health: &str| {
        format!(
            "workers: 1\nlisteners:\n  h2c: {{bind: \"127.0.0.1:0\", protocol: h2c}}\nupstreams:\n  g: {{targets: [\"127.0.0.1:{}\"], protocol: http2, passive_health: {{failures: 2, eject: 1h{health}}}}}\nservices:\n  echo: {{path: /test.Echo, strip_prefix: false, upstream: g}}\n",
            server.port
        )
    };
    let listed = serde_json::json!([
        {"method": "/test.Echo/Down"},
        {"method": "/test.Echo/Flaky", "shape": "server", "size": 1},
        {"method": "/test.Echo/Unary"},
    ]);
    let codes = |seen: &[serde_json::Value]| -> Vec<(String, String)> {
        seen.iter()
            .map(|s| (s["code"].as_str().unwrap_or("?").into(), s["details"].as_str().unwrap_or("").into()))
            .collect()
    };
    let tolerant = start(&config(""));
    let seen = calls(&tolerant.addr("h2c").to_string(), listed.clone());
    let down = ("UNAVAILABLE".to_string(), "down".to_string());
    assert_eq!(codes(&seen), [down.clone(), down.clone(), ("OK".into(), String::new())], "{seen:?}");
    let strict = start(&config(", grpc_failures: [UNAVAILABLE]"));
    let seen = calls(&strict.addr("h2c").to_string(), listed);
    assert_eq!(seen[1]["received"], 1, "the message before the trailers: {seen:?}");
    assert_eq!(codes(&seen), [down.clone(), down, ("UNAVAILABLE".into(), "no healthy upstream".into())], "{seen:?}");
}

/// `health_check: {type: grpc}` asks the endpoint through gRPC's health protocol: an endpoint
/// that answers NOT_SERVING is taken out (calls get UNAVAILABLE from the gateway), and back in
/// once it answers SERVING again.
#[test]
fn grpc_health_checks_follow_the_servers_serving_status() {
    if !grpcio("grpc_health_checks_follow_the_servers_serving_status") {
        return;
    }
    let server = GrpcServer::start();
    let gw = start(&format!(
        "workers: 1\nadmin: {{bind: \"127.0.0.1:0\"}}\nlisteners:\n  h2c: {{bind: \"127.0.0.1:0\", protocol: h2c}}\nupstreams:\n  g: {{targets: [\"127.0.0.1:{}\"], protocol: http2, health_check: {{type: grpc, service: test.Echo, interval: 100ms, timeout: 1s, rise: 1, fall: 1}}}}\n  direct: {{targets: [\"127.0.0.1:{0}\"], protocol: http2}}\nsites:\n  s: {{hosts: [\"*\"], routes: [{{path: /test.Echo/SetHealth, upstream: direct}}, {{path: /, upstream: g}}]}}\n",
        server.port
    ));
    let address = gw.addr("h2c").to_string();
    let healthy = |want: f64| {
        gatehouse_testkit::wait_until(crate::common::SETTLE, || {
            let m = gw.metrics();
            let v = m
                .lines()
                .find(|l| l.starts_with("gatehouse_upstream_healthy{upstream=\"g\""))?
                .rsplit(' ')
                .next()?
                .parse::<f64>()
                .ok()?;
            (v == want).then_some(())
        })
        .unwrap_or_else(|| panic!("upstream g never became healthy={want}: {}", gw.metrics()));
    };
    healthy(1.0);
    let set = |status: &str| {
        let seen = calls(&address, serde_json::json!([{"method": "/test.Echo/SetHealth", "text": status}]));
        assert_eq!(seen[0]["code"], "OK", "{seen:?}");
    };
    set("NOT_SERVING");
    healthy(0.0);
    let seen = calls(&address, serde_json::json!([{"method": "/test.Echo/Unary"}]));
    assert_eq!(
        (&seen[0]["code"], &seen[0]["details"]),
        (&"UNAVAILABLE".into(), &"no healthy upstream".into()),
        "{seen:?}"
    );
    set("SERVING");
    healthy(1.0);
    let seen = calls(&address, serde_json::json!([{"method": "/test.Echo/Unary"}]));
    assert_eq!(seen[0]["code"], "OK", "{seen:?}");
}

/// A service with `auth: jwt` takes the token from the `authorization` metadata of a gRPC call:
/// a good one passes, none or a forged one is UNAUTHENTICATED.
#[test]
fn jwt_from_the_authorization_metadata() {
    use gatehouse_jwt::sign::{sign, SigningKey};
    if !grpcio("jwt_from_the_authorization_metadata") {
        return;
    }
    const SECRET: &str = "grpc-app-secret-0123456789abcdef";
    let server = GrpcServer::start();
    let gw = start(&format!(
        "workers: 1\nlisteners:\n  h2c: {{bind: \"127.0.0.1:0\", protocol: h2c}}\nupstreams:\n  g: {{targets: [\"127.0.0.1:{}\"], protocol: http2}}\nservices:\n  echo: {{path: /test.Echo, strip_prefix: false, upstream: g, auth: jwt}}\napps:\n  caller: {{secret: \"{SECRET}\", grants: {{echo: ~}}}}\n",
        server.port
    ));
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let claims = serde_json::json!({"sub": "caller", "exp": now + 300, "iat": now});
    let header = serde_json::json!({"alg": "HS256", "typ": "JWT"});
    let good = sign(&header, &claims, &SigningKey::Hmac(SECRET.as_bytes().to_vec())).expect("sign");
    let forged = sign(&header, &claims, &SigningKey::Hmac(b"not-the-secret-0123456789abcdef".to_vec())).expect("sign");
    let seen = calls(
        &gw.addr("h2c").to_string(),
        serde_json::json!([
            {"method": "/test.Echo/Unary", "metadata": {"authorization": format!("Bearer {good}")}},
            {"method": "/test.Echo/Unary"},
            {"method": "/test.Echo/Unary", "metadata": {"authorization": format!("Bearer {forged}")}},
        ]),
    );
    let codes: Vec<&str> = seen.iter().map(|s| s["code"].as_str().unwrap_or("?")).collect();
    assert_eq!(codes, ["OK", "UNAUTHENTICATED", "UNAUTHENTICATED"], "{seen:?}");
}

/// The gRPC-Web client's folder (`tests/grpc/web`), when its packages are installed (`npm ci`
/// there; CI does it). Without them (and without `CI`) a test is skipped.
fn grpc_web_client(test: &str) -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/grpc/web");
    let found = dir.join("node_modules/grpc-web").is_dir() && dir.join("node_modules/xhr2").is_dir();
    if !found {
        assert!(std::env::var_os("CI").is_none(), "tests/grpc/web needs `npm ci` but CI is set");
        eprintln!("{test}: skipped, run `npm ci --prefix crates/gatehouse/tests/grpc/web`");
    }
    found.then_some(dir)
}

/// A gateway with a plain listener (HTTP/1.1 and h2c) whose one route, `/test.Echo/`, goes to
/// `server` as an `http2` upstream: calls to other services are the gateway's to refuse.
fn web_gateway(server: &GrpcServer) -> Gateway {
    start(&format!(
        "workers: 2\nadmin: {{bind: \"127.0.0.1:0\"}}\nlisteners:\n  web: {{bind: \"127.0.0.1:0\"}}\nupstreams:\n  g: {{targets: [\"127.0.0.1:{}\"], protocol: http2}}\nsites:\n  s: {{hosts: [\"*\"], routes: [{{path: /test.Echo/, upstream: g}}]}}\n",
        server.port
    ))
}

#[test]
fn grpc_web_calls_from_the_grpc_web_client_in_text_and_binary() {
    if !grpcio("grpc_web_calls_from_the_grpc_web_client_in_text_and_binary") {
        return;
    }
    let Some(dir) = grpc_web_client("grpc_web_calls_from_the_grpc_web_client_in_text_and_binary") else { return };
    let server = GrpcServer::start();
    let gw = web_gateway(&server);
    let out = Command::new("node")
        .arg(dir.join("client.cjs"))
        .arg(format!("http://{}", gw.addr("web")))
        .output()
        .expect("run node");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "client failed: {text}{}", String::from_utf8_lossy(&out.stderr));
    let seen: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("client output {text:?}: {e}"));
    for format in ["text", "binary"] {
        let s = &seen[format];
        let unary = &s["unary"];
        assert_eq!((&unary["code"], &unary["response"]), (&0.into(), &"hello".into()), "{format}: {seen}");
        assert_eq!(unary["metadata"]["x-echo"], "metadata", "{format}: initial metadata: {seen}");
        assert_eq!(unary["status"]["metadata"]["x-trailer"], "done", "{format}: trailing metadata: {seen}");
        // INVALID_ARGUMENT, the application's own, in the trailer frame.
        assert_eq!(
            (&s["error"]["code"], &s["error"]["message"]),
            (&3.into(), &"asked to fail".into()),
            "{format}: {seen}"
        );
        // UNAVAILABLE in a trailers-only answer: the status in the head.
        assert_eq!((&s["down"]["code"], &s["down"]["message"]), (&14.into(), &"down".into()), "{format}: {seen}");
        let repeat = &s["repeat"];
        assert_eq!(
            (&repeat["code"], &repeat["messages"], &repeat["bytes"]),
            (&0.into(), &2000.into(), &200_000.into()),
            "{format}: {seen}"
        );
        // UNIMPLEMENTED, made by the gateway (no route for the service).
        assert_eq!(s["unrouted"]["code"], 12, "{format}: {seen}");
    }
}

/// The frames of a gRPC-Web body: (flag byte, payload) each.
fn web_frames(mut body: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut frames = Vec::new();
    while !body.is_empty() {
        assert!(body.len() >= 5, "a frame header cut short: {body:?}");
        let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
        assert!(body.len() >= 5 + len, "a frame cut short");
        frames.push((body[0], body[5..5 + len].to_vec()));
        body = &body[5 + len..];
    }
    frames
}

/// Decodes base64 that may be padded at the end of any group of four (gRPC-Web text bodies).
fn unbase64(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut start = 0;
    for end in (4..=text.len()).step_by(4) {
        if text[end - 1] == b'=' || end == text.len() {
            out.extend(data_encoding::BASE64.decode(&text[start..end]).expect("base64"));
            start = end;
        }
    }
    assert_eq!(start, text.len(), "base64 in groups of four");
    out
}

#[test]
fn grpc_web_frames_in_each_content_type_over_http1_and_http2() {
    use std::io::Write as _;
    if !grpcio("grpc_web_frames_in_each_content_type_over_http1_and_http2") {
        return;
    }
    let server = GrpcServer::start();
    let gw = web_gateway(&server);
    let url = format!("http://{}/test.Echo/Unary", gw.addr("web"));
    // Two messages' worth of request: gRPC's frame of "hello" (a unary call takes one).
    let message = b"\0\0\0\0\x05hello".to_vec();
    for version in ["--http1.1", "--http2-prior-knowledge"] {
        for content_type in [
            "application/grpc-web",
            "application/grpc-web+proto",
            "application/grpc-web-text",
            "application/grpc-web-text+proto",
        ] {
            let text = content_type.contains("-text");
            // A text body padded per message (here one "hello" padded, as grpc-web's client does).
            let body = if text { data_encoding::BASE64.encode(&message).into_bytes() } else { message.clone() };
            let mut curl = Command::new("curl")
                .args(["-sS", "-D", "-", "-o", "-", version, "-X", "POST", "-H"])
                .arg(format!("content-type: {content_type}"))
                .args(["-H", "x-grpc-web: 1", "--data-binary", "@-"])
                .arg(&url)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("run curl");
            curl.stdin.take().expect("stdin").write_all(&body).expect("send the body");
            let out = curl.wait_with_output().expect("curl's output");
            assert!(out.status.success(), "{version} {content_type}: {}", String::from_utf8_lossy(&out.stderr));
            let raw = out.stdout;
            let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("head end") + 4;
            let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
            let via = format!("{version} {content_type}: {head}");
            assert!(head.starts_with("http/1.1 200") || head.starts_with("http/2 200"), "{via}");
            // The endpoint's `application/grpc`, as gRPC-Web: text when the request was.
            let answer_type = if text { "application/grpc-web-text" } else { "application/grpc-web" };
            assert!(head.contains(&format!("content-type: {answer_type}\r\n")), "{via}");
            assert!(!head.contains("grpc-status"), "the status goes in the body's trailer frame: {via}");
            let body = if text { unbase64(&raw[split..]) } else { raw[split..].to_vec() };
            let frames = web_frames(&body);
            assert_eq!(frames.len(), 2, "{via}: {frames:?}");
            assert_eq!(frames[0], (0, b"hello".to_vec()), "{via}");
            assert_eq!(frames[1].0, 0x80, "{via}");
            let trailers = String::from_utf8(frames[1].1.clone()).expect("ascii");
            assert!(trailers.ends_with("\r\n"), "{via}: {trailers:?}");
            let lines: Vec<&str> = trailers.split("\r\n").filter(|l| !l.is_empty()).collect();
            assert!(lines.contains(&"grpc-status:0"), "{via}: {lines:?}");
            assert!(lines.contains(&"x-trailer:done"), "{via}: {lines:?}");
        }
    }
}

#[test]
fn a_grpc_web_calls_answer_that_is_not_grpc_passes_as_it_is() {
    // An endpoint that answers with a page of its own (here a plain HTTP backend): no gRPC
    // content type, so the body is not framed or encoded.
    let backend = Backend::start("plain page");
    let gw = start(&crate::common::simple(&format!("targets: {}", crate::common::targets(&[&backend]))));
    let resp = gatehouse_testkit::curl(&[
        "-X",
        "POST",
        "-H",
        &format!("Host: {}", crate::common::HOST),
        "-H",
        "content-type: application/grpc-web-text",
        "--data-binary",
        "AAAAAAVoZWxsbw==",
        &format!("http://{}/svc/Method", gw.addr("http")),
    ]);
    assert_eq!(resp.status, 200, "{resp:?}");
    assert_eq!(resp.text(), "plain page", "{resp:?}");
    let seen = backend.requests();
    assert_eq!(seen[0].header("content-type"), Some("application/grpc"), "{:?}", seen[0]);
    assert_eq!(seen[0].body, b"\0\0\0\0\x05hello", "the text body reached the endpoint decoded");
}

/// gRPC calls through a traced gateway: each call's server span carries its gRPC status (OK and
/// the application's INVALID_ARGUMENT), and the server got a `traceparent`.
#[test]
fn grpc_calls_are_traced_with_their_status() {
    if !grpcio("grpc_calls_are_traced_with_their_status") {
        return;
    }
    let Some(jaeger) = gatehouse_testkit::Jaeger::start() else { return };
    let server = GrpcServer::start();
    let gw = start(&format!(
        "workers: 2\nadmin: {{bind: \"127.0.0.1:0\"}}\n{}listeners:\n  h2c: {{bind: \"127.0.0.1:0\", protocol: h2c}}\nupstreams:\n  g: {{targets: [\"127.0.0.1:{}\"], protocol: http2}}\nsites:\n  s: {{hosts: [\"*\"], routes: [{{path: /, upstream: g}}]}}\n",
        crate::traces::tracing_section(&format!("http://{}", jaeger.otlp_grpc), "grpc", "gw-grpc-calls", ""),
        server.port
    ));
    check_calls(&client(&gw.addr("h2c").to_string(), None), "h2c");
    let codes = gatehouse_testkit::wait_until(std::time::Duration::from_secs(15), || {
        let codes: Vec<i64> = jaeger
            .traces("gw-grpc-calls", 100)
            .iter()
            .flat_map(|t| t["spans"].as_array().cloned().unwrap_or_default())
            .filter(|s| gatehouse_testkit::span_tag(s, "span.kind") == Some(&"server".into()))
            .filter_map(|s| gatehouse_testkit::span_tag(&s, "rpc.grpc.status_code").and_then(|v| v.as_i64()))
            .collect();
        (codes.len() >= 6).then_some(codes)
    })
    .unwrap_or_else(|| {
        panic!(
            "six calls' server spans with a gRPC status: {:?}",
            jaeger
                .traces("gw-grpc-calls", 100)
                .iter()
                .flat_map(|t| t["spans"].as_array().cloned().unwrap_or_default())
                .map(|s| s["tags"].clone())
                .collect::<Vec<_>>()
        )
    });
    // The client's five successes and its application error (the metrics test counts both
    // listeners' runs, twice these).
    assert_eq!(codes.iter().filter(|&&c| c == 0).count(), 5, "{codes:?}");
    assert_eq!(codes.iter().filter(|&&c| c == 3).count(), 1, "{codes:?}");
}
