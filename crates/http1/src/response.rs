//! The endpoint's response head, parsed in place: the usual head keeps its header lines as they
//! are, for the client side to write unchanged ([`RawHead`]); the body framing follows RFC 9112
//! §6.3 strictly, since a proxy that reads a body differently from its client lets responses be
//! smuggled.

use crate::framing::{Chunk, ConnectionTokens, Framing};
use crate::raw_head::{role, RawHead, Role, MAX_LINES};
use bytes::BytesMut;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Response, StatusCode, Version};

/// Most response headers accepted.
const MAX_HEADERS: usize = 128;

/// A response head read from an endpoint.
#[derive(Debug)]
pub struct Head {
    /// Status and, when the head was parsed into a map, its headers (hop-by-hop ones left out).
    pub response: Response<()>,
    /// The header lines to pass on as they are; `None` when they are in the response's map.
    pub raw: Option<RawHead>,
    /// How the body is delimited.
    pub framing: Framing,
    /// Whether the connection may serve another request once the body is read.
    pub reusable: bool,
}

/// Where a header's name and value are in the head: name start, name length, value start, value
/// length.
pub type Span = (u32, u32, u32, u32);

/// Why a response head was refused.
#[derive(Debug)]
#[non_exhaustive]
pub enum HeadError {
    /// Not an HTTP/1.x response head.
    Syntax(httparse::Error),
    /// The status code is outside 100-999.
    Status,
    /// A header name that is not a token.
    HeaderName,
    /// A header value with a forbidden byte.
    HeaderValue,
    /// A `Content-Length` that is not a number.
    ContentLength,
    /// Two `Content-Length` headers that disagree.
    ConflictingContentLength,
}

impl std::fmt::Display for HeadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeadError::Syntax(e) => write!(f, "invalid response head: {e}"),
            HeadError::Status => f.write_str("invalid status"),
            HeadError::HeaderName => f.write_str("invalid header name"),
            HeadError::HeaderValue => f.write_str("invalid header value"),
            HeadError::ContentLength => f.write_str("invalid Content-Length"),
            HeadError::ConflictingContentLength => f.write_str("conflicting Content-Length"),
        }
    }
}

impl std::error::Error for HeadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HeadError::Syntax(e) => Some(e),
            _ => None,
        }
    }
}

/// Parses one complete head from the buffer: the response, its body framing, and whether the
/// connection may be reused afterwards. The usual head keeps its lines unparsed, for the
/// client side to write as they are ([`RawHead`]); one with more than [`MAX_LINES`] lines,
/// a `Connection` header naming other headers, a protocol switch or bare-LF line ends is
/// parsed into the response's map instead.
pub fn parse_head(rbuf: &mut BytesMut, spans: &mut Vec<Span>, head_request: bool) -> Result<Option<Head>, HeadError> {
    // Uninitialised slots: httparse writes only the ones it fills, so nothing is zeroed per head.
    let mut slots = [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut parsed = httparse::Response::new(&mut []);
    let config = httparse::ParserConfig::default();
    let len = match config.parse_response_with_uninit_headers(&mut parsed, &rbuf[..], &mut slots) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(HeadError::Syntax(e)),
    };
    let code = parsed.code.unwrap_or(0);
    let status = StatusCode::from_u16(code).map_err(|_| HeadError::Status)?;
    let http10 = parsed.version == Some(0);
    // Offsets of names and values in the buffer, so the head can be frozen and sliced.
    let base = rbuf.as_ptr() as usize;
    spans.clear();
    let mut said = Said::default();
    for (i, h) in parsed.headers.iter().enumerate() {
        let name = (h.name.as_ptr() as usize - base) as u32;
        let value = (h.value.as_ptr() as usize - base) as u32;
        spans.push((name, h.name.len() as u32, value, h.value.len() as u32));
        said.add(i, h.name.as_bytes(), h.value);
    }
    let early = head_request
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    let (framing, mut reusable) = framing(early, &said)?;
    reusable &= said.connection.keep_alive(http10);
    // With chunked coding, a length beside it is dropped (a smuggling vector).
    let drop_lengths = said.coded && !early;
    let mut resp = Response::new(());
    *resp.status_mut() = status;
    *resp.version_mut() = Version::HTTP_11;
    let raw = if spans.len() <= MAX_LINES && !said.connection.other && status != StatusCode::SWITCHING_PROTOCOLS {
        let skip = said.hop | if drop_lengths { said.lengths } else { 0 };
        squeeze(rbuf, spans, len, skip)
    } else {
        None
    };
    let raw = match raw {
        Some(lines) => {
            let head = rbuf.split_to(len).freeze();
            let length = said.length.is_some() && !drop_lengths;
            // Room for what the proxy adds (the echoed request id, rewrites, quota headers).
            *resp.headers_mut() = crate::header_maps::take(6);
            Some(RawHead::new(head.slice(lines), said.names, said.date, length))
        }
        None => {
            *resp.headers_mut() = take_map(rbuf, spans, len, drop_lengths)?;
            None
        }
    };
    Ok(Some(Head { response: resp, raw, framing, reusable }))
}

