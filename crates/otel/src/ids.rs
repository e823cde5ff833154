//! Trace and span ids: random, never zero, drawn without a lock or a system call from a
//! generator per thread (wyrand), seeded once per thread from the standard library's random
//! hasher keys (which come from the operating system).

use std::cell::Cell;
use std::hash::BuildHasher;

thread_local! {
    static STATE: Cell<u64> = Cell::new(seed());
}

fn seed() -> u64 {
    std::collections::hash_map::RandomState::new().hash_one(std::thread::current().id())
}

fn next() -> u64 {
    STATE.with(|s| {
        let x = s.get().wrapping_add(0xa076_1d64_78bd_642f);
        s.set(x);
        let t = u128::from(x).wrapping_mul(u128::from(x ^ 0xe703_7ed1_a0b4_28db));
        ((t >> 64) as u64) ^ (t as u64)
    })
}

/// A span id: 64 random bits, not all zero.
pub(crate) fn span_id() -> u64 {
    loop {
        let v = next();
        if v != 0 {
            return v;
        }
    }
}

/// A trace id: 128 random bits, not all zero.
pub(crate) fn trace_id() -> u128 {
    (u128::from(next()) << 64) | u128::from(span_id())
}
