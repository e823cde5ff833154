//! What the ACME manager counts, kept across the reloads that restart it: orders by result,
//! on-demand decisions, the CA's answer times, and the kept certificates by days to expiry.

use gatehouse_telemetry::{Counter, Histogram};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// On-demand decisions, in the order of [`AcmeStats::on_demand`].
pub const ON_DEMAND_DECISIONS: [&str; 4] = ["allowed", "refused", "over_rate", "not_a_name"];

/// Challenge types, in the order of [`AcmeStats::validations`].
pub const CHALLENGE_TYPES: [&str; 3] = ["http-01", "tls-alpn-01", "dns-01"];

/// Bounds of the expiry gauges, days; the last gauge counts the rest.
pub const EXPIRY_DAYS: [i64; 3] = [7, 30, 90];

/// The ACME manager's counters.
#[derive(Debug, Default)]
pub struct AcmeStats {
    /// Orders that gave a certificate.
    pub orders_valid: Counter,
    /// Orders that failed (each logged with the CA's problem document).
    pub orders_failed: Counter,
    /// Certificates that expired with no renewal in place (each logged as an error, each
    /// certificate counted once).
    pub expired: Counter,
    /// Requests the CA refused for their nonce (`badNonce`), each sent again.
    pub refused_nonces: Counter,
    /// The CA's verdicts on this node's answers, by [`CHALLENGE_TYPES`]: valid, invalid.
    pub validations: [[Counter; 2]; 3],
    /// On-demand decisions, as [`ON_DEMAND_DECISIONS`] names them.
    pub on_demand: [Counter; 4],
    /// Time of each request to the CA (directory, nonces, orders, polls, certificates, ARI).
    pub requests: Histogram,
    /// Kept certificates expiring within 7, 30, 90 days and later (gauges; an expired one counts
    /// within 7 days).
    pub expiring: [AtomicU64; 4],
}

impl AcmeStats {
    /// Counts an on-demand decision (an index of [`ON_DEMAND_DECISIONS`]).
    pub fn decided(&self, i: usize) {
        if let Some(c) = self.on_demand.get(i) {
            c.inc();
        }
    }

    /// Counts the CA's verdict on an answer by `challenge` (one of [`CHALLENGE_TYPES`]).
    pub fn validated(&self, challenge: &str, valid: bool) {
        if let Some(i) = CHALLENGE_TYPES.iter().position(|t| *t == challenge) {
            self.validations[i][usize::from(!valid)].inc();
        }
    }

    /// Sets the expiry gauges from the kept certificates' ends of validity.
    pub fn set_expiring(&self, not_afters: impl Iterator<Item = i64>, now: i64) {
        let mut counts = [0u64; 4];
        for t in not_afters {
            let days = (t - now).div_euclid(86_400);
            let i = EXPIRY_DAYS.iter().position(|&d| days < d).unwrap_or(EXPIRY_DAYS.len());
            counts[i] += 1;
        }
        for (gauge, n) in self.expiring.iter().zip(counts) {
            gauge.store(n, Relaxed);
        }
    }
}

/// The problem type of a refused nonce (RFC 8555 §6.5).
const BAD_NONCE: &[u8] = b"urn:ietf:params:acme:error:badNonce";

/// The HTTP client of the account, timing each request to the CA and counting refused nonces.
pub(crate) struct Timed {
    pub(crate) inner: Box<dyn instant_acme::HttpClient>,
    pub(crate) stats: std::sync::Arc<AcmeStats>,
}

impl instant_acme::HttpClient for Timed {
    fn request(
        &self,
        req: http::Request<instant_acme::BodyWrapper<bytes::Bytes>>,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<instant_acme::BytesResponse, instant_acme::Error>> + Send>,
    > {
        let answer = self.inner.request(req);
        let stats = self.stats.clone();
        Box::pin(async move {
            let started = std::time::Instant::now();
            let answer = answer.await;
            stats.requests.observe(started.elapsed());
            match answer {
                // A refusal's problem document is read here to count refused nonces, and handed
                // on whole; other answers pass untouched.
                Ok(mut r) if r.parts.status == http::StatusCode::BAD_REQUEST => {
                    let body = r.body.into_bytes().await.map_err(instant_acme::Error::Other)?;
                    if body.windows(BAD_NONCE.len()).any(|w| w == BAD_NONCE) {
                        stats.refused_nonces.inc();
                    }
                    Ok(instant_acme::BytesResponse { parts: r.parts, body: Box::new(body) })
                }
                other => other,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_gauges_count_by_days_left() {
        let s = AcmeStats::default();
        let day = 86_400;
        s.set_expiring([-day, 3 * day, 20 * day, 60 * day, 89 * day, 200 * day].into_iter(), 0);
        let got: Vec<u64> = s.expiring.iter().map(|g| g.load(Relaxed)).collect();
        assert_eq!(got, [2, 1, 2, 1]);
    }
}
