//! The response body sent to the client: a short local body, or the upstream's body streamed frame
//! by frame. The upstream connection goes back to the pool as soon as its body has ended, and the
//! access log line is written when the body is done or dropped.

use bytes::Bytes;
use gatehouse_telemetry::access_log::{AccessLog, Entry};
use gatehouse_upstream::Lease;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};
use tokio::time::Sleep;

/// Body of a response to the client.
#[derive(Debug)]
pub struct ResponseBody {
    kind: Kind,
    sent: u64,
    record: Option<Box<LogRecord>>,
}

#[derive(Debug)]
enum Kind {
    Full(Option<Bytes>),
    Upstream { inner: Incoming, lease: Option<Lease>, read_timeout: Duration, timer: Option<Pin<Box<Sleep>>> },
}

/// What the access log needs, captured at request time when logging is on.
#[derive(Debug)]
pub(crate) struct LogRecord {
    pub log: AccessLog,
    pub client: IpAddr,
    pub time: SystemTime,
    pub start: Instant,
    pub method: String,
    pub uri: String,
    pub version: &'static str,
    pub host: String,
    pub referer: String,
    pub user_agent: String,
    pub status: u16,
    pub upstream: String,
    pub route: String,
}

/// The upstream stopped sending the body for longer than the read timeout.
#[derive(Debug)]
struct BodyTimeout;

impl std::fmt::Display for BodyTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("upstream body read timed out")
    }
}

impl std::error::Error for BodyTimeout {}

impl ResponseBody {
    /// A complete body.
    pub fn full(bytes: Bytes) -> Self {
        ResponseBody { kind: Kind::Full(Some(bytes).filter(|b| !b.is_empty())), sent: 0, record: None }
    }

    /// No body.
    pub fn empty() -> Self {
        ResponseBody { kind: Kind::Full(None), sent: 0, record: None }
    }

    /// The upstream's body; `lease` returns to the pool when it ends.
    pub(crate) fn upstream(inner: Incoming, lease: Lease, read_timeout: Duration) -> Self {
        let mut body = ResponseBody {
            kind: Kind::Upstream { inner, lease: Some(lease), read_timeout, timer: None },
            sent: 0,
            record: None,
        };
        body.release_if_done();
        body
    }

    pub(crate) fn set_record(&mut self, record: Box<LogRecord>) {
        self.record = Some(record);
    }

    fn release_if_done(&mut self) {
        if let Kind::Upstream { inner, lease, .. } = &mut self.kind {
            if inner.is_end_stream() {
                if let Some(l) = lease.take() {
                    l.release();
                }
            }
        }
    }
}

impl Drop for ResponseBody {
    fn drop(&mut self) {
        self.release_if_done();
        if let Some(r) = self.record.take() {
            r.log.log(&Entry {
                client: r.client,
                time: r.time,
                method: &r.method,
                uri: &r.uri,
                version: r.version,
                host: &r.host,
                status: r.status,
                bytes: self.sent,
                referer: &r.referer,
                user_agent: &r.user_agent,
                duration: r.start.elapsed(),
                upstream: &r.upstream,
                route: &r.route,
            });
        }
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        let polled = match &mut this.kind {
            Kind::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Kind::Upstream { inner, lease, read_timeout, timer } => match Pin::new(&mut *inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    *timer = None;
                    Poll::Ready(Some(Ok(frame)))
                }
                Poll::Ready(Some(Err(e))) => {
                    // The connection is broken: drop it rather than pool it.
                    lease.take();
                    Poll::Ready(Some(Err(Box::new(e) as Self::Error)))
                }
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => {
                    let t = *read_timeout;
                    let sleep = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep(t)));
                    match sleep.as_mut().poll(cx) {
                        Poll::Ready(()) => {
                            lease.take();
                            Poll::Ready(Some(Err(Box::new(BodyTimeout) as Self::Error)))
                        }
                        Poll::Pending => Poll::Pending,
                    }
                }
            },
        };
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(d) = frame.data_ref() {
                this.sent += d.len() as u64;
            }
        }
        if matches!(polled, Poll::Ready(Some(Ok(_))) | Poll::Ready(None)) {
            this.release_if_done();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Full(b) => b.is_none(),
            Kind::Upstream { inner, .. } => inner.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            Kind::Upstream { inner, .. } => inner.size_hint(),
        }
    }
}
