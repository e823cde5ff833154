//! The response body sent to the client: a short local body, or the upstream's body streamed frame
//! by frame. The upstream connection goes back to the pool as soon as its body has ended, and the
//! access log line is written when the body is done or dropped.

use crate::grpc::Code;
use bytes::Bytes;
use gatehouse_http1::RawHead;
use gatehouse_telemetry::access_log::{AccessLog, Entry};
use gatehouse_telemetry::RouteStats;
use gatehouse_upstream::{UpstreamBody, UpstreamBodyError};
use http_body::{Body, Frame, SizeHint};
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
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
    /// A gRPC call's answer, or one with a deadline.
    Call(Box<Call>),
    /// An answer sent compressed.
    Encoded(Box<Encoded>),
}

/// An answer (as the endpoint made it) and its compression.
#[derive(Debug)]
struct Encoded {
    inner: ResponseBody,
    encoder: crate::compress::Encoder,
}

/// An upstream body that ends in a gRPC status when it fails or its time is up, or is cut off at
/// a deadline.
#[derive(Debug)]
struct Call {
    /// `None` once dropped: the upstream stream is reset then.
    body: Option<UpstreamBody>,
    /// Failures end in trailers with a `grpc-status` (the client sees a gRPC status, not a reset).
    grpc: bool,
    /// When the answer must have ended ([`gatehouse_clock::now_ms`]; `u64::MAX`: no bound).
    due_ms: u64,
    deadline: gatehouse_clock::LazyDeadline,
    /// Where a gRPC call's status is counted.
    stats: Option<Arc<RouteStats>>,
    /// Who answered, when the status may count as the endpoint's failure.
    judge: Option<crate::forward::Judge>,
    /// A gRPC-Web call's answer is translated back to gRPC-Web.
    web: Option<crate::grpc_web::Encoder>,
}

/// The request's time (`stream_timeout`, `grpc-timeout`) ran out before its answer ended.
#[derive(Debug)]
pub struct DeadlineExceeded;

impl std::fmt::Display for DeadlineExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request's deadline passed before its answer ended")
    }
}

impl std::error::Error for DeadlineExceeded {}

/// What the access log and the request's server span need, captured at request time when
/// logging is on or the request is traced. The request's own text (method, target, host, referer,
/// user agent) is copied into one buffer; what the gateway chose (route, endpoint, app) is shared.
#[derive(Debug)]
pub(crate) struct LogRecord {
    /// The access log, when on.
    pub log: Option<AccessLog>,
    /// Over TLS.
    pub tls: bool,
    pub client: IpAddr,
    pub time: SystemTime,
    pub start: Instant,
    /// Method, target, host, referer and user agent, one after the other ([`Text`]).
    pub text: String,
    /// Where each of them ends in `text`.
    pub ends: [u32; 5],
    /// The target without the app key the client put in it, in place of the one in `text`.
    pub keyless_uri: Option<String>,
    pub version: &'static str,
    pub status: u16,
    /// The endpoint that answered.
    pub upstream: Option<Arc<str>>,
    /// The route's id.
    pub route: Option<Arc<str>>,
    /// The app a service admitted.
    pub app: Option<Arc<str>>,
    /// The request's id, unless ids are off.
    pub request_id: Option<http::HeaderValue>,
    /// The `grpc-status` a gRPC call ended with.
    pub grpc_status: Option<u8>,
    /// The request's trace context (for the log's ids) and, when sampled, what its span needs.
    pub trace: Option<Box<crate::trace::TraceRecord>>,
}

/// The parts of [`LogRecord::text`], in order.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Text {
    Method,
    Uri,
    Host,
    Referer,
    UserAgent,
}

impl LogRecord {
    /// One part of the request's text.
    pub fn text(&self, part: Text) -> &str {
        let i = part as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        self.text.get(start..self.ends[i] as usize).unwrap_or("")
    }

    /// The request's method.
    pub fn method(&self) -> &str {
        self.text(Text::Method)
    }

    /// The target as logged: without an app key in it.
    pub fn uri(&self) -> &str {
        self.keyless_uri.as_deref().unwrap_or_else(|| self.text(Text::Uri))
    }

    /// The `Host` header or the authority.
    pub fn host(&self) -> &str {
        self.text(Text::Host)
    }

    /// The endpoint that answered, or "".
    pub fn upstream(&self) -> &str {
        self.upstream.as_deref().unwrap_or("")
    }

    /// The app, or "".
    pub fn app(&self) -> &str {
        self.app.as_deref().unwrap_or("")
    }
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

    /// The bytes of a complete body (the gateway's own answers); `None` for an endpoint's.
    pub fn full_bytes(&self) -> Option<&[u8]> {
        match &self.kind {
            Kind::Full(bytes) => Some(bytes.as_deref().unwrap_or_default()),
            _ => None,
        }
    }

    /// The endpoint's body, streamed.
    pub(crate) fn upstream(body: UpstreamBody) -> Self {
        ResponseBody { kind: Kind::Upstream(body), sent: 0, record: None }
    }

