//! Who may get an on-demand certificate: names `allow` covers, else names the `ask` endpoint
//! allows (`GET ask?domain=NAME`, 200 = yes; anything else, or no answer, = no), each decision
//! remembered; and how many new orders the cluster places per interval (a counter in Redis per
//! interval, in the process without Redis).

use bytes::Bytes;
use gatehouse_cluster::Cluster;
use gatehouse_config::OnDemand;
use http_body_util::Empty;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Longest wait for the ask endpoint.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// Decisions remembered at most; past it the memory starts again.
const MAX_DECISIONS: usize = 100_000;

/// Whether `name` is one a public CA issues for: a lower-case DNS name of two labels or more, not
/// an IP address.
pub fn is_orderable(name: &str) -> bool {
    name.len() <= 253
        && name.contains('.')
        && name.parse::<std::net::IpAddr>().is_err()
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
}

/// Whether `pattern` (`name` or `*.suffix`) covers `name`; `*.suffix` covers every name under
/// the suffix.
fn covers(pattern: &str, name: &str) -> bool {
    match pattern.strip_prefix("*.") {
        Some(suffix) => {
            name.len() > suffix.len() + 1
                && name.ends_with(suffix)
                && name.as_bytes()[name.len() - suffix.len() - 1] == b'.'
        }
        None => pattern == name,
    }
}

/// The HTTP client that asks the `ask` endpoint (plain HTTP or HTTPS, the system's roots).
type AskClient = Client<HttpsConnector<HttpConnector>, Empty<Bytes>>;

/// The on-demand policy of a manager.
pub struct Policy {
    allow: Vec<String>,
    ask: Option<(String, AskClient)>,
    limit: u32,
    interval: Duration,
    allowed_ttl: Duration,
    refused_ttl: Duration,
    decisions: Mutex<HashMap<String, (bool, Instant)>>,
    /// Without Redis: the current interval's number and the orders placed in it.
    local: Mutex<(u64, u32)>,
}

impl Policy {
    /// The policy of `od`; `Err` when no HTTP client can be made for `ask`.
    pub fn new(od: &OnDemand) -> Result<Policy, String> {
        let ask = match &od.ask {
            None => None,
            Some(url) => {
                let https = hyper_rustls::HttpsConnectorBuilder::new()
                    .try_with_platform_verifier()
                    .map_err(|e| format!("tls.acme.on_demand.ask: no TLS client: {e}"))?
                    .https_or_http()
                    .enable_http1()
                    .build();
                Some((url.clone(), Client::builder(hyper_util::rt::TokioExecutor::new()).build(https)))
            }
        };
        Ok(Policy {
            allow: od.allow.clone(),
            ask,
            limit: od.rate.limit,
            interval: od.rate.interval.0.max(Duration::from_secs(1)),
            allowed_ttl: od.allowed_ttl.0,
            refused_ttl: od.refused_ttl.0,
            decisions: Mutex::default(),
            local: Mutex::default(),
        })
    }

    /// Whether `name` may have a certificate ordered.
    pub async fn allows(&self, name: &str) -> bool {
        if self.allow.iter().any(|p| covers(p, name)) {
            return true;
        }
        let Some((url, client)) = &self.ask else { return false };
        let cached = self.decisions.lock().unwrap_or_else(|p| p.into_inner()).get(name).copied();
        if let Some((allowed, at)) = cached {
            let ttl = if allowed { self.allowed_ttl } else { self.refused_ttl };
            if at.elapsed() < ttl {
                return allowed;
            }
        }
        let sep = if url.contains('?') { '&' } else { '?' };
        let target = format!("{url}{sep}domain={name}");
        let allowed = match ask(client, &target).await {
            Ok(status) => {
                tracing::info!(
                    name,
                    status,
                    "on-demand certificate {}",
                    if status == 200 { "allowed" } else { "refused" }
                );
                status == 200
            }
            Err(e) => {
                tracing::warn!(name, ask = %url, error = %e, "the on-demand ask endpoint did not answer; refused");
                false
            }
        };
        let mut decisions = self.decisions.lock().unwrap_or_else(|p| p.into_inner());
        if decisions.len() >= MAX_DECISIONS {
            decisions.clear();
        }
        decisions.insert(name.to_string(), (allowed, Instant::now()));
        allowed
    }

    /// Counts one new order against the rate; `false` when the interval's orders are used up.
    pub async fn take_order(&self, cluster: Option<&Cluster>) -> bool {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let window = now.as_secs() / self.interval.as_secs();
        if let Some(cluster) = cluster {
            let key = cluster.key(&format!("acme:ondemand:rate:{{{window}}}"));
            match cluster.client().incr(&key).await {
                Ok(n) => {
                    if n == 1 {
                        let _ = cluster.client().pexpire(&key, (self.interval * 2).as_millis() as u64).await;
                    }
                    return n <= i64::from(self.limit);
                }
                Err(e) => cluster.failed("count an on-demand order", &e),
            }
        }
        let mut local = self.local.lock().unwrap_or_else(|p| p.into_inner());
        if local.0 != window {
            *local = (window, 0);
        }
        local.1 += 1;
        local.1 <= self.limit
    }
}

async fn ask(client: &AskClient, target: &str) -> Result<u16, String> {
    let req = http::Request::get(target)
        .header(http::header::USER_AGENT, "gatehouse-acme")
        .body(Empty::new())
        .map_err(|e| e.to_string())?;
    match tokio::time::timeout(ASK_TIMEOUT, client.request(req)).await {
        Ok(Ok(resp)) => Ok(resp.status().as_u16()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("no answer in time".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_cover_names_under_them() {
        assert!(covers("*.customers.example.com", "a.customers.example.com"));
        assert!(covers("*.customers.example.com", "a.b.customers.example.com"));
        assert!(!covers("*.customers.example.com", "customers.example.com"));
        assert!(!covers("*.customers.example.com", "evilcustomers.example.com"));
        assert!(covers("www.example.com", "www.example.com"));
        assert!(!covers("www.example.com", "a.www.example.com"));
    }

    #[test]
    fn only_domain_names_are_orderable() {
        assert!(is_orderable("a.example.com"));
        for bad in ["localhost", "127.0.0.1", "A.example.com", "a..b", "-a.example.com", "a_b.example.com", ""] {
            assert!(!is_orderable(bad), "{bad}");
        }
    }
}
