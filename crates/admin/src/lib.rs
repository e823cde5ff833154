//! The admin listener, on a socket of its own, served by the control thread so traffic workers
//! never do this work: `/metrics`, `/status` and `/healthz` without a token; the REST API under
//! `/api/v1` and the web console under `/console/` with one.

#![forbid(unsafe_code)]

mod api;
mod auth;
pub mod bodies;
mod certs;
pub mod client;
mod console;
mod draft;
mod draft_files;
mod http_util;
mod metrics;
mod routes;
mod stats;

pub use api::{openapi, Api, AppKeyMac};
pub use auth::{Audit, Tokens};
pub use certs::CertStore;
pub use metrics::{render_dns, render_metrics, render_tls};

use bytes::Bytes;
use gatehouse_proxy::Shared;
use gatehouse_tls::TlsStats;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// What `/status` reports; updated by the control loop on every apply.
pub type StatusDoc = Arc<Mutex<serde_json::Value>>;

/// Everything the admin listener answers from.
pub struct AdminState {
    /// The data plane's snapshot and counters.
    pub shared: Arc<Shared>,
    /// TLS counters.
    pub tls: Arc<TlsStats>,
    /// ACME counters.
    pub acme: Arc<gatehouse_acme::AcmeStats>,
    /// Counters of the names upstream targets are resolved by.
    pub dns: Arc<gatehouse_discovery::Stats>,
    /// Trace span counters.
    pub traces: Arc<gatehouse_otel::TraceStats>,
    /// This node's status document.
    pub status: StatusDoc,
    /// The API and console; none when no token is configured.
    pub api: Option<Arc<Api>>,
    /// Which `Host` names it answers for, and what it answers without a token.
    pub exposure: Exposure,
}

/// What the admin listener shows and to whom (`admin.hosts`, `admin.public`).
#[derive(Debug, Clone, Default)]
pub struct Exposure {
    /// Host names answered for besides IP addresses and `localhost`, lower case.
    pub hosts: Vec<String>,
    /// Paths answered without a token.
    pub public: Vec<String>,
}

impl Exposure {
    /// Whether a request naming `host` (a `Host` value, port and all) is for this listener:
    /// an IP address, `localhost`, or a configured name. A name that resolves here only because
    /// someone made it (DNS rebinding) is none of these.
    pub fn answers_for(&self, host: &str) -> bool {
        let name = match host.strip_prefix('[') {
            Some(rest) => return rest.split(']').next().is_some_and(|ip| ip.parse::<std::net::Ipv6Addr>().is_ok()),
            None => match host.rsplit_once(':') {
                Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
                _ => host,
            },
        };
        name.parse::<std::net::Ipv4Addr>().is_ok()
            || name.eq_ignore_ascii_case("localhost")
            || self.hosts.iter().any(|h| h.eq_ignore_ascii_case(name))
    }
}

/// The next connection on `listener`. When accepting fails (out of descriptors or memory), backs
/// off instead of spinning, then goes on.
pub async fn accept(listener: &tokio::net::TcpListener, what: &str) -> (tokio::net::TcpStream, SocketAddr) {
    let mut backoff = gatehouse_telemetry::AcceptBackoff::default();
    loop {
        match listener.accept().await {
            Ok(accepted) => {
                backoff.succeeded(what);
                return accepted;
            }
            Err(e) => tokio::time::sleep(backoff.failed(what, &e)).await,
        }
    }
}

/// Serves the admin endpoints until the task is aborted; over TLS when `tls` is given.
pub async fn serve(listener: tokio::net::TcpListener, state: Arc<AdminState>, tls: Option<Arc<rustls::ServerConfig>>) {
    loop {
        let (stream, remote) = accept(&listener, "admin").await;
        let (state, tls) = (state.clone(), tls.clone());
        tokio::spawn(async move {
            let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(handle(&state, req, remote).await) }
            });
            let builder = {
                let mut b = hyper::server::conn::http1::Builder::new();
                b.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(HEADER_TIMEOUT);
                b
            };
            match tls {
                None => {
                    let _ = builder.serve_connection(TokioIo::new(stream), service).await;
                }
                Some(config) => {
                    let handshake = gatehouse_tls::conn::handshake(stream, config);
                    match tokio::time::timeout(HEADER_TIMEOUT, handshake).await {
                        Ok(Ok(conn)) => {
                            let _ = builder.serve_connection(TokioIo::new(conn), service).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%remote, error = %e, "admin TLS handshake failed"),
                        Err(_) => tracing::debug!(%remote, "admin TLS handshake timed out"),
                    }
                }
            }
        });
    }
}

