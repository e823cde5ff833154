//! A log line for an event that can come thousands of times a second (a Redis error on every
//! request): counted always elsewhere, logged at most once per interval.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Says yes at most once per `interval`, from any thread, without a lock.
#[derive(Debug, Default)]
pub struct LogEvery {
    /// When it last said yes: milliseconds after the process's first use plus one (0: never).
    last_ms: AtomicU64,
}

fn since_start_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1
}

impl LogEvery {
    /// Whether to log now: the first call, then the first call at least `interval` after the
    /// last yes.
    pub fn now(&self, interval: Duration) -> bool {
        let now = since_start_ms();
        let last = self.last_ms.load(Relaxed);
        (last == 0 || now.saturating_sub(last) >= interval.as_millis() as u64)
            && self.last_ms.compare_exchange(last, now, Relaxed, Relaxed).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_per_interval() {
        let every = LogEvery::default();
        assert!(every.now(Duration::from_secs(60)));
        assert!(!every.now(Duration::from_secs(60)));
        assert!(every.now(Duration::ZERO));
    }
}
