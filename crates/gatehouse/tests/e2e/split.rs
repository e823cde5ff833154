//! Traffic split and mirroring through the real binary: 10,000 requests over a weighted list
//! land within the weights, and new weights applied by a reload follow on the same connections;
//! overrides by header and cookie always win; a sticky cookie and a hash key keep a client on
//! its upstream; a mirror gets its share of copies (bodies whole, heads as the route's upstream
//! got them), counted, and neither a slow nor a dead mirror holds or fails a client's request.

use crate::common::{head, settled, start, targets, HOST, SETTLE};
use gatehouse_testkit::{http_get, http_request, metric_value, wait_until, Backend, HttpConn};
use std::time::Duration;

/// Upstreams `v1`, `v2` and `more` (`name: address` pairs), and site `main` on [`HOST`] with
/// `routes`.
fn config(v1: &Backend, v2: &Backend, more: &[(&str, String)], routes: &str) -> String {
    let more: String = more.iter().map(|(name, addr)| format!("  {name}: {{targets: [\"{addr}\"]}}\n")).collect();
    format!(
        "{}upstreams:\n  v1: {{targets: {}}}\n  v2: {{targets: {}}}\n{more}sites:\n  main:\n    hosts: [\"{HOST}\"]\n    routes: {routes}\n",
        head(""),
        targets(&[v1]),
        targets(&[v2]),
    )
}

/// Sends `n` GETs over the keep-alive connections `conns`, in turn; every one must be a 200.
fn send(conns: &mut [HttpConn], n: usize, path: &str) {
    for i in 0..n {
        let k = i % conns.len();
        let r = conns[k].get(HOST, path, &[]).unwrap_or_else(|e| panic!("request {i} on connection {k}: {e}"));
        assert_eq!(r.status, 200, "request {i}: {r:?}");
    }
}

fn share(part: usize, whole: usize) -> f64 {
    part as f64 * 100.0 / whole as f64
}

#[test]
fn a_weighted_split_follows_its_weights_and_a_reload_changes_them_on_open_connections() {
    let (v1, v2) = (Backend::start("v1"), Backend::start("v2"));
    let split = |a: u32, b: u32| {
        format!("[{{path: /, upstream: [{{upstream: v1, weight: {a}}}, {{upstream: v2, weight: {b}}}]}}]")
    };
    let mut gw = start(&config(&v1, &v2, &[], &split(90, 10)));
    settled(&gw);
    let mut conns: Vec<HttpConn> = (0..4).map(|_| HttpConn::open(gw.addr("http")).expect("connect")).collect();
    send(&mut conns, 10_000, "/");
    let (a, b) = (v1.request_count(), v2.request_count());
    assert_eq!(a + b, 10_000);
    assert!((share(b, 10_000) - 10.0).abs() <= 2.0, "v1 {a}, v2 {b} of 10,000 at 90/10");
    let metrics = gw.metrics();
    let counted = |up: &str| {
        metric_value(&metrics, &format!("gatehouse_split_requests_total{{route=\"main:/\",upstream=\"{up}\"}}"))
    };
    assert_eq!((counted("v1"), counted("v2")), (Some(a as f64), Some(b as f64)), "{metrics}");
    eprintln!("90/10 over 10,000 requests: v1 {a}, v2 {b}");

    // New weights by reload: the same connections carry on, and follow them.
    let connections = v1.connections() + v2.connections();
    gw.write_config(&config(&v1, &v2, &[], &split(50, 50)));
    assert_eq!(gw.reload()["event"], "reloaded");
    v1.clear();
    v2.clear();
    send(&mut conns, 2_000, "/");
    assert!(conns.iter().all(|c| !c.is_closed()), "a client connection was closed by the reload");
    let (a, b) = (v1.request_count(), v2.request_count());
    assert!((share(b, 2_000) - 50.0).abs() <= 2.0, "v1 {a}, v2 {b} of 2,000 at 50/50");
    // The upstream connections were kept too (v2 had some already at 10 %).
    assert!(v1.connections() + v2.connections() <= connections + 4, "upstream connections were not reused");
    eprintln!("50/50 after the reload, over 2,000 requests: v1 {a}, v2 {b}");
}

