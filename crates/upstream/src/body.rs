//! The request body sent upstream: the client's body streamed as it arrives, cut off with an error
//! when it exceeds the route's limit (so a chunked body cannot sneak past `max_body`), or when the
//! client stops sending it for longer than the listener's `body_read_timeout` (a slow POST).

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// Errors of a client body, whatever the client protocol.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

type ClientBody = Pin<Box<dyn Body<Data = Bytes, Error = BoxError> + Send>>;

/// The body of a forwarded request.
pub struct RequestBody {
    inner: Option<ClientBody>,
    remaining: u64,
    /// Longest wait for the next part of the body, and when the last part came.
    idle_ms: u64,
    last_ms: u64,
    deadline: gatehouse_clock::LazyDeadline,
    /// When the whole body must have come ([`gatehouse_clock::now_ms`]; `u64::MAX`: no bound).
    due_ms: u64,
}

impl std::fmt::Debug for RequestBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestBody").field("empty", &self.inner.is_none()).field("remaining", &self.remaining).finish()
    }
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

/// The client sent nothing of its body for longer than allowed.
#[derive(Debug)]
pub struct BodyTimeout;

impl std::fmt::Display for BodyTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the client stopped sending its request body")
    }
}

impl std::error::Error for BodyTimeout {}

impl RequestBody {
    /// No body.
    pub fn empty() -> Self {
        RequestBody {
            inner: None,
            remaining: 0,
            idle_ms: 0,
            last_ms: 0,
            deadline: gatehouse_clock::LazyDeadline::default(),
            due_ms: u64::MAX,
        }
    }

    /// The client's body (HTTP/1.1 or HTTP/2), limited to `limit` bytes, failing when no part of
    /// it comes for `idle`. An empty body costs no allocation.
    pub fn streaming<B>(body: B, limit: u64, idle: Duration) -> Self
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        if body.is_end_stream() {
            return Self::empty();
        }
        RequestBody {
            inner: Some(Box::pin(body.map_err(Into::into))),
            remaining: limit,
            idle_ms: gatehouse_clock::millis(idle),
            last_ms: gatehouse_clock::now_ms(),
            deadline: gatehouse_clock::LazyDeadline::default(),
            due_ms: u64::MAX,
        }
    }

    /// The body must have come whole by `due_ms` ([`gatehouse_clock::now_ms`]), whatever the
    /// pauses between its parts.
    pub fn until(mut self, due_ms: Option<u64>) -> Self {
        if let (Some(due_ms), false) = (due_ms, self.is_empty()) {
            self.due_ms = due_ms;
        }
        self
    }

    /// When the body's last part came (or when it began).
    pub(crate) fn last_ms(&self) -> u64 {
        self.last_ms
    }

    /// True when there is nothing to send (so the request can be replayed on a retry).
    pub fn is_empty(&self) -> bool {
        self.inner.is_none()
    }
}

impl RequestBody {
    /// Whether the next part is late: the idle wait since the last one, or the whole body's
    /// bound, has passed (otherwise the task is woken by then).
    fn due(&mut self, cx: &mut Context<'_>) -> bool {
        let due = self.last_ms.saturating_add(self.idle_ms).min(self.due_ms);
        due != u64::MAX && self.deadline.expired(cx, due)
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
        match inner.as_mut().poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    let n = data.len() as u64;
                    if n > this.remaining {
                        this.inner = None;
                        return Poll::Ready(Some(Err(Box::new(BodyTooLarge))));
                    }
                    this.remaining -= n;
                }
                this.last_ms = gatehouse_clock::now_ms();
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
            Poll::Ready(None) => {
                this.inner = None;
                Poll::Ready(None)
            }
            Poll::Pending if this.due(cx) => {
                this.inner = None;
                Poll::Ready(Some(Err(Box::new(BodyTimeout))))
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
