//! Select stage, circuit breaker: an endpoint that fails `error_threshold` times within
//! `error_reset` is skipped for `retry_delay`; then one probe request goes through (half-open),
//! and its outcome closes the breaker or opens it again.
//!
//! The state is one atomic word shared by every worker, read as the [`BreakerState`] enum. It
//! lives in the endpoint's state, so a reload that keeps the endpoint keeps its breaker.

use gatehouse_config::CircuitBreaker;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::AcqRel, Ordering::Acquire, Ordering::Relaxed};
use std::time::Duration;

/// A breaker's configuration, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerSettings {
    /// Failures that open the breaker.
    pub threshold: u32,
    /// Window in which failures are counted.
    pub window_ms: u64,
    /// How long the breaker stays open.
    pub open_ms: u64,
}

impl BreakerSettings {
    /// From the configuration.
    pub fn new(cfg: &CircuitBreaker) -> Self {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX / 4).max(1);
        BreakerSettings {
            threshold: cfg.error_threshold.max(1),
            window_ms: ms(cfg.error_reset.0),
            open_ms: ms(cfg.retry_delay.0),
        }
    }
}

/// The state of a breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Requests flow; failures are being counted.
    Closed,
    /// Requests are refused until `until_ms`; then one probe may go.
    Open {
        /// When a probe may go.
        until_ms: u64,
    },
    /// One probe is in flight; if it never reports, another may go after `until_ms`.
    HalfOpen {
        /// When the probe is given up.
        until_ms: u64,
    },
}

const KIND_SHIFT: u32 = 62;
const TIME_MASK: u64 = (1 << KIND_SHIFT) - 1;

impl BreakerState {
    fn encode(self) -> u64 {
        match self {
            BreakerState::Closed => 0,
            BreakerState::Open { until_ms } => (1 << KIND_SHIFT) | (until_ms & TIME_MASK),
            BreakerState::HalfOpen { until_ms } => (2 << KIND_SHIFT) | (until_ms & TIME_MASK),
        }
    }

    fn decode(word: u64) -> Self {
        match word >> KIND_SHIFT {
            1 => BreakerState::Open { until_ms: word & TIME_MASK },
            2 => BreakerState::HalfOpen { until_ms: word & TIME_MASK },
            _ => BreakerState::Closed,
        }
    }

    /// 0 closed, 1 open, 2 half-open, for the metrics gauge.
    pub fn as_gauge(self) -> i64 {
        (self.encode() >> KIND_SHIFT) as i64
    }
}

/// One endpoint's breaker.
#[derive(Debug, Default)]
pub struct Breaker {
    state: AtomicU64,
    window_start_ms: AtomicU64,
    failures: AtomicU32,
    /// Times it opened.
    pub opened: AtomicU64,
}

impl Breaker {
    /// The current state.
    pub fn state(&self) -> BreakerState {
        BreakerState::decode(self.state.load(Acquire))
    }

    /// Whether the balancer may consider the endpoint: closed, or open and due for a probe.
    pub fn available(&self, now_ms: u64) -> bool {
        match self.state() {
            BreakerState::Closed => true,
            BreakerState::Open { until_ms } | BreakerState::HalfOpen { until_ms } => now_ms >= until_ms,
        }
    }

    /// Claims the right to send a request after the balancer chose the endpoint: always when
    /// closed; when due for a probe, only the one caller that turns it half-open.
    pub fn admit(&self, now_ms: u64, open_ms: u64) -> bool {
        let word = self.state.load(Acquire);
        match BreakerState::decode(word) {
            BreakerState::Closed => true,
            BreakerState::Open { until_ms } | BreakerState::HalfOpen { until_ms } if now_ms >= until_ms => {
                let probe = BreakerState::HalfOpen { until_ms: now_ms + open_ms }.encode();
                let won = self.state.compare_exchange(word, probe, AcqRel, Acquire).is_ok();
                if won {
                    tracing::info!("circuit breaker half-open: sending one probe");
                }
                won
            }
            _ => false,
        }
    }

    /// Records a success: a probe's success closes the breaker.
    pub fn on_success(&self) {
        let word = self.state.load(Acquire);
        if let BreakerState::HalfOpen { .. } = BreakerState::decode(word) {
            if self.state.compare_exchange(word, 0, AcqRel, Acquire).is_ok() {
                self.failures.store(0, Relaxed);
                tracing::info!("circuit breaker closed");
            }
        }
    }

    /// Records a failure at `now_ms`: a probe's failure opens the breaker again; in the closed
    /// state the failure is counted in the window, and the threshold opens it.
    pub fn on_failure(&self, now_ms: u64, s: &BreakerSettings) -> bool {
        let word = self.state.load(Acquire);
        let open = BreakerState::Open { until_ms: now_ms + s.open_ms }.encode();
        match BreakerState::decode(word) {
            BreakerState::HalfOpen { .. } => self.trip(word, open),
            BreakerState::Open { .. } => false,
            BreakerState::Closed => {
                let start = self.window_start_ms.load(Relaxed);
                let n = if now_ms.saturating_sub(start) > s.window_ms {
                    self.window_start_ms.store(now_ms, Relaxed);
                    self.failures.store(1, Relaxed);
                    1
                } else {
                    self.failures.fetch_add(1, Relaxed) + 1
                };
                n >= s.threshold && self.trip(word, open)
            }
        }
    }

    fn trip(&self, from: u64, open: u64) -> bool {
        let tripped = self.state.compare_exchange(from, open, AcqRel, Acquire).is_ok();
        if tripped {
            self.failures.store(0, Relaxed);
            self.opened.fetch_add(1, Relaxed);
        }
        tripped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: BreakerSettings = BreakerSettings { threshold: 3, window_ms: 1_000, open_ms: 5_000 };

    #[test]
    fn opens_after_threshold_within_window() {
        let b = Breaker::default();
        assert!(!b.on_failure(100, &S));
        assert!(!b.on_failure(200, &S));
        assert!(b.on_failure(300, &S));
        assert_eq!(b.state(), BreakerState::Open { until_ms: 5_300 });
        assert!(!b.available(5_299) && b.available(5_300));
    }

    #[test]
    fn failures_spread_over_windows_do_not_open() {
        let b = Breaker::default();
        for t in [0, 2_000, 4_000, 6_000, 8_000] {
            assert!(!b.on_failure(t, &S));
        }
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[test]
    fn one_probe_then_close_or_reopen() {
        let b = Breaker::default();
        (0..3).for_each(|_| {
            b.on_failure(0, &S);
        });
        assert!(!b.admit(4_999, S.open_ms), "still open");
        assert!(b.admit(5_000, S.open_ms), "first caller probes");
        assert!(!b.admit(5_001, S.open_ms), "only one probe");
        assert!(!b.available(5_001));
        b.on_failure(5_100, &S);
        assert_eq!(b.state(), BreakerState::Open { until_ms: 10_100 });
        assert!(b.admit(10_100, S.open_ms));
        b.on_success();
        assert_eq!(b.state(), BreakerState::Closed);
        assert_eq!(b.opened.load(Relaxed), 2);
    }

    #[test]
    fn a_lost_probe_is_replaced() {
        let b = Breaker::default();
        (0..3).for_each(|_| {
            b.on_failure(0, &S);
        });
        assert!(b.admit(5_000, S.open_ms));
        // The probe never reports (its client went away): after another delay a new one goes.
        assert!(!b.admit(9_999, S.open_ms));
        assert!(b.admit(10_000, S.open_ms));
    }
}