/// Moves the header lines of the head (`len` bytes) to be forwarded together, leaving out the
/// lines in `skip`; their range in the buffer, or `None` when a line to forward does not end in
/// CRLF (the head is then parsed into a map, whose encoding ends every line in CRLF).
fn squeeze(rbuf: &mut BytesMut, spans: &[Span], len: usize, skip: u64) -> Option<std::ops::Range<usize>> {
    let buf = &mut rbuf[..len];
    let Some(first) = spans.first().map(|s| s.0 as usize) else {
        return Some(0..0);
    };
    // The blank line that ends the head: CRLF, or a bare LF.
    let blank = if buf.ends_with(b"\r\n") { 2 } else { 1 };
    let line = |i: usize| spans[i].0 as usize..spans.get(i + 1).map_or(len - blank, |next| next.0 as usize);
    let kept = (0..spans.len()).filter(|&i| skip & (1 << i) == 0);
    // Every line is checked before any moves: the map parse that follows a `None` reads the
    // head where it was.
    if !kept.clone().all(|i| buf[line(i)].ends_with(b"\r\n")) {
        return None;
    }
    let mut to = first;
    for i in kept {
        let range = line(i);
        let n = range.len();
        if to != range.start {
            buf.copy_within(range, to);
        }
        to += n;
    }
    Some(first..to)
}

/// Takes the head (`len` bytes) off the buffer as a header map; with `drop_lengths`, without
/// `Content-Length` and `Transfer-Encoding`.
fn take_map(rbuf: &mut BytesMut, spans: &[Span], len: usize, drop_lengths: bool) -> Result<HeaderMap, HeadError> {
    let head = rbuf.split_to(len).freeze();
    // Room for what the proxy adds (the echoed request id, rewrites, quota headers).
    let mut headers = crate::header_maps::take(spans.len() + 5);
    let mut connection = crate::framing::ConnectionHeader::default();
    for &(ns, nl, vs, vl) in spans {
        let (ns, nl, vs, vl) = (ns as usize, nl as usize, vs as usize, vl as usize);
        let name = crate::header_maps::header_name(&head[ns..ns + nl]).map_err(|_| HeadError::HeaderName)?;
        let value = HeaderValue::from_maybe_shared(head.slice(vs..vs + vl)).map_err(|_| HeadError::HeaderValue)?;
        if name == header::CONNECTION {
            connection.take(value, &mut headers);
        } else {
            headers.append(name, value);
        }
    }
    connection.finish(&mut headers);
    if drop_lengths {
        headers.remove(header::CONTENT_LENGTH);
        headers.remove(header::TRANSFER_ENCODING);
    }
    Ok(headers)
}

/// Parses one complete response head off the front of `buf` as the upstream client does, for the
/// fuzz target and tests: `Ok(None)` while more bytes are needed, `Err` for a head the proxy
/// refuses. Interim (1xx) heads are returned like any other (the client reads past them).
pub fn parse_response_head(buf: &mut BytesMut, head_request: bool) -> Result<Option<Head>, HeadError> {
    parse_head(buf, &mut Vec::new(), head_request)
}

/// What a response's headers say to the proxy, gathered in the one pass over them.
#[derive(Debug, Default)]
struct Said {
    connection: ConnectionTokens,
    /// Hop-by-hop lines (never forwarded), by index.
    hop: u64,
    /// `Content-Length` lines, by index.
    lengths: u64,
    /// The first `Content-Length`: `Some(None)` when it is not a number.
    length: Option<Option<u64>>,
    /// A later `Content-Length` says something else.
    conflicting: bool,
    /// There is a `Transfer-Encoding`.
    coded: bool,
    /// The last coding named is `chunked`.
    chunked_last: bool,
    /// There is a `Date`.
    date: bool,
    /// The names of the lines that may be forwarded, as [`crate::raw_head::name_bit`] files them.
    names: u64,
}

impl Said {
    fn add(&mut self, i: usize, name: &[u8], value: &[u8]) {
        let bit = if i < MAX_LINES { 1u64 << i } else { 0 };
        // Only the names of lines that may be forwarded: hop-by-hop lines never are, and their
        // bits would only make edits read the lines for nothing.
        match role(name) {
            Role::EndToEnd => self.names |= crate::raw_head::name_bit(name),
            Role::Date => {
                self.date = true;
                self.names |= crate::raw_head::name_bit(name);
            }
            Role::Connection => {
                self.connection.scan(value);
                self.hop |= bit;
            }
            Role::HopByHop => self.hop |= bit,
            Role::TransferEncoding => {
                self.coded = true;
                self.hop |= bit;
                if let Some(last) = value.split(|&b| b == b',').map(<[u8]>::trim_ascii).rfind(|t| !t.is_empty()) {
                    self.chunked_last = last.eq_ignore_ascii_case(b"chunked");
                }
            }
            Role::ContentLength => {
                self.names |= crate::raw_head::name_bit(name);
                self.lengths |= bit;
                let n = decimal(value);
                match self.length {
                    None => self.length = Some(n),
                    Some(first) => self.conflicting |= n.is_none() || n != first,
                }
            }
        }
    }
}

/// A `Content-Length` value: digits only.
fn decimal(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    value.iter().try_fold(0u64, |n, &b| {
        if b.is_ascii_digit() {
            n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}

/// Body framing per RFC 9112 §6.3, and whether the connection may be reused after it. `early`:
/// a response that has no body whatever its headers say.
fn framing(early: bool, said: &Said) -> Result<(Framing, bool), HeadError> {
    if early {
        return Ok((Framing::Empty, true));
    }
    if said.coded {
        // With a length as well, the connection is not reused after such a message.
        let both = said.length.is_some();
        return Ok(if said.chunked_last { (Framing::Chunked(Chunk::Size), !both) } else { (Framing::Close, false) });
    }
    match said.length {
        None => Ok((Framing::Close, false)),
        Some(None) => Err(HeadError::ContentLength),
        Some(Some(_)) if said.conflicting => Err(HeadError::ConflictingContentLength),
        Some(Some(n)) => Ok((Framing::Length(n), true)),
    }
}
