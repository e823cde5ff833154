//! Active health checks: one task per upstream sends `GET path` to every endpoint each interval on a
//! fresh connection, and flips the endpoint's health after `fall` failures or `rise` successes in a
//! row. The state lives in the endpoint, so it survives a reload that restarts the task.

use crate::endpoint::EndpointState;
use crate::io::{connect, Counted};
use crate::{Protocol, RequestBody, Settings, Upstream};
use gatehouse_config as config;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// A compiled health check.
#[derive(Debug, Clone)]
pub struct HealthCheckSpec {
    /// Path requested.
    pub path: String,
    /// Time between rounds.
    pub interval: Duration,
    /// Time allowed for one check.
    pub timeout: Duration,
    /// Successes in a row that mark healthy.
    pub rise: u32,
    /// Failures in a row that mark unhealthy.
    pub fall: u32,
    /// Host header.
    pub host: Option<String>,
    /// `type: grpc`: the service asked about through gRPC's health protocol.
    pub grpc: Option<String>,
}

impl HealthCheckSpec {
    pub(crate) fn from_config(c: &config::HealthCheck) -> Self {
        HealthCheckSpec {
            grpc: (c.kind == config::HealthCheckKind::Grpc).then(|| c.service.clone()),
            path: c.path.clone(),
            interval: c.interval.0,
            timeout: c.timeout.0,
            rise: c.rise,
            fall: c.fall,
            host: c.host.clone(),
        }
    }
}

/// Runs the health checks of `upstream` until the task is aborted.
pub async fn run_health_checks(upstream: Arc<Upstream>) {
    let Some(spec) = upstream.health_check.clone() else {
        return;
    };
    let mut streaks: HashMap<SocketAddr, (u32, u32)> = HashMap::new();
    let mut tick = tokio::time::interval(spec.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        // The endpoints as now known: a name's new addresses are checked from the next round.
        let members = upstream.members_full();
        let checks =
            members.endpoints.iter().map(|ep| {
                let spec = &spec;
                let settings = &upstream.settings;
                async move {
                    (ep, tokio::time::timeout(spec.timeout, probe(&ep.state, settings, spec)).await.unwrap_or(false))
                }
            });
        let results = join_all(checks).await;
        streaks.retain(|addr, _| members.endpoints.iter().any(|e| e.state.addr == *addr));
        for (ep, ok) in results {
            let streak = streaks.entry(ep.state.addr).or_default();
            if ok {
                *streak = (streak.0 + 1, 0);
                if streak.0 >= spec.rise {
                    ep.state.set_healthy(true);
                }
            } else {
                *streak = (0, streak.1 + 1);
                if streak.1 >= spec.fall {
                    ep.state.set_healthy(false);
                }
            }
        }
    }
}

async fn join_all<F: std::future::Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    let handles: Vec<_> = futures.map(Box::pin).collect();
    let mut out = Vec::with_capacity(handles.len());
    // Checks of one round run one after another on this task; each is bounded by the timeout.
    for h in handles {
        out.push(h.await);
    }
    out
}

/// One check of one endpoint, over the upstream's own transport (TLS included). HTTP/1.1 unless
/// the upstream speaks HTTP/2 only, or the endpoint chose it by ALPN.
async fn probe(ep: &EndpointState, settings: &Settings, spec: &HealthCheckSpec) -> bool {
    let h1_only = settings.protocol != Protocol::Http2;
    let Ok(io) = connect(ep, settings, h1_only, Counted::No, None).await else {
        return false;
    };
    let h2 = settings.protocol == Protocol::Http2 || io.alpn_h2();
    let host = spec.host.as_deref().unwrap_or(&ep.authority);
    let req = match &spec.grpc {
        Some(service) if h2 => grpc_request(host, service, spec.timeout),
        // gRPC's health protocol is HTTP/2 only.
        Some(_) => return false,
        None => http::Request::get(&spec.path)
            .header(http::header::HOST, host)
            .header(http::header::USER_AGENT, "gatehouse-health-check")
            .header(http::header::CONNECTION, "close")
            .body(RequestBody::empty())
            .ok(),
    };
    let Some(mut req) = req else {
        return false;
    };
    if h2 {
        // As requests are sent over HTTP/2: authority and scheme in the target, no `Connection`.
        crate::pool::h2_form(&mut req, &ep.authority, ep.tls_name().is_some());
    }
    let io = TokioIo::new(io);
    let resp = if h2 {
        let Ok((mut sender, conn)) = http2::handshake(TokioExecutor::new(), io).await else {
            return false;
        };
        tokio::spawn(async move {
            let _ = conn.await;
        });
        sender.send_request(req).await
    } else {
        let Ok((mut sender, conn)) = http1::handshake::<_, RequestBody>(io).await else {
            return false;
        };
        tokio::spawn(async move {
            let _ = conn.await;
        });
        sender.send_request(req).await
    };
    match (resp, &spec.grpc) {
        (Err(_), _) => false,
        (Ok(r), None) => r.status().is_success() || r.status().is_redirection(),
        (Ok(r), Some(_)) => grpc_serving(r).await,
    }
}

/// gRPC's health checking protocol (grpc.health.v1): a call of `Health/Check` for `service`.
fn grpc_request(host: &str, service: &str, timeout: Duration) -> Option<http::Request<RequestBody>> {
    // HealthCheckRequest { string service = 1; } in one uncompressed message.
    let mut message = Vec::with_capacity(service.len() + 4);
    if !service.is_empty() {
        message.push(0x0a);
        // The length as a varint.
        let mut n = service.len();
        while n >= 0x80 {
            message.push(u8::try_from(n & 0x7f).unwrap_or(0) | 0x80);
            n >>= 7;
        }
        message.push(u8::try_from(n).unwrap_or(0));
        message.extend_from_slice(service.as_bytes());
    }
    let mut frame = vec![0u8];
    frame.extend_from_slice(&u32::try_from(message.len()).unwrap_or(0).to_be_bytes());
    frame.extend_from_slice(&message);
    let body = RequestBody::streaming(http_body_util::Full::new(bytes::Bytes::from(frame)), u64::MAX, timeout);
    http::Request::post("/grpc.health.v1.Health/Check")
        .header(http::header::HOST, host)
        .header(http::header::USER_AGENT, "gatehouse-health-check")
        .header(http::header::CONTENT_TYPE, "application/grpc")
        .header(http::header::TE, "trailers")
        .body(body)
        .ok()
}

/// Whether a `Health/Check` answer says `SERVING`: the call succeeded (`grpc-status: 0`) and its
/// message is HealthCheckResponse { ServingStatus status = 1; } with SERVING (1).
async fn grpc_serving(resp: http::Response<hyper::body::Incoming>) -> bool {
    use http_body_util::BodyExt;
    let (parts, incoming) = resp.into_parts();
    let Ok(collected) = incoming.collect().await else {
        return false;
    };
    let status = collected.trailers().and_then(|t| t.get("grpc-status")).or_else(|| parts.headers.get("grpc-status"));
    if parts.status != http::StatusCode::OK || status.map(|s| s.as_bytes()) != Some(b"0") {
        return false;
    }
    let answer = collected.to_bytes();
    answer.len() >= 5 && answer[5..] == [0x08, 0x01]
}
