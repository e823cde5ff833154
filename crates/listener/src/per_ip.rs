//! Open connections per client address, shared by a listener's workers without a lock: a table
//! of atomic words, each holding a 40-bit tag of the address's keyed hash and a 24-bit count.
//! An address probes a few slots from its hash; it counts in the slot bearing its tag, or claims an
//! empty one, and the slot empties again when its count returns to zero.
//!
//! Limits: when every probed slot belongs to other addresses the connection is admitted uncounted
//! (and counted in [`PerIpLimit::untracked`]), so a table filled by a wide attack never refuses
//! the innocent. Two addresses whose hashes share tag and slot would share a count; with a 64-bit
//! keyed hash that takes about 2^40 addresses at once.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

const COUNT_BITS: u32 = 24;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
const PROBES: usize = 4;

/// The table of one listener.
#[derive(Debug)]
pub struct PerIpLimit {
    limit: u64,
    slots: Box<[AtomicU64]>,
    hasher: RandomState,
    untracked: AtomicU64,
}

/// The address already has as many connections open as the limit allows.
#[derive(Debug)]
pub struct OverLimit;

/// A counted connection; the count drops with it.
#[derive(Debug)]
pub struct PerIpGuard {
    table: Arc<PerIpLimit>,
    slot: usize,
}

impl PerIpLimit {
    /// A table admitting `limit` open connections per address, sized for `capacity` addresses at
    /// once (rounded up to a power of two, at least 1,024 slots).
    pub fn new(limit: u32, capacity: usize) -> PerIpLimit {
        let n = capacity.max(1024).next_power_of_two();
        PerIpLimit {
            limit: u64::from(limit).min(COUNT_MASK),
            slots: (0..n).map(|_| AtomicU64::new(0)).collect(),
            hasher: RandomState::new(),
            untracked: AtomicU64::new(0),
        }
    }

    /// Counts a connection from `ip`; `Ok(None)` when admitted uncounted (no room in the table).
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Option<PerIpGuard>, OverLimit> {
        let hash = self.hasher.hash_one(canonical(ip));
        // Never zero, so an empty slot (0) is told from any tag.
        let tag = (hash >> COUNT_BITS) | 1;
        let mask = self.slots.len() - 1;
        let start = usize::try_from(hash).unwrap_or(0);
        // Bounded: a lost race restarts the probe, a few times at most.
        for _ in 0..8 {
            let mut empty = None;
            let mut lost = false;
            for i in 0..PROBES {
                let slot = (start.wrapping_add(i)) & mask;
                let cur = self.slots[slot].load(Relaxed);
                if cur == 0 {
                    empty.get_or_insert(slot);
                } else if cur >> COUNT_BITS == tag {
                    if cur & COUNT_MASK >= self.limit {
                        return Err(OverLimit);
                    }
                    if self.slots[slot].compare_exchange(cur, cur + 1, Relaxed, Relaxed).is_ok() {
                        return Ok(Some(PerIpGuard { table: self.clone(), slot }));
                    }
                    lost = true;
                    break;
                }
            }
            if lost {
                continue;
            }
            let Some(slot) = empty else { break };
            if self.slots[slot].compare_exchange(0, (tag << COUNT_BITS) | 1, Relaxed, Relaxed).is_ok() {
                return Ok(Some(PerIpGuard { table: self.clone(), slot }));
            }
        }
        self.untracked.fetch_add(1, Relaxed);
        Ok(None)
    }

    /// Connections admitted without a count because the table had no room for their address.
    pub fn untracked(&self) -> u64 {
        self.untracked.load(Relaxed)
    }
}

impl Drop for PerIpGuard {
    fn drop(&mut self) {
        let slot = &self.table.slots[self.slot];
        let mut cur = slot.load(Relaxed);
        loop {
            // The last connection empties the slot for any address to claim.
            let next = if cur & COUNT_MASK <= 1 { 0 } else { cur - 1 };
            match slot.compare_exchange_weak(cur, next, Relaxed, Relaxed) {
                Ok(_) => return,
                Err(now) => cur = now,
            }
        }
    }
}

/// An IPv4 client seen through an IPv6 socket (`::ffff:a.b.c.d`) counts as its IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("address")
    }

    #[test]
    fn counts_per_address_up_to_the_limit() {
        let t = Arc::new(PerIpLimit::new(3, 0));
        let mut a: Vec<_> = (0..3).map(|_| t.admit(ip("10.0.0.1")).expect("under the limit")).collect();
        assert!(t.admit(ip("10.0.0.1")).is_err(), "the fourth is refused");
        assert!(t.admit(ip("::ffff:10.0.0.1")).is_err(), "the same address through IPv6");
        let b = t.admit(ip("10.0.0.2")).expect("another address has its own count");
        drop(a.pop());
        let again = t.admit(ip("10.0.0.1")).expect("a closed connection frees its place");
        assert!(t.admit(ip("10.0.0.1")).is_err());
        drop((again, b, a));
        assert_eq!(t.untracked(), 0);
    }

    #[test]
    fn the_last_connection_empties_the_slot() {
        let t = Arc::new(PerIpLimit::new(2, 0));
        let g = t.admit(ip("192.0.2.7")).expect("admitted");
        let h = t.admit(ip("192.0.2.7")).expect("admitted");
        drop((g, h));
        assert!(t.slots.iter().all(|s| s.load(Relaxed) == 0), "every slot is empty again");
    }

    #[test]
    fn a_full_table_admits_uncounted() {
        let t = Arc::new(PerIpLimit::new(1, 0));
        let mut held = Vec::new();
        for i in 0..5_000u32 {
            held.push(t.admit(IpAddr::from(i.to_be_bytes())).expect("distinct addresses are admitted"));
        }
        assert!(t.untracked() > 0, "1,024 slots cannot count 5,000 addresses");
        drop(held);
        assert!(t.slots.iter().all(|s| s.load(Relaxed) == 0));
    }
}
