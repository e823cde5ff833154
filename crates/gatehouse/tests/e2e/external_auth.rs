//! `auth: external` through the real binary, against a real authorization service
//! (`tests/extauth/authz.py`, Python's own HTTP server): what it is asked, its 2xx admitting with
//! its headers sent upstream, its refusals passed to the client as they came and never forwarded,
//! kept answers, a service too slow or gone (503, or admitted with `fail_open`), and its keep-alive
//! connections reused.

use crate::common::{head, start, PeerProcess};
use gatehouse_testkit::{http_get, metric_value, Backend, Gateway};
use serde_json::Value;
use std::process::Command;

const HOST: &str = "api.test";

fn authz() -> PeerProcess {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/extauth/authz.py");
    PeerProcess::spawn(Command::new("python3").arg(script), "the authorization service")
}

/// What the service was asked so far.
fn seen(authz: &PeerProcess) -> Vec<Value> {
    let r = http_get(format!("127.0.0.1:{}", authz.port).parse().expect("addr"), "authz", "/seen", &[]);
    serde_json::from_slice(&r.body).expect("JSON")
}

/// Service `api` asks `authz`; `cached` keeps answers 60 s; `open` asks a closed port and admits
/// anyway; `closed` asks the same closed port and does not.
fn gateway(backend: &Backend, authz: &PeerProcess) -> Gateway {
    let url = format!("http://127.0.0.1:{}/check", authz.port);
    let dead = format!("http://127.0.0.1:{}/check", gatehouse_testkit::free_port());
    start(&format!(
        r#"{head}upstreams:
  u: {{ targets: ["{backend}"] }}
services:
  api:
    path: /api
    upstream: u
    auth: external
    external:
      url: "{url}"
      timeout: 500ms
      forward_headers: [authorization, x-tenant]
      copy_response_headers: [x-user-id, x-roles]
  cached:
    path: /cached
    upstream: u
    auth: external
    external: {{ url: "{url}", copy_response_headers: [x-user-id], cache: {{ ttl: 60s, key: [authorization] }} }}
  open:
    path: /open
    upstream: u
    auth: external
    external: {{ url: "{dead}", timeout: 500ms, fail_open: true }}
  closed:
    path: /closed
    upstream: u
    auth: external
    external: {{ url: "{dead}", timeout: 500ms }}
"#,
        head = head(""),
        backend = backend.addr()
    ))
}

fn get(gw: &Gateway, path: &str, headers: &[(&str, &str)]) -> gatehouse_testkit::Response {
    http_get(gw.addr("http"), HOST, path, headers)
}

