//! What reaches the backend: forwarding headers, hop-by-hop removal, Host policies, path rewrites
//! and routing, driven with curl as a user would.

use crate::common::{head, simple, start, targets, HOST};
use gatehouse_testkit::{curl, Backend};

fn url(gw: &gatehouse_testkit::Gateway, path: &str) -> String {
    format!("http://{}{path}", gw.addr("http"))
}

#[test]
fn forwarding_headers_are_added_and_hop_by_hop_headers_removed() {
    let b = Backend::start("a");
    let yaml = format!("forwarding: {{via: gatehouse}}\n{}", simple(&format!("targets: {}", targets(&[&b]))));
    let gw = start(&yaml);
    let resp = curl(&[
        &url(&gw, "/hello"),
        "-H",
        &format!("Host: {HOST}"),
        "-H",
        "X-Forwarded-For: 1.2.3.4",
        "-H",
        "X-Real-IP: 6.6.6.6",
        "-H",
        "X-Forwarded-Proto: https",
        "-H",
        "Connection: X-Secret",
        "-H",
        "X-Secret: 1",
        "-H",
        "Keep-Alive: timeout=5",
        "-H",
        "Proxy-Connection: keep-alive",
        "-H",
        "X-Multi: first",
        "-H",
        "X-Multi: second",
    ]);
    assert_eq!(resp.status, 200, "{resp:?}");
    assert_eq!(resp.text(), "a");

    let reqs = b.requests();
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    let r = &reqs[0];
    assert_eq!(r.path_and_query(), "/hello");
    assert_eq!(r.header_all("x-forwarded-for"), ["1.2.3.4, 127.0.0.1"], "{r:?}");
    assert_eq!(r.header_all("x-real-ip"), ["127.0.0.1"], "X-Real-IP is set, not appended: {r:?}");
    assert_eq!(r.header_all("x-forwarded-proto"), ["http"], "X-Forwarded-Proto is set: {r:?}");
    assert_eq!(r.header_all("via"), ["1.1 gatehouse"], "{r:?}");
    for hop in ["connection", "x-secret", "keep-alive", "proxy-connection"] {
        assert!(r.header(hop).is_none(), "hop-by-hop header `{hop}` reached the backend: {r:?}");
    }
    assert_eq!(r.header_all("x-multi"), ["first", "second"], "repeated headers keep both values in order");
    assert_eq!(r.header("host"), Some(HOST), "Host is preserved by default");
}

/// `TE: trailers` (what gRPC sends, and a client that takes trailers) reaches an HTTP/1.1
/// upstream, named in `Connection` as RFC 9110 §10.1.4 asks; any other coding of `TE` is for the
/// client's hop only.
#[test]
fn te_trailers_is_forwarded_and_other_te_codings_are_not() {
    let b = Backend::start("a");
    let gw = start(&simple(&format!("targets: {}", targets(&[&b]))));
    for (te, forwarded) in [("trailers", Some("trailers")), ("gzip, trailers;q=1", Some("trailers")), ("gzip", None)] {
        let resp = curl(&[
            &url(&gw, "/te"),
            "-H",
            &format!("Host: {HOST}"),
            "-H",
            &format!("TE: {te}"),
            "-H",
            "Connection: TE",
        ]);
        assert_eq!(resp.status, 200, "{resp:?}");
        let reqs = b.requests();
        let r = reqs.last().expect("the backend got the request");
        assert_eq!(r.header("te"), forwarded, "TE: {te}: {r:?}");
        assert_eq!(r.header("connection"), forwarded.map(|_| "te"), "TE: {te}: {r:?}");
    }
}

#[test]
fn host_header_policies() {
    let b = Backend::start("a");
    let routes = "[{path: /keep/, upstream: u}, {path: /literal/, upstream: u, host_header: internal.example}, \
                  {path: /endpoint/, upstream: u, host_header: upstream}]";
    let yaml = format!(
        "{}upstreams:\n  u: {{targets: {}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: {routes}}}\n",
        head(""),
        targets(&[&b]),
    );
    let gw = start(&yaml);
    for path in ["/keep/x", "/literal/x", "/endpoint/x"] {
        let resp = curl(&[&url(&gw, path), "-H", &format!("Host: {HOST}:8080")]);
        assert_eq!(resp.status, 200, "{path}: {resp:?}");
    }
    let hosts: Vec<(String, Option<String>)> =
        b.requests().iter().map(|r| (r.path_and_query(), r.header("host").map(str::to_string))).collect();
    assert_eq!(
        hosts,
        [
            ("/keep/x".to_string(), Some(format!("{HOST}:8080"))),
            ("/literal/x".to_string(), Some("internal.example".to_string())),
            ("/endpoint/x".to_string(), Some(b.addr().to_string())),
        ]
    );
}