#[test]
fn overrides_always_win_and_a_sticky_cookie_keeps_the_client() {
    let (v1, v2) = (Backend::start("v1"), Backend::start("v2"));
    let routes = "[{path: /, upstream: [{upstream: v1, weight: 1}, {upstream: v2, weight: 1, \
                  match: {header: {x-canary: \"always\"}}}, {upstream: v1, weight: 0}], sticky: {cookie: gh_split}}]";
    // An upstream listed twice is refused, with its place.
    let (ok, err) = crate::common::check(&config(&v1, &v2, &[], routes));
    assert!(!ok && err.contains("sites.main.routes[0].upstream[2].upstream: `v1` is listed twice"), "{err}");
    let routes = "[{path: /, upstream: [{upstream: v1, weight: 1}, {upstream: v2, weight: 1, \
                  match: {header: {x-canary: \"always\"}}}], sticky: {cookie: gh_split, max_age: 1d}}, \
                  {path: /beta, upstream: [{upstream: v1}, {upstream: v2, weight: 0, match: {cookie: {beta: \"yes\"}}}]}]";
    let gw = start(&config(&v1, &v2, &[], routes));
    let addr = gw.addr("http");
    // The header override: every time, whatever the cookie says.
    let v1_cookie = {
        let mut cookie = None;
        for _ in 0..10 {
            let r = http_get(addr, HOST, "/", &[]);
            if r.header("x-backend") == Some("v1") {
                cookie = r.header("set-cookie").map(str::to_string);
            }
        }
        cookie.expect("v1 drawn at least once in 10 at 1:1")
    };
    assert!(
        v1_cookie.starts_with("gh_split=") && v1_cookie.contains("; Path=/; Max-Age=86400; HttpOnly; SameSite=Lax"),
        "{v1_cookie}"
    );
    let pair = v1_cookie.split(';').next().unwrap_or_default();
    for _ in 0..20 {
        let r = http_get(addr, HOST, "/", &[("x-canary", "always"), ("cookie", pair)]);
        assert_eq!(r.header("x-backend"), Some("v2"), "{r:?}");
        assert_eq!(r.header("set-cookie"), None, "an override sets no cookie: {r:?}");
    }
    // The sticky cookie: the same upstream every time, and no new cookie.
    for _ in 0..50 {
        let r = http_get(addr, HOST, "/", &[("cookie", &format!("other=1; {pair}"))]);
        assert_eq!((r.header("x-backend"), r.header("set-cookie")), (Some("v1"), None), "{r:?}");
    }
    // Clients without the cookie are drawn, and each told where it went.
    let mut seen = std::collections::BTreeMap::new();
    for _ in 0..40 {
        let r = http_get(addr, HOST, "/", &[]);
        assert!(r.header("set-cookie").is_some(), "{r:?}");
        *seen.entry(r.header("x-backend").unwrap_or("?").to_string()).or_insert(0) += 1;
    }
    assert!(seen.len() == 2 && seen.values().all(|n| (18..=22).contains(n)), "{seen:?}");
    // Over HTTP/2 as well: the cookie set in the answer's head.
    for r in gatehouse_testkit::h2c_get_each(addr, HOST, &["/", "/"]) {
        assert_eq!(r.status, 200, "{r:?}");
        assert!(r.header("set-cookie").is_some_and(|c| c.starts_with("gh_split=")), "{r:?}");
    }
    // A match-only upstream (weight 0) gets its cookie's requests and nothing else.
    for _ in 0..20 {
        assert_eq!(http_get(addr, HOST, "/beta/x", &[]).header("x-backend"), Some("v1"));
        let r = http_get(addr, HOST, "/beta/x", &[("cookie", "a=1; beta=yes")]);
        assert_eq!(r.header("x-backend"), Some("v2"), "{r:?}");
    }
}

#[test]
fn a_service_split_keeps_each_user_on_one_upstream_by_a_hash_key() {
    let (v1, v2) = (Backend::start("v1"), Backend::start("v2"));
    let yaml = format!(
        "{}services:\n  api:\n    path: /api\n    upstream: [{{upstream: v1, weight: 3}}, {{upstream: v2, weight: 1}}]\n    \
         sticky: {{hash: \"header:x-user\"}}\n    auth: app_key\napps:\n  web: {{key: K-web-0123456789, grants: {{api: ~}}}}\n",
        config(&v1, &v2, &[], "[{path: /, upstream: v1}]"),
    );
    let gw = start(&yaml);
    let addr = gw.addr("http");
    // Refused before any choice counts for nothing upstream.
    assert_eq!(http_get(addr, HOST, "/api/x", &[("x-user", "u1")]).status, 401);
    let mut on_v2 = 0;
    for user in 0..200 {
        let id = format!("user-{user}");
        let headers = [("x-user", id.as_str()), ("x-app-key", "K-web-0123456789")];
        let first = http_get(addr, HOST, "/api/x", &headers);
        assert_eq!(first.status, 200, "{first:?}");
        for _ in 0..3 {
            assert_eq!(http_get(addr, HOST, "/api/y", &headers).header("x-backend"), first.header("x-backend"), "{id}");
        }
        on_v2 += usize::from(first.header("x-backend") == Some("v2"));
    }
    // 200 keys hashed at 3:1: 50 expected on v2 (binomial σ ≈ 6).
    assert!((25..=75).contains(&on_v2), "{on_v2} of 200 users on v2");
    // The key did not reach the backend: the service's rewrite applies whichever upstream it is.
    assert!(v2.requests().iter().chain(v1.requests().iter()).all(|r| r.header("x-app-key").is_none()));
}

