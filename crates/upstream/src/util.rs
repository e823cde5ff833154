//! Small shared pieces: the worker index of the current thread, a monotonic millisecond clock, a
//! per-thread random generator and a stable hash.

use std::cell::Cell;
use std::sync::OnceLock;
use std::time::Instant;

thread_local! {
    static WORKER: Cell<usize> = const { Cell::new(0) };
    static RNG: Cell<u64> = Cell::new(seed());
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

/// Milliseconds since the first call in this process (monotonic).
pub fn now_ms() -> u64 {
    u64::try_from(epoch().elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// The instant `ms` milliseconds after the epoch of [`now_ms`].
pub fn instant_at_ms(ms: u64) -> Instant {
    epoch() + std::time::Duration::from_millis(ms)
}

fn seed() -> u64 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let local = 0u8;
    mix(t ^ (&local as *const u8 as u64)) | 1
}

/// A uniformly distributed random number (xorshift64*, per thread).
pub fn rand_u64() -> u64 {
    RNG.with(|r| {
        let mut x = r.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        r.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    })
}

/// A random number in `0..n` (`n > 0`).
pub fn rand_below(n: u64) -> u64 {
    ((u128::from(rand_u64()) * u128::from(n)) >> 64) as u64
}

/// FNV-1a over `bytes` followed by a finaliser, stable across runs and nodes.
pub fn stable_hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    mix(h)
}

/// splitmix64's finaliser: spreads every input bit over the output.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
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
    /// woken by then.
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