#[test]
fn strip_prefix_and_rewrite_change_the_path() {
    let b = Backend::start("a");
    let yaml = format!(
        "{}upstreams:\n  u: {{targets: {}}}\nsites:\n  main:\n    hosts: [\"{HOST}\"]\n    routes: [{{path: /api/, upstream: u, strip_prefix: true}}]\n  other:\n    hosts: [\"other.test\"]\n    routes: [{{path: /api/, upstream: u, rewrite: /v2/}}]\n",
        head(""),
        targets(&[&b]),
    );
    let gw = start(&yaml);
    let sent =
        [(HOST, "/api/users?x=1"), (HOST, "/api/"), ("other.test", "/api/users"), ("other.test", "/api/a/b?q=2")];
    for (host, path) in sent {
        let resp = curl(&[&url(&gw, path), "-H", &format!("Host: {host}")]);
        assert_eq!(resp.status, 200, "{host}{path}: {resp:?}");
    }
    let seen: Vec<String> = b.requests().iter().map(|r| r.path_and_query()).collect();
    assert_eq!(seen, ["/users?x=1", "/", "/v2/users", "/v2/a/b?q=2"]);
}

#[test]
fn unknown_host_is_404_and_never_forwarded() {
    let b = Backend::start("a");
    let gw = start(&simple(&format!("targets: {}", targets(&[&b]))));
    let resp = curl(&[&url(&gw, "/"), "-H", "Host: elsewhere.test"]);
    assert_eq!(resp.status, 404, "{resp:?}");
    assert_eq!(b.request_count(), 0, "a request for an unknown host reached the backend");
    let ok = curl(&[&url(&gw, "/"), "-H", &format!("Host: {HOST}")]);
    assert_eq!(ok.status, 200, "the known host still works: {ok:?}");
}

#[test]
fn longest_prefix_wins() {
    let (root, api, v1) = (Backend::start("root"), Backend::start("api"), Backend::start("v1"));
    let yaml = format!(
        "{}upstreams:\n  root: {{targets: {}}}\n  api: {{targets: {}}}\n  v1: {{targets: {}}}\nsites:\n  main:\n    hosts: [\"{HOST}\"]\n    routes:\n      - {{path: /api/v1/, upstream: v1}}\n      - {{path: /, upstream: root}}\n      - {{path: /api/, upstream: api}}\n",
        head(""),
        targets(&[&root]),
        targets(&[&api]),
        targets(&[&v1]),
    );
    let gw = start(&yaml);
    let cases = [
        ("/api/v1/users", "v1"),
        ("/api/v1/", "v1"),
        ("/api/v2/users", "api"),
        ("/api/", "api"),
        ("/api", "root"),
        ("/apiary", "root"),
        ("/", "root"),
    ];
    for (path, want) in cases {
        let resp = curl(&[&url(&gw, path), "-H", &format!("Host: {HOST}")]);
        assert_eq!(resp.status, 200, "{path}: {resp:?}");
        assert_eq!(resp.header("x-backend"), Some(want), "{path} went to the wrong upstream");
    }
}

#[test]
fn hop_by_hop_headers_of_the_response_are_removed() {
    let b = Backend::start("a");
    b.add_response_header("Connection", "X-Hop");
    b.add_response_header("X-Hop", "internal");
    b.add_response_header("Keep-Alive", "timeout=5");
    b.add_response_header("X-End-To-End", "kept");
    let gw = start(&simple(&format!("targets: {}", targets(&[&b]))));
    let resp = curl(&[&url(&gw, "/"), "-H", &format!("Host: {HOST}")]);
    assert_eq!(resp.status, 200, "{resp:?}");
    assert_eq!(resp.header("x-end-to-end"), Some("kept"), "{resp:?}");
    for hop in ["x-hop", "keep-alive"] {
        assert!(resp.header(hop).is_none(), "hop-by-hop response header `{hop}` reached the client: {resp:?}");
    }
    assert!(
        !resp.header("connection").is_some_and(|v| v.to_ascii_lowercase().contains("x-hop")),
        "the upstream's Connection header reached the client: {resp:?}"
    );
}

#[test]
fn curl_upload_over_max_body_is_refused_before_the_body_is_sent() {
    let b = Backend::start("a");
    let yaml = format!(
        "{}upstreams:\n  u: {{targets: {}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u, max_body: 1k}}]}}\n",
        head(""),
        targets(&[&b]),
    );
    let gw = start(&yaml);
    let big = "b".repeat(2000);
    let resp = curl(&[
        &url(&gw, "/upload"),
        "-H",
        &format!("Host: {HOST}"),
        "-H",
        "Expect: 100-continue",
        "--data-binary",
        &big,
    ]);
    assert_eq!(resp.status, 413, "{resp:?}");
    assert_eq!(b.request_count(), 0, "the oversized upload reached the backend");

    let small = "s".repeat(500);
    let resp = curl(&[&url(&gw, "/upload"), "-H", &format!("Host: {HOST}"), "--data-binary", &small]);
    assert_eq!(resp.status, 200, "{resp:?}");
    let reqs = b.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!((reqs[0].method.as_str(), reqs[0].body.as_slice()), ("POST", small.as_bytes()));
}
