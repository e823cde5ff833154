//! Accept failures in a row, logged once and backed off from, for every accept loop (the
//! listeners' and the admin API's).

use std::time::{Duration, Instant};

/// Accept failures in a row (out of descriptors or memory, say): the first is logged, the loop
/// backs off instead of spinning while connections wait in the backlog, and the recovery is logged
/// with how many attempts failed over how long.
#[derive(Debug, Default)]
pub struct AcceptBackoff {
    failures: u64,
    since: Option<Instant>,
}

impl AcceptBackoff {
    /// How long to wait after a failed accept before the next attempt.
    pub const PAUSE: Duration = Duration::from_millis(50);

    /// Notes a failure of the listener at `what`; the loop waits what this returns before its
    /// next attempt.
    #[must_use]
    pub fn failed(&mut self, what: &str, error: &std::io::Error) -> Duration {
        if self.failures == 0 {
            tracing::warn!(listener = what, %error, "accept failed; backing off until it succeeds again");
            self.since = Some(Instant::now());
        }
        self.failures += 1;
        Self::PAUSE
    }

    /// Notes a success, logging the recovery after failures.
    pub fn succeeded(&mut self, what: &str) {
        if self.failures > 0 {
            let over = self.since.map(|t| t.elapsed()).unwrap_or_default();
            tracing::info!(listener = what, failures = self.failures, over = ?over, "accept works again");
            self.failures = 0;
            self.since = None;
        }
    }
}
