//! The API gateway through the real binary: app keys in the three places (and taken out before
//! forwarding), grants and address lists, ACL, local rate limits, header rewrite, the access log's
//! app id, and circuit breakers against a backend that fails on command.

use crate::common::{head, start, targets, SETTLE};
use gatehouse_testkit::{metric_value, Backend, Gateway, HttpConn, Response, TempDir};
use std::time::Instant;

const HOST: &str = "api.test";

/// Upstream `u` on `backend`, service `mws` on `/mws` with app-key auth, app `shop` (key
/// `K-shop`) on plan `gold`, app `lonely` (key `K-lonely`) without grants, app `far` (key
/// `K-far`) allowed from 10.0.0.0/8 only. `extra_service` and `gold` are flow-map entries added
/// to the service and the plan.
fn config(backend: &Backend, extra_service: &str, gold: &str) -> String {
    format!(
        r#"{head}upstreams:
  u: {{ targets: {t} }}
services:
  mws:
    path: /mws
    upstream: u
    auth: app_key
    {extra_service}
apps:
  shop: {{ key: K-shop, grants: {{ mws: gold }} }}
  lonely: {{ key: K-lonely }}
  far: {{ key: K-far, allow_ips: ["10.0.0.0/8"], grants: {{ mws: ~ }} }}
plans:
  gold: {{ {gold} }}
"#,
        head = head(""),
        t = targets(&[backend])
    )
}

fn get(gw: &Gateway, path: &str, headers: &[(&str, &str)]) -> Response {
    gatehouse_testkit::http_get(gw.addr("http"), HOST, path, headers)
}

#[test]
fn the_app_key_is_found_in_header_query_or_path_and_never_forwarded() {
    let backend = Backend::start("b");
    let dir = TempDir::new();
    let log = dir.join("access.log");
    let yaml = config(&backend, "", "")
        .replace("upstreams:", &format!("access_log: {{ path: \"{}\", format: json }}\nupstreams:", log.display()));
    let mut gw = start(&yaml);

    let by_path = get(&gw, "/mws/~K-shop/test.html", &[("x-app-id", "forged")]);
    let by_query = get(&gw, "/mws/test.html?_app_key=K-shop&x=1", &[]);
    let by_header = get(&gw, "/mws/test.html", &[("X-APP-KEY", "K-shop")]);
    for r in [&by_path, &by_query, &by_header] {
        assert_eq!(r.status, 200, "{r:?}");
    }
    let seen = backend.requests();
    let targets: Vec<String> = seen.iter().map(|r| r.path_and_query()).collect();
    assert_eq!(targets, ["/test.html", "/test.html?x=1", "/test.html"]);
    for r in &seen {
        assert_eq!(r.header("x-app-key"), None, "the key header reached the backend");
        assert_eq!(r.header_all("x-app-id"), ["shop"], "the app id is ours, not the client's");
    }

    // Refusals are never forwarded.
    backend.clear();
    let missing = get(&gw, "/mws/test.html", &[]);
    assert_eq!(missing.status, 401);
    assert_eq!(missing.header("www-authenticate"), Some("AppKey realm=\"mws\""));
    assert_eq!(missing.header("content-type"), Some("application/json"));
    assert!(missing.text().contains("\"error\":\"unauthorized\""), "{}", missing.text());
    assert_eq!(get(&gw, "/mws/~K-nobody/x", &[]).status, 401);
    assert_eq!(get(&gw, "/mws/x", &[("x-app-key", "K-lonely")]).status, 403, "no grant");
    assert_eq!(get(&gw, "/mws/x", &[("x-app-key", "K-far")]).status, 403, "outside allow_ips");
    assert_eq!(get(&gw, "/mwsx/~K-x/x", &[("x-app-key", "K-shop")]).status, 404, "a service owns whole segments");
    assert_eq!(backend.request_count(), 0);

    let (_, _) = gw.terminate();
    let text = std::fs::read_to_string(&log).expect("access log");
    // Workers hand their lines over in batches, so the order is not the order of the requests.
    assert_eq!(text.lines().filter(|l| l.contains("\"app\":\"shop\"")).count(), 3, "{text}");
    assert!(text.contains("\"uri\":\"/mws/test.html?x=1\""), "{text}");
    assert!(!text.contains("K-shop"), "an app key reached the log: {text}");
}

