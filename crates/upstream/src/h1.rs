//! Forward stage, HTTP/1.1 to the endpoint, on the request's own task: the request head is encoded
//! into a buffer the connection reuses, the response head is parsed in place and its header values
//! are slices of the read buffer (no copy), and the response body is read from the socket as the
//! client's side consumes it. No connection task, no channel between the two sides.

use crate::body::RequestBody;
pub(crate) use crate::framing::{Chunk, Framing};
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
    spans: Vec<(u32, u32, u32, u32)>,
    head_deadline: crate::util::LazyDeadline,
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
        for (name, value) in req.headers() {
            w.extend_from_slice(name.as_str().as_bytes());
            w.extend_from_slice(b": ");
            w.extend_from_slice(value.as_bytes());
            w.extend_from_slice(b"\r\n");
        }
        if !req.headers().contains_key(header::HOST) {
            let _ = write!(w, "host: {default_host}\r\n");
        }
        if chunked {
            w.extend_from_slice(b"transfer-encoding: chunked\r\n");
        } else if req.body().is_empty()
            && !req.headers().contains_key(header::CONTENT_LENGTH)
            && matches!(*req.method(), http::Method::POST | http::Method::PUT | http::Method::PATCH)
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
    ) -> Result<(Response<()>, Framing, bool), ExchangeError> {
        let deadline = crate::util::now_ms() + read_timeout.as_millis() as u64;
        loop {
            if let Some(parsed) = self.parse_head(head_request)? {
                if parsed.0.status().is_informational() && parsed.0.status() != StatusCode::SWITCHING_PROTOCOLS {
                    continue;
                }
                return Ok(parsed);
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

    /// Parses one complete head from the buffer: the response, its body framing, and whether the
    /// connection may be reused afterwards.
    fn parse_head(&mut self, head_request: bool) -> Result<Option<(Response<()>, Framing, bool)>, ExchangeError> {
        // Uninitialised slots: httparse writes only the ones it fills, so nothing is zeroed per head.
        let mut slots = [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
        let mut parsed = httparse::Response::new(&mut []);
        let config = httparse::ParserConfig::default();
        let len = match config.parse_response_with_uninit_headers(&mut parsed, &self.rbuf, &mut slots) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(e) => return Err(ExchangeError::Upstream(format!("invalid response head: {e}"))),
        };
        let code = parsed.code.unwrap_or(0);
        let status = StatusCode::from_u16(code).map_err(|_| ExchangeError::Upstream("invalid status".into()))?;
        let http10 = parsed.version == Some(0);
        // Offsets of names and values in the buffer, so the head can be frozen and sliced.
        let base = self.rbuf.as_ptr() as usize;
        let spans = &mut self.spans;
        spans.clear();
        for h in parsed.headers.iter() {
            let name = (h.name.as_ptr() as usize - base) as u32;
            let value = (h.value.as_ptr() as usize - base) as u32;
            spans.push((name, h.name.len() as u32, value, h.value.len() as u32));
        }
        let count = spans.len();
        let head = self.rbuf.split_to(len).freeze();
        // Room for what the proxy adds (rate-limit headers, the echoed request id, rewrites)
        // without growing.
        let mut headers = crate::header_maps::take(count + 5);
        let mut connection = crate::framing::ConnectionHeader::default();
        for &(ns, nl, vs, vl) in &self.spans {
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
        let tokens = connection.finish(&mut headers);
        let (framing, mut reusable) = framing(status, head_request, &mut headers)?;
        reusable &= tokens.keep_alive(http10);
        let mut resp = Response::new(());
        *resp.status_mut() = status;
        *resp.version_mut() = Version::HTTP_11;
        *resp.headers_mut() = headers;
        Ok(Some((resp, framing, reusable)))
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

/// Body framing per RFC 9112 §6.3, normalising headers so the client side sees one framing.
fn framing(status: StatusCode, head_request: bool, headers: &mut HeaderMap) -> Result<(Framing, bool), ExchangeError> {
    if head_request
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        return Ok((Framing::Empty, true));
    }
    if headers.contains_key(header::TRANSFER_ENCODING) {
        let chunked_last = headers
            .get_all(header::TRANSFER_ENCODING)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .rfind(|t| !t.is_empty())
            .is_some_and(|t| t.eq_ignore_ascii_case("chunked"));
        // With both, Transfer-Encoding wins and the length is dropped (a smuggling vector); the
        // connection is not reused after such a message.
        let both = headers.remove(header::CONTENT_LENGTH).is_some();
        headers.remove(header::TRANSFER_ENCODING);
        return Ok(if chunked_last { (Framing::Chunked(Chunk::Size), !both) } else { (Framing::Close, false) });
    }
    let mut lengths = headers.get_all(header::CONTENT_LENGTH).iter();
    let Some(first) = lengths.next() else {
        return Ok((Framing::Close, false));
    };
    let parse = |v: &HeaderValue| {
        v.to_str().ok().filter(|s| s.bytes().all(|b| b.is_ascii_digit())).and_then(|s| s.parse::<u64>().ok())
    };
    let n = parse(first).ok_or_else(|| ExchangeError::Upstream("invalid Content-Length".into()))?;
    if lengths.any(|v| parse(v) != Some(n)) {
        return Err(ExchangeError::Upstream("conflicting Content-Length".into()));
    }
    Ok((Framing::Length(n), true))
}

#[cfg(test)]
mod tests;
