//! OpenTelemetry traces for the request path.
//!
//! A [`Tracer`] is built from `tracing:` and kept in the snapshot. On each request it reads the
//! W3C trace context (`traceparent`, `tracestate`), decides sampling (the parent's flag, else a
//! ratio of the trace id, as OpenTelemetry's `TraceIdRatioBased`), and gives each upstream
//! attempt a `traceparent` of its own. Sampled requests record a server span and a client span
//! per attempt, each written straight into its OTLP protobuf bytes ([`Span`], [`proto`]) in a
//! buffer the thread reuses. A finished span is appended to its thread's batch ([`batch`]); a
//! full batch, or `export.interval` after its first span, hands the batch to a bounded queue with
//! `try_send`, so a worker never waits: a full queue drops the batch and counts its spans.
//!
//! The queue is read by an exporter thread with a Tokio runtime of its own ([`export`]), which
//! wraps batches of spans in an `ExportTraceServiceRequest` and sends them with our hyper
//! client: protobuf over HTTP, or gRPC over HTTP/2. A collector that is down costs the dropped
//! spans and nothing else.

mod batch;
mod export;
mod ids;
mod propagation;
mod proto;

pub use batch::flush_local;
pub use export::{check_files, ExportError, TraceStats};
pub use propagation::{parse_traceparent, Parent};
pub use proto::Key;

use gatehouse_config::Tracing;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use std::sync::Arc;
use std::time::SystemTime;

/// `traceparent`.
pub static TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
/// `tracestate`.
pub static TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

/// A request's trace context: its trace, the id of the gateway's server span for it, the
/// client's span it continues, whether it is recorded.
#[derive(Clone, Debug)]
pub struct Ctx {
    /// Trace id.
    pub trace_id: u128,
    /// The server span's id.
    pub span_id: u64,
    /// The client's span, from its `traceparent`.
    pub parent: Option<u64>,
    /// Recorded and exported.
    pub sampled: bool,
    /// The client's `tracestate`, passed on as it came.
    pub tracestate: Option<HeaderValue>,
}

impl Ctx {
    /// The trace id as 32 lowercase hex digits.
    pub fn trace_hex(&self) -> String {
        format!("{:032x}", self.trace_id)
    }

    /// The server span's id as 16 lowercase hex digits.
    pub fn span_hex(&self) -> String {
        format!("{:016x}", self.span_id)
    }

    /// `traceparent` naming span `span_id` of this trace (an upstream attempt's), written by
    /// hand: this runs for every attempt of every request when tracing is on, sampled or not.
    pub fn traceparent(&self, span_id: u64) -> HeaderValue {
        let mut b = [0u8; 55];
        b[..3].copy_from_slice(b"00-");
        let (high, low) = ((self.trace_id >> 64) as u64, self.trace_id as u64);
        b[3..19].copy_from_slice(&hex16(high));
        b[19..35].copy_from_slice(&hex16(low));
        b[35] = b'-';
        b[36..52].copy_from_slice(&hex16(span_id));
        b[52..].copy_from_slice(if self.sampled { b"-01" } else { b"-00" });
        HeaderValue::from_maybe_shared(slab_bytes(&b)).unwrap_or_else(|_| HeaderValue::from_static(""))
    }

    /// Puts the trace context of span `span_id` on an upstream request, in place of any. (The
    /// client's own `traceparent` and `tracestate` were taken off when the request came in.)
    pub fn inject(&self, headers: &mut HeaderMap, span_id: u64) {
        headers.insert(TRACEPARENT.clone(), self.traceparent(span_id));
        if let Some(state) = &self.tracestate {
            headers.insert(TRACESTATE.clone(), state.clone());
        }
    }
}

thread_local! {
    /// Where this thread's `traceparent` values are written, one after the other.
    static SLAB: std::cell::RefCell<bytes::BytesMut> = std::cell::RefCell::new(bytes::BytesMut::new());
}

/// `traceparent` values one slab holds: a slab is allocated once per this many upstream
/// attempts, instead of a value each. Kept small, since a value still held (by a request to a
/// slow upstream) keeps its whole slab: at most this many times the values' own bytes.
const SLAB_VALUES: usize = 16;

/// `value` copied into this thread's slab, as bytes that share it (each value counted on the
/// slab, which is freed with the last of them): a header value without an allocation of its own.
fn slab_bytes(value: &[u8; 55]) -> bytes::Bytes {
    SLAB.with(|s| match s.try_borrow_mut() {
        Ok(mut slab) => {
            if slab.capacity() - slab.len() < value.len() {
                *slab = bytes::BytesMut::with_capacity(value.len() * SLAB_VALUES);
            }
            slab.extend_from_slice(value);
            slab.split().freeze()
        }
        Err(_) => bytes::Bytes::copy_from_slice(value),
    })
}

