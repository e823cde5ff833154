//! Target `response_head`: the bytes an endpoint answers with, read by the upstream client. A
//! response head must parse the same however much of it has arrived (nothing before it is
//! complete, then the same answer), and what the proxy passes on must be safe to write to the
//! client: lines it forwards as they came each end in CRLF and carry no hop-by-hop header, and a
//! chunked body's head forwards no `Content-Length` (the pair is a request-smuggling vector).
//!
//! The input: one byte of flags (bit 0: the request was a HEAD), one giving the step between the
//! prefixes tried (1 to 256), then the bytes as the endpoint sent them.

use bytes::BytesMut;
use gatehouse_http1::framing::Framing;
use gatehouse_http1::{parse_response_head, ResponseHead as ParsedHead};

/// Headers that belong to one hop and are never passed on in the forwarded lines.
/// `Trailer` is not among them: it announces trailer fields, end to end (RFC 9110 §6.6.2).
const HOP_BY_HOP: [&str; 7] =
    ["connection", "keep-alive", "proxy-connection", "te", "transfer-encoding", "upgrade", "expect"];

/// What a parse came to, comparable across prefixes.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    More,
    Refused,
    Head {
        status: u16,
        framing: Framing,
        reusable: bool,
        forwarded: Vec<u8>,
        map: Vec<(String, Vec<u8>)>,
        rest: Vec<u8>,
    },
}

fn parse(bytes: &[u8], head_request: bool) -> (Answer, Option<ParsedHead>) {
    let mut buf = BytesMut::from(bytes);
    match parse_response_head(&mut buf, head_request) {
        Ok(None) => (Answer::More, None),
        Err(_) => (Answer::Refused, None),
        Ok(Some(head)) => {
            let mut forwarded = Vec::new();
            if let Some(raw) = &head.raw {
                raw.write(&mut forwarded);
            }
            let map =
                head.response.headers().iter().map(|(n, v)| (n.as_str().to_string(), v.as_bytes().to_vec())).collect();
            let answer = Answer::Head {
                status: head.response.status().as_u16(),
                framing: head.framing,
                reusable: head.reusable,
                forwarded,
                map,
                rest: buf.to_vec(),
            };
            (answer, Some(head))
        }
    }
}

/// Parses the input whole and at growing prefixes, and checks what would be forwarded.
pub fn check(data: &[u8]) {
    let [flags, step, bytes @ ..] = data else {
        return;
    };
    let head_request = flags & 1 != 0;
    let (whole, head) = parse(bytes, head_request);
    // Prefixes: more is needed until the head is complete; from then on, the whole's answer
    // for the head (the bytes after it differ by prefix, so `rest` is left out).
    let mut settled = false;
    for end in (0..bytes.len()).step_by(usize::from(*step) + 1) {
        let (answer, _) = parse(&bytes[..end], head_request);
        match (&answer, &whole) {
            (Answer::More, _) => assert!(!settled, "a longer prefix needed more after a shorter one was settled"),
            (Answer::Refused, Answer::Refused) => settled = true,
            (
                Answer::Head { status, framing, reusable, forwarded, map, .. },
                Answer::Head { status: s, framing: f, reusable: r, forwarded: fw, map: m, .. },
            ) => {
                assert_eq!(
                    (status, framing, reusable, forwarded, map),
                    (s, f, r, fw, m),
                    "a prefix parsed otherwise than the whole"
                );
                settled = true;
            }
            (a, w) => panic!("a prefix answered {a:?}, the whole {w:?}"),
        }
    }
    let Some(head) = head else { return };
    let chunked = matches!(head.framing, Framing::Chunked(_));
    if let Answer::Head { forwarded, .. } = &whole {
        assert!(forwarded.is_empty() || forwarded.ends_with(b"\r\n"), "forwarded lines end without CRLF");
        for line in forwarded.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            assert!(line.ends_with(b"\r"), "a forwarded line ends in a bare LF: {line:?}");
            let name = line.split(|&b| b == b':').next().unwrap_or_default().to_ascii_lowercase();
            let name = String::from_utf8_lossy(&name);
            assert!(!HOP_BY_HOP.contains(&name.as_ref()), "hop-by-hop `{name}` forwarded as it came");
            assert!(!(chunked && name == "content-length"), "Content-Length forwarded beside chunked coding");
        }
    }
    if chunked {
        let headers = head.response.headers();
        assert!(!headers.contains_key("content-length"), "Content-Length kept in the map beside chunked coding");
        assert!(!headers.contains_key("transfer-encoding"), "Transfer-Encoding kept in the map");
    }
}