/// The counters of `route`'s mirror to `shadow` in the gateway's metrics: answered, failed,
/// skipped, incomplete.
fn mirrored(gw: &gatehouse_testkit::Gateway, route: &str) -> [u64; 4] {
    mirrored_to(gw, route, "shadow")
}

#[test]
fn a_mirror_gets_its_share_of_copies_as_the_upstream_got_them() {
    let (v1, v2, shadow) = (Backend::start("v1"), Backend::start("v2"), Backend::start("shadow"));
    let routes = "[{path: /, upstream: v1, strip_prefix: false, mirror: {upstream: shadow, percent: 10}}, \
                  {path: /all, upstream: v1, rewrite: /inner, mirror: {upstream: shadow, max_body: 4k}}]";
    let gw = start(&config(&v1, &v2, &[("shadow", shadow.addr().to_string())], routes));
    let addr = gw.addr("http");
    let mut conns: Vec<HttpConn> = (0..2).map(|_| HttpConn::open(addr).expect("connect")).collect();
    send(&mut conns, 1_000, "/x");
    // The share is drawn along the documented sequence (docs/architecture.md: request n is
    // copied when n·⌊2⁶⁴·frac(√2)⌋ mod 2⁶⁴ falls in the first tenth): its count for 1,000
    // requests, within two of 100.
    let want = (0..1_000u64).filter(|n| n.wrapping_mul(0x6A09_E667_F3BC_C908) < u64::MAX / 10 + 1).count() as u64;
    assert!((98..=102).contains(&want), "{want}");
    let copies = wait_until(SETTLE, || (mirrored(&gw, "main:/")[0] >= want).then(|| shadow.request_count()));
    assert_eq!(copies, Some(want as usize), "copies of 1,000 requests at 10 %: {:?}", mirrored(&gw, "main:/"));
    assert_eq!(mirrored(&gw, "main:/"), [want, 0, 0, 0]);
    assert_eq!(v1.request_count(), 1_000);

    // Every request of `/all`, bodies included, as v1 got them (target rewritten, forwarding
    // headers, chunked or not).
    shadow.clear();
    v1.clear();
    let body: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    let r = http_request(addr, "POST", HOST, "/all/form?q=1", &[("content-type", "application/octet-stream")], &body)
        .expect("POST");
    assert_eq!(r.status, 200, "{r:?}");
    wait_until(SETTLE, || (shadow.request_count() >= 1).then_some(())).expect("the copy arrived");
    let (primary, copy) = (&v1.requests()[0], &shadow.requests()[0]);
    assert!(!copy.aborted);
    assert_eq!((copy.method.as_str(), copy.uri.as_str()), ("POST", "/inner/form?q=1"));
    assert_eq!(copy.body, body, "the copy's body");
    assert_eq!(copy.body, primary.body);
    for name in ["host", "x-forwarded-for", "x-real-ip", "x-request-id", "content-type"] {
        assert_eq!(copy.header(name), primary.header(name), "{name}");
    }
    // A body longer than `max_body` is not copied, and the client's request is whole upstream.
    let long = vec![b'x'; 10_000];
    assert_eq!(http_request(addr, "PUT", HOST, "/all/long", &[], &long).expect("PUT").status, 200);
    wait_until(SETTLE, || (mirrored(&gw, "main:/all")[3] == 1).then_some(())).expect("counted as incomplete");
    assert_eq!(v1.requests().last().map(|r| r.body.len()), Some(10_000));
    let bytes =
        metric_value(&gw.metrics(), "gatehouse_mirror_request_bytes_total{route=\"main:/all\",upstream=\"shadow\"}");
    assert!(bytes.is_some_and(|b| b >= 3000.0), "{bytes:?}");
}

