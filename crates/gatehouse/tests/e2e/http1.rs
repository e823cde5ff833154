//! The client-side HTTP/1.x server over raw TCP: pipelining, `Expect: 100-continue`, HTTP/1.0,
//! chunked uploads, and the framing refusals that keep a request from being read two ways.

use crate::common::{head, start, targets, HOST};
use gatehouse_testkit::{Backend, Gateway, RawConn};
use std::time::Duration;

const READ: Duration = Duration::from_secs(5);

fn gateway(b: &Backend) -> Gateway {
    start(&format!(
        "{}upstreams:\n  u: {{targets: {}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}]}}\n",
        head(""),
        targets(&[b]),
    ))
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let b = Backend::start("a");
    let gw = gateway(&b);
    let mut c = RawConn::connect(gw.addr("http"));
    let mut batch = Vec::new();
    for path in ["/one", "/two", "/three"] {
        batch.extend_from_slice(format!("GET {path} HTTP/1.1\r\nHost: {HOST}\r\n\r\n").as_bytes());
    }
    // A POST with a body in the middle of the pipeline must not swallow the request after it.
    batch
        .extend_from_slice(format!("POST /four HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: 5\r\n\r\nhello").as_bytes());
    batch.extend_from_slice(format!("GET /five HTTP/1.1\r\nHost: {HOST}\r\n\r\n").as_bytes());
    c.send(&batch);
    for _ in 0..5 {
        let resp = c.read_response(READ).expect("a pipelined response");
        assert_eq!(resp.status, 200, "{resp:?}");
    }
    let paths: Vec<String> = b.requests().iter().map(|r| r.path_and_query()).collect();
    assert_eq!(paths, ["/one", "/two", "/three", "/four", "/five"]);
    assert_eq!(b.requests()[3].body, b"hello");
}

#[test]
fn expect_100_continue_is_answered_before_the_body() {
    let b = Backend::start("a");
    let gw = gateway(&b);
    let mut c = RawConn::connect(gw.addr("http"));
    c.send(format!("PUT /up HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n").as_bytes());
    let interim = c.read_response(READ).expect("100 Continue");
    assert_eq!(interim.status, 100, "{interim:?}");
    c.send(b"data");
    let resp = c.read_response(READ).expect("the final response");
    assert_eq!(resp.status, 200, "{resp:?}");
    let reqs = b.requests();
    assert_eq!(reqs[0].body, b"data");
    assert_eq!(reqs[0].header("expect"), None, "Expect is answered here, not forwarded");
}

#[test]
fn http10_without_keep_alive_is_closed_after_the_response() {
    let b = Backend::start("a");
    let gw = gateway(&b);
    let mut c = RawConn::connect(gw.addr("http"));
    c.send(format!("GET /old HTTP/1.0\r\nHost: {HOST}\r\n\r\n").as_bytes());
    let (text, closed) = c.read_to_close(READ);
    assert!(text.starts_with("HTTP/1.1 200"), "{text:?}");
    assert!(!text.contains("transfer-encoding: chunked"), "no chunked coding for HTTP/1.0: {text:?}");
    assert!(closed, "the connection must close after an HTTP/1.0 response without keep-alive");
}

#[test]
fn chunked_uploads_are_forwarded_whole() {
    let b = Backend::start("a");
    let gw = gateway(&b);
    let mut c = RawConn::connect(gw.addr("http"));
    c.send(
        format!("POST /up HTTP/1.1\r\nHost: {HOST}\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=x\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
            .as_bytes(),
    );
    let resp = c.read_response(READ).expect("a response");
    assert_eq!(resp.status, 200, "{resp:?}");
    assert_eq!(b.requests()[0].body, b"hello world");
}

#[test]
fn ambiguous_framing_is_refused_and_never_forwarded() {
    let b = Backend::start("a");
    let gw = gateway(&b);
    let cases: [(&str, u16); 6] = [
        ("Content-Length: 5\r\nTransfer-Encoding: chunked", 400),
        ("Content-Length: 5\r\nContent-Length: 6", 400),
        ("Content-Length: 5, 6", 400),
        ("Transfer-Encoding: chunked, identity", 501),
        ("Transfer-Encoding: xchunked", 501),
        ("Transfer-Encoding: gzip, chunked", 501),
    ];
    for (headers, want) in cases {
        let mut c = RawConn::connect(gw.addr("http"));
        // A smuggled request rides behind the ambiguous one; it must never reach the backend.
        c.send(
            format!("POST / HTTP/1.1\r\nHost: {HOST}\r\n{headers}\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: {HOST}\r\n\r\n")
                .as_bytes(),
        );
        let (text, closed) = c.read_to_close(READ);
        assert!(text.starts_with(&format!("HTTP/1.1 {want}")), "{headers:?}: {text:?}");
        assert!(closed, "{headers:?}: the connection must close");
    }
    assert_eq!(b.request_count(), 0, "nothing may reach the backend: {:?}", b.requests());
}
