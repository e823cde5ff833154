//! Forward stage, HTTP/1.1 to the endpoint, on the request's own task: the request head is encoded
//! into a buffer the connection reuses, the response head is parsed in place and its header values
//! are slices of the read buffer (no copy), and the response body is read from the socket as the
//! client's side consumes it. No connection task, no channel between the two sides.

use crate::body::RequestBody;
use crate::error::UpstreamError;
use bytes::{Bytes, BytesMut};
pub(crate) use gatehouse_http1::framing::{BodyError, Framing, Piece, Trailers};
use gatehouse_http1::response::{parse_head, Span};
pub(crate) use gatehouse_http1::ResponseHead as Head;
use http::header;
use http::{Request, StatusCode};
use http_body::Body;
use std::io::{self, Write as _};
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::AsyncWriteExt;

/// Largest response head accepted from an endpoint.
const MAX_HEAD: usize = 64 * 1024;
use gatehouse_http1::framing::READ_CHUNK;

/// An HTTP/1.1 connection to an endpoint.
#[derive(Debug)]
pub(crate) struct H1Conn {
    pub(crate) io: crate::io::UpstreamIo,
    pub(crate) rbuf: BytesMut,
    wbuf: Vec<u8>,
    /// Offsets of header names and values in the head being parsed; kept to reuse its allocation.
    spans: Vec<Span>,
    head_deadline: gatehouse_clock::LazyDeadline,
    /// The trailer fields of the response body being read (here, not in the body, which is
    /// moved about with every response).
    pub(crate) trailers: Trailers,
}

impl H1Conn {
    pub(crate) fn new(io: crate::io::UpstreamIo) -> Self {
        H1Conn {
            io,
            rbuf: BytesMut::with_capacity(READ_CHUNK),
            wbuf: Vec::with_capacity(1024),
            spans: Vec::new(),
            head_deadline: Default::default(),
            trailers: Trailers::default(),
        }
    }

    /// Whether an idle connection can take a request: the endpoint has not closed it and sent
    /// nothing unasked. Uses the readiness the event loop already knows; no system call unless
    /// the socket looks readable.
    pub(crate) fn idle_usable(&mut self) -> bool {
        self.rbuf.is_empty() && self.io.idle_usable()
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
    ) -> Result<(), UpstreamError> {
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
        // Boxed: a header map would grow this future by its size for every response.
        let mut trailers: Option<Box<http::HeaderMap>> = None;
        loop {
            let frame = std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx)).await;
            let data = match frame {
                None => break,
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => data,
                    Err(frame) => {
                        // Trailers go after the last chunk; a body with a length has no place for them.
                        trailers = frame.into_trailers().ok().map(Box::new);
                        continue;
                    }
                },
                Some(Err(e)) if e.is::<crate::BodyTooLarge>() => return Err(UpstreamError::BodyTooLarge),
                Some(Err(e)) if e.is::<crate::BodyTimeout>() => return Err(UpstreamError::ClientTimeout),
                Some(Err(e)) => return Err(UpstreamError::ClientBody(e)),
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
            io_result.map_err(|source| UpstreamError::Write { source, sent: true })?;
        }
        if chunked {
            let mut end = Vec::with_capacity(5);
            gatehouse_http1::framing::encode_last_chunk(&mut end, trailers.as_deref());
            self.io.write_all(&end).await.map_err(|source| UpstreamError::Write { source, sent: true })?;
        }
        Ok(())
    }

    /// Reads the response head, skipping interim (1xx) responses other than 101, within
    /// `read_timeout` of the call.
    pub(crate) async fn read_head(
        &mut self,
        head_request: bool,
        read_timeout: std::time::Duration,
    ) -> Result<Head, UpstreamError> {
        let deadline = gatehouse_clock::now_ms() + read_timeout.as_millis() as u64;
        loop {
            if let Some(head) = self.parse_head(head_request)? {
                let status = head.response.status();
                if status.is_informational() && status != StatusCode::SWITCHING_PROTOCOLS {
                    continue;
                }
                return Ok(head);
            }
            if self.rbuf.len() >= MAX_HEAD {
                return Err(UpstreamError::HeadTooLarge);
            }
            let read = std::future::poll_fn(|cx| match self.poll_fill(cx) {
                Poll::Pending if self.head_deadline.expired(cx, deadline) => Poll::Ready(Err(None)),
                Poll::Pending => Poll::Pending,
                Poll::Ready(r) => Poll::Ready(r.map_err(Some)),
            })
            .await;
            match read {
                Ok(0) => return Err(UpstreamError::Closed),
                Ok(_) => {}
                Err(None) => return Err(UpstreamError::Timeout),
                Err(Some(e)) => return Err(UpstreamError::Read(e)),
            }
        }
    }

    /// Parses one complete head from the buffer ([`parse_head`]).
    fn parse_head(&mut self, head_request: bool) -> Result<Option<Head>, UpstreamError> {
        parse_head(&mut self.rbuf, &mut self.spans, head_request).map_err(UpstreamError::Head)
    }

    /// Reads more bytes into the buffer; `Ok(0)` at end of stream.
    pub(crate) fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        self.io.poll_fill(&mut self.rbuf, cx)
    }

    /// The next piece of body per `framing` from the buffer (data, or a trailer line), or `None`
    /// when more bytes are needed.
    pub(crate) fn decode_piece(&mut self, framing: &mut Framing) -> Result<Option<Piece>, BodyError> {
        framing.decode_piece(&mut self.rbuf)
    }

    /// The raw stream and any bytes already read past the head, for a protocol switch.
    pub(crate) fn into_upgraded(self) -> (crate::io::UpstreamIo, Bytes) {
        (self.io, self.rbuf.freeze())
    }
}

fn not_sent_or_broken(written: usize, source: io::Error) -> UpstreamError {
    UpstreamError::Write { source, sent: written > 0 }
}

#[cfg(test)]
mod tests;
