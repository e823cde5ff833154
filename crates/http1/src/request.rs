//! A client's request head, parsed in place: header values are slices of the read buffer. The
//! body framing rules are strict, because a proxy that reads a body differently from the server
//! behind it lets requests be smuggled: Transfer-Encoding together with Content-Length, a coding
//! other than `chunked`, or conflicting lengths are refused, never guessed.

use crate::framing::{Chunk, ConnectionHeader, Framing};
use bytes::BytesMut;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, StatusCode, Uri, Version};
use std::cell::RefCell;
use std::mem::MaybeUninit;

/// Most request headers accepted (as hyper's default).
const MAX_HEADERS: usize = 100;

/// A parsed request head.
#[derive(Debug)]
pub struct Head {
    /// Method, target, version and headers (`Connection` and what it names taken out; `Host` set
    /// from an absolute-form target).
    pub request: Request<()>,
    /// How the body that follows is delimited.
    pub framing: Framing,
    /// Whether the connection may carry another request after this one.
    pub keep_alive: bool,
    /// Whether the client waits for `100 Continue` before sending the body.
    pub expect_continue: bool,
}

thread_local! {
    /// Where each header's name and value sit in the head, while a head is parsed: one list per
    /// worker, so neither a connection (idle ones included) nor a request keeps one of its own.
    static SPANS: RefCell<Vec<(u32, u32, u32, u32)>> = const { RefCell::new(Vec::new()) };
}

/// Parses one client request head from `buf` as the HTTP/1.x listener does, consuming it:
/// `Ok(None)` while more bytes are needed, the status to refuse the request with otherwise.
/// `max_head` bounds the head's bytes (431 beyond). Also the `request_head` fuzz target's entry.
pub fn parse_request_head(buf: &mut BytesMut, max_head: usize) -> Result<Option<Head>, StatusCode> {
    SPANS.with(|spans| parse_with(buf, &mut spans.borrow_mut(), max_head))
}