    /// For a 101 answer: the endpoint's raw connection (plain or TLS, to be spliced with the
    /// client's) and any bytes it sent after its head.
    pub fn take_upgrade(
        &mut self,
    ) -> Option<(impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static, Bytes)> {
        match &mut self.kind {
            Kind::Upstream(body) => body.take_upgrade(),
            Kind::Call(call) => call.body.as_mut()?.take_upgrade(),
            Kind::Full(_) | Kind::Encoded(_) => None,
        }
    }

    /// The endpoint head's lines, when they are passed on unparsed (see [`RawHead`]).
    pub fn raw_head_mut(&mut self) -> Option<&mut RawHead> {
        match &mut self.kind {
            Kind::Upstream(body) => body.raw_head_mut(),
            Kind::Call(call) => call.body.as_mut()?.raw_head_mut(),
            Kind::Encoded(e) => e.inner.raw_head_mut(),
            Kind::Full(_) => None,
        }
    }

    /// Takes the endpoint head's unparsed lines, to write them before the response's map.
    pub fn take_raw_head(&mut self) -> Option<RawHead> {
        match &mut self.kind {
            Kind::Upstream(body) => body.take_raw_head(),
            Kind::Call(call) => call.body.as_mut()?.take_raw_head(),
            Kind::Encoded(e) => e.inner.take_raw_head(),
            Kind::Full(_) => None,
        }
    }

    /// Sends the body compressed by `encoder` (an endpoint's: the gateway's own are left as
    /// they are).
    pub(crate) fn encode(&mut self, encoder: crate::compress::Encoder) {
        if let Kind::Upstream(_) | Kind::Call(_) = self.kind {
            let kind = std::mem::replace(&mut self.kind, Kind::Full(None));
            let inner = ResponseBody { kind, sent: 0, record: None };
            self.kind = Kind::Encoded(Box::new(Encoded { inner, encoder }));
        }
    }

    pub(crate) fn set_record(&mut self, record: Box<LogRecord>) {
        self.record = Some(record);
    }

    /// Makes an upstream body a gRPC call's (`grpc`: failures end in a `grpc-status`; `web`: the
    /// answer goes back as gRPC-Web) and bounds it by `due_ms`; a local body is left as it is.
    pub(crate) fn bound(
        &mut self,
        grpc: bool,
        due_ms: Option<u64>,
        stats: Option<Arc<RouteStats>>,
        judge: Option<crate::forward::Judge>,
        web: Option<crate::grpc_web::Web>,
    ) {
        if let Kind::Upstream(_) = self.kind {
            let Kind::Upstream(body) = std::mem::replace(&mut self.kind, Kind::Full(None)) else { return };
            self.kind = Kind::Call(Box::new(Call {
                body: Some(body),
                grpc,
                due_ms: due_ms.unwrap_or(u64::MAX),
                deadline: gatehouse_clock::LazyDeadline::default(),
                stats: stats.filter(|_| grpc),
                judge,
                web: web.map(crate::grpc_web::Encoder::new),
            }));
        }
    }

    /// Counts the status a gRPC call ended with (in its trailers, or a trailers-only head's
    /// headers) for the route and the log line.
    pub(crate) fn grpc_status(&mut self, headers: &http::HeaderMap, stats: Option<&RouteStats>) {
        let Some(code) = crate::grpc::status_of(headers) else { return };
        if let Some(stats) = stats {
            stats.record_grpc(code);
        }
        if let Some(r) = self.record.as_mut() {
            r.grpc_status = Some(code);
        }
    }
}

impl Drop for ResponseBody {
    fn drop(&mut self) {
        if let Some(r) = self.record.take() {
            let duration = gatehouse_clock::now().saturating_duration_since(r.start);
            if let Some(log) = &r.log {
                log.log(&Entry {
                    client: r.client,
                    time: r.time,
                    method: r.method(),
                    uri: r.uri(),
                    version: r.version,
                    host: r.host(),
                    status: r.status,
                    bytes: self.sent,
                    referer: r.text(Text::Referer),
                    user_agent: r.text(Text::UserAgent),
                    duration,
                    upstream: r.upstream(),
                    route: r.route.as_deref().unwrap_or(""),
                    app: r.app(),
                    request_id: r.request_id.as_ref().and_then(|v| v.to_str().ok()).unwrap_or(""),
                    grpc_status: r.grpc_status,
                    trace: r.trace.as_ref().map(|t| (t.ctx.trace_id, t.ctx.span_id)),
                });
            }
            if let Some(t) = &r.trace {
                crate::trace::finish_server(&r, t, self.sent, duration);
            }
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
            Kind::Call(call) => call.poll(cx),
            Kind::Encoded(e) => e.poll(cx),
        };
        if let (Kind::Call(call), Poll::Ready(Some(Ok(frame)))) = (&mut this.kind, &polled) {
            if let Some(trailers) = frame.trailers_ref() {
                if let (Some(judge), Some(code)) = (call.judge.take(), crate::grpc::status_of(trailers)) {
                    let (upstream, ep) = &*judge;
                    upstream.record_late_outcome(ep, upstream.grpc_failure(code));
                }
                let stats = call.stats.clone();
                this.grpc_status(trailers, stats.as_deref());
            }
        }
        let polled = match &mut this.kind {
            Kind::Call(call) => match call.web.as_mut() {
                Some(web) => to_web(web, polled, cx),
                None => polled,
            },
            _ => polled,
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
            // An answer that has ended (a trailers-only one) can fail no more.
            Kind::Call(call) => {
                call.body.as_ref().is_none_or(|b| b.is_end_stream()) && call.web.as_ref().is_none_or(|w| w.idle())
            }
            Kind::Encoded(e) => e.encoder.finished && e.encoder.trailers.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            Kind::Upstream(body) => body.size_hint(),
            // A gRPC-Web answer's length changes on the way.
            Kind::Call(call) if call.web.is_some() => SizeHint::default(),
            Kind::Call(call) => call.body.as_ref().map_or_else(SizeHint::default, |b| b.size_hint()),
            // A compressed answer's length is known once it has been sent.
            Kind::Encoded(_) => SizeHint::default(),
        }
    }
}

