//! OpenTelemetry traces for the request path.
//!
//! A [`Tracer`] is built from `tracing:` and kept in the snapshot. On each request it reads the
//! W3C trace context (`traceparent`, `tracestate`), decides sampling (the parent's flag, else a
//! ratio of the trace id, as OpenTelemetry's `TraceIdRatioBased`), and gives each upstream
//! attempt a `traceparent` of its own. Sampled requests record a server span and a client span
//! per attempt as plain [`SpanRecord`]s; finishing one is a `try_send` into a bounded queue, so a
//! worker never waits: a full queue drops the span and counts it.
//!
//! The queue is read by an exporter thread with a Tokio runtime of its own ([`export`]), which
//! batches the spans, makes them the SDK's `SpanData` there (off the request path) and hands the
//! batches to `opentelemetry-otlp`'s exporter: protobuf over HTTP through our own hyper client,
//! or gRPC through tonic. A collector that is down costs the dropped spans and nothing else.

mod export;
mod ids;
mod propagation;

pub use export::{check_files, ExportError, TraceStats};
pub use propagation::{parse_traceparent, Parent};

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
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut b = [0u8; 55];
        b[..3].copy_from_slice(b"00-");
        for (i, byte) in self.trace_id.to_be_bytes().iter().enumerate() {
            b[3 + 2 * i] = HEX[usize::from(byte >> 4)];
            b[4 + 2 * i] = HEX[usize::from(byte & 0xf)];
        }
        b[35] = b'-';
        for (i, byte) in span_id.to_be_bytes().iter().enumerate() {
            b[36 + 2 * i] = HEX[usize::from(byte >> 4)];
            b[37 + 2 * i] = HEX[usize::from(byte & 0xf)];
        }
        b[52..].copy_from_slice(if self.sampled { b"-01" } else { b"-00" });
        HeaderValue::from_bytes(&b).unwrap_or_else(|_| HeaderValue::from_static(""))
    }

    /// Puts the trace context of span `span_id` on an upstream request, in place of any.
    pub fn inject(&self, headers: &mut HeaderMap, span_id: u64) {
        headers.insert(TRACEPARENT.clone(), self.traceparent(span_id));
        match &self.tracestate {
            Some(state) => {
                headers.insert(TRACESTATE.clone(), state.clone());
            }
            None => {
                headers.remove(&TRACESTATE);
            }
        }
    }
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

/// An attribute's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A string.
    Str(String),
    /// A number.
    Int(i64),
    /// A flag.
    Bool(bool),
}

/// A finished span, as the request path records it.
#[derive(Clone, Debug)]
pub struct SpanRecord {
    /// Trace id.
    pub trace_id: u128,
    /// Span id.
    pub span_id: u64,
    /// Parent span id, if any.
    pub parent: Option<u64>,
    /// The parent is the client's span (not one of the gateway's).
    pub parent_remote: bool,
    /// Server or client.
    pub kind: Kind,
    /// `GET /api/{*}`-style name.
    pub name: String,
    /// Start.
    pub start: SystemTime,
    /// End.
    pub end: SystemTime,
    /// Attributes by their semantic-convention names.
    pub attributes: Vec<(&'static str, Value)>,
    /// Error status and its description.
    pub error: Option<String>,
}

/// Traces for one configuration: sampling, propagation, and the queue to the exporter.
#[derive(Debug)]
pub struct Tracer {
    settings: Tracing,
    /// Sampled when the trace id's number is below this; `None`: always.
    threshold: Option<u64>,
    queue: tokio::sync::mpsc::Sender<SpanRecord>,
    stats: Arc<TraceStats>,
    exporter: export::Exporter,
}

impl Tracer {
    /// Starts the exporter for `settings` (the `tracing:` of a configuration; files read by
    /// then). `stats` survive a new tracer after a reload.
    pub fn start(settings: &Tracing, node_id: &str, stats: Arc<TraceStats>) -> Result<Tracer, ExportError> {
        let (queue, rx) = tokio::sync::mpsc::channel(settings.export.queue.max(1));
        let exporter = export::Exporter::start(settings, node_id, rx, stats.clone())?;
        Ok(Tracer { settings: settings.clone(), threshold: threshold(settings.sampler.ratio), queue, stats, exporter })
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

    /// Hands a finished span to the exporter; dropped and counted when the queue is full.
    #[inline]
    pub fn finish(&self, span: SpanRecord) {
        if self.queue.try_send(span).is_err() {
            self.stats.dropped.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
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
        let off = Ctx { sampled: false, ..ctx };
        assert!(off.traceparent(2).to_str().unwrap_or_default().ends_with("-0000000000000002-00"));
        for _ in 0..1000 {
            let (t, s) = (ids::trace_id(), ids::span_id());
            let c = Ctx { trace_id: t, span_id: 1, parent: None, sampled: true, tracestate: None };
            assert_eq!(c.traceparent(s), format!("00-{t:032x}-{s:016x}-01").as_str());
            assert!(parse_traceparent(c.traceparent(s).as_bytes()) == Some((t, s, true)));
        }
    }
}
