//! Request smuggling and head parsing over raw TCP: each case sends bytes exactly as written, with a
//! well-formed request pipelined behind them, and checks both the client's answer and what the
//! recording backend received. A case is either refused (4xx/5xx, connection closed, the request
//! behind it never answered nor forwarded) or forwarded in one normalised form, after which the
//! request behind it is answered on its own (no desync).

use crate::common::{head, start, targets, HOST};
use gatehouse_testkit::{Backend, Gateway, RawConn, Recorded};
use std::time::Duration;

const READ: Duration = Duration::from_secs(5);

/// The well-formed request sent behind every case on the same connection.
const PROBE: &str = "GET /probe HTTP/1.1\r\nHost: app.test\r\n\r\n";

/// How the forwarded request's body is framed towards the backend.
#[derive(Clone, Copy, Debug)]
enum Framed {
    /// No body: neither `Content-Length` nor `Transfer-Encoding`.
    Bodiless,
    /// Exactly one `Content-Length` with this value, no `Transfer-Encoding`.
    Length(&'static str),
    /// Exactly one `Transfer-Encoding: chunked`, no `Content-Length` (the body is re-chunked).
    Chunked,
}

/// What must happen to a case.
#[derive(Clone, Copy, Debug)]
enum Outcome {
    /// Refused while reading the head: this status, connection closed, nothing reaches the backend.
    Refused(u16),
    /// Refused while reading the body, which is streamed: the head may have gone on, but the backend
    /// sees the body fail (never a whole request); this status, connection closed.
    RefusedInBody(u16),
    /// Answered by the gateway itself with this status, not forwarded; the connection stays in step.
    Answered(u16),
    /// Forwarded as `method path`, framed so, with exactly this body; the probe is answered next.
    Forwarded { method: &'static str, path: &'static str, framed: Framed, body: &'static str },
    /// Forwarded like `Forwarded`, then the connection closes (HTTP/1.0 without keep-alive).
    ForwardedThenClosed { method: &'static str, path: &'static str },
}

use Framed::*;
use Outcome::*;

const fn fwd(method: &'static str, path: &'static str, framed: Framed, body: &'static str) -> Outcome {
    Forwarded { method, path, framed, body }
}

/// Each case: a name, the bytes (before the probe) and the outcome, with why.
const CASES: &[(&str, &[u8], Outcome)] = &[
    // ---- Content-Length and Transfer-Encoding together: the classic CL.TE / TE.CL desync.
    (
        "cl then te",
        b"POST / HTTP/1.1\r\nHost: app.test\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        Refused(400),
    ),
    (
        "te then cl",
        b"POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
        Refused(400),
    ),
    // ---- Content-Length: conflicting or malformed values are refused; identical repeats are one
    // length (RFC 9110 section 8.6) and are forwarded as a single header.
    (
        "two differing cl",
        b"POST / HTTP/1.1\r\nHost: app.test\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
        Refused(400),
    ),
    (
        "comma-joined differing cl",
        b"POST / HTTP/1.1\r\nHost: app.test\r\nContent-Length: 5, 6\r\n\r\nhello!",
        Refused(400),
    ),
    (
        "two identical cl",
        b"POST /cl2 HTTP/1.1\r\nHost: app.test\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
        fwd("POST", "/cl2", Length("5"), "hello"),
    ),
    (
        "comma-joined identical cl",
        b"POST /cl3 HTTP/1.1\r\nHost: app.test\r\nContent-Length: 5,5\r\n\r\nhello",
        fwd("POST", "/cl3", Length("5"), "hello"),
    ),
    ("signed cl", b"POST / HTTP/1.1\r\nHost: app.test\r\nContent-Length: +5\r\n\r\nhello", Refused(400)),
    ("negative cl", b"POST / HTTP/1.1\r\nHost: app.test\r\nContent-Length: -1\r\n\r\n", Refused(400)),
    ("hex cl", b"POST / HTTP/1.1\r\nHost: app.test\r\nContent-Length: 0x5\r\n\r\nhello", Refused(400)),
    (
        "overflowing cl",
        b"POST / HTTP/1.1\r\nHost: app.test\r\nContent-Length: 99999999999999999999\r\n\r\n",
        Refused(400),
    ),
    // ---- Obfuscated Transfer-Encoding: only exactly `chunked` (any case, optional whitespace) is
    // a body framing we read; anything else is a coding we do not decode.
    (
        "te chunked then identity",
        b"POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
        Refused(501),
    ),
    ("te xchunked", b"POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n", Refused(501)),
    (
        "two te headers",
        b"POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\
          \r\n",
        Refused(501),
    ),
    (
        "te identity then chunked",
        b"POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\
          \r\n",
        Refused(501),
    ),
    (
        "te tab before value",
        b"POST /tab HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding:\tchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        fwd("POST", "/tab", Chunked, "hello"),
    ),
    (
        "te upper case",
        b"POST /upper HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: CHUNKED\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        fwd("POST", "/upper", Chunked, "hello"),
    ),
    (
        "te trailing space",
        b"POST /trail HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked \r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        fwd("POST", "/trail", Chunked, "hello"),
    ),
    (
        "te space before colon",
        b"POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
        Refused(400),
    ),
    (
        "te folded",
        b"POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n",
        Refused(400),
    ),
    (
        "te on http/1.0",
        b"POST / HTTP/1.0\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        Refused(400),
    ),
    // ---- Chunk sizes: hex digits only, at most 16, no sign or leading whitespace.
    (
        "chunk size not hex",
        b"POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
        RefusedInBody(400),
    ),
    (
        "chunk size overflowing",
        b"POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\nhello\r\n0\r\n\
          \r\n",
        RefusedInBody(400),
    ),
    (
        "chunk size negative",
        b"POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n0\r\n\r\n",
        RefusedInBody(400),
    ),
    (
        "chunk size signed",
        b"POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n\r\n+5\r\nhello\r\n0\r\n\r\n",
        RefusedInBody(400),
    ),
    (
        "chunk size leading spaces",
        b"POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n\r\n  5\r\nhello\r\n0\r\n\r\n",
        RefusedInBody(400),
    ),
    (
        "chunk data too long",
        b"POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n",
        RefusedInBody(400),
    ),
    // ---- Chunk extensions are allowed and dropped; a bare LF ends no chunk line (only CRLF does),
    // so an extension cannot hide a line from one parser and not another.
    (
        "chunk extension",
        b"POST /ext HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\n\r\n",
        fwd("POST", "/ext", Chunked, "hello"),
    ),
    (
        "bare lf in chunk extension",
        b"POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n\r\n5;ext\nhello\r\n0\r\n\r\n",
        RefusedInBody(400),
    ),
    (
        "bare lf after chunk size",
        b"POST / HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n",
        RefusedInBody(400),
    ),
    // ---- Line endings and header syntax. A bare LF ending the request line or a header is
    // tolerated (RFC 9112 section 2.2) because the head is re-written with CRLF when forwarded.
    ("bare lf head", b"GET /lf HTTP/1.1\nHost: app.test\n\n", fwd("GET", "/lf", Bodiless, "")),
    ("obs-fold", b"GET / HTTP/1.1\r\nHost: app.test\r\nX-A: 1\r\n\tfolded\r\n\r\n", Refused(400)),
    ("space before colon", b"GET / HTTP/1.1\r\nHost: app.test\r\nX-A : 1\r\n\r\n", Refused(400)),
    ("space in header name", b"GET / HTTP/1.1\r\nHost: app.test\r\nBad Name: 1\r\n\r\n", Refused(400)),
    ("control byte in header name", b"GET / HTTP/1.1\r\nHost: app.test\r\nNa\x01me: 1\r\n\r\n", Refused(400)),
    ("empty header name", b"GET / HTTP/1.1\r\nHost: app.test\r\n: 1\r\n\r\n", Refused(400)),
    ("nul in header value", b"GET / HTTP/1.1\r\nHost: app.test\r\nX-A: a\x00b\r\n\r\n", Refused(400)),
    ("bare cr in header value", b"GET / HTTP/1.1\r\nHost: app.test\r\nX-A: a\rb\r\n\r\n", Refused(400)),
    ("del in header value", b"GET / HTTP/1.1\r\nHost: app.test\r\nX-A: a\x7fb\r\n\r\n", Refused(400)),
    ("control byte in request line", b"GET /a\x01b HTTP/1.1\r\nHost: app.test\r\n\r\n", Refused(400)),
    ("bad request line", b"GARBAGE\r\n\r\n", Refused(400)),
    // ---- Request targets. Absolute-form routes and forwards by its own authority, which also
    // becomes `Host` (RFC 9112 section 3.2.2), so routing and forwarding agree.
    (
        "absolute-form",
        b"GET http://app.test/abs?q=1 HTTP/1.1\r\nHost: app.test\r\n\r\n",
        fwd("GET", "/abs?q=1", Bodiless, ""),
    ),
    (
        "absolute-form host mismatch",
        b"GET http://app.test/mix HTTP/1.1\r\nHost: evil.test\r\n\r\n",
        fwd("GET", "/mix", Bodiless, ""),
    ),
    ("absolute-form for unknown site", b"GET http://evil.test/ HTTP/1.1\r\nHost: app.test\r\n\r\n", Answered(404)),
    ("connect authority-form", b"CONNECT app.test:443 HTTP/1.1\r\nHost: app.test:443\r\n\r\n", Refused(405)),
    ("options asterisk", b"OPTIONS * HTTP/1.1\r\nHost: app.test\r\n\r\n", Answered(404)),
    // ---- Versions and expectations.
    (
        "http/1.0 closes",
        b"GET /ten HTTP/1.0\r\nHost: app.test\r\n\r\n",
        ForwardedThenClosed { method: "GET", path: "/ten" },
    ),
    (
        "http/1.0 keep-alive",
        b"GET /tenka HTTP/1.0\r\nHost: app.test\r\nConnection: keep-alive\r\n\r\n",
        fwd("GET", "/tenka", Bodiless, ""),
    ),
    ("http/2.0 request line", b"GET / HTTP/2.0\r\nHost: app.test\r\n\r\n", Refused(505)),
    (
        "expect 100-continue",
        b"POST /exp HTTP/1.1\r\nHost: app.test\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello",
        fwd("POST", "/exp", Length("5"), "hello"),
    ),
];

/// A gateway with one site for `HOST` routing everything to `b`; `listener` as for `head`.
fn gateway(b: &Backend, listener: &str) -> Gateway {
    start(&format!(
        "{}upstreams:\n  u: {{targets: {}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}]}}\n",
        head(listener),
        targets(&[b]),
    ))
}

fn assert_framed(name: &str, r: &Recorded, framed: Framed) {
    let (cl, te) = (r.header_all("content-length"), r.header_all("transfer-encoding"));
    match framed {
        Bodiless => assert!(cl.is_empty() && te.is_empty(), "{name}: no body framing expected, got {r:?}"),
        Length(n) => assert!(cl == [n] && te.is_empty(), "{name}: one content-length {n} expected, got {r:?}"),
        Chunked => assert!(cl.is_empty() && te == ["chunked"], "{name}: one chunked coding expected, got {r:?}"),
    }
}

/// Sends one case and the probe behind it on a fresh connection, and checks the outcome.
fn check(gw: &Gateway, b: &Backend, name: &str, bytes: &[u8], outcome: Outcome) {
    b.clear();
    let mut c = RawConn::connect(gw.addr("http"));
    let mut sent = bytes.to_vec();
    sent.extend_from_slice(PROBE.as_bytes());
    c.send(&sent);
    match outcome {
        Refused(want) | RefusedInBody(want) => {
            let (text, closed) = c.read_to_close(READ);
            assert!(text.starts_with(&format!("HTTP/1.1 {want} ")), "{name}: want {want}, got {text:?}");
            assert_eq!(text.matches("HTTP/1.1 ").count(), 1, "{name}: answered past the refusal: {text:?}");
            assert!(closed, "{name}: the connection must close after a refusal");
            let got = b.requests();
            if matches!(outcome, Refused(_)) {
                assert!(got.is_empty(), "{name}: reached the backend: {got:?}");
            } else {
                assert!(got.iter().all(|r| r.aborted), "{name}: a whole request reached the backend: {got:?}");
            }
        }
        Answered(want) => {
            let first = c.read_response(READ).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(first.status, want, "{name}: {first:?}");
            let probe = c.read_response(READ).unwrap_or_else(|e| panic!("{name}: probe: {e}"));
            assert_eq!(probe.status, 200, "{name}: the probe behind must be answered: {probe:?}");
            let paths: Vec<String> = b.requests().iter().map(Recorded::path_and_query).collect();
            assert_eq!(paths, ["/probe"], "{name}: only the probe may be forwarded");
        }
        Forwarded { method, path, framed, body } => {
            let mut first = c.read_response(READ).unwrap_or_else(|e| panic!("{name}: {e}"));
            if first.status == 100 {
                first = c.read_response(READ).unwrap_or_else(|e| panic!("{name}: after 100: {e}"));
            }
            assert_eq!(first.status, 200, "{name}: {first:?}");
            let probe = c.read_response(READ).unwrap_or_else(|e| panic!("{name}: probe: {e}"));
            assert_eq!(probe.status, 200, "{name}: the probe behind must be answered on its own: {probe:?}");
            let got = b.requests();
            assert_eq!(got.len(), 2, "{name}: want the case and the probe, got {got:?}");
            let r = &got[0];
            assert_eq!((r.method.as_str(), r.path_and_query().as_str()), (method, path), "{name}: {r:?}");
            assert_eq!(r.uri, path, "{name}: forwarded in origin-form");
            assert_eq!(r.header_all("host"), [HOST], "{name}: one Host, the routed one: {r:?}");
            assert_eq!(r.header("expect"), None, "{name}: Expect is answered here, not forwarded");
            assert_framed(name, r, framed);
            assert_eq!(r.body, body.as_bytes(), "{name}: body");
            assert!(!r.aborted, "{name}: body aborted");
            assert_eq!(got[1].path_and_query(), "/probe", "{name}: second request is the probe: {got:?}");
        }
        ForwardedThenClosed { method, path } => {
            let first = c.read_response(READ).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(first.status, 200, "{name}: {first:?}");
            let (rest, closed) = c.read_to_close(READ);
            assert!(closed && rest.is_empty(), "{name}: must close without answering the probe: {rest:?}");
            let got = b.requests();
            assert_eq!(got.len(), 1, "{name}: only the case may be forwarded: {got:?}");
            assert_eq!((got[0].method.as_str(), got[0].path_and_query().as_str()), (method, path), "{name}");
        }
    }
}

#[test]
fn smuggling_and_parsing_cases_are_refused_or_forwarded_unambiguously() {
    let b = Backend::start("a");
    let gw = gateway(&b, "");
    // Cases refused in the body go last: the head they had already sent on may be recorded by the
    // backend (as aborted) after the next case has begun, and only those cases allow for that.
    let in_body = |o: &Outcome| matches!(o, RefusedInBody(_));
    let ordered = CASES.iter().filter(|c| !in_body(&c.2)).chain(CASES.iter().filter(|c| in_body(&c.2)));
    for &(name, bytes, outcome) in ordered {
        check(&gw, &b, name, bytes, outcome);
    }
}

#[test]
fn smuggling_oversize_heads_are_431_and_never_forwarded() {
    let b = Backend::start("a");
    let gw = gateway(&b, "max_header_bytes: 2k");
    // No 414: the request line counts towards the one head limit, `max_header_bytes`.
    let long_line = format!("GET /{} HTTP/1.1\r\nHost: {HOST}\r\n\r\n", "a".repeat(4096));
    check(&gw, &b, "oversize request line", long_line.as_bytes(), Refused(431));
    let long_headers = format!("GET / HTTP/1.1\r\nHost: {HOST}\r\n{}\r\n", "X-Pad: aaaaaaaaaaaaaaaa\r\n".repeat(200));
    check(&gw, &b, "oversize headers", long_headers.as_bytes(), Refused(431));
}