type Polled = Poll<Option<Result<Frame<Bytes>, Box<dyn std::error::Error + Send + Sync>>>>;

/// A gRPC call's frame as gRPC-Web sends it: data (base64 for text), trailers as the last data.
fn to_web(web: &mut crate::grpc_web::Encoder, polled: Polled, cx: &mut Context<'_>) -> Polled {
    match polled {
        Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
            Ok(data) => {
                let out = web.data(data);
                if out.is_empty() {
                    // Fewer than three bytes, carried: poll again for more.
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                Poll::Ready(Some(Ok(Frame::data(out))))
            }
            Err(frame) => match frame.trailers_ref() {
                Some(trailers) => Poll::Ready(Some(Ok(Frame::data(web.trailers(trailers))))),
                None => Poll::Ready(Some(Ok(frame))),
            },
        },
        Poll::Ready(None) => Poll::Ready(web.finish().map(|b| Ok(Frame::data(b)))),
        other => other,
    }
}

impl Encoded {
    /// The next frame of a compressed answer: the endpoint's data as the encoder gives it out,
    /// what it holds written out when the endpoint pauses (an event stream's event is not held
    /// back) and when it ends, then any trailers. Not inlined into `poll_frame`: answers that
    /// are not compressed keep its size.
    #[inline(never)]
    fn poll(&mut self, cx: &mut Context<'_>) -> Polled {
        loop {
            let encoder = &mut self.encoder;
            if encoder.finished {
                return Poll::Ready(encoder.trailers.take().map(|t| Ok(Frame::trailers(t))));
            }
            let out = match Pin::new(&mut self.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    // The last data (its length reached) ends the stream at once: no flush
                    // between it and the end.
                    Ok(data) if self.inner.is_end_stream() => encoder.encode_last(&data),
                    Ok(data) => encoder.encode(&data),
                    Err(frame) => {
                        encoder.trailers = frame.into_trailers().ok();
                        encoder.finish()
                    }
                },
                Poll::Ready(None) => encoder.finish(),
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Pending if encoder.unflushed => encoder.flush(),
                Poll::Pending => return Poll::Pending,
            };
            match out {
                Ok(bytes) if bytes.is_empty() => {}
                Ok(bytes) => return Poll::Ready(Some(Ok(Frame::data(bytes)))),
                Err(e) => {
                    tracing::warn!(error = %e, "compressing an answer failed");
                    encoder.finished = true;
                    return Poll::Ready(Some(Err(Box::new(e))));
                }
            }
        }
    }
}

impl Call {
    fn poll(&mut self, cx: &mut Context<'_>) -> Polled {
        let Some(body) = self.body.as_mut() else {
            return Poll::Ready(None);
        };
        match Pin::new(body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => Poll::Ready(Some(Ok(frame))),
            Poll::Ready(None) => {
                self.body = None;
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => {
                tracing::warn!(error = %e, "upstream response body failed");
                let (code, message) = match e {
                    UpstreamBodyError::Timeout => (Code::DeadlineExceeded, "upstream timed out"),
                    _ => (Code::Unavailable, "upstream failed"),
                };
                self.end(code, message, Box::new(e))
            }
            Poll::Pending if self.due_ms != u64::MAX && self.deadline.expired(cx, self.due_ms) => {
                tracing::debug!("deadline passed before the answer ended");
                self.end(Code::DeadlineExceeded, "deadline exceeded", Box::new(DeadlineExceeded))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// Drops the upstream body (resetting its stream) and ends the answer: with trailers that
    /// carry `code` for a gRPC call, with `error` (a reset) for any other.
    fn end(&mut self, code: Code, message: &str, error: Box<dyn std::error::Error + Send + Sync>) -> Polled {
        self.body = None;
        if !self.grpc {
            return Poll::Ready(Some(Err(error)));
        }
        Poll::Ready(Some(Ok(Frame::trailers(crate::grpc::status_trailers(code, message)))))
    }
}
