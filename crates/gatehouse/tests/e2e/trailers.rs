//! Trailer fields pass both ways on every path: HTTP/1.1 chunked to HTTP/1.1 chunked, HTTP/1.1
//! chunked to and from HTTP/2, HTTP/2 to HTTP/2; with real clients (a raw HTTP/1.1 connection,
//! hyper's HTTP/2 client) and hyper's server as the backend. The `Trailer` header that announces
//! them passes too.

use crate::common::{simple, start, targets, HOST, SETTLE};
use gatehouse_testkit::{h2c_exchange, Backend, RawConn};

fn pairs(fields: &[(String, String)]) -> Vec<(&str, &str)> {
    fields.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// A chunked request with trailers from an HTTP/1.1 client; what the backend and the client got.
fn http1_exchange(gw: &gatehouse_testkit::Gateway) -> gatehouse_testkit::RawResponse {
    let mut c = RawConn::connect(gw.addr("http"));
    c.send(
        format!(
            "POST /t HTTP/1.1\r\nHost: {HOST}\r\nTE: trailers\r\nTrailer: x-checksum\r\nTransfer-Encoding: chunked\r\n\r\n\
             5\r\nhello\r\n0\r\nX-Checksum: abc\r\nX-Multi: 1\r\nx-multi: 2\r\nContent-Length: 99\r\n\r\n"
        )
        .as_bytes(),
    );
    c.read_response(SETTLE).expect("a response")
}

#[test]
fn http1_chunked_trailers_pass_both_ways_to_http1_and_http2_backends() {
    for protocol in ["http1", "http2"] {
        let b = Backend::start("b");
        b.set_trailers(&[("x-server", "done"), ("x-multi", "3")]);
        let gw = start(&simple(&format!("targets: {}, protocol: {protocol}", targets(&[&b]))));
        let resp = http1_exchange(&gw);
        assert_eq!((resp.status, &resp.body[..]), (200, &b"b"[..]), "{protocol}: {resp:?}");
        assert_eq!(pairs(&resp.trailers), [("x-server", "done"), ("x-multi", "3")], "{protocol}: {resp:?}");
        let reqs = b.requests();
        assert_eq!(reqs[0].body, b"hello", "{protocol}");
        // Content-Length may not be a trailer: dropped on the way.
        assert_eq!(pairs(&reqs[0].trailers), [("x-checksum", "abc"), ("x-multi", "1"), ("x-multi", "2")], "{protocol}");
        assert_eq!(reqs[0].header("trailer"), Some("x-checksum"), "{protocol}: the Trailer header passes");
    }
}

#[test]
fn http2_trailers_pass_both_ways_to_http1_and_http2_backends() {
    for protocol in ["http1", "http2"] {
        let b = Backend::start("b");
        b.set_trailers(&[("x-server", "done")]);
        let gw = start(&simple(&format!("targets: {}, protocol: {protocol}", targets(&[&b]))));
        let answer = h2c_exchange(gw.addr("http"), HOST, "/t", b"hello", &[("x-checksum", "abc"), ("x-multi", "1")]);
        assert_eq!((answer.response.status, &answer.response.body[..]), (200, &b"b"[..]), "{protocol}: {answer:?}");
        assert_eq!(pairs(&answer.trailers), [("x-server", "done")], "{protocol}: {answer:?}");
        let reqs = b.requests();
        assert_eq!(pairs(&reqs[0].trailers), [("x-checksum", "abc"), ("x-multi", "1")], "{protocol}");
    }
}
