//! The generic cell rate algorithm: one number per key, the theoretical arrival time (TAT) of the
//! next request if the key sent at exactly its allowed rate. A request is admitted when admitting
//! it keeps the TAT within `burst` emission intervals of now. The same arithmetic runs locally
//! (on an atomic) and in Redis (in a Lua script), in microseconds.

use gatehouse_config::RateLimit;

/// A limit in the units the algorithm works in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gcra {
    /// Microseconds between two requests at the steady rate.
    pub emission_us: u64,
    /// How far ahead of now the TAT may run: `burst` emission intervals.
    pub tolerance_us: u64,
    /// After a refusal, the key is refused for this long (0: no block).
    pub block_us: u64,
    /// Requests per interval, for the `RateLimit-Limit` header.
    pub limit: u64,
}

/// What the algorithm decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Admitted.
    Allow {
        /// Requests that could still arrive at once.
        remaining: u64,
        /// Microseconds until the key's full burst is available again.
        reset_us: u64,
    },
    /// Refused.
    Deny {
        /// Microseconds until a request would be admitted.
        retry_after_us: u64,
    },
}

impl Gcra {
    /// The algorithm's parameters for a configured limit.
    pub fn new(cfg: &RateLimit) -> Self {
        let interval_us = u64::try_from(cfg.interval.0.as_micros()).unwrap_or(u64::MAX);
        let emission_us = (interval_us / cfg.limit.max(1)).max(1);
        let burst = cfg.burst.unwrap_or(cfg.limit).max(1);
        let block_us = cfg.block.map_or(0, |b| u64::try_from(b.0.as_micros()).unwrap_or(u64::MAX));
        Gcra { emission_us, tolerance_us: emission_us.saturating_mul(burst), block_us, limit: cfg.limit }
    }

    /// Decides for a request at `now` given the stored TAT (0: none); returns the TAT to store
    /// (`None`: keep the stored one) and the decision.
    pub fn decide(&self, tat: u64, now: u64) -> (Option<u64>, Decision) {
        let next = tat.max(now) + self.emission_us;
        let ahead = next - now;
        if ahead <= self.tolerance_us {
            let remaining = (self.tolerance_us - ahead) / self.emission_us;
            return (Some(next), Decision::Allow { remaining, reset_us: ahead });
        }
        let retry_after_us = ahead - self.tolerance_us;
        // A key refused for the first time (its TAT within reach of the tolerance, so not
        // already blocked) is blocked: the TAT moves so that nothing is admitted before
        // `now + block`. Requests during a block do not extend it.
        if self.block_us > 0 && tat <= now + self.tolerance_us {
            let blocked = now + self.block_us + self.tolerance_us - self.emission_us;
            if blocked > tat {
                return (Some(blocked), Decision::Deny { retry_after_us: self.block_us.max(retry_after_us) });
            }
        }
        (None, Decision::Deny { retry_after_us })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gatehouse_config::Duration;

    fn limit(limit: u64, interval_ms: u64, burst: Option<u64>, block_ms: Option<u64>) -> Gcra {
        let text = format!("{{ limit: {limit}, interval: {interval_ms}ms }}");
        let mut cfg: RateLimit = serde_yaml_from(&text);
        cfg.burst = burst;
        cfg.block = block_ms.map(Duration::millis);
        Gcra::new(&cfg)
    }

    fn serde_yaml_from(text: &str) -> RateLimit {
        let c = gatehouse_config::compile(&format!(
            "listeners: {{ l: {{ bind: \"127.0.0.1:0\" }} }}\nplans: {{ p: {{ rate_limits: [{text}] }} }}"
        ))
        .expect("valid");
        c.plans["p"].rate_limits[0].clone()
    }

    /// Runs `n` requests at `now`, storing TATs as a caller would; returns how many were admitted.
    fn burst_at(g: &Gcra, tat: &mut u64, now: u64, n: usize) -> usize {
        let mut ok = 0;
        for _ in 0..n {
            let (next, d) = g.decide(*tat, now);
            if let Some(t) = next {
                *tat = t;
            }
            ok += usize::from(matches!(d, Decision::Allow { .. }));
        }
        ok
    }

    #[test]
    fn burst_then_steady_rate() {
        let g = limit(10, 1000, Some(5), None);
        let mut tat = 0;
        let t0 = 1_000_000_000;
        assert_eq!(burst_at(&g, &mut tat, t0, 20), 5, "exactly the burst at once");
        // One emission interval later, exactly one more.
        assert_eq!(burst_at(&g, &mut tat, t0 + 100_000, 3), 1);
        // Over ten seconds at a steady trickle, the rate is the limit.
        let mut admitted = 0;
        for ms in (200..10_200).step_by(10) {
            admitted += burst_at(&g, &mut tat, t0 + ms * 1000, 1);
        }
        assert!((99..=101).contains(&admitted), "{admitted}");
    }

    #[test]
    fn headers_facts() {
        let g = limit(10, 1000, None, None);
        let (_, d) = g.decide(0, 5_000_000);
        assert_eq!(d, Decision::Allow { remaining: 9, reset_us: 100_000 });
        let mut tat = 0;
        burst_at(&g, &mut tat, 5_000_000, 10);
        let (next, d) = g.decide(tat, 5_000_000);
        assert_eq!(next, None);
        assert_eq!(d, Decision::Deny { retry_after_us: 100_000 });
    }

    #[test]
    fn block_refuses_for_the_block_period() {
        let g = limit(2, 1000, Some(2), Some(60_000));
        let mut tat = 0;
        let t0 = 7_000_000;
        assert_eq!(burst_at(&g, &mut tat, t0, 3), 2);
        assert_eq!(burst_at(&g, &mut tat, t0 + 59_000_000, 1), 0, "still blocked after 59 s");
        assert_eq!(g.decide(tat, t0 + 59_000_000), (None, Decision::Deny { retry_after_us: 1_000_000 }));
        assert_eq!(burst_at(&g, &mut tat, t0 + 60_000_000, 1), 1, "free after 60 s");
    }
}
