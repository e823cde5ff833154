//! `tracing:`: OpenTelemetry traces, exported over OTLP (HTTP/protobuf or gRPC), with W3C trace
//! context taken from requests and given to upstreams.

use crate::units::Duration;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// `tracing:`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tracing {
    /// Where spans go.
    pub otlp: Otlp,
    /// `service.name` of the spans.
    #[serde(default = "default_service_name")]
    pub service_name: String,
    /// Which requests are traced.
    #[serde(default)]
    pub sampler: Sampler,
    /// Continue an inbound W3C `traceparent` (and `tracestate`), and give upstreams the trace
    /// context of their attempt.
    #[serde(default = "yes")]
    pub propagate: bool,
    /// The queue and the batches between the request path and the exporter.
    #[serde(default)]
    pub export: Export,
}

fn default_service_name() -> String {
    "gatehouse".into()
}

fn yes() -> bool {
    true
}

/// `tracing.otlp`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Otlp {
    /// The collector: `http://host:4318` (HTTP; `/v1/traces` added when the URL has no path)
    /// or `http://host:4317` (gRPC); `https://` for TLS.
    pub endpoint: String,
    /// `http` (protobuf over HTTP) or `grpc`.
    #[serde(default)]
    pub protocol: OtlpProtocol,
    /// Headers sent with every export (a vendor's API key).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Trust for an `https://` collector: a PEM file of CA certificates; without it the system's roots.
    #[serde(default)]
    pub ca: Option<PathBuf>,
    /// How long one export may take.
    #[serde(default = "default_timeout")]
    pub timeout: Duration,
}

fn default_timeout() -> Duration {
    Duration::secs(10)
}

/// OTLP transport.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OtlpProtocol {
    /// Protobuf over HTTP (`POST /v1/traces`).
    #[default]
    Http,
    /// gRPC (`opentelemetry.proto.collector.trace.v1.TraceService/Export`).
    Grpc,
}

/// `tracing.sampler`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Sampler {
    /// The share of new traces recorded, 0 to 1 (decided from the trace id, so every node
    /// decides the same for one trace).
    pub ratio: f64,
    /// A request with a `traceparent` follows its sampled flag instead of `ratio`.
    pub parent_based: bool,
}

impl Default for Sampler {
    fn default() -> Self {
        Sampler { ratio: 1.0, parent_based: true }
    }
}

/// `tracing.export`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Export {
    /// Finished spans waiting for the exporter; more are dropped (and counted).
    pub queue: usize,
    /// Most spans in one export.
    pub batch: usize,
    /// Longest a finished span waits for its batch.
    pub interval: Duration,
}

impl Default for Export {
    fn default() -> Self {
        Export { queue: 8192, batch: 512, interval: Duration::secs(1) }
    }
}

pub(crate) fn validate(c: &crate::Config, err: &mut impl FnMut(String, String)) {
    let Some(t) = &c.tracing else { return };
    if !is_collector_url(&t.otlp.endpoint) {
        err(
            "tracing.otlp.endpoint".into(),
            format!("{:?} is not an http:// or https:// URL with a host (and no query)", t.otlp.endpoint),
        );
    }
    if t.otlp.ca.is_some() && !t.otlp.endpoint.starts_with("https://") {
        err("tracing.otlp.ca".into(), "only an https:// endpoint uses a CA".into());
    }
    for (name, value) in &t.otlp.headers {
        if !crate::upstream::is_token(name) {
            err(format!("tracing.otlp.headers.{name}"), "not a header name".into());
        }
        if value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
            err(format!("tracing.otlp.headers.{name}"), "not a header value".into());
        }
    }
    if t.otlp.timeout.0.is_zero() {
        err("tracing.otlp.timeout".into(), "must be more than 0".into());
    }
    if t.service_name.trim().is_empty() {
        err("tracing.service_name".into(), "must not be empty".into());
    }
    if !(0.0..=1.0).contains(&t.sampler.ratio) {
        err("tracing.sampler.ratio".into(), format!("{} is not between 0 and 1", t.sampler.ratio));
    }
    let e = &t.export;
    if e.queue == 0 || e.queue > 1_000_000 {
        err("tracing.export.queue".into(), "between 1 and 1000000 spans".into());
    }
    if e.batch == 0 || e.batch > e.queue.max(1) {
        err("tracing.export.batch".into(), "between 1 and the queue's size".into());
    }
    if e.interval.0.is_zero() {
        err("tracing.export.interval".into(), "must be more than 0".into());
    }
}

/// `http://` or `https://`, a host (a name, an IPv4 address or a bracketed IPv6 one) and
/// optionally a port and a path; nothing else.
fn is_collector_url(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://")) else {
        return false;
    };
    let authority = rest.split('/').next().unwrap_or("");
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((h, after)) => (h, after.strip_prefix(':')),
            None => return false,
        },
        None => match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        },
    };
    !host.is_empty()
        && port.is_none_or(|p| p.parse::<u16>().is_ok())
        && !url.contains(['?', '#', ' ', '@'])
        && host.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':'))
}

#[cfg(test)]
mod tests {
    use super::is_collector_url;

    #[test]
    fn collector_urls() {
        for ok in
            ["http://127.0.0.1:4318", "https://otel.example.com/v1/traces", "http://[::1]:4317", "http://collector"]
        {
            assert!(is_collector_url(ok), "{ok}");
        }
        for bad in
            ["127.0.0.1:4318", "ftp://x", "http://", "http://:4318", "http://a:port", "http://a/?q=1", "http://u@a"]
        {
            assert!(!is_collector_url(bad), "{bad}");
        }
    }
}