#[test]
fn the_authorization_service_decides_and_its_refusals_reach_the_client_as_they_came() {
    let (backend, authz) = (Backend::start("b"), authz());
    let gw = gateway(&backend, &authz);

    // Admitted: the service's chosen headers go upstream in place of the client's own, the others
    // do not; the backend sees the path without the prefix.
    let r = get(
        &gw,
        "/api/orders/7?full=1",
        &[("authorization", "Bearer alice"), ("x-user-id", "root"), ("x-tenant", "t1")],
    );
    assert_eq!(r.status, 200, "{r:?}");
    let last = backend.requests().pop().expect("forwarded");
    assert_eq!(
        (last.header("x-user-id"), last.header("x-roles"), last.header("x-internal")),
        (Some("alice"), Some("reader"), None)
    );
    assert_eq!(last.path_and_query(), "/orders/7?full=1");
    // What the service was asked: GET on its URL, the request's method, target, host and
    // address, the headers to forward and no others.
    let asked = seen(&authz);
    let q = &asked[0];
    assert_eq!((q["method"].as_str(), q["path"].as_str()), (Some("GET"), Some("/check")));
    let h = &q["headers"];
    assert_eq!(h["x-forwarded-method"], "GET");
    assert_eq!(h["x-forwarded-uri"], "/api/orders/7?full=1");
    assert_eq!(h["x-forwarded-host"], HOST);
    assert_eq!(h["x-forwarded-for"], "127.0.0.1");
    assert_eq!((h["authorization"].as_str(), h["x-tenant"].as_str()), (Some("Bearer alice"), Some("t1")));
    assert!(h.get("x-user-id").is_none(), "a header not listed was forwarded: {h}");

    // The service judges the normalized path: a dot segment does not walk around its rule.
    let r = get(&gw, "/api/public/../admin/users", &[("authorization", "Bearer alice")]);
    assert_eq!(r.status, 403, "{r:?}");
    assert_eq!(seen(&authz).last().expect("asked")["headers"]["x-forwarded-uri"], "/api/admin/users");
    let r = get(&gw, "/api/admin/users", &[("authorization", "Bearer root")]);
    assert_eq!(r.status, 200, "{r:?}");

    // Refusals as they came: status, headers, body; never forwarded.
    let forwarded = backend.requests().len();
    let r = get(&gw, "/api/orders", &[]);
    assert_eq!((r.status, r.header("www-authenticate")), (401, Some("Basic realm=\"authz\"")));
    assert_eq!(r.body, br#"{"error": "who are you?"}"#);
    let r = get(&gw, "/api/orders", &[("authorization", "Bearer mallory")]);
    assert_eq!((r.status, r.header("x-reason")), (403, Some("unknown user")));
    assert_eq!(r.body, br#"{"error": "unknown user"}"#);
    let r = get(&gw, "/api/orders", &[("authorization", "Bearer broken")]);
    assert_eq!((r.status, r.text().as_str()), (500, "authz is broken\n"));
    // Too slow: 503, not the late 200.
    let r = get(&gw, "/api/orders", &[("authorization", "Bearer slow")]);
    assert_eq!(r.status, 503, "{r:?}");
    assert_eq!(backend.requests().len(), forwarded, "a refused request was forwarded");

    // Its connections are kept alive and reused, as upstreams' are.
    let asked = seen(&authz);
    let mut ports: Vec<u64> = asked.iter().filter_map(|q| q["port"].as_u64()).collect();
    ports.sort_unstable();
    ports.dedup();
    assert!(ports.len() < asked.len(), "{} questions on {} connections", asked.len(), ports.len());

    let metrics = gw.metrics();
    assert_eq!(
        metric_value(&metrics, "gatehouse_gateway_denied_total{service=\"api\",reason=\"external_refused\"}"),
        Some(4.0)
    );
    assert_eq!(
        metric_value(&metrics, "gatehouse_gateway_denied_total{service=\"api\",reason=\"external_unavailable\"}"),
        Some(1.0)
    );
}

#[test]
fn answers_are_kept_and_a_service_gone_is_503_or_admitted_when_told() {
    let (backend, authz) = (Backend::start("b"), authz());
    let gw = gateway(&backend, &authz);
    let before = seen(&authz).len();
    for _ in 0..5 {
        let r = get(&gw, "/cached/a", &[("authorization", "Bearer alice")]);
        assert_eq!(r.status, 200, "{r:?}");
    }
    assert_eq!(seen(&authz).len(), before + 1, "kept answers were asked again");
    assert!(backend.requests().iter().all(|r| r.header("x-user-id") == Some("alice")));
    // Another target, or another caller: asked.
    assert_eq!(get(&gw, "/cached/b", &[("authorization", "Bearer alice")]).status, 200);
    assert_eq!(get(&gw, "/cached/a", &[("authorization", "Bearer root")]).status, 200);
    assert_eq!(seen(&authz).len(), before + 3);
    // A refusal is not kept.
    for _ in 0..2 {
        assert_eq!(get(&gw, "/cached/a", &[("authorization", "Bearer mallory")]).status, 403);
    }
    assert_eq!(seen(&authz).len(), before + 5);
    let metrics = gw.metrics();
    assert_eq!(metric_value(&metrics, "gatehouse_gateway_external_cached_total{service=\"cached\"}"), Some(4.0));

    // Nobody listens: 503, or admitted with fail_open.
    let forwarded = backend.requests().len();
    assert_eq!(get(&gw, "/closed/x", &[("authorization", "Bearer alice")]).status, 503);
    assert_eq!(backend.requests().len(), forwarded);
    assert_eq!(get(&gw, "/open/x", &[("authorization", "Bearer alice")]).status, 200);
    assert_eq!(backend.requests().len(), forwarded + 1);
    assert!(gw.stderr().contains("authorization service not reached"), "{}", gw.stderr());
}
