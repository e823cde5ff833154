//! Forward stage, HTTP/1.1 to the endpoint, on the request's own task: the request head is encoded
//! into a buffer the connection reuses, the response head is parsed in place and its header values
//! are slices of the read buffer (no copy), and the response body is read from the socket as the
//! client's side consumes it. No connection task, no channel between the two sides.

use crate::body::RequestBody;
use crate::framing::ConnectionTokens;
pub(crate) use crate::framing::{Chunk, Framing};
use crate::raw_head::{role, RawHead, Role, MAX_LINES};
use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderValue};
use http::{Request, Response, StatusCode, Version};
use http_body::Body;
use std::io::{self, Write as _};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Largest response head accepted from an endpoint.
const MAX_HEAD: usize = 64 * 1024;
/// Most response headers accepted.
const MAX_HEADERS: usize = 128;
use crate::framing::READ_CHUNK;

/// An HTTP/1.1 connection to an endpoint.
#[derive(Debug)]
pub(crate) struct H1Conn {
    pub(crate) io: crate::pool::TimedIo,
    pub(crate) rbuf: BytesMut,
    wbuf: Vec<u8>,
    /// Offsets of header names and values in the head being parsed; kept to reuse its allocation.
    spans: Vec<Span>,
    head_deadline: crate::util::LazyDeadline,
}

/// Where a header's name and value are in the head: name start, name length, value start, value
/// length.
type Span = (u32, u32, u32, u32);

/// A response head read from the endpoint (exported as `ParsedHead`, for [`parse_response_head`]).
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

/// How the exchange failed.
#[derive(Debug)]
pub(crate) enum ExchangeError {
    /// Nothing of the request reached the socket: it may be sent elsewhere as it is.
    NotSent(io::Error),
    /// The client's body went over the route's limit.
    BodyTooLarge,
    /// The client's body failed (client went away).
    ClientBody(String),
    /// The client stopped sending its body.
    ClientTimeout,
    /// The endpoint broke the exchange after the request (or part of it) was written.
    Upstream(String),
    /// No response head within the read timeout.
    Timeout,
}

impl H1Conn {
    pub(crate) fn new(io: crate::pool::TimedIo) -> Self {
        H1Conn {
            io,
            rbuf: BytesMut::with_capacity(READ_CHUNK),
            wbuf: Vec::with_capacity(1024),
            spans: Vec::new(),
            head_deadline: Default::default(),
        }
    }