/// The 401 for a request to a path that answers without a token only when `admin.public` lists
/// it, made without an accepted token; `None` when it may go on.
fn needs_token(
    state: &AdminState,
    req: &http::Request<hyper::body::Incoming>,
    path: &str,
    remote: SocketAddr,
) -> Option<http::Response<Full<Bytes>>> {
    let guarded = req.method() == http::Method::GET
        && gatehouse_config::PUBLIC_PATHS.contains(&path)
        && !state.exposure.public.iter().any(|p| p == path);
    let api = state.api.as_ref();
    if !guarded || api.is_some_and(|a| a.tokens.check(req.headers().get(http::header::AUTHORIZATION)).is_some()) {
        return None;
    }
    if let Some(api) = api {
        api.refused.count(remote, req.method(), path);
    }
    let presented = req.headers().get(http::header::AUTHORIZATION);
    let body = serde_json::json!({"error": format!("{} (or list the path in admin.public)", auth::refusal(presented))});
    let mut resp = http_util::json(401, &body);
    resp.headers_mut().insert(http::header::WWW_AUTHENTICATE, auth::challenge(presented));
    Some(resp)
}

/// Time allowed for a TLS handshake and for a request head on the admin listener.
const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// `HEAD` is answered wherever `GET` is, as `GET` would be (RFC 9110 §9.3.2): the same status
/// and headers, `Content-Length` included; hyper leaves the body out of an answer to `HEAD`.
async fn handle(
    state: &AdminState,
    mut req: http::Request<hyper::body::Incoming>,
    remote: SocketAddr,
) -> http::Response<Full<Bytes>> {
    if req.method() == http::Method::HEAD {
        *req.method_mut() = http::Method::GET;
    }
    route(state, req, remote).await
}

async fn route(
    state: &AdminState,
    req: http::Request<hyper::body::Incoming>,
    remote: SocketAddr,
) -> http::Response<Full<Bytes>> {
    let path = req.uri().path().to_string();
    let host = req.headers().get(http::header::HOST).map(|h| h.to_str().unwrap_or("\u{0}"));
    if host.is_some_and(|h| !state.exposure.answers_for(h)) {
        return http_util::text(
            421,
            "text/plain",
            "421 Misdirected Request: not a host this listener answers for\n".into(),
        );
    }
    if let Some(refused) = needs_token(state, &req, &path, remote) {
        return refused;
    }
    match (req.method(), path.as_str()) {
        (&http::Method::GET, "/metrics") => {
            let mut text = render_metrics(&state.shared);
            render_tls(&mut text, &state.tls);
            metrics::render_acme(&mut text, &state.tls, &state.acme);
            render_dns(&mut text, &state.dns);
            metrics::render_traces(&mut text, &state.traces);
            if let Some(api) = &state.api {
                metrics::render_admin(&mut text, &api.refused);
            }
            http_util::text(200, "text/plain; version=0.0.4", text)
        }
        (&http::Method::GET, "/status") => {
            http_util::text(200, "application/json", state.status.lock().map(|s| s.to_string()).unwrap_or_default())
        }
        (&http::Method::GET, "/healthz") => http_util::text(200, "text/plain", "ok\n".into()),
        (&http::Method::GET, "/api/v1/openapi.json") => {
            http_util::text(200, "application/json", api::openapi().to_string())
        }
        (_, p) if p.starts_with("/api/") => match &state.api {
            Some(api) => api.handle(req, remote, state).await,
            None => http_util::json(
                404,
                &serde_json::json!({"error": "the admin API is off: configure admin.tokens to turn it on"}),
            ),
        },
        (&http::Method::GET, "/") => http_util::redirect("/console/"),
        (&http::Method::GET, p) if p.starts_with("/console/") => console::serve(p),
        _ => http_util::text(404, "text/plain", "404 Not Found\n".into()),
    }
}
