//! Per-service gateway counters, kept across reloads by service name.

use gatehouse_telemetry::{Counter, LogEvery};

/// What the Admit stage decided for one service.
#[derive(Debug, Default)]
pub struct ServiceStats {
    /// Requests admitted.
    pub admitted: Counter,
    /// 401: no credentials.
    pub missing_credentials: Counter,
    /// 401: credentials that name no app or do not verify.
    pub invalid_credentials: Counter,
    /// 403: the app calls from an address outside its `allow_ips`.
    pub address_refused: Counter,
    /// 403: the app has no grant for the service.
    pub not_granted: Counter,
    /// 403: refused by an ACL.
    pub acl_denied: Counter,
    /// 429: over a rate limit.
    pub rate_limited: Counter,
    /// 503: a cluster limit failing closed could not reach Redis.
    pub limiter_unavailable: Counter,
    /// 503: the token's provider has never given its key set.
    pub keys_unavailable: Counter,
    /// The authorization service answered other than 2xx (passed on to the client).
    pub external_refused: Counter,
    /// The authorization service could not be asked (503, or admitted with `fail_open`).
    pub external_unavailable: Counter,
    /// Requests admitted on a kept 2xx of the authorization service, without asking it.
    pub external_cached: Counter,
    /// Cluster rate-limit decisions Redis could not make (admitted or refused per `on_redis_error`).
    pub limiter_errors: Counter,
    /// When a limiter error was last logged.
    pub limiter_logged: LogEvery,
}

impl ServiceStats {
    /// Refusals by reason, for `gatehouse_gateway_denied_total{reason=…}`.
    pub fn denials(&self) -> [(&'static str, u64); 10] {
        [
            ("missing_credentials", self.missing_credentials.get()),
            ("invalid_credentials", self.invalid_credentials.get()),
            ("address_refused", self.address_refused.get()),
            ("not_granted", self.not_granted.get()),
            ("acl", self.acl_denied.get()),
            ("rate_limited", self.rate_limited.get()),
            ("limiter_unavailable", self.limiter_unavailable.get()),
            ("keys_unavailable", self.keys_unavailable.get()),
            ("external_refused", self.external_refused.get()),
            ("external_unavailable", self.external_unavailable.get()),
        ]
    }
}