fn parse_with(
    buf: &mut BytesMut,
    spans: &mut Vec<(u32, u32, u32, u32)>,
    max_head: usize,
) -> Result<Option<Head>, StatusCode> {
    let mut slots = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    let len = match req.parse_with_uninit_headers(buf, &mut slots) {
        Ok(httparse::Status::Complete(len)) if len > max_head => {
            return Err(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
        }
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() > max_head => {
            return Err(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE),
        Err(httparse::Error::Version) => return Err(StatusCode::HTTP_VERSION_NOT_SUPPORTED),
        Err(_) => return Err(StatusCode::BAD_REQUEST),
    };
    let method = Method::from_bytes(req.method.unwrap_or("").as_bytes()).map_err(|_| StatusCode::BAD_REQUEST)?;
    if method == Method::CONNECT {
        return Err(StatusCode::METHOD_NOT_ALLOWED);
    }
    let http10 = req.version == Some(0);
    let base = buf.as_ptr() as usize;
    let path = req.path.unwrap_or("");
    let target = (path.as_ptr() as usize - base, path.len());
    spans.clear();
    for h in req.headers.iter() {
        let name = (h.name.as_ptr() as usize - base) as u32;
        let value = (h.value.as_ptr() as usize - base) as u32;
        spans.push((name, h.name.len() as u32, value, h.value.len() as u32));
    }
    let head = buf.split_to(len).freeze();
    let uri = Uri::from_maybe_shared(head.slice(target.0..target.0 + target.1)).map_err(|_| StatusCode::BAD_REQUEST)?;
    // Room for what the proxy adds (forwarding headers, the request id, a service's headers)
    // without growing.
    let mut headers = crate::header_maps::take(spans.len() + 8);
    let mut connection = ConnectionHeader::default();
    // Which of the headers framing reads are present, noted on the way: most requests have none,
    // and then need no lookup.
    let mut present = Present::default();
    for &(ns, nl, vs, vl) in spans.iter() {
        let (ns, nl, vs, vl) = (ns as usize, nl as usize, vs as usize, vl as usize);
        let name = crate::header_maps::header_name(&head[ns..ns + nl]).map_err(|_| StatusCode::BAD_REQUEST)?;
        let value = HeaderValue::from_maybe_shared(head.slice(vs..vs + vl)).map_err(|_| StatusCode::BAD_REQUEST)?;
        present.coding |= name == header::TRANSFER_ENCODING;
        present.length |= name == header::CONTENT_LENGTH;
        present.expect |= name == header::EXPECT;
        if name == header::CONNECTION {
            connection.take(value, &mut headers);
        } else {
            headers.append(name, value);
        }
    }
    let tokens = connection.finish(&mut headers);
    if let Some(authority) = uri.authority() {
        // Absolute-form: the target's authority is the host (RFC 9112 section 3.2.2); routing
        // reads it, so `Host` is made to say the same and the request is forwarded for one host.
        let host = HeaderValue::from_str(authority.as_str()).map_err(|_| StatusCode::BAD_REQUEST)?;
        headers.insert(header::HOST, host);
    }
    let framing = if present.coding || present.length { framing(&mut headers, http10)? } else { Framing::Empty };
    let keep_alive = tokens.keep_alive(http10);
    let expect_continue = present.expect
        && !http10
        && headers.get(header::EXPECT).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let mut request = Request::new(());
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.version_mut() = if http10 { Version::HTTP_10 } else { Version::HTTP_11 };
    *request.headers_mut() = headers;
    Ok(Some(Head { request, framing, keep_alive, expect_continue }))
}

/// Whether the request line at the start of `buf`, refused for its version, names HTTP
/// (`HTTP/2.0`) rather than another protocol (`GET / SPDY/3`). The parser stops at the version's
/// first wrong byte, so the answer does not depend on how much of the line has arrived.
pub fn names_http(buf: &[u8]) -> bool {
    // The parser skips empty lines before the request line.
    let start = buf.iter().position(|b| !matches!(b, b'\r' | b'\n')).unwrap_or(buf.len());
    let line = buf[start..].split(|&b| b == b'\n').next().unwrap_or_default();
    line.split(|&b| b == b' ').nth(2).is_none_or(|version| version.starts_with(b"HTTP/"))
}

/// Which of the headers looked up after parsing (framing, `Expect`) the head has.
#[derive(Debug, Default)]
struct Present {
    coding: bool,
    length: bool,
    expect: bool,
}

fn framing(headers: &mut HeaderMap, http10: bool) -> Result<Framing, StatusCode> {
    if headers.contains_key(header::TRANSFER_ENCODING) {
        if http10 || headers.contains_key(header::CONTENT_LENGTH) {
            return Err(StatusCode::BAD_REQUEST);
        }
        let mut codings = headers
            .get_all(header::TRANSFER_ENCODING)
            .iter()
            .flat_map(|v| v.as_bytes().split(|&b| b == b','))
            .map(|t| t.trim_ascii())
            .filter(|t| !t.is_empty());
        let only_chunked =
            matches!((codings.next(), codings.next()), (Some(t), None) if t.eq_ignore_ascii_case(b"chunked"));
        if !only_chunked {
            // Chunked must be the last coding, and other codings are not decoded here.
            return Err(StatusCode::NOT_IMPLEMENTED);
        }
        return Ok(Framing::Chunked(Chunk::Size));
    }
    let mut length: Option<u64> = None;
    let mut parts = 0usize;
    for value in headers.get_all(header::CONTENT_LENGTH) {
        for part in value.as_bytes().split(|&b| b == b',') {
            parts += 1;
            let part = part.trim_ascii();
            if part.is_empty() || part.len() > 19 || !part.iter().all(u8::is_ascii_digit) {
                return Err(StatusCode::BAD_REQUEST);
            }
            let n: u64 = std::str::from_utf8(part).ok().and_then(|s| s.parse().ok()).ok_or(StatusCode::BAD_REQUEST)?;
            if length.is_some_and(|l| l != n) {
                return Err(StatusCode::BAD_REQUEST);
            }
            length = Some(n);
        }
    }
    if let (Some(n), true) = (length, parts > 1) {
        // Identical repeats are one length (RFC 9110 section 8.6); forwarded as one header, so the
        // server behind cannot read them another way.
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(n));
    }
    Ok(match length {
        Some(0) | None => Framing::Empty,
        Some(n) => Framing::Length(n),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(text: &str) -> Result<Option<Head>, StatusCode> {
        let mut buf = BytesMut::from(text.as_bytes());
        parse_request_head(&mut buf, 64 * 1024)
    }

    #[test]
    fn simple_get_and_pipelined_rest_stays() {
        let mut buf = BytesMut::from(&b"GET /a?b=1 HTTP/1.1\r\nHost: x\r\nX-A: 1\r\nX-A: 2\r\n\r\nGET /next"[..]);
        let head = parse_request_head(&mut buf, 64 * 1024).expect("valid").expect("complete");
        assert_eq!(head.request.uri(), "/a?b=1");
        assert_eq!(head.request.headers().get_all("x-a").iter().count(), 2);
        assert!(head.keep_alive);
        assert_eq!(head.framing, Framing::Empty);
        assert_eq!(&buf[..], b"GET /next");
    }

    #[test]
    fn partial_heads_wait() {
        assert!(matches!(parse_str("GET / HTTP/1.1\r\nHost: x\r\n"), Ok(None)));
    }

    #[test]
    fn framing_rules() {
        let cl = parse_str("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n").expect("ok").expect("head");
        assert_eq!(cl.framing, Framing::Length(5));
        let te =
            parse_str("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n").expect("ok").expect("head");
        assert_eq!(te.framing, Framing::Chunked(Chunk::Size));
        for bad in [
            "POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 5, 6\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n",
            "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
        ] {
            assert_eq!(parse_str(bad).err(), Some(StatusCode::BAD_REQUEST), "{bad:?}");
        }
        for unsupported in [
            "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: xchunked\r\n\r\n",
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
        ] {
            assert_eq!(parse_str(unsupported).err(), Some(StatusCode::NOT_IMPLEMENTED), "{unsupported:?}");
        }
        for same in [
            "POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n",
        ] {
            let head = parse_str(same).expect("ok").expect("head");
            assert_eq!(head.framing, Framing::Length(5), "{same:?}");
            let lengths: Vec<_> = head.request.headers().get_all(header::CONTENT_LENGTH).iter().collect();
            assert_eq!(lengths, ["5"], "{same:?}: forwarded as one value");
        }
    }

    #[test]
    fn absolute_form_authority_becomes_host() {
        let head = parse_str("GET http://app.test/x?q=1 HTTP/1.1\r\nHost: evil.test\r\nHost: other.test\r\n\r\n")
            .expect("ok")
            .expect("head");
        let hosts: Vec<_> = head.request.headers().get_all(header::HOST).iter().collect();
        assert_eq!(hosts, ["app.test"]);
        assert_eq!(head.request.uri().path_and_query().map(|p| p.as_str()), Some("/x?q=1"));
    }

    #[test]
    fn malformed_heads_are_refused() {
        for bad in ["HELLO\r\n\r\n", "GET / HTTP/1.1\r\nX-Bad : 1\r\n\r\n", "GET / HTTP/1.1\r\nX(Bad): 1\r\n\r\n"] {
            assert_eq!(parse_str(bad).err(), Some(StatusCode::BAD_REQUEST), "{bad:?}");
        }
        assert_eq!(parse_str("GET / HTTP/2.0\r\n\r\n").err(), Some(StatusCode::HTTP_VERSION_NOT_SUPPORTED));
        assert_eq!(parse_str("INVALID CONNECTION PREFACE\r\n\r\n").err(), Some(StatusCode::HTTP_VERSION_NOT_SUPPORTED));
        assert_eq!(parse_str("CONNECT a:443 HTTP/1.1\r\n\r\n").err(), Some(StatusCode::METHOD_NOT_ALLOWED));
    }

    #[test]
    fn versions_that_name_http_or_another_protocol() {
        for http in ["GET / HTTP/2.0\r\n", "\r\nGET / HTTP/1.2", "PRI * HTTP/2.0\r\n\r\nXX", "GET / HTTP/3"] {
            assert!(names_http(http.as_bytes()), "{http:?}");
        }
        for other in ["INVALID CONNECTION PREFACE\r\n\r\n", "GET / SPDY/3\r\n", "GET / P", "GET / HTTX/1.1\r\n"] {
            assert!(!names_http(other.as_bytes()), "{other:?}");
        }
    }

    #[test]
    fn heads_over_the_limit_are_431() {
        let mut buf = BytesMut::from(format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(200)).as_bytes());
        assert_eq!(parse_request_head(&mut buf, 100).err(), Some(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE));
        let mut partial = BytesMut::from(format!("GET / HTTP/1.1\r\nX: {}", "a".repeat(200)).as_bytes());
        assert_eq!(parse_request_head(&mut partial, 100).err(), Some(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE));
    }

    #[test]
    fn keep_alive_and_expect() {
        let h10 = parse_str("GET / HTTP/1.0\r\n\r\n").expect("ok").expect("h");
        assert!(!h10.keep_alive);
        let h10k = parse_str("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").expect("ok").expect("h");
        assert!(h10k.keep_alive);
        let close = parse_str("GET / HTTP/1.1\r\nConnection: close\r\n\r\n").expect("ok").expect("h");
        assert!(!close.keep_alive);
        let exp =
            parse_str("POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n").expect("ok").expect("h");
        assert!(exp.expect_continue);
    }
}