/// Each byte's two lowercase hex digits.
static HEX_PAIRS: [[u8; 2]; 256] = {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut t = [[0u8; 2]; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = [HEX[i >> 4], HEX[i & 0xf]];
        i += 1;
    }
    t
};

/// `v` as 16 lowercase hex digits, a table lookup per byte.
#[inline]
fn hex16(v: u64) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (pair, byte) in out.chunks_exact_mut(2).zip(v.to_be_bytes()) {
        pair.copy_from_slice(&HEX_PAIRS[usize::from(byte)]);
    }
    out
}

/// A new span id (never zero).
pub fn span_id() -> u64 {
    ids::span_id()
}

/// Server or client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The gateway answering a client.
    Server,
    /// The gateway asking an upstream.
    Client,
}

/// A sampled span being recorded: the OTLP `Span` message, written field by field as the request
/// path learns them (one buffer, no attribute of its own allocated), and added to the thread's
/// batch by [`Tracer::finish`]. The buffer is the thread's spare one, given back when the span
/// is finished or dropped: recording allocates nothing once a thread has recorded a span. Its
/// attributes are written through [`Attrs`].
#[derive(Debug)]
pub struct Span {
    attrs: Attrs,
}

impl Drop for Span {
    fn drop(&mut self) {
        batch::give_back(std::mem::take(&mut self.attrs.buf));
    }
}

impl std::ops::Deref for Span {
    type Target = Attrs;
    fn deref(&self) -> &Attrs {
        &self.attrs
    }
}

impl std::ops::DerefMut for Span {
    fn deref_mut(&mut self) -> &mut Attrs {
        &mut self.attrs
    }
}

/// Span attributes, encoded: a span's own, or a set encoded once and added to many spans as they
/// are ([`Attrs::encoded`]): the attributes an upstream endpoint gives each of its client spans.
#[derive(Debug, Default)]
pub struct Attrs {
    buf: Vec<u8>,
}