#[test]
fn http2_requests_go_through_the_same_checks() {
    let backend = Backend::start("b");
    let gw = start(&config(&backend, "", "rate_limits: [{ limit: 2, interval: 1h, headers: true }]"));
    let url = |path: &str| format!("http://{}{path}", gw.addr("http"));
    let host = format!("Host: {HOST}");
    let h2 = |path: &str| gatehouse_testkit::curl(&["--http2-prior-knowledge", &url(path), "-H", &host]);
    let ok = h2("/mws/~K-shop/a?_app_key=K-shop&b=1");
    assert_eq!((ok.status, ok.version.as_str()), (200, "HTTP/2"), "{ok:?}");
    assert_eq!(ok.header("ratelimit-remaining"), Some("1"));
    assert_eq!(h2("/mws/a").status, 401);
    assert_eq!(h2("/mws/~K-shop/a").status, 200);
    assert_eq!(h2("/mws/~K-shop/a").status, 429);
    let seen = backend.requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].path_and_query(), "/a?b=1");
    assert_eq!(seen[0].header("x-app-id"), Some("shop"));
}

#[test]
fn acl_by_method_and_path_on_service_and_plan() {
    let backend = Backend::start("b");
    let gw = start(&config(
        &backend,
        "acl: { deny: [{ methods: [DELETE] }] }",
        "acl: { allow: [{ methods: [GET, HEAD], paths: [\"/public/**\"] }, { methods: [POST], paths: [\"/orders\"] }] }",
    ));
    let key = [("x-app-key", "K-shop")];
    assert_eq!(get(&gw, "/mws/public/a/b.html", &key).status, 200);
    assert_eq!(get(&gw, "/mws/private", &key).status, 403);
    let mut conn = HttpConn::open(gw.addr("http")).expect("connect");
    assert_eq!(conn.request("POST", HOST, "/mws/orders", &key, b"{}").expect("POST").status, 200);
    assert_eq!(conn.request("PUT", HOST, "/mws/orders", &key, b"{}").expect("PUT").status, 403);
    // The refused request's unread body was read and dropped: the connection stays in step.
    assert!(!conn.is_closed(), "a refusal with a small body closed the connection");
    assert_eq!(conn.request("DELETE", HOST, "/mws/public/x", &key, b"").expect("DELETE").status, 403);
    // A large unread body is not worth reading: the connection closes after the answer.
    let big = vec![b'x'; 100 << 10];
    assert_eq!(conn.request("POST", HOST, "/mws/private", &key, &big).expect("POST").status, 403);
    assert!(conn.is_closed(), "a refusal with a 100 KiB body kept the connection");
    let paths: Vec<String> =
        backend.requests().iter().map(|r| format!("{} {}", r.method, r.path_and_query())).collect();
    assert_eq!(paths, ["GET /public/a/b.html", "POST /orders"]);
    let m = gw.metrics();
    assert_eq!(metric_value(&m, "gatehouse_gateway_denied_total{service=\"mws\",reason=\"acl\"}"), Some(4.0), "{m}");
}

