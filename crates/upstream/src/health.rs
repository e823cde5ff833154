//! Active health checks: one task per upstream sends `GET path` to every endpoint each interval on a
//! fresh connection, and flips the endpoint's health after `fall` failures or `rise` successes in a
//! row. The state lives in the endpoint, so it survives a reload that restarts the task.

use crate::{RequestBody, Upstream};
use gatehouse_config as config;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
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
}

impl HealthCheckSpec {
    pub(crate) fn from_config(c: &config::HealthCheck) -> Self {
        HealthCheckSpec {
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
        let checks = upstream.endpoints.iter().map(|ep| {
            let spec = &spec;
            async move { (ep, tokio::time::timeout(spec.timeout, probe(ep.state.addr, spec)).await.unwrap_or(false)) }
        });
        let results = join_all(checks).await;
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

async fn probe(addr: SocketAddr, spec: &HealthCheckSpec) -> bool {
    let Ok(stream) = tokio::net::TcpStream::connect(addr).await else {
        return false;
    };
    let Ok((mut sender, conn)) = http1::handshake::<_, RequestBody>(TokioIo::new(stream)).await else {
        return false;
    };
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let host = spec.host.clone().unwrap_or_else(|| addr.to_string());
    let Ok(req) = http::Request::get(&spec.path)
        .header(http::header::HOST, host)
        .header(http::header::USER_AGENT, "gatehouse-health-check")
        .header(http::header::CONNECTION, "close")
        .body(RequestBody::empty())
    else {
        return false;
    };
    match sender.send_request(req).await {
        Ok(resp) => resp.status().is_success() || resp.status().is_redirection(),
        Err(_) => false,
    }
}
