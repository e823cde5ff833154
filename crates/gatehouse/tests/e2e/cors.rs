//! CORS through the real binary: a browser's calls (headless Chromium) from an allowed and a
//! refused origin, simple and preflighted, with and without credentials; preflights answered by
//! the gateway (never forwarded, never rate limited, no key needed); the backend's own CORS
//! headers replaced.

use crate::common::{head, start, targets};
use gatehouse_testkit::{http_get, http_request, Backend};
use serde_json::Value;

/// Pages on `app.test` and `evil.test` (backend `page`), the API on `api.test` (backend `api`):
/// `/open` for any origin, `/creds` for `app.test`'s pages with credentials, and service `svc`
/// (app key, two requests an hour) with the same policy.
fn config(page: &Backend, api: &Backend, port: u16) -> String {
    let app = format!("http://app.test:{port}");
    let policy = format!(
        "{{origins: [\"{app}\"], methods: [GET, PUT], headers: [content-type, x-app-key], expose_headers: [x-backend], credentials: true, max_age: 1m}}"
    );
    format!(
        r#"{head}upstreams:
  page: {{targets: {page}}}
  api: {{targets: {api}}}
sites:
  pages:
    hosts: [app.test, evil.test]
    routes: [{{path: /, upstream: page}}]
  api:
    hosts: [api.test]
    routes:
      - {{path: /open, upstream: api, cors: {{origins: ["*"]}}}}
      - {{path: /creds, upstream: api, cors: {policy}}}
services:
  svc:
    hosts: [api.test]
    path: /svc
    upstream: api
    auth: app_key
    rate_limits: [{{limit: 2, interval: 1h}}]
    cors: {policy}
apps:
  web: {{key: K-web, grants: {{svc: ~}}}}
"#,
        head = head(&format!("bind: \"127.0.0.1:{port}\"")).replace("bind: \"127.0.0.1:0\", ", ""),
        page = targets(&[page]),
        api = targets(&[api]),
    )
}

#[test]
fn browsers_follow_the_cors_policy() {
    let Some(here) = crate::common::browser_tests("browsers_follow_the_cors_policy") else { return };
    let (page, api) = (Backend::start("page"), Backend::start("api"));
    page.set_body("<!doctype html><title>page</title>");
    page.add_response_header("content-type", "text/html");
    // The backend's own policy, which the gateway's replaces.
    api.add_response_header("access-control-allow-origin", "*");
    let port = gatehouse_testkit::free_port();
    let gw = start(&config(&page, &api, port));

    let out = std::process::Command::new("node")
        .arg(here.join("cors.test.mjs"))
        .env("GATEWAY", port.to_string())
        .output()
        .expect("run node");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}\n--- gateway ---\n{}", gw.stderr());
    let seen: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let read = |k: &str| (seen[k]["status"].as_u64(), seen[k]["backend"].as_str());
    let refused = |k: &str| seen[k]["error"].as_str().is_some_and(|e| e.contains("Failed to fetch"));
    // Allowed: simple, preflighted, with credentials; the exposed header readable.
    assert_eq!(read("simple"), (Some(200), Some("api")), "{seen}");
    assert_eq!(read("preflighted"), (Some(200), Some("api")), "{seen}");
    assert_eq!(read("credentials"), (Some(200), Some("api")), "{seen}");
    // Any origin: readable, the header not exposed; with credentials refused (`*`).
    assert_eq!(read("open"), (Some(200), None), "{seen}");
    assert!(refused("open_credentials"), "{seen}");
    // A method or a header the policy does not allow.
    assert!(refused("method_refused"), "{seen}");
    assert!(refused("header_refused"), "{seen}");
    // The service: two requests pass (their preflights were not counted, nor asked for a key),
    // the third is limited, and a call without a key is refused: both readable by the page.
    assert_eq!(read("service_1"), (Some(200), Some("api")), "{seen}");
    assert_eq!(read("service_2"), (Some(200), Some("api")), "{seen}");
    assert_eq!(read("service_limited").0, Some(429), "{seen}");
    assert_eq!(read("service_no_key").0, Some(401), "{seen}");
    // Another origin reads nothing, though the backend said `*`.
    for k in ["evil_simple", "evil_preflighted"] {
        assert!(refused(k), "{k}: {seen}");
    }
    assert_eq!(read("evil_open"), (Some(200), None), "{seen}");

    // The backend never saw a preflight, nor the refused calls' preflighted requests.
    let methods: Vec<(String, String)> =
        api.requests().iter().map(|r| (r.method.clone(), r.path_and_query())).collect();
    assert!(!methods.iter().any(|(m, _)| m == "OPTIONS"), "{methods:?}");
    assert!(!methods.iter().any(|(m, _)| m == "DELETE"), "{methods:?}");
    assert_eq!(methods.iter().filter(|(m, _)| m == "PUT").count(), 3, "{methods:?}");

    // By hand: a preflight and an answer, as a browser would see them.
    let addr = gw.addr("http");
    let origin = format!("http://app.test:{port}");
    let asked = [
        ("origin", origin.as_str()),
        ("access-control-request-method", "PUT"),
        ("access-control-request-headers", "content-type"),
    ];
    let pre = http_request(addr, "OPTIONS", "api.test", "/creds/x", &asked, b"").expect("preflight");
    assert_eq!(pre.status, 204, "{pre:?}");
    assert_eq!(pre.header("access-control-allow-methods"), Some("GET, PUT"));
    assert_eq!(pre.header("access-control-max-age"), Some("60"));
    assert_eq!(pre.header("content-length"), None, "a 204 has no Content-Length (RFC 9110 §8.6)");
    let plain = http_get(addr, "api.test", "/creds/y", &[]);
    assert_eq!(plain.header("vary"), Some("Origin"), "{plain:?}");
    assert_eq!(plain.header("access-control-allow-origin"), None, "the backend's `*` is replaced: {plain:?}");
    // The same over HTTP/2 (h2c): the preflight answered, an answer given the policy.
    let url = format!("http://{addr}/creds/h2");
    let h2 = |extra: &[&str]| {
        let mut args = vec!["--http2-prior-knowledge", url.as_str(), "-H", "Host: api.test", "-H"];
        let origin_header = format!("Origin: {origin}");
        args.push(&origin_header);
        args.extend_from_slice(extra);
        gatehouse_testkit::curl(&args)
    };
    let pre2 = h2(&["-X", "OPTIONS", "-H", "Access-Control-Request-Method: PUT"]);
    assert_eq!((pre2.status, pre2.version.as_str()), (204, "HTTP/2"), "{pre2:?}");
    assert_eq!(pre2.header("access-control-allow-origin"), Some(origin.as_str()));
    let get2 = h2(&[]);
    assert_eq!((get2.status, get2.header("access-control-allow-origin")), (200, Some(origin.as_str())), "{get2:?}");
    assert_eq!(get2.header("access-control-expose-headers"), Some("x-backend"));
    // An OPTIONS that is no preflight goes to the backend.
    let options = http_request(addr, "OPTIONS", "api.test", "/creds/z", &[], b"").expect("OPTIONS");
    assert_eq!(options.status, 200);
    assert!(api.requests().iter().any(|r| r.method == "OPTIONS" && r.path_and_query() == "/creds/z"));
}
