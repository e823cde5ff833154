//! The exporter thread: a Tokio runtime of its own, reading finished spans from the request
//! path's queue, batching them (`export.batch` spans, or what came within `export.interval`),
//! making them the SDK's `SpanData` and exporting them with `opentelemetry-otlp` (protobuf over
//! HTTP through a hyper client made here, or gRPC through tonic). One export at a time, each
//! bounded by `otlp.timeout`; a failed one is counted and its spans are let go.

use crate::{Kind, SpanRecord, Value};
use bytes::Bytes;
use gatehouse_config::{OtlpProtocol, Tracing};
use http_body_util::BodyExt;
use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter as _, SpanLinks};
use opentelemetry_sdk::Resource;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Largest answer read from a collector.
const MAX_ANSWER: usize = 4 << 20;

/// Span counters, for `/metrics`.
#[derive(Debug, Default)]
pub struct TraceStats {
    /// Spans the collector took.
    pub exported: AtomicU64,
    /// Spans dropped because the queue was full.
    pub dropped: AtomicU64,
    /// Spans in exports that failed (collector down, refused, timed out).
    pub failed: AtomicU64,
    /// Exports that failed.
    pub failed_exports: AtomicU64,
}

/// Why the exporter could not start.
#[derive(Debug)]
pub enum ExportError {
    /// `tracing.otlp.ca` could not be used.
    Ca(String),
    /// The exporter could not be made.
    Build(String),
    /// The thread could not start.
    Thread(std::io::Error),
}

impl std::fmt::Display for ExportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExportError::Ca(e) => write!(f, "tracing.otlp.ca: {e}"),
            ExportError::Build(e) => write!(f, "tracing.otlp: {e}"),
            ExportError::Thread(e) => write!(f, "cannot start the trace exporter thread: {e}"),
        }
    }
}

impl std::error::Error for ExportError {}

/// The running exporter thread.
#[derive(Debug)]
pub(crate) struct Exporter {
    stop: Mutex<Option<oneshot::Sender<()>>>,
    done: Mutex<Option<std::sync::mpsc::Receiver<()>>>,
}

/// The CA file's certificates, read now so that a bad file is the configuration's error.
fn read_ca(settings: &Tracing) -> Result<Option<(Vec<u8>, rustls::RootCertStore)>, ExportError> {
    let Some(path) = &settings.otlp.ca else { return Ok(None) };
    let pem = std::fs::read(path).map_err(|e| ExportError::Ca(format!("cannot read {}: {e}", path.display())))?;
    let mut roots = rustls::RootCertStore::empty();
    use rustls::pki_types::{pem::PemObject, CertificateDer};
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| ExportError::Ca(format!("{}: {e}", path.display())))?;
        roots.add(cert).map_err(|e| ExportError::Ca(format!("{}: {e}", path.display())))?;
    }
    if roots.is_empty() {
        return Err(ExportError::Ca(format!("{} holds no CA certificate", path.display())));
    }
    Ok(Some((pem, roots)))
}

/// Reads the files `settings` name, as `gatehouse check` does: the first problem.
pub fn check_files(settings: &Tracing) -> Result<(), ExportError> {
    read_ca(settings).map(drop)
}

/// The URL spans are posted to: `endpoint`, with `/v1/traces` when it has no path (HTTP).
fn http_url(endpoint: &str) -> String {
    let rest = endpoint.split_once("://").map_or(endpoint, |(_, r)| r);
    match rest.find('/') {
        Some(i) if rest.len() > i + 1 => endpoint.to_string(),
        _ => format!("{}/v1/traces", endpoint.trim_end_matches('/')),
    }
}