#[test]
fn local_rate_limits_answer_429_with_retry_after_and_ratelimit_headers() {
    let backend = Backend::start("b");
    // Five per hour for the plan (by app); per client address and path for everyone, blocked for
    // an hour once exceeded.
    let gw = start(&config(
        &backend,
        "rate_limits: [{ limit: 3, interval: 1h, key: client_ip, per_path: true, block: 1h, headers: true }]",
        "rate_limits: [{ limit: 5, interval: 1h, headers: true }]",
    ));
    let key = [("x-app-key", "K-shop")];
    let mut conn = HttpConn::open(gw.addr("http")).expect("connect");
    let mut remaining = Vec::new();
    for path in ["/mws/a", "/mws/a", "/mws/a"] {
        let r = conn.get(HOST, path, &key).expect("GET");
        assert_eq!(r.status, 200, "{r:?}");
        remaining.push(r.header("ratelimit-remaining").unwrap_or("-").to_string());
        assert_eq!(r.header("ratelimit-limit"), Some("3"), "the tightest limit is reported");
    }
    assert_eq!(remaining, ["2", "1", "0"]);
    let limited = conn.get(HOST, "/mws/a", &key).expect("GET");
    assert_eq!(limited.status, 429);
    assert_eq!(limited.header("ratelimit-remaining"), Some("0"));
    let retry: u64 = limited.header("retry-after").and_then(|v| v.parse().ok()).expect("Retry-After");
    assert!((3590..=3600).contains(&retry), "blocked for the hour: {retry}");
    // Another path has its own count for the address, and the plan's limit of 5 is next.
    assert_eq!(conn.get(HOST, "/mws/b", &key).expect("GET").status, 200);
    assert_eq!(conn.get(HOST, "/mws/b", &key).expect("GET").status, 200);
    let plan = conn.get(HOST, "/mws/c", &key).expect("GET");
    assert_eq!(plan.status, 429, "the plan allows 5 per hour: {plan:?}");
    assert_eq!(plan.header("ratelimit-limit"), Some("5"));
    assert_eq!(backend.request_count(), 5);
    // Without `headers: true`, admitted answers say nothing of the quota; a 429 still does.
    let quiet = start(&config(&backend, "", "rate_limits: [{ limit: 1, interval: 1h }]"));
    let mut conn = HttpConn::open(quiet.addr("http")).expect("connect");
    let first = conn.get(HOST, "/mws/a", &key).expect("GET");
    assert_eq!((first.status, first.header("ratelimit-limit")), (200, None));
    let second = conn.get(HOST, "/mws/a", &key).expect("GET");
    assert_eq!((second.status, second.header("ratelimit-limit")), (429, Some("1")));
    let m = gw.metrics();
    assert_eq!(metric_value(&m, "gatehouse_gateway_denied_total{service=\"mws\",reason=\"rate_limited\"}"), Some(2.0));
}

#[test]
fn limits_keyed_by_header_and_by_service() {
    let backend = Backend::start("b");
    let gw = start(&config(
        &backend,
        "rate_limits: [{ limit: 1, interval: 1h, key: \"header:x-tenant\" }, { limit: 4, interval: 1h, key: service }]",
        "",
    ));
    let key = ("x-app-key", "K-shop");
    let status = |tenant: Option<&str>| {
        let mut h = vec![key];
        if let Some(t) = tenant {
            h.push(("x-tenant", t));
        }
        get(&gw, "/mws/x", &h).status
    };
    // One per tenant; requests without the header share one count.
    assert_eq!(
        [status(Some("a")), status(Some("a")), status(Some("b")), status(None), status(None)],
        [200, 429, 200, 200, 429]
    );
    // Three admitted so far; the service-wide ceiling of four admits one more, whoever asks.
    assert_eq!(status(Some("c")), 200);
    assert_eq!(status(Some("d")), 429, "the service-wide limit");
    assert_eq!(backend.request_count(), 4);
}

