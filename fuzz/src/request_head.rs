//! Target `request_head`: the bytes a client sends, read by the HTTP/1.x listener. A request head
//! must parse the same however much of it has arrived (more needed, then one answer), consume
//! exactly its own bytes, and what it accepts must be safe to forward: no header carries a CR,
//! LF or NUL; the body's framing agrees with the headers (never both `Transfer-Encoding` and
//! `Content-Length`, a coding other than `chunked` or two different lengths; those are the
//! request-smuggling vectors); `CONNECT` is never accepted; an absolute-form target's authority
//! is the `Host`.
//!
//! The input: one byte giving the step between the prefixes tried (1 to 256), one choosing the
//! head size limit (64 << (b % 8) bytes, 64 to 8,192), then the bytes as the client sent them.

use bytes::BytesMut;
use gatehouse_http1::framing::Framing;
use gatehouse_http1::{parse_request_head, RequestHead};
use http::{header, Method, Version};

/// What a parse came to, comparable across prefixes.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    More,
    /// Refused with a status. Which status may differ between a prefix and the whole (a head
    /// cut at the size limit is 431 where the whole has a bad byte further on), so prefixes
    /// compare refusals by kind only.
    Refused(u16),
    Head {
        method: String,
        target: String,
        version: Version,
        headers: Vec<(String, Vec<u8>)>,
        framing: Framing,
        keep_alive: bool,
        expect_continue: bool,
        consumed: usize,
    },
}

fn parse(bytes: &[u8], max_head: usize) -> (Answer, Option<RequestHead>) {
    let mut buf = BytesMut::from(bytes);
    match parse_request_head(&mut buf, max_head) {
        Ok(None) => {
            assert_eq!(buf.len(), bytes.len(), "bytes consumed while more were needed");
            (Answer::More, None)
        }
        Err(status) => {
            assert!(status.is_client_error() || status.is_server_error(), "refused with {status}");
            (Answer::Refused(status.as_u16()), None)
        }
        Ok(Some(head)) => {
            let consumed = bytes.len() - buf.len();
            assert!(consumed > 0, "a head of no bytes");
            assert_eq!(&bytes[consumed..], &buf[..], "what is left is not the bytes after the head");
            let r = &head.request;
            let answer = Answer::Head {
                method: r.method().to_string(),
                target: r.uri().to_string(),
                version: r.version(),
                headers: r.headers().iter().map(|(n, v)| (n.as_str().to_string(), v.as_bytes().to_vec())).collect(),
                framing: head.framing,
                keep_alive: head.keep_alive,
                expect_continue: head.expect_continue,
                consumed,
            };
            (answer, Some(head))
        }
    }
}

/// Parses the input whole and at growing prefixes, and checks what would be forwarded.
pub fn check(data: &[u8]) {
    let [step, limit, bytes @ ..] = data else {
        return;
    };
    let max_head = 64usize << (limit % 8);
    let (whole, head) = parse(bytes, max_head);
    let mut settled = false;
    for end in (0..bytes.len()).step_by(usize::from(*step) + 1) {
        let (answer, _) = parse(&bytes[..end], max_head);
        match (&answer, &whole) {
            (Answer::More, _) => assert!(!settled, "a longer prefix needed more after a shorter one was settled"),
            (Answer::Refused(_), Answer::Refused(_)) => settled = true,
            (Answer::Head { .. }, Answer::Head { .. }) => {
                assert_eq!(answer, whole, "a prefix parsed otherwise than the whole");
                settled = true;
            }
            (a, w) => panic!("a prefix answered {a:?}, the whole {w:?}"),
        }
    }
    if let Some(head) = head {
        check_accepted(&head);
    }
}

/// What an accepted head must hold before it is forwarded.
fn check_accepted(head: &RequestHead) {
    let r = &head.request;
    assert_ne!(r.method(), Method::CONNECT, "CONNECT accepted");
    assert!(matches!(r.version(), Version::HTTP_10 | Version::HTTP_11), "version {:?}", r.version());
    let target = r.uri().to_string();
    assert!(!target.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control()), "target {target:?}");
    let h = r.headers();
    for (name, value) in h {
        assert!(
            !value.as_bytes().iter().any(|&b| b == b'\r' || b == b'\n' || b == 0),
            "header {name} carries CR, LF or NUL: {value:?}"
        );
    }
    let coding = h.contains_key(header::TRANSFER_ENCODING);
    let lengths: Vec<_> = h.get_all(header::CONTENT_LENGTH).iter().collect();
    assert!(!coding || lengths.is_empty(), "Transfer-Encoding beside Content-Length");
    match head.framing {
        Framing::Chunked(_) => {
            assert!(coding, "chunked framing without Transfer-Encoding");
            assert_eq!(r.version(), Version::HTTP_11, "chunked framing on HTTP/1.0");
            let tokens: Vec<Vec<u8>> = h
                .get_all(header::TRANSFER_ENCODING)
                .iter()
                .flat_map(|v| v.as_bytes().split(|&b| b == b',').map(|t| t.trim_ascii().to_ascii_lowercase()))
                .filter(|t| !t.is_empty())
                .collect();
            assert_eq!(tokens, [b"chunked".to_vec()], "a coding other than chunked accepted");
        }
        Framing::Length(n) => {
            assert!(!coding);
            assert_eq!(lengths.len(), 1, "not exactly one Content-Length forwarded");
            assert_eq!(decimal(lengths[0].as_bytes()), Some(n), "Content-Length and framing differ");
        }
        Framing::Empty => {
            assert!(!coding, "Transfer-Encoding with no body framing");
            assert!(lengths.len() <= 1, "several Content-Length headers forwarded");
            if let Some(v) = lengths.first() {
                assert_eq!(decimal(v.as_bytes()), Some(0), "a body length other than 0 read as no body");
            }
        }
        ref other => panic!("framing {other:?} for a request"),
    }
    if let Some(authority) = r.uri().authority() {
        assert_eq!(
            h.get(header::HOST).map(|v| v.as_bytes()),
            Some(authority.as_str().as_bytes()),
            "an absolute-form target's authority is not the Host"
        );
    }
    if head.expect_continue {
        assert_eq!(r.version(), Version::HTTP_11, "100-continue on HTTP/1.0");
    }
    let close = h
        .get_all(header::CONNECTION)
        .iter()
        .any(|v| v.as_bytes().split(|&b| b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close")));
    assert!(!(close && head.keep_alive), "kept alive although the client said close");
}

/// A forwarded `Content-Length` value: digits only (leading zeros allowed, RFC 9110 section 8.6).
fn decimal(v: &[u8]) -> Option<u64> {
    let v = v.trim_ascii();
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}
