//! The worker's clock, shared by the serve and forward stages: which worker the current thread is,
//! a monotonic millisecond clock read once per poll of a connection's task, and the deadlines
//! built on it that rarely touch the timer wheel.

#![forbid(unsafe_code)]

use std::cell::Cell;
use std::sync::OnceLock;
use std::time::Instant;

thread_local! {
    static WORKER: Cell<usize> = const { Cell::new(0) };
    /// Inside a [`ClockScoped`] poll: `Some(None)` until the first reading, then `Some(Some(t))`;
    /// outside one, `None` (every [`now`] reads the clock).
    static NOW: Cell<Option<Option<Instant>>> = const { Cell::new(None) };
}

/// Records which worker the current thread is, so per-worker state (idle pools) needs no lock
/// shared with other workers.
pub fn set_worker_index(i: usize) {
    WORKER.with(|w| w.set(i));
}

/// The worker index of the current thread (0 outside workers).
pub fn worker_index() -> usize {
    WORKER.with(|w| w.get())
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// The monotonic time. Within one poll of a [`ClockScoped`] future, the first call reads the
/// clock and the later ones reuse that reading, as nginx reads the time once per turn of its event
/// loop: a request asked for it about eight times (metrics, deadlines, the idle pool) and each read
/// costs ~25 ns here. A poll never waits, so the reading is at most that poll's own run time old.
pub fn now() -> Instant {
    NOW.with(|c| match c.get() {
        None => Instant::now(),
        Some(Some(t)) => t,
        Some(None) => {
            let t = Instant::now();
            c.set(Some(Some(t)));
            t
        }
    })
}

/// Milliseconds since the first call in this process (monotonic), from [`now`].
pub fn now_ms() -> u64 {
    millis(now().saturating_duration_since(epoch()))
}

/// `d` in whole milliseconds, as the `_ms` deadlines count (`u64::MAX` past that).
pub fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A future whose every poll shares one clock reading among the [`now`] calls made in it (a
/// connection's task).
#[derive(Debug)]
pub struct ClockScoped<F>(pub F);

impl<F: std::future::Future + Unpin> std::future::Future for ClockScoped<F> {
    type Output = F::Output;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<F::Output> {
        /// Puts back the state found on entry, also when the poll panics (tokio catches a task's
        /// panic and the thread goes on: a reading left behind would stop the clock).
        struct Restore(Option<Option<Instant>>);
        impl Drop for Restore {
            fn drop(&mut self) {
                let _ = NOW.try_with(|c| c.set(self.0));
            }
        }
        let _restore = Restore(NOW.with(|c| c.replace(Some(None))));
        std::pin::Pin::new(&mut self.0).poll(cx)
    }
}

/// The instant `ms` milliseconds after the epoch of [`now_ms`].
pub fn instant_at_ms(ms: u64) -> Instant {
    epoch() + std::time::Duration::from_millis(ms)
}

/// A deadline that rarely touches the timer wheel: its timer stays armed at the earliest deadline
/// asked for and is re-armed only when it fires before the deadline now in force. Connections that
/// move their deadline on every request (keep-alive idle, response head) pay for a timer about
/// once per timeout period instead of once per request.
#[derive(Debug, Default)]
pub struct LazyDeadline {
    timer: Option<(u64, std::pin::Pin<Box<tokio::time::Sleep>>)>,
}

impl LazyDeadline {
    /// Whether `deadline_ms` (on the [`now_ms`] clock) has passed; otherwise makes sure the task is
    /// woken by then. Whenever the timer is armed on return, it was polled with `cx`.
    pub fn expired(&mut self, cx: &mut std::task::Context<'_>, deadline_ms: u64) -> bool {
        use std::future::Future;
        let at = |ms| tokio::time::Instant::from_std(instant_at_ms(ms));
        match &mut self.timer {
            None => {
                if now_ms() >= deadline_ms {
                    return true;
                }
                let mut sleep = Box::pin(tokio::time::sleep_until(at(deadline_ms)));
                let fired = sleep.as_mut().poll(cx).is_ready();
                self.timer = Some((deadline_ms, sleep));
                fired && now_ms() >= deadline_ms
            }
            Some((armed, sleep)) => {
                if *armed > deadline_ms {
                    sleep.as_mut().reset(at(deadline_ms));
                    *armed = deadline_ms;
                }
                if sleep.as_mut().poll(cx).is_pending() {
                    return false;
                }
                if now_ms() >= deadline_ms {
                    return true;
                }
                // Fired for an earlier deadline that has since moved: re-arm.
                sleep.as_mut().reset(at(deadline_ms));
                *armed = deadline_ms;
                sleep.as_mut().poll(cx).is_ready()
            }
        }
    }
}

/// A [`LazyDeadline`] asked for by one task only (a client connection's), which does not even poll
/// its timer while the timer is armed for that task and not yet due: the timer wakes the task when
/// it fires, so its state (an allocation of its own, a cache miss on a busy worker) stays
/// untouched. An upstream connection's deadline, asked for by the tasks that take turns on the
/// connection, stays a [`LazyDeadline`]: polling its timer is what sets it to wake the task asking.
#[derive(Debug, Default)]
pub struct TaskDeadline {
    lazy: LazyDeadline,
    /// The waker the armed timer was last polled with: the one it wakes.
    waker: Option<std::task::Waker>,
}

impl TaskDeadline {
    /// As [`LazyDeadline::expired`].
    pub fn expired(&mut self, cx: &mut std::task::Context<'_>, deadline_ms: u64) -> bool {
        match (&self.lazy.timer, &mut self.waker) {
            (Some((armed, _)), Some(w)) if w.will_wake(cx.waker()) => {
                if *armed <= deadline_ms && now_ms() < *armed {
                    // Armed no later than the deadline, not yet due, and set to wake this task.
                    return false;
                }
            }
            (_, Some(w)) => w.clone_from(cx.waker()),
            (_, None) => self.waker = Some(cx.waker().clone()),
        }
        self.lazy.expired(cx, deadline_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::task::{Context, Poll};

    /// Polls `f` once with a no-op waker.
    fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        std::pin::Pin::new(f).poll(&mut cx)
    }

    /// Sleeps until the clock has moved past `t`, so that a fresh reading must differ from it.
    fn after(t: Instant) {
        while Instant::now() <= t {
            std::thread::yield_now();
        }
    }

    /// Waits until `d` reports `deadline` passed, woken by its timer: a test fails if only a guard
    /// timer 5 s later wakes the task (checked first, so that wake-up cannot pass for the other).
    async fn wait_expired(d: &mut TaskDeadline, deadline: u64) {
        let wait = std::future::poll_fn(|cx| if d.expired(cx, deadline) { Poll::Ready(()) } else { Poll::Pending });
        tokio::select! {
            biased;
            _ = tokio::time::sleep(std::time::Duration::from_secs(5)) => panic!("the deadline's timer never woke the task"),
            _ = wait => {}
        }
    }

    #[tokio::test]
    async fn a_deadline_moved_later_is_kept_by_the_timer_armed_for_the_earlier_one() {
        let mut d = TaskDeadline::default();
        let start = now_ms();
        let (first, later) = (start + 30, start + 80);
        assert!(!std::future::poll_fn(|cx| Poll::Ready(d.expired(cx, first))).await);
        // Still armed for `first`: this asks without touching the timer, which wakes the task at
        // `first`; the deadline then in force is re-armed.
        wait_expired(&mut d, later).await;
        assert!(now_ms() >= later, "expired at {} ms, before the deadline {later} ms", now_ms());
    }

    #[tokio::test]
    async fn a_timer_armed_for_another_waker_is_set_to_wake_the_task_asking() {
        let mut d = TaskDeadline::default();
        let deadline = now_ms() + 30;
        let mut other = Context::from_waker(std::task::Waker::noop());
        assert!(!d.expired(&mut other, deadline));
        wait_expired(&mut d, deadline).await;
        assert!(now_ms() >= deadline);
    }

    #[test]
    fn one_poll_shares_one_reading_and_the_next_poll_reads_again() {
        let mut polls = Vec::new();
        {
            let mut fut = ClockScoped(std::future::poll_fn(|_| {
                let first = now();
                after(first);
                polls.push((first, now()));
                if polls.len() < 2 {
                    Poll::Pending
                } else {
                    Poll::Ready(())
                }
            }));
            assert!(poll_once(&mut fut).is_pending());
            assert!(poll_once(&mut fut).is_ready());
        }
        let [(a1, a2), (b1, b2)] = polls[..] else { panic!("two polls expected") };
        assert_eq!(a1, a2, "a second call in the same poll reads the clock again");
        assert_eq!(b1, b2);
        assert!(b1 > a1, "the second poll reused the first poll's reading");
    }

    #[test]
    fn outside_a_scope_and_after_a_panicking_poll_every_call_reads_the_clock() {
        let t = now();
        after(t);
        assert!(now() > t);
        let mut fut = ClockScoped(std::future::poll_fn(|_| -> Poll<()> {
            let _ = now();
            panic!("a task's poll panics");
        }));
        assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| poll_once(&mut fut))).is_err());
        let t = now();
        after(t);
        assert!(now() > t, "the clock stopped at the panicking poll's reading");
    }
}
