//! A request body read from an HTTP/3 stream, held to its `content-length`.

use bytes::{Buf, Bytes};
use http_body::{Body, Frame};
use std::pin::Pin;
use std::task::{Context, Poll};

type RecvHalf = h3::server::RequestStream<h3_quinn::RecvStream, Bytes>;

/// A request body read from an HTTP/3 stream: data frames, then trailers.
pub(crate) struct H3Body {
    recv: Option<RecvHalf>,
    trailers: bool,
    /// Bytes still due by the request's `content-length`, when it has one.
    due: Option<u64>,
    /// What a first look found before the request path asked.
    first: Option<Polled>,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One poll of a request body.
type Polled = Poll<Option<Result<Frame<Bytes>, BoxError>>>;

impl H3Body {
    /// The body of a request stream. A request without a body (a GET) usually ends with its
    /// HEADERS frame, in the same packet: one look now tells, so the request is forwarded with
    /// no body rather than as a chunked one of length zero, as over HTTP/2.
    pub(crate) fn new(recv: RecvHalf, length: Option<u64>) -> H3Body {
        let mut body = H3Body { recv: Some(recv), trailers: false, due: length, first: None };
        let mut cx = Context::from_waker(std::task::Waker::noop());
        match body.poll_next(&mut cx) {
            Poll::Pending => {}
            Poll::Ready(None) => body.recv = None,
            ready => body.first = Some(ready),
        }
        body
    }

    fn poll_next(&mut self, cx: &mut Context<'_>) -> Polled {
        let Some(recv) = self.recv.as_mut() else { return Poll::Ready(None) };
        if !self.trailers {
            match recv.poll_recv_data(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(Some(mut data))) => {
                    let bytes = data.copy_to_bytes(data.remaining());
                    if let Some(due) = self.due.as_mut() {
                        match due.checked_sub(bytes.len() as u64) {
                            Some(left) => *due = left,
                            None => return self.malformed(),
                        }
                    }
                    return Poll::Ready(Some(Ok(Frame::data(bytes))));
                }
                Poll::Ready(Ok(None)) => {
                    if self.due.is_some_and(|due| due > 0) {
                        return self.malformed();
                    }
                    self.trailers = true;
                }
                Poll::Ready(Err(e)) => {
                    self.recv = None;
                    return Poll::Ready(Some(Err(Box::new(e))));
                }
            }
        }
        let Some(recv) = self.recv.as_mut() else { return Poll::Ready(None) };
        let next = match recv.poll_recv_trailers(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Ok(Some(trailers))) => Some(Ok(Frame::trailers(trailers))),
            Poll::Ready(Ok(None)) => None,
            Poll::Ready(Err(e)) => Some(Err(Box::new(e) as BoxError)),
        };
        self.recv = None;
        Poll::Ready(next)
    }
}

impl H3Body {
    /// The body does not match its `content-length`: the stream is stopped and the request fails
    /// (its endpoint connection is not reused).
    fn malformed(&mut self) -> Polled {
        if let Some(mut recv) = self.recv.take() {
            recv.stop_sending(h3::error::Code::H3_MESSAGE_ERROR);
        }
        Poll::Ready(Some(Err(Box::new(LengthMismatch))))
    }
}

impl Body for H3Body {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Polled {
        if let Some(first) = self.first.take() {
            return first;
        }
        self.poll_next(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.recv.is_none() && self.first.is_none()
    }
}

/// A body longer or shorter than its `content-length`.
#[derive(Debug)]
struct LengthMismatch;

impl std::fmt::Display for LengthMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("request body length differs from its content-length")
    }
}

impl std::error::Error for LengthMismatch {}
