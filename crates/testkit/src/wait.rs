//! Polling a condition with a deadline: the only kind of waiting the kit does besides waiting on
//! events and process exit.

use std::time::{Duration, Instant};

/// Interval between two evaluations of a polled condition.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Evaluates `check` until it returns `Some`, at most for `timeout`; `None` if the time ran out.
/// The interval between attempts is short and fixed; the number of attempts is bounded by the
/// deadline.
pub fn wait_until<T>(timeout: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}