impl Exporter {
    pub(crate) fn start(
        settings: &Tracing,
        node_id: &str,
        rx: mpsc::Receiver<SpanRecord>,
        stats: Arc<TraceStats>,
    ) -> Result<Exporter, ExportError> {
        let ca = read_ca(settings)?;
        let settings = settings.clone();
        let node_id = node_id.to_string();
        let (stop_tx, stop_rx) = oneshot::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let (built_tx, built_rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("otel-export".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = built_tx.send(Err(ExportError::Thread(e)));
                        return;
                    }
                };
                rt.block_on(async move {
                    let exporter = match build(&settings, &node_id, ca) {
                        Ok(e) => e,
                        Err(e) => {
                            let _ = built_tx.send(Err(e));
                            return;
                        }
                    };
                    let _ = built_tx.send(Ok(()));
                    run(exporter, &settings, rx, stop_rx, &stats).await;
                });
                let _ = done_tx.send(());
            })
            .map_err(ExportError::Thread)?;
        match built_rx.recv() {
            Ok(Ok(())) => Ok(Exporter { stop: Mutex::new(Some(stop_tx)), done: Mutex::new(Some(done_rx)) }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(ExportError::Build("the exporter thread ended".into())),
        }
    }

    /// Exports what is queued, then stops; waits at most `timeout`.
    pub(crate) fn shutdown(&self, timeout: Duration) {
        if let Some(stop) = self.stop.lock().ok().and_then(|mut s| s.take()) {
            let _ = stop.send(());
        }
        if let Some(done) = self.done.lock().ok().and_then(|mut d| d.take()) {
            let _ = done.recv_timeout(timeout);
        }
    }
}

/// The OTLP exporter for `settings`, on the current runtime.
fn build(
    settings: &Tracing,
    node_id: &str,
    ca: Option<(Vec<u8>, rustls::RootCertStore)>,
) -> Result<opentelemetry_otlp::SpanExporter, ExportError> {
    let otlp = &settings.otlp;
    let headers: std::collections::HashMap<String, String> =
        otlp.headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let mut exporter = match otlp.protocol {
        OtlpProtocol::Http => {
            let client = HttpClient::new(ca.map(|(_, roots)| roots), otlp.timeout.0)?;
            opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_endpoint(http_url(&otlp.endpoint))
                .with_timeout(otlp.timeout.0)
                .with_headers(headers)
                .with_http_client(client)
                .build()
        }
        OtlpProtocol::Grpc => {
            let mut map = http::HeaderMap::new();
            for (k, v) in &otlp.headers {
                if let (Ok(k), Ok(v)) =
                    (http::HeaderName::try_from(k.as_str()), http::HeaderValue::try_from(v.as_str()))
                {
                    map.insert(k, v);
                }
            }
            let mut builder = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(otlp.endpoint.clone())
                .with_timeout(otlp.timeout.0)
                .with_metadata(opentelemetry_otlp::tonic_types::metadata::MetadataMap::from_headers(map));
            if otlp.endpoint.starts_with("https://") {
                use opentelemetry_otlp::tonic_types::transport::{Certificate, ClientTlsConfig};
                let tls = match ca {
                    Some((pem, _)) => ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem)),
                    None => ClientTlsConfig::new().with_native_roots(),
                };
                builder = builder.with_tls_config(tls);
            }
            builder.build()
        }
    }
    .map_err(|e| ExportError::Build(e.to_string()))?;
    let resource = Resource::builder_empty()
        .with_service_name(settings.service_name.clone())
        .with_attributes([
            KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
            KeyValue::new("service.instance.id", node_id.to_string()),
        ])
        .build();
    exporter.set_resource(&resource);
    Ok(exporter)
}

/// Batches and exports until told to stop (then what is queued goes out) or every sender is gone.
async fn run(
    exporter: opentelemetry_otlp::SpanExporter,
    settings: &Tracing,
    mut rx: mpsc::Receiver<SpanRecord>,
    mut stop: oneshot::Receiver<()>,
    stats: &TraceStats,
) {
    let batch = settings.export.batch.max(1);
    let interval = settings.export.interval.0;
    let scope = InstrumentationScope::builder("gatehouse").with_version(env!("CARGO_PKG_VERSION")).build();
    let mut buf: Vec<SpanRecord> = Vec::with_capacity(batch);
    let mut open = true;
    let mut stopping = false;
    while open || !buf.is_empty() {
        if buf.is_empty() && !stopping {
            tokio::select! {
                n = rx.recv_many(&mut buf, batch) => open = n > 0,
                _ = &mut stop => stopping = true,
            }
        }
        // Fill the batch for at most `interval` from its first span (at once when stopping).
        let deadline = tokio::time::Instant::now() + interval;
        while open && buf.len() < batch {
            if stopping {
                match rx.try_recv() {
                    Ok(s) => buf.push(s),
                    Err(_) => break,
                }
                continue;
            }
            let room = batch - buf.len();
            tokio::select! {
                n = rx.recv_many(&mut buf, room) => open = n > 0,
                _ = tokio::time::sleep_until(deadline) => break,
                _ = &mut stop => stopping = true,
            }
        }
        if buf.is_empty() {
            if stopping {
                break;
            }
            continue;
        }
        let n = buf.len() as u64;
        let spans: Vec<SpanData> = buf.drain(..).map(|s| span_data(s, &scope)).collect();
        let bound = settings.otlp.timeout.0 + Duration::from_secs(1);
        match tokio::time::timeout(bound, exporter.export(spans)).await {
            Ok(Ok(())) => {
                stats.exported.fetch_add(n, Relaxed);
            }
            Ok(Err(e)) => failed(stats, n, &e.to_string()),
            Err(_) => failed(stats, n, "timed out"),
        }
        if stopping && rx.is_empty() {
            break;
        }
    }
    let _ = exporter.shutdown();
}