    /// Whether an idle connection can take a request: the endpoint has not closed it and sent
    /// nothing unasked. Uses the readiness the event loop already knows; no system call unless
    /// the socket looks readable.
    pub(crate) fn idle_usable(&mut self) -> bool {
        if !self.rbuf.is_empty() {
            return false;
        }
        let mut cx = Context::from_waker(Waker::noop());
        match self.io.inner.poll_read_ready(&mut cx) {
            Poll::Pending => true,
            Poll::Ready(Err(_)) => false,
            Poll::Ready(Ok(())) => {
                let mut probe = [0u8; 1];
                matches!(self.io.inner.try_read(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
            }
        }
    }

    fn encode_head(&mut self, req: &Request<RequestBody>, default_host: &str, chunked: bool) {
        let w = &mut self.wbuf;
        w.clear();
        let target = req.uri().path_and_query().map_or("/", |p| p.as_str());
        w.extend_from_slice(req.method().as_str().as_bytes());
        w.push(b' ');
        w.extend_from_slice(target.as_bytes());
        w.extend_from_slice(b" HTTP/1.1\r\n");
        let mut host = false;
        for (name, value) in req.headers() {
            host |= name == header::HOST;
            w.extend_from_slice(name.as_str().as_bytes());
            w.extend_from_slice(b": ");
            w.extend_from_slice(value.as_bytes());
            w.extend_from_slice(b"\r\n");
        }
        if !host {
            let _ = write!(w, "host: {default_host}\r\n");
        }
        if chunked {
            w.extend_from_slice(b"transfer-encoding: chunked\r\n");
        } else if matches!(*req.method(), http::Method::POST | http::Method::PUT | http::Method::PATCH)
            && req.body().is_empty()
            && !req.headers().contains_key(header::CONTENT_LENGTH)
        {
            w.extend_from_slice(b"content-length: 0\r\n");
        }
        w.extend_from_slice(b"\r\n");
    }

    /// Writes the request; the body is streamed as the client sends it.
    pub(crate) async fn write_request(
        &mut self,
        req: &mut Request<RequestBody>,
        default_host: &str,
    ) -> Result<(), ExchangeError> {
        let has_body = !req.body().is_empty();
        let chunked = has_body && !req.headers().contains_key(header::CONTENT_LENGTH);
        self.encode_head(req, default_host, chunked);
        // The head goes out with one write in the common case; an error before any byte left
        // means the endpoint never saw the request.
        let mut written = 0;
        while written < self.wbuf.len() {
            match self.io.write(&self.wbuf[written..]).await {
                Ok(0) => return Err(not_sent_or_broken(written, io::ErrorKind::WriteZero.into())),
                Ok(n) => written += n,
                Err(e) => return Err(not_sent_or_broken(written, e)),
            }
        }
        if !has_body {
            return Ok(());
        }
        let body = req.body_mut();
        loop {
            let frame = std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx)).await;
            let data = match frame {
                None => break,
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => data,
                    Err(_) => continue, // request trailers are not forwarded
                },
                Some(Err(e)) if e.is::<crate::BodyTooLarge>() => return Err(ExchangeError::BodyTooLarge),
                Some(Err(e)) if e.is::<crate::BodyTimeout>() => return Err(ExchangeError::ClientTimeout),
                Some(Err(e)) => return Err(ExchangeError::ClientBody(e.to_string())),
            };
            if data.is_empty() {
                continue;
            }
            let io_result = if chunked {
                let mut size = Vec::with_capacity(12);
                let _ = write!(size, "{:x}\r\n", data.len());
                match self.io.write_all(&size).await {
                    Ok(()) => match self.io.write_all(&data).await {
                        Ok(()) => self.io.write_all(b"\r\n").await,
                        Err(e) => Err(e),
                    },
                    Err(e) => Err(e),
                }
            } else {
                self.io.write_all(&data).await
            };
            io_result.map_err(|e| ExchangeError::Upstream(format!("writing request body: {e}")))?;
        }
        if chunked {
            self.io
                .write_all(b"0\r\n\r\n")
                .await
                .map_err(|e| ExchangeError::Upstream(format!("writing request body: {e}")))?;
        }
        Ok(())
    }

    /// Reads the response head, skipping interim (1xx) responses other than 101, within
    /// `read_timeout` of the call.
    pub(crate) async fn read_head(
        &mut self,
        head_request: bool,
        read_timeout: std::time::Duration,
    ) -> Result<Head, ExchangeError> {
        let deadline = crate::util::now_ms() + read_timeout.as_millis() as u64;
        loop {
            if let Some(head) = self.parse_head(head_request)? {
                let status = head.response.status();
                if status.is_informational() && status != StatusCode::SWITCHING_PROTOCOLS {
                    continue;
                }
                return Ok(head);
            }
            if self.rbuf.len() >= MAX_HEAD {
                return Err(ExchangeError::Upstream("response head too large".into()));
            }
            let read = std::future::poll_fn(|cx| match self.poll_fill(cx) {
                Poll::Pending if self.head_deadline.expired(cx, deadline) => Poll::Ready(Err(None)),
                Poll::Pending => Poll::Pending,
                Poll::Ready(r) => Poll::Ready(r.map_err(Some)),
            })
            .await;
            match read {
                Ok(0) => return Err(ExchangeError::Upstream("connection closed before the response head".into())),
                Ok(_) => {}
                Err(None) => return Err(ExchangeError::Timeout),
                Err(Some(e)) => return Err(ExchangeError::Upstream(format!("reading response head: {e}"))),
            }
        }
    }

    /// Parses one complete head from the buffer ([`parse_head`]).
    fn parse_head(&mut self, head_request: bool) -> Result<Option<Head>, ExchangeError> {
        parse_head(&mut self.rbuf, &mut self.spans, head_request)
    }

    /// Reads more bytes into the buffer; `Ok(0)` at end of stream.
    pub(crate) fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        crate::framing::poll_fill(&self.io.inner, &mut self.rbuf, cx)
    }

    /// The next piece of body per `framing` from the buffer, or `None` when more bytes are needed.
    pub(crate) fn decode(&mut self, framing: &mut Framing) -> Result<Option<Bytes>, String> {
        crate::framing::decode_body(&mut self.rbuf, framing)
    }

    /// The raw stream and any bytes already read past the head, for a protocol switch.
    pub(crate) fn into_upgraded(self) -> (TcpStream, Bytes) {
        (self.io.inner, self.rbuf.freeze())
    }
}

