//! The exporter thread: a Tokio runtime of its own, woken when a worker queued a batch of
//! finished spans (encoded OTLP `Span`s, [`crate::batch`]) or every `export.interval`, joining
//! batches up to `export.batch` spans into an `ExportTraceServiceRequest` and sending it with a
//! hyper client made here: protobuf over HTTP (`/v1/traces`), or the gRPC `TraceService/Export`
//! call over HTTP/2. One export at a time, each bounded by `otlp.timeout`; a failed one is
//! counted and its spans are let go. The batches' buffers go back to the workers.

use crate::batch::{Batch, Shared, SPARE_BUFFERS};
use crate::proto::Envelope;
use bytes::Buf;
use gatehouse_config::{OtlpProtocol, Tracing};
use http_body_util::BodyExt;
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
fn read_ca(settings: &Tracing) -> Result<Option<rustls::RootCertStore>, ExportError> {
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
    Ok(Some(roots))
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
        rx: mpsc::Receiver<Batch>,
        shared: Arc<Shared>,
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
                    let sink = match build(&settings, &node_id, ca) {
                        Ok(s) => s,
                        Err(e) => {
                            let _ = built_tx.send(Err(e));
                            return;
                        }
                    };
                    let _ = built_tx.send(Ok(()));
                    run(sink, &settings, rx, &shared, stop_rx, &stats).await;
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

/// Where and how batches go: the URL, the headers, and the client for the protocol.
#[derive(Debug)]
struct Sink {
    protocol: OtlpProtocol,
    url: http::Uri,
    headers: http::HeaderMap,
    client: Client,
    timeout: Duration,
    envelope: Envelope,
}

/// The gRPC method OTLP exports traces with.
const GRPC_EXPORT: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/// The sink for `settings`: OTLP/HTTP posts `application/x-protobuf` to `/v1/traces`; OTLP/gRPC
/// calls `TraceService/Export` over HTTP/2 (prior knowledge for `http://`, ALPN for `https://`).
fn build(settings: &Tracing, node_id: &str, ca: Option<rustls::RootCertStore>) -> Result<Sink, ExportError> {
    let otlp = &settings.otlp;
    let mut headers = http::HeaderMap::new();
    for (k, v) in &otlp.headers {
        if let (Ok(k), Ok(v)) = (http::HeaderName::try_from(k.as_str()), http::HeaderValue::try_from(v.as_str())) {
            headers.insert(k, v);
        }
    }
    let grpc = otlp.protocol == OtlpProtocol::Grpc;
    let (url, content_type) = match grpc {
        false => (http_url(&otlp.endpoint), "application/x-protobuf"),
        true => (format!("{}{GRPC_EXPORT}", otlp.endpoint.trim_end_matches('/')), "application/grpc"),
    };
    headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static(content_type));
    if grpc {
        headers.insert(http::header::TE, http::HeaderValue::from_static("trailers"));
        if let Ok(v) = http::HeaderValue::try_from(format!("{}m", otlp.timeout.0.as_millis().max(1))) {
            headers.insert("grpc-timeout", v);
        }
    }
    let url = url.parse().map_err(|e| ExportError::Build(format!("{url}: {e}")))?;
    let version = env!("CARGO_PKG_VERSION");
    let envelope = Envelope::new(
        &[("service.name", &settings.service_name), ("service.version", version), ("service.instance.id", node_id)],
        ("gatehouse", version),
    );
    let client = client(ca, grpc)?;
    Ok(Sink { protocol: otlp.protocol, url, headers, client, timeout: otlp.timeout.0, envelope })
}

type Client = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    ExportBody,
>;

/// A part of an export's body: the envelope's head, or a worker's batch of spans, written as
/// it is (hyper writes the parts with vectored writes, none copied into one buffer). A
/// batch's buffer goes back to the workers when hyper is done with it.
#[derive(Debug)]
struct Part {
    bytes: Vec<u8>,
    at: usize,
    /// Where a batch's buffer goes back to.
    spare: Option<Arc<Shared>>,
}

impl Buf for Part {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn chunk(&self) -> &[u8] {
        &self.bytes[self.at..]
    }

    fn advance(&mut self, n: usize) {
        self.at = (self.at + n).min(self.bytes.len());
    }
}

impl Drop for Part {
    fn drop(&mut self) {
        if let Some(shared) = self.spare.take() {
            give_back(&shared, std::mem::take(&mut self.bytes));
        }
    }
}

/// An export's body: its parts, of a length known up front (`Content-Length`, or the gRPC
/// message's DATA frames).
#[derive(Debug)]
struct ExportBody {
    parts: std::collections::VecDeque<Part>,
    len: u64,
}

impl http_body::Body for ExportBody {
    type Data = Part;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Part>, Self::Error>>> {
        let part = self.parts.pop_front();
        if let Some(p) = &part {
            self.len -= p.remaining() as u64;
        }
        std::task::Poll::Ready(part.map(|p| Ok(http_body::Frame::data(p))))
    }

    fn is_end_stream(&self) -> bool {
        self.parts.is_empty()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.len)
    }
}

/// A hyper client on this thread's runtime with rustls (the CA file's roots or the system's):
/// HTTP/1.1 or HTTP/2 by ALPN for OTLP/HTTP, HTTP/2 only for gRPC.
fn client(roots: Option<rustls::RootCertStore>, http2_only: bool) -> Result<Client, ExportError> {
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
    let connector = match http2_only {
        true => builder.https_or_http().enable_http2().build(),
        false => builder.https_or_http().enable_http1().enable_http2().build(),
    };
    Ok(hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(http2_only)
        .build(connector))
}