/// Nanoseconds since the Unix epoch.
fn unix_nanos(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

impl Attrs {
    /// A string attribute.
    #[inline]
    pub fn str(&mut self, key: &Key, value: &str) {
        proto::key_value_pre(&mut self.buf, proto::span::ATTRIBUTES, key, proto::Any::Str(value.as_bytes()));
    }

    /// A number attribute.
    #[inline]
    pub fn int(&mut self, key: &Key, value: i64) {
        proto::key_value_pre(&mut self.buf, proto::span::ATTRIBUTES, key, proto::Any::Int(value));
    }

    /// A flag attribute.
    #[inline]
    pub fn bool(&mut self, key: &Key, value: bool) {
        proto::key_value_pre(&mut self.buf, proto::span::ATTRIBUTES, key, proto::Any::Bool(value));
    }

    /// An address attribute, as text (`192.0.2.1`, `2001:db8::1`).
    pub fn ip(&mut self, key: &Key, ip: std::net::IpAddr) {
        let mut text = [0u8; gatehouse_telemetry::IP_TEXT_MAX];
        let n = gatehouse_telemetry::ip_text(ip, &mut text);
        proto::key_value_pre(&mut self.buf, proto::span::ATTRIBUTES, key, proto::Any::Str(&text[..n]));
    }

    /// Attributes encoded before (the bytes of an [`Attrs`] made for many spans).
    #[inline]
    pub fn encoded(&mut self, attributes: &[u8]) {
        self.buf.extend_from_slice(attributes);
    }

    /// The encoded attributes, to be added to spans with [`Attrs::encoded`].
    pub fn into_bytes(self) -> Box<[u8]> {
        self.buf.into_boxed_slice()
    }
}

impl Span {
    /// Starts a span of trace `trace_id`; `parent_remote` says its parent is the client's span
    /// (not one of the gateway's).
    pub fn new(
        kind: Kind,
        trace_id: u128,
        span_id: u64,
        parent: Option<u64>,
        parent_remote: bool,
        start: SystemTime,
    ) -> Span {
        use proto::span::*;
        // The fixed-size fields (at most 55 bytes) assembled in place, then one copy: each field
        // written by the varint helpers was a capacity check and a call of its own.
        let mut head = [0u8; 56];
        let mut n = 0;
        let mut put = |bytes: &[u8]| {
            head[n..n + bytes.len()].copy_from_slice(bytes);
            n += bytes.len();
        };
        put(&[(TRACE_ID << 3 | proto::LEN) as u8, 16]);
        put(&trace_id.to_be_bytes());
        put(&[(SPAN_ID << 3 | proto::LEN) as u8, 8]);
        put(&span_id.to_be_bytes());
        let mut flags = FLAG_SAMPLED | FLAG_HAS_IS_REMOTE;
        if let Some(p) = parent {
            put(&[(PARENT_SPAN_ID << 3 | proto::LEN) as u8, 8]);
            put(&p.to_be_bytes());
            if parent_remote {
                flags |= FLAG_IS_REMOTE;
            }
        }
        // Field 16 takes a tag of two bytes (`16 << 3 | 5` as a varint).
        put(&[(FLAGS << 3 | proto::FIXED32) as u8 | 0x80, ((FLAGS << 3) >> 7) as u8]);
        put(&flags.to_le_bytes());
        let kind = if kind == Kind::Server { KIND_SERVER } else { KIND_CLIENT };
        put(&[(KIND << 3 | proto::VARINT) as u8, kind as u8]);
        put(&[(START << 3 | proto::FIXED64) as u8]);
        put(&unix_nanos(start).to_le_bytes());
        let mut buf = batch::spare();
        buf.extend_from_slice(&head[..n]);
        Span { attrs: Attrs { buf } }
    }

    /// The span's name, the concatenation of `parts` (`GET /api`).
    pub fn name(&mut self, parts: &[&str]) {
        let buf = &mut self.attrs.buf;
        proto::len_prefix(buf, proto::span::NAME, parts.iter().map(|p| p.len()).sum());
        for p in parts {
            buf.extend_from_slice(p.as_bytes());
        }
    }

    /// Marks the span failed (status `ERROR`) with `message`.
    pub fn error(&mut self, message: &str) {
        use proto::span::*;
        let buf = &mut self.attrs.buf;
        let n = proto::field_len(STATUS_MESSAGE, message.len()) + 2;
        proto::len_prefix(buf, STATUS, n);
        proto::bytes(buf, STATUS_MESSAGE, message.as_bytes());
        proto::uint(buf, STATUS_CODE, STATUS_ERROR);
    }
}

/// Traces for one configuration: sampling, propagation, and the queue to the exporter.
#[derive(Debug)]
pub struct Tracer {
    settings: Tracing,
    /// Sampled when the trace id's number is below this; `None`: always.
    threshold: Option<u64>,
    /// Where this tracer's batches go.
    queue: Arc<batch::Queue>,
    /// Spans that make a batch.
    batch: usize,
    /// Longest a span waits in its thread's batch.
    interval: std::time::Duration,
    stats: Arc<TraceStats>,
    exporter: export::Exporter,
}

impl Tracer {
    /// Starts the exporter for `settings` (the `tracing:` of a configuration; files read by
    /// then). `stats` survive a new tracer after a reload.
    pub fn start(settings: &Tracing, node_id: &str, stats: Arc<TraceStats>) -> Result<Tracer, ExportError> {
        let batch = settings.export.batch.max(1);
        // The queue holds batches: `export.queue` spans' worth of full ones.
        let (tx, rx) = tokio::sync::mpsc::channel((settings.export.queue / batch).max(1));
        let shared = Arc::new(batch::Shared::default());
        let exporter = export::Exporter::start(settings, node_id, rx, shared.clone(), stats.clone())?;
        Ok(Tracer {
            settings: settings.clone(),
            threshold: threshold(settings.sampler.ratio),
            queue: Arc::new(batch::Queue { tx, shared, stats: stats.clone() }),
            batch,
            interval: settings.export.interval.0,
            stats,
            exporter,
        })
    }

    /// The settings it runs with.
    pub fn settings(&self) -> &Tracing {
        &self.settings
    }

    /// Counters.
    pub fn stats(&self) -> &Arc<TraceStats> {
        &self.stats
    }

    /// The trace context of a request: the client's continued when `propagate` is on and its
    /// `traceparent` is valid, else a new trace. With `propagate`, the client's `traceparent`
    /// and `tracestate` are taken off the request (each upstream attempt gets its own).
    #[inline]
    pub fn begin(&self, headers: &mut HeaderMap) -> Ctx {
        let parent = match self.settings.propagate {
            true => propagation::take(headers),
            false => None,
        };
        let span_id = ids::span_id();
        match parent {
            Some(p) => {
                let sampled = match self.settings.sampler.parent_based {
                    true => p.sampled,
                    false => self.samples(p.trace_id),
                };
                Ctx { trace_id: p.trace_id, span_id, parent: Some(p.span_id), sampled, tracestate: p.tracestate }
            }
            None => {
                let trace_id = ids::trace_id();
                Ctx { trace_id, span_id, parent: None, sampled: self.samples(trace_id), tracestate: None }
            }
        }
    }

    /// Whether `propagate` is on: upstreams get the trace context.
    pub fn propagates(&self) -> bool {
        self.settings.propagate
    }

    fn samples(&self, trace_id: u128) -> bool {
        match self.threshold {
            None => true,
            // The trace id's low 64 bits, as the SDK's TraceIdRatioBased reads them.
            Some(t) => ((trace_id as u64) >> 1) < t,
        }
    }

    /// Ends `span` at `end` and adds it to this thread's batch, which goes to the exporter once
    /// it holds `export.batch` spans or its first is `export.interval` old.
    #[inline]
    pub fn finish(&self, mut span: Span, end: SystemTime) {
        proto::fixed64(&mut span.attrs.buf, proto::span::END, unix_nanos(end));
        batch::add(&self.queue, &span.attrs.buf, self.batch, self.interval);
    }

    /// Exports what is queued and stops the exporter, within `timeout` (the process stops).
    pub fn shutdown(&self, timeout: std::time::Duration) {
        self.exporter.shutdown(timeout);
    }
}

/// The SDK's threshold for `ratio`: `None` for 1 (always), 0 for 0 (never).
fn threshold(ratio: f64) -> Option<u64> {
    if ratio >= 1.0 {
        None
    } else if ratio <= 0.0 {
        Some(0)
    } else {
        Some((ratio * (1u64 << 63) as f64) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ratio_samples_its_share_of_random_trace_ids() {
        for ratio in [0.01, 0.1, 0.5] {
            let t = threshold(ratio);
            let n = 200_000;
            let hits = (0..n).filter(|_| ((ids::trace_id() as u64) >> 1) < t.unwrap_or(u64::MAX)).count();
            let share = hits as f64 / n as f64;
            assert!((share - ratio).abs() < ratio * 0.1 + 0.002, "{ratio}: {share}");
        }
        assert_eq!(threshold(1.0), None);
        assert_eq!(threshold(0.0), Some(0));
    }

    /// What `Span` and the envelope write, decoded by the official OTLP messages.
    #[test]
    fn spans_decode_as_otlp_messages() {
        use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
        use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
        use prost::Message;
        let start = SystemTime::UNIX_EPOCH + std::time::Duration::from_nanos(1_700_000_000_123_456_789);
        let end = start + std::time::Duration::from_micros(1500);
        let mut server =
            Span::new(Kind::Server, 0x0af7651916cd43dd8448eb211c80319c, 0x1122, Some(0xb7ad6b7169203331), true, start);
        server.name(&["GET", " ", "/api"]);
        server.str(&Key::new("http.request.method"), "GET");
        server.int(&Key::new("http.response.status_code"), 503);
        server.int(&Key::new("negative"), -2);
        server.bool(&Key::new("gatehouse.connection.reused"), true);
        server.ip(&Key::new("client.address"), std::net::IpAddr::from([192, 0, 2, 7]));
        server.str(&Key::new("long"), &"x".repeat(300));
        server.error("503");
        let mut client =
            Span::new(Kind::Client, 0x0af7651916cd43dd8448eb211c80319c, 0x3344, Some(0x1122), false, start);
        client.name(&["GET"]);
        // Attributes encoded once, added as they are.
        let mut once = Attrs::default();
        once.str(&Key::new("server.address"), "backend.internal");
        once.int(&Key::new("server.port"), 8443);
        let once = once.into_bytes();
        client.encoded(&once);
        client.bool(&Key::new("tls.resumed"), false);
        // Two threads' batches: the server span in one, the client span in the other.
        let batches: Vec<Vec<u8>> = [server, client]
            .into_iter()
            .map(|mut span| {
                proto::fixed64(&mut span.attrs.buf, proto::span::END, unix_nanos(end));
                let mut batch = Vec::new();
                proto::bytes(&mut batch, proto::SCOPE_SPANS_SPANS, &span.attrs.buf);
                batch
            })
            .collect();
        let envelope =
            proto::Envelope::new(&[("service.name", "gw"), ("service.instance.id", "a")], ("gatehouse", "1.2"));
        let spans_len = batches.iter().map(|b| b.len()).sum();
        let (mut message, len) = envelope.head(0, spans_len);
        for b in &batches {
            message.extend_from_slice(b);
        }
        assert_eq!(message.len(), len);
        let decoded = ExportTraceServiceRequest::decode(message.as_slice());
        let request = decoded.unwrap_or_default();
        assert_eq!(request.resource_spans.len(), 1);
        let rs = &request.resource_spans[0];
        let resource: Vec<_> = rs.resource.iter().flat_map(|r| r.attributes.iter()).map(|kv| kv.key.as_str()).collect();
        assert_eq!(resource, ["service.name", "service.instance.id"]);
        let scope = &rs.scope_spans[0];
        assert_eq!(scope.scope.as_ref().map(|s| (s.name.as_str(), s.version.as_str())), Some(("gatehouse", "1.2")));
        let [s, c] = &scope.spans[..] else { panic!("two spans: {:?}", scope.spans) };
        assert_eq!(s.trace_id, 0x0af7651916cd43dd8448eb211c80319cu128.to_be_bytes());
        assert_eq!(s.span_id, 0x1122u64.to_be_bytes());
        assert_eq!(s.parent_span_id, 0xb7ad6b7169203331u64.to_be_bytes());
        assert_eq!(s.flags, 0x301);
        assert_eq!(c.flags, 0x101);
        assert_eq!((s.kind, c.kind), (2, 3));
        assert_eq!((s.name.as_str(), c.name.as_str()), ("GET /api", "GET"));
        assert_eq!(s.start_time_unix_nano, 1_700_000_000_123_456_789);
        assert_eq!(s.end_time_unix_nano - s.start_time_unix_nano, 1_500_000);
        let attr =
            |k: &str| s.attributes.iter().find(|kv| kv.key == k).and_then(|kv| kv.value.clone()).and_then(|v| v.value);
        assert_eq!(attr("http.request.method"), Some(V::StringValue("GET".into())));
        assert_eq!(attr("http.response.status_code"), Some(V::IntValue(503)));
        assert_eq!(attr("negative"), Some(V::IntValue(-2)));
        assert_eq!(attr("gatehouse.connection.reused"), Some(V::BoolValue(true)));
        assert_eq!(attr("client.address"), Some(V::StringValue("192.0.2.7".into())));
        assert_eq!(attr("long"), Some(V::StringValue("x".repeat(300))));
        assert_eq!(s.status.as_ref().map(|st| (st.code, st.message.as_str())), Some((2, "503")));
        assert_eq!(c.status, None);
        assert_eq!(c.parent_span_id, 0x1122u64.to_be_bytes());
        let client_attrs: Vec<_> =
            c.attributes.iter().map(|kv| (kv.key.as_str(), kv.value.clone().and_then(|v| v.value))).collect();
        assert_eq!(
            client_attrs,
            [
                ("server.address", Some(V::StringValue("backend.internal".into()))),
                ("server.port", Some(V::IntValue(8443))),
                ("tls.resumed", Some(V::BoolValue(false))),
            ]
        );
    }

    #[test]
    fn traceparent_is_w3c_version_00() {
        let ctx = Ctx {
            trace_id: 0x0af7651916cd43dd8448eb211c80319c,
            span_id: 1,
            parent: None,
            sampled: true,
            tracestate: None,
        };
        assert_eq!(ctx.traceparent(0xb7ad6b7169203331), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
        let off = Ctx { sampled: false, ..ctx.clone() };
        assert!(off.traceparent(2).to_str().unwrap_or_default().ends_with("-0000000000000002-00"));
        for _ in 0..1000 {
            let (t, s) = (ids::trace_id(), ids::span_id());
            let c = Ctx { trace_id: t, span_id: 1, parent: None, sampled: true, tracestate: None };
            assert_eq!(c.traceparent(s), format!("00-{t:032x}-{s:016x}-01").as_str());
            assert!(parse_traceparent(c.traceparent(s).as_bytes()) == Some((t, s, true)));
        }
        // Values held while later ones fill and replace their slab keep their bytes.
        let held: Vec<(String, HeaderValue)> = (0..10 * SLAB_VALUES as u64 + 3)
            .map(|s| (format!("00-0af7651916cd43dd8448eb211c80319c-{:016x}-01", s + 1), ctx.traceparent(s + 1)))
            .collect();
        for (want, v) in &held {
            assert_eq!(v, want.as_str());
        }
    }
}