fn not_sent_or_broken(written: usize, e: io::Error) -> ExchangeError {
    if written == 0 {
        ExchangeError::NotSent(e)
    } else {
        ExchangeError::Upstream(format!("writing request: {e}"))
    }
}

/// Parses one complete head from the buffer: the response, its body framing, and whether the
/// connection may be reused afterwards. The usual head keeps its lines unparsed, for the
/// client side to write as they are ([`RawHead`]); one with more than [`MAX_LINES`] lines,
/// a `Connection` header naming other headers, a protocol switch or bare-LF line ends is
/// parsed into the response's map instead.
fn parse_head(rbuf: &mut BytesMut, spans: &mut Vec<Span>, head_request: bool) -> Result<Option<Head>, ExchangeError> {
    // Uninitialised slots: httparse writes only the ones it fills, so nothing is zeroed per head.
    let mut slots = [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut parsed = httparse::Response::new(&mut []);
    let config = httparse::ParserConfig::default();
    let len = match config.parse_response_with_uninit_headers(&mut parsed, &rbuf[..], &mut slots) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(ExchangeError::Upstream(format!("invalid response head: {e}"))),
    };
    let code = parsed.code.unwrap_or(0);
    let status = StatusCode::from_u16(code).map_err(|_| ExchangeError::Upstream("invalid status".into()))?;
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
fn take_map(rbuf: &mut BytesMut, spans: &[Span], len: usize, drop_lengths: bool) -> Result<HeaderMap, ExchangeError> {
    let head = rbuf.split_to(len).freeze();
    // Room for what the proxy adds (the echoed request id, rewrites, quota headers).
    let mut headers = crate::header_maps::take(spans.len() + 5);
    let mut connection = crate::framing::ConnectionHeader::default();
    for &(ns, nl, vs, vl) in spans {
        let (ns, nl, vs, vl) = (ns as usize, nl as usize, vs as usize, vl as usize);
        let name = crate::header_maps::header_name(&head[ns..ns + nl])
            .map_err(|_| ExchangeError::Upstream("invalid header name".into()))?;
        let value = HeaderValue::from_maybe_shared(head.slice(vs..vs + vl))
            .map_err(|_| ExchangeError::Upstream("invalid header value".into()))?;
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
pub fn parse_response_head(buf: &mut BytesMut, head_request: bool) -> Result<Option<Head>, String> {
    match parse_head(buf, &mut Vec::new(), head_request) {
        Ok(head) => Ok(head),
        Err(ExchangeError::Upstream(e)) => Err(e),
        Err(e) => Err(format!("{e:?}")),
    }
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
    /// The names present, as [`crate::raw_head::name_bit`] files them.
    names: u64,
}

impl Said {
    fn add(&mut self, i: usize, name: &[u8], value: &[u8]) {
        let bit = if i < MAX_LINES { 1u64 << i } else { 0 };
        self.names |= crate::raw_head::name_bit(name);
        match role(name) {
            Role::EndToEnd => {}
            Role::Date => self.date = true,
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
fn framing(early: bool, said: &Said) -> Result<(Framing, bool), ExchangeError> {
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
        Some(None) => Err(ExchangeError::Upstream("invalid Content-Length".into())),
        Some(Some(_)) if said.conflicting => Err(ExchangeError::Upstream("conflicting Content-Length".into())),
        Some(Some(n)) => Ok((Framing::Length(n), true)),
    }
}

#[cfg(test)]
mod tests;