fn failed(stats: &TraceStats, n: u64, why: &str) {
    stats.failed.fetch_add(n, Relaxed);
    // The first failure of a run of them is logged; the counter tells the rest.
    if stats.failed_exports.fetch_add(1, Relaxed).is_multiple_of(100) {
        tracing::warn!(spans = n, error = why, "trace export failed; spans dropped");
    }
}

fn span_data(s: SpanRecord, scope: &InstrumentationScope) -> SpanData {
    let context = SpanContext::new(
        TraceId::from(s.trace_id),
        SpanId::from(s.span_id),
        TraceFlags::SAMPLED,
        false,
        TraceState::default(),
    );
    SpanData {
        span_context: context,
        parent_span_id: s.parent.map_or(SpanId::INVALID, SpanId::from),
        parent_span_is_remote: s.parent_remote,
        span_kind: match s.kind {
            Kind::Server => SpanKind::Server,
            Kind::Client => SpanKind::Client,
        },
        name: s.name.into(),
        start_time: s.start,
        end_time: s.end,
        attributes: s
            .attributes
            .into_iter()
            .map(|(k, v)| match v {
                Value::Str(v) => KeyValue::new(k, v),
                Value::Int(v) => KeyValue::new(k, v),
                Value::Bool(v) => KeyValue::new(k, v),
            })
            .collect(),
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status: match s.error {
            Some(e) => Status::error(e),
            None => Status::Unset,
        },
        instrumentation_scope: scope.clone(),
    }
}

/// The HTTP client spans are posted with: hyper on this thread's runtime, rustls (the CA file's
/// roots or the system's), each request bounded by `timeout` and its answer by [`MAX_ANSWER`].
#[derive(Debug)]
struct HttpClient {
    inner: hyper_util::client::legacy::Client<
        hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
        http_body_util::Full<Bytes>,
    >,
    timeout: Duration,
}

impl HttpClient {
    fn new(roots: Option<rustls::RootCertStore>, timeout: Duration) -> Result<HttpClient, ExportError> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let builder = hyper_rustls::HttpsConnectorBuilder::new();
        let builder = match roots {
            Some(roots) => {
                let config = rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map_err(|e| ExportError::Build(e.to_string()))?
                    .with_root_certificates(roots)
                    .with_no_client_auth();
                builder.with_tls_config(config)
            }
            None => builder
                .with_provider_and_native_roots(provider)
                .map_err(|e| ExportError::Build(format!("the system's CA roots: {e}")))?,
        };
        let connector = builder.https_or_http().enable_http1().enable_http2().build();
        let inner = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
        Ok(HttpClient { inner, timeout })
    }
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for HttpClient {
    async fn send_bytes(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, opentelemetry_http::HttpError> {
        let (parts, body) = request.into_parts();
        let request = http::Request::from_parts(parts, http_body_util::Full::new(body));
        let exchange = async {
            let response = self.inner.request(request).await?;
            let (parts, body) = response.into_parts();
            let body = http_body_util::Limited::new(body, MAX_ANSWER).collect().await?.to_bytes();
            Ok::<_, opentelemetry_http::HttpError>(http::Response::from_parts(parts, body))
        };
        tokio::time::timeout(self.timeout, exchange).await.map_err(|_| "the collector did not answer in time")?
    }
}

#[cfg(test)]
mod tests {
    use super::http_url;

    #[test]
    fn the_traces_path_is_added_to_a_bare_endpoint() {
        assert_eq!(http_url("http://127.0.0.1:4318"), "http://127.0.0.1:4318/v1/traces");
        assert_eq!(http_url("http://127.0.0.1:4318/"), "http://127.0.0.1:4318/v1/traces");
        assert_eq!(http_url("https://otel.example.com/otlp/v1/traces"), "https://otel.example.com/otlp/v1/traces");
    }
}