impl Sink {
    /// Sends batches as one export; `Err` says why the collector did not take it. The batches'
    /// buffers go back to the workers once written (or when the export is given up).
    async fn send(&self, batches: Vec<Batch>, shared: &Arc<Shared>) -> Result<(), String> {
        let spans_len = batches.iter().map(|b| b.bytes.len()).sum();
        let grpc = self.protocol == OtlpProtocol::Grpc;
        let (mut head, len) = self.envelope.head(if grpc { 5 } else { 0 }, spans_len);
        if grpc {
            // gRPC's message header: not compressed, then the message's length.
            let len = u32::try_from(len).map_err(|_| "batch too large".to_string())?;
            head[1..5].copy_from_slice(&len.to_be_bytes());
        }
        let mut parts = std::collections::VecDeque::with_capacity(batches.len() + 1);
        let mut body_len = head.len() as u64;
        parts.push_back(Part { bytes: head, at: 0, spare: None });
        for b in batches {
            body_len += b.bytes.len() as u64;
            parts.push_back(Part { bytes: b.bytes, at: 0, spare: Some(shared.clone()) });
        }
        let body = ExportBody { parts, len: body_len };
        let mut request = http::Request::new(body);
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = self.url.clone();
        *request.headers_mut() = self.headers.clone();
        let exchange = async {
            let response = self.client.request(request).await.map_err(|e| gatehouse_telemetry::error_chain(&e))?;
            let (parts, body) = response.into_parts();
            let collected =
                http_body_util::Limited::new(body, MAX_ANSWER).collect().await.map_err(|e| e.to_string())?;
            let trailers = collected.trailers().cloned();
            let answer = collected.to_bytes();
            match self.protocol {
                OtlpProtocol::Http if parts.status.is_success() => Ok(()),
                OtlpProtocol::Http => Err(format!(
                    "the collector answered {}: {}",
                    parts.status,
                    String::from_utf8_lossy(&answer[..answer.len().min(200)])
                )),
                OtlpProtocol::Grpc => grpc_outcome(parts.status, &parts.headers, trailers.as_ref()),
            }
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| "the collector did not answer in time".to_string())?
    }
}

/// A gRPC call's result: `grpc-status` from the trailers, or from the headers of a
/// trailers-only answer.
fn grpc_outcome(
    status: http::StatusCode,
    headers: &http::HeaderMap,
    trailers: Option<&http::HeaderMap>,
) -> Result<(), String> {
    if status != http::StatusCode::OK {
        return Err(format!("the collector answered HTTP {status}"));
    }
    let field = |name: &str| trailers.and_then(|t| t.get(name)).or_else(|| headers.get(name));
    match field("grpc-status").map(|v| v.as_bytes()) {
        Some(b"0") => Ok(()),
        Some(code) => Err(format!(
            "the collector answered gRPC status {}: {}",
            String::from_utf8_lossy(code),
            field("grpc-message").map(|m| String::from_utf8_lossy(m.as_bytes())).unwrap_or_default()
        )),
        None => Err("the collector's answer has no grpc-status".into()),
    }
}

/// Exports until told to stop (then what is queued goes out) or every sender is gone. It waits
/// for a queued batch (the workers' signal), the interval or the stop; each wake-up sends what is
/// queued, joined into exports of up to `export.batch` spans.
async fn run(
    sink: Sink,
    settings: &Tracing,
    mut rx: mpsc::Receiver<Batch>,
    shared: &Arc<Shared>,
    mut stop: oneshot::Receiver<()>,
    stats: &TraceStats,
) {
    let batch = settings.export.batch.max(1);
    let interval = settings.export.interval.0;
    // A batch that would have made the export larger than `export.batch`: the next one's first.
    let mut carry: Option<Batch> = None;
    let mut stopping = false;
    let mut open = true;
    while open && !stopping {
        tokio::select! {
            () = shared.ready.notified() => {}
            () = tokio::time::sleep(interval) => {}
            _ = &mut stop => stopping = true,
        }
        // Everything queued now goes.
        loop {
            let mut drained = false;
            let mut held: Vec<Batch> = carry.take().into_iter().collect();
            let mut spans = held.iter().map(|b| b.spans).sum::<usize>();
            while spans < batch {
                match rx.try_recv() {
                    Ok(b) if spans + b.spans > batch && !held.is_empty() => {
                        carry = Some(b);
                        break;
                    }
                    Ok(b) => {
                        spans += b.spans;
                        held.push(b);
                    }
                    Err(e) => {
                        open = e == mpsc::error::TryRecvError::Empty;
                        drained = true;
                        break;
                    }
                }
            }
            if !held.is_empty() {
                match sink.send(held, shared).await {
                    Ok(()) => {
                        stats.exported.fetch_add(spans as u64, Relaxed);
                    }
                    Err(e) => failed(stats, spans as u64, &e),
                }
            }
            if drained {
                break;
            }
        }
    }
}

/// A sent batch's buffer, for the workers' next batches.
fn give_back(shared: &Shared, mut bytes: Vec<u8>) {
    if let Ok(mut spare) = shared.spare.lock() {
        if spare.len() < SPARE_BUFFERS {
            bytes.clear();
            spare.push(bytes);
        }
    }
}

fn failed(stats: &TraceStats, n: u64, why: &str) {
    stats.failed.fetch_add(n, Relaxed);
    // The first failure of a run of them is logged; the counter tells the rest.
    if stats.failed_exports.fetch_add(1, Relaxed).is_multiple_of(100) {
        tracing::warn!(spans = n, error = why, "trace export failed; spans dropped");
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