#[test]
fn headers_are_rewritten_both_ways_by_service_then_plan() {
    let backend = Backend::start("b");
    backend.add_response_header("x-powered-by", "php");
    backend.add_response_header("etag", "\"abc\"");
    let gw = start(&config(
        &backend,
        "headers: { request: { remove: [cookie], set: { x-env: prod, x-tier: free } }, response: { remove: [x-powered-by] } }",
        "headers: { request: { set: { x-tier: gold }, append: { x-tags: plan } }, response: { set: { x-plan: gold }, remove: [etag] } }",
    ));
    let r = get(&gw, "/mws/x", &[("x-app-key", "K-shop"), ("cookie", "s=1"), ("x-tags", "client")]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-powered-by"), None);
    assert_eq!(r.header("etag"), None);
    assert_eq!(r.header("x-plan"), Some("gold"));
    let seen = &backend.requests()[0];
    assert_eq!(seen.header("cookie"), None);
    assert_eq!(seen.header("x-env"), Some("prod"));
    assert_eq!(seen.header("x-tier"), Some("gold"), "the plan's set comes after the service's");
    assert_eq!(seen.header_all("x-tags"), ["client", "plan"]);
}

/// Sends GETs until `done` says stop, at most for [`SETTLE`]; returns how many were sent.
fn until(gw: &Gateway, mut done: impl FnMut(&Response) -> bool) -> usize {
    let deadline = Instant::now() + SETTLE;
    let mut conn = HttpConn::open(gw.addr("http")).expect("connect");
    let mut n = 0;
    while Instant::now() < deadline {
        let r = conn.get(HOST, "/", &[]).expect("GET");
        n += 1;
        if done(&r) {
            return n;
        }
        if conn.is_closed() {
            conn = HttpConn::open(gw.addr("http")).expect("reconnect");
        }
    }
    panic!("condition not reached after {n} requests");
}

#[test]
fn circuit_breakers_open_skip_probe_and_close() {
    let bad = Backend::start("bad");
    let good = Backend::start("good");
    let yaml = format!(
        r#"{head}upstreams:
  u:
    targets: {t}
    retries: 0
    passive_health: {{ failures: 0 }}
    circuit_breaker: {{ error_threshold: 3, error_reset: 1m, retry_delay: 300ms }}
sites:
  main: {{ hosts: ["{HOST}"], routes: [{{ path: /, upstream: u }}] }}
"#,
        head = head(""),
        t = targets(&[&bad, &good])
    );
    let gw = start(&yaml);
    let state = format!("gatehouse_upstream_breaker_state{{upstream=\"u\",endpoint=\"{}\"}}", bad.addr());
    bad.set_status(500);
    // Round robin: every other request goes to `bad` until its third 500 opens the breaker.
    let mut conn = HttpConn::open(gw.addr("http")).expect("connect");
    let statuses: Vec<u16> = (0..6).map(|_| conn.get(HOST, "/", &[]).expect("GET").status).collect();
    assert_eq!(statuses.iter().filter(|&&s| s == 500).count(), 3, "{statuses:?}");
    assert_eq!(metric_value(&gw.metrics(), &state), Some(1.0), "open");
    // While open, everything goes to `good`.
    let before = bad.request_count();
    for _ in 0..20 {
        assert_eq!(conn.get(HOST, "/", &[]).expect("GET").status, 200);
    }
    assert_eq!(bad.request_count(), before, "an open breaker's endpoint got traffic");
    // Recovered: after the delay one probe goes to `bad`, succeeds, and the breaker closes.
    bad.set_status(200);
    until(&gw, |r| r.header("x-backend") == Some("bad"));
    gw.wait_metric(SETTLE, |m| metric_value(m, &state) == Some(0.0));
    let m = gw.metrics();
    let opened = format!("gatehouse_upstream_breaker_opened_total{{upstream=\"u\",endpoint=\"{}\"}}", bad.addr());
    assert_eq!(metric_value(&m, &opened), Some(1.0));

    // Both failing: both breakers open, and the answer is 503 without trying them.
    bad.set_status(502);
    good.set_status(503);
    until(&gw, |r| r.status == 503 && r.header("x-backend").is_none());
    let (b, g) = (bad.request_count(), good.request_count());
    assert_eq!(conn.get(HOST, "/", &[]).expect("GET").status, 503);
    assert_eq!((bad.request_count(), good.request_count()), (b, g));
}

#[test]
fn breaker_state_survives_a_reload() {
    let bad = Backend::start("bad");
    let good = Backend::start("good");
    let yaml = |extra: &str| {
        format!(
            "{head}upstreams:\n  u: {{ targets: {t}, retries: 0, passive_health: {{ failures: 0 }}, circuit_breaker: {{ error_threshold: 2, retry_delay: 1h }} }}\nsites:\n  main: {{ hosts: [\"{HOST}\"], routes: [{{ path: /, upstream: u{extra} }}] }}\n",
            head = head(""),
            t = targets(&[&bad, &good])
        )
    };
    let mut gw = start(&yaml(""));
    bad.set_status(500);
    until(&gw, |_| bad.request_count() >= 2);
    crate::common::settled(&gw);
    gw.write_config(&yaml(", max_body: 1m"));
    gw.reload();
    let before = bad.request_count();
    let mut conn = HttpConn::open(gw.addr("http")).expect("connect");
    for _ in 0..10 {
        assert_eq!(conn.get(HOST, "/", &[]).expect("GET").status, 200);
    }
    assert_eq!(bad.request_count(), before, "the reload closed the breaker");
}
