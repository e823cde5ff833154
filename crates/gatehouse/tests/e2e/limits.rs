//! Malformed requests and connection limits, over raw TCP: what is refused, with which status, and
//! that none of it reaches the backend.

use crate::common::{head, start, targets, HOST};
use gatehouse_testkit::{raw, Backend, Gateway, RawConn};
use std::time::{Duration, Instant};

const READ: Duration = Duration::from_secs(5);

/// A gateway for [`HOST`] whose listener has the extra settings `listener`, whose `/` route goes to
/// `b`, and whose `/small/` route accepts bodies up to 1 KiB.
fn gateway(b: &Backend, listener: &str) -> Gateway {
    let routes = "[{path: /, upstream: u}, {path: /small/, upstream: u, max_body: 1k}]";
    start(&format!(
        "{}upstreams:\n  u: {{targets: {}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: {routes}}}\n",
        head(listener),
        targets(&[b]),
    ))
}

fn status_of(reply: &str) -> Option<u16> {
    let line = reply.lines().next()?;
    line.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
}

/// Sends `bytes` on a fresh connection and checks the reply's status.
fn assert_status(gw: &Gateway, bytes: &[u8], want: u16) {
    let reply = raw(gw.addr("http"), bytes);
    assert_eq!(status_of(&reply), Some(want), "sent {:?}\ngot {reply:?}", String::from_utf8_lossy(bytes));
}

#[test]
fn malformed_requests_are_400_and_never_forwarded() {
    let b = Backend::start("a");
    let gw = gateway(&b, "");
    let cases: [&[u8]; 7] = [
        // HTTP/1.1 without Host.
        b"GET / HTTP/1.1\r\n\r\n",
        // Not a request line.
        b"HELLO\r\n\r\n",
        b"GET /\x01 HTTP/1.1\r\nHost: app.test\r\n\r\n",
        // Space between header name and colon (RFC 9112 section 5.1).
        b"GET / HTTP/1.1\r\nHost: app.test\r\nX-Bad : 1\r\n\r\n",
        // Control bytes in a header value and in a header name.
        b"GET / HTTP/1.1\r\nHost: app.test\r\nX-Bad: a\x01b\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: app.test\r\nX(Bad): 1\r\n\r\n",
        // Two Host headers.
        b"GET / HTTP/1.1\r\nHost: app.test\r\nHost: other.test\r\n\r\n",
    ];
    for bytes in cases {
        assert_status(&gw, bytes, 400);
    }
    assert_eq!(b.request_count(), 0, "a malformed request reached the backend: {:?}", b.requests());
    assert_status(&gw, b"GET / HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\n\r\n", 200);
}

#[test]
fn request_heads_over_max_header_bytes_are_refused() {
    let b = Backend::start("a");
    let gw = gateway(&b, "max_header_bytes: 8k");
    let big = format!("GET / HTTP/1.1\r\nHost: {HOST}\r\nX-Big: {}\r\n\r\n", "x".repeat(10 * 1024));
    let reply = raw(gw.addr("http"), big.as_bytes());
    let status = status_of(&reply);
    assert!(status.is_some_and(|s| s == 431 || s == 400), "a 10 KiB head under max_header_bytes: 8k got {reply:?}");
    let fits =
        format!("GET / HTTP/1.1\r\nHost: {HOST}\r\nX-Big: {}\r\nConnection: close\r\n\r\n", "x".repeat(6 * 1024));
    assert_eq!(status_of(&raw(gw.addr("http"), fits.as_bytes())), Some(200), "a 6 KiB head fits in 8k");
    assert_eq!(b.request_count(), 1, "only the head that fits is forwarded");
}

#[test]
fn small_max_header_bytes_is_enforced() {
    let b = Backend::start("a");
    let gw = gateway(&b, "max_header_bytes: 2k");
    let big = format!("GET / HTTP/1.1\r\nHost: {HOST}\r\nX-Big: {}\r\nConnection: close\r\n\r\n", "x".repeat(4 * 1024));
    assert_eq!(status_of(&raw(gw.addr("http"), big.as_bytes())), Some(431), "a 4 KiB head under max_header_bytes: 2k");
    let small = format!("GET / HTTP/1.1\r\nHost: {HOST}\r\nX-Small: {}\r\nConnection: close\r\n\r\n", "x".repeat(1024));
    assert_eq!(status_of(&raw(gw.addr("http"), small.as_bytes())), Some(200), "a 1 KiB head fits in 2k");
    assert_eq!(b.request_count(), 1, "only the head that fits is forwarded");
}

/// Values outside 1k..1m are refused by `check`, with the field's path.
#[test]
fn max_header_bytes_out_of_range_is_refused_by_check() {
    let dir = gatehouse_testkit::TempDir::new();
    let file = dir.join("small-head.yaml");
    let yaml = "listeners:\n  http: {bind: \"127.0.0.1:0\", max_header_bytes: 512}\nupstreams:\n  u: {targets: [\"127.0.0.1:9\"]}\nsites:\n  s: {hosts: [\"*\"], routes: [{path: /, upstream: u}]}\n";
    std::fs::write(&file, yaml).expect("write config");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .arg("check")
        .arg(&file)
        .output()
        .expect("run gatehouse check");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "512 must be refused: {stderr}");
    assert!(stderr.contains("listeners.http.max_header_bytes: must be between 1k and 1m"), "{stderr}");
}

