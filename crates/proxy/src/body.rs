//! The response body sent to the client: a short local body, or the upstream's body streamed frame
//! by frame. The upstream connection goes back to the pool as soon as its body has ended, and the
//! access log line is written when the body is done or dropped.

use bytes::Bytes;
use gatehouse_http1::RawHead;
use gatehouse_telemetry::access_log::{AccessLog, Entry};
use gatehouse_upstream::UpstreamBody;
use http_body::{Body, Frame, SizeHint};
use std::net::IpAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Instant, SystemTime};

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
    Upstream(UpstreamBody),
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
    pub app: String,
    /// The request's id, unless ids are off.
    pub request_id: Option<http::HeaderValue>,
}

impl ResponseBody {
    /// A complete body.
    pub fn full(bytes: Bytes) -> Self {
        ResponseBody { kind: Kind::Full(Some(bytes).filter(|b| !b.is_empty())), sent: 0, record: None }
    }

    /// No body.
    pub fn empty() -> Self {
        ResponseBody { kind: Kind::Full(None), sent: 0, record: None }
    }

    /// The endpoint's body, streamed.
    pub(crate) fn upstream(body: UpstreamBody) -> Self {
        ResponseBody { kind: Kind::Upstream(body), sent: 0, record: None }
    }

    /// For a 101 answer: the endpoint's raw connection and any bytes it sent after its head.
    pub fn take_upgrade(&mut self) -> Option<(gatehouse_upstream::UpstreamIo, Bytes)> {
        match &mut self.kind {
            Kind::Upstream(body) => body.take_upgrade(),
            Kind::Full(_) => None,
        }
    }

    /// The endpoint head's lines, when they are passed on unparsed (see [`RawHead`]).
    pub fn raw_head_mut(&mut self) -> Option<&mut RawHead> {
        match &mut self.kind {
            Kind::Upstream(body) => body.raw_head_mut(),
            Kind::Full(_) => None,
        }
    }

    /// Takes the endpoint head's unparsed lines, to write them before the response's map.
    pub fn take_raw_head(&mut self) -> Option<RawHead> {
        match &mut self.kind {
            Kind::Upstream(body) => body.take_raw_head(),
            Kind::Full(_) => None,
        }
    }

    pub(crate) fn set_record(&mut self, record: Box<LogRecord>) {
        self.record = Some(record);
    }
}

impl Drop for ResponseBody {
    fn drop(&mut self) {
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
                duration: gatehouse_clock::now().saturating_duration_since(r.start),
                upstream: &r.upstream,
                route: &r.route,
                app: &r.app,
                request_id: r.request_id.as_ref().and_then(|v| v.to_str().ok()).unwrap_or(""),
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
            Kind::Upstream(body) => match Pin::new(body).poll_frame(cx) {
                Poll::Ready(Some(Err(e))) => {
                    tracing::warn!(error = %e, "upstream response body failed");
                    Poll::Ready(Some(Err(Box::new(e) as Self::Error)))
                }
                Poll::Ready(Some(Ok(frame))) => Poll::Ready(Some(Ok(frame))),
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            },
        };
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(d) = frame.data_ref() {
                this.sent += d.len() as u64;
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Full(b) => b.is_none(),
            Kind::Upstream(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            Kind::Upstream(body) => body.size_hint(),
        }
    }
}
