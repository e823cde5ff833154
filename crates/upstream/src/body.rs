//! The request body sent upstream: the client's body streamed as it arrives, cut off with an error
//! when it exceeds the route's limit (so a chunked body cannot sneak past `max_body`).

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The body of a forwarded request.
#[derive(Debug)]
pub struct RequestBody {
    inner: Option<Incoming>,
    remaining: u64,
}

/// The client sent more body than the route allows.
#[derive(Debug)]
pub struct BodyTooLarge;

impl std::fmt::Display for BodyTooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("request body exceeds the route's max_body")
    }
}

impl std::error::Error for BodyTooLarge {}

impl RequestBody {
    /// No body.
    pub fn empty() -> Self {
        RequestBody { inner: None, remaining: 0 }
    }

    /// The client's body, limited to `limit` bytes.
    pub fn streaming(body: Incoming, limit: u64) -> Self {
        if body.is_end_stream() {
            return Self::empty();
        }
        RequestBody { inner: Some(body), remaining: limit }
    }

    /// True when there is nothing to send (so the request can be replayed on a retry).
    pub fn is_empty(&self) -> bool {
        self.inner.is_none()
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        match Pin::new(inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    let n = data.len() as u64;
                    if n > this.remaining {
                        this.inner = None;
                        return Poll::Ready(Some(Err(Box::new(BodyTooLarge))));
                    }
                    this.remaining -= n;
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(Box::new(e)))),
            Poll::Ready(None) => {
                this.inner = None;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(|b| b.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.as_ref().map_or_else(|| SizeHint::with_exact(0), |b| b.size_hint())
    }
}