#[test]
fn declared_body_over_max_body_is_413_without_reaching_the_backend() {
    let b = Backend::start("a");
    let gw = gateway(&b, "");
    // Only the head: the refusal must come from the declared length alone.
    let mut c = RawConn::connect(gw.addr("http"));
    c.send(format!("POST /small/upload HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: 2048\r\n\r\n").as_bytes());
    let resp = c.read_response(READ).expect("a response to an oversized declared body");
    assert_eq!(resp.status, 413, "{resp:?}");
    assert_eq!(b.request_count(), 0, "the oversized request reached the backend");

    let mut c = RawConn::connect(gw.addr("http"));
    let body = "y".repeat(1000);
    c.send(format!("POST /small/upload HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: 1000\r\n\r\n{body}").as_bytes());
    let resp = c.read_response(READ).expect("a response to a body within the limit");
    assert_eq!(resp.status, 200, "{resp:?}");
}

#[test]
fn chunked_body_over_max_body_is_413() {
    let b = Backend::start("a");
    let gw = gateway(&b, "");
    let mut c = RawConn::connect(gw.addr("http"));
    let chunk = "z".repeat(2000);
    c.send(
        format!(
            "POST /small/upload HTTP/1.1\r\nHost: {HOST}\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{chunk}\r\n",
            chunk.len()
        )
        .as_bytes(),
    );
    let resp = c.read_response(READ).expect("a response to an oversized chunked body");
    assert_eq!(resp.status, 413, "{resp:?}");
    assert!(
        b.requests().iter().all(|r| r.body.len() <= 1024),
        "the backend received more than max_body: {:?}",
        b.requests().iter().map(|r| r.body.len()).collect::<Vec<_>>()
    );
}

#[test]
fn max_requests_per_connection_closes_after_the_last_one() {
    let b = Backend::start("a");
    let gw = gateway(&b, "max_requests_per_connection: 3");
    let mut c = RawConn::connect(gw.addr("http"));
    for i in 1..=3 {
        c.send(format!("GET /{i} HTTP/1.1\r\nHost: {HOST}\r\n\r\n").as_bytes());
        let resp = c.read_response(READ).unwrap_or_else(|e| panic!("response {i}: {e}"));
        assert_eq!(resp.status, 200, "response {i}: {resp:?}");
        let close = resp.header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
        assert_eq!(close, i == 3, "response {i} has the wrong Connection header: {resp:?}");
    }
    assert!(c.wait_closed(Duration::from_secs(2)).is_some(), "the connection stayed open after the 3rd response");
    assert_eq!(b.request_count(), 3);
}

#[test]
fn header_read_timeout_closes_slow_request_heads() {
    let b = Backend::start("a");
    let gw = gateway(&b, "header_read_timeout: 300ms");

    // Half a request line, then silence.
    let mut c = RawConn::connect(gw.addr("http"));
    c.send(b"GET / HT");
    let closed = c.wait_closed(Duration::from_secs(3));
    assert!(closed.is_some_and(|d| d < Duration::from_secs(2)), "half a request line kept the connection: {closed:?}");

    // A head sent one byte every 100 ms: the timeout covers the whole head, not the gap between bytes.
    let mut c = RawConn::connect(gw.addr("http"));
    let started = Instant::now();
    c.send(format!("GET / HTTP/1.1\r\nHost: {HOST}\r\nX-Slow: ").as_bytes());
    let mut closed_after = None;
    for _ in 0..30 {
        if c.try_send(b"a").is_err() {
            closed_after = Some(started.elapsed());
            break;
        }
        if c.wait_closed(Duration::from_millis(100)).is_some() {
            closed_after = Some(started.elapsed());
            break;
        }
    }
    assert!(
        closed_after.is_some_and(|d| d < Duration::from_secs(2)),
        "a head trickling in byte by byte was not cut off: {closed_after:?}"
    );

    let mut c = RawConn::connect(gw.addr("http"));
    c.send(format!("GET / HTTP/1.1\r\nHost: {HOST}\r\n\r\n").as_bytes());
    let resp = c.read_response(READ).expect("a normal request still works");
    assert_eq!(resp.status, 200);
    assert_eq!(b.request_count(), 1, "only the complete request reached the backend");
}

#[test]
fn keepalive_timeout_closes_idle_connections() {
    let b = Backend::start("a");
    let gw = gateway(&b, "keepalive_timeout: 300ms");
    let mut c = RawConn::connect(gw.addr("http"));
    c.send(format!("GET / HTTP/1.1\r\nHost: {HOST}\r\n\r\n").as_bytes());
    let resp = c.read_response(READ).expect("response");
    assert_eq!(resp.status, 200);
    assert!(!resp.header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close")), "{resp:?}");
    let closed = c.wait_closed(Duration::from_secs(3));
    assert!(
        closed.is_some_and(|d| d >= Duration::from_millis(150) && d < Duration::from_secs(2)),
        "an idle keep-alive connection should close about 300 ms after the response; closed after {closed:?}"
    );
}

#[test]
fn connections_over_max_connections_wait_in_the_backlog() {
    let b = Backend::start("a");
    let yaml = format!(
        "{}upstreams:\n  u: {{targets: {}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}]}}\n",
        head("max_connections: 1").replacen("workers: 2", "workers: 1", 1),
        targets(&[&b]),
    );
    let gw = start(&yaml);
    let mut first = gatehouse_testkit::HttpConn::open(gw.addr("http")).expect("connect");
    assert_eq!(first.get(HOST, "/", &[]).expect("GET on the first connection").status, 200);

    let mut second = RawConn::connect(gw.addr("http"));
    second.send(format!("GET /second HTTP/1.1\r\nHost: {HOST}\r\n\r\n").as_bytes());
    let early = second.read_response(Duration::from_millis(500));
    assert!(early.is_err(), "a second connection was served while the only slot was taken: {early:?}");

    drop(first);
    let resp = second.read_response(READ).expect("served once the first connection closed");
    assert_eq!(resp.status, 200, "{resp:?}");
}