#[test]
fn a_mirror_on_a_split_copies_from_every_upstream_of_it() {
    let (v1, v2, shadow) = (Backend::start("v1"), Backend::start("v2"), Backend::start("shadow"));
    let routes = "[{path: /, upstream: [{upstream: v1}, {upstream: v2}], mirror: {upstream: shadow, percent: 20}}]";
    let gw = start(&config(&v1, &v2, &[("shadow", shadow.addr().to_string())], routes));
    let mut conn = HttpConn::open(gw.addr("http")).expect("connect");
    for i in 0..1_000 {
        let seq = i.to_string();
        assert_eq!(conn.get(HOST, "/x", &[("x-seq", &seq)]).expect("GET").status, 200);
    }
    wait_until(SETTLE, || (mirrored(&gw, "main:/")[0] == 200).then_some(())).expect("200 copies answered");
    let on_v2: std::collections::HashSet<String> =
        v2.requests().iter().filter_map(|r| r.header("x-seq").map(str::to_string)).collect();
    let copies = shadow.requests();
    let from_v2 = copies.iter().filter(|c| c.header("x-seq").is_some_and(|s| on_v2.contains(s))).count();
    // Half the copies come from each upstream's requests (the two draws are independent).
    assert!((70..=130).contains(&from_v2), "{from_v2} of {} copies were of v2's requests", copies.len());
    // A copy of a GET is a GET without a body, framed as the original was.
    let first = &copies[0];
    assert_eq!(
        (first.method.as_str(), first.header("transfer-encoding"), first.header("content-length")),
        ("GET", None, None)
    );
    assert!(first.body.is_empty());
}

#[test]
fn a_slow_or_dead_mirror_never_holds_or_fails_the_client() {
    let (v1, v2, shadow) = (Backend::start("v1"), Backend::start("v2"), Backend::start("shadow"));
    // The shadow takes a minute to answer: longer than the whole test may run.
    shadow.set_delay(Duration::from_secs(60));
    let more = [("shadow", shadow.addr().to_string()), ("dead", Backend::closed_port().to_string())];
    let routes = "[{path: /slow, upstream: v1, mirror: {upstream: shadow, timeout: 2s, max_in_flight: 5}}, \
                  {path: /dead, upstream: v1, mirror: {upstream: dead}}]";
    let yaml = config(&v1, &v2, &more, routes);
    let gw = start(&yaml);
    let addr = gw.addr("http");
    let mut conns: Vec<HttpConn> = (0..2).map(|_| HttpConn::open(addr).expect("connect")).collect();
    // Twenty requests answered while the shadow holds every copy it got: none waited for it.
    send(&mut conns, 20, "/slow/a");
    let during = mirrored(&gw, "main:/slow");
    assert_eq!(during[0], 0, "a copy was answered: {during:?}");
    // Five copies under way at most; the other fifteen were not sent.
    assert_eq!(during[2], 15, "{during:?}");
    wait_until(SETTLE, || (shadow.request_count() == 5).then_some(())).expect("five copies at the shadow");
    // The five time out, counted as failed.
    let after = wait_until(Duration::from_secs(10), || {
        let m = mirrored(&gw, "main:/slow");
        (m[1] == 5).then_some(m)
    });
    assert_eq!(after, Some([0, 5, 15, 0]), "{:?}", mirrored(&gw, "main:/slow"));
    // The timeouts count against the shadow's endpoint, for its passive health.
    let failures = metric_value(
        &gw.metrics(),
        &format!("gatehouse_upstream_failures_total{{upstream=\"shadow\",endpoint=\"{}\"}}", shadow.addr()),
    );
    assert_eq!(failures, Some(5.0), "{}", gw.metrics());
    // A mirror nothing listens on: every client request answered, every copy failed.
    send(&mut conns, 30, "/dead/b");
    let dead_counts = wait_until(SETTLE, || {
        let m = mirrored_to(&gw, "main:/dead", "dead");
        (m[1] == 30).then_some(m)
    });
    assert_eq!(dead_counts, Some([0, 30, 0, 0]));
    assert_eq!(v1.request_count(), 50);
}

fn mirrored_to(gw: &gatehouse_testkit::Gateway, route: &str, upstream: &str) -> [u64; 4] {
    let m = gw.metrics();
    ["answered", "failed", "skipped", "incomplete"].map(|result| {
        metric_value(
            &m,
            &format!(
                "gatehouse_mirror_requests_total{{route=\"{route}\",upstream=\"{upstream}\",result=\"{result}\"}}"
            ),
        )
        .unwrap_or(-1.0) as u64
    })
}
