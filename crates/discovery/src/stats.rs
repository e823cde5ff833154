//! Counters of the discovery loop by name, read by the metrics page.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// What is counted for one name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NameStats {
    /// Lookups answered.
    pub resolved: u64,
    /// Lookups that failed (timeout, server failure, no such name, no address).
    pub failed: u64,
    /// Addresses in the last good answer.
    pub addresses: usize,
}

/// Counters by name (a host name or an SRV name).
#[derive(Debug, Default)]
pub struct Stats(Mutex<BTreeMap<String, NameStats>>);

impl Stats {
    fn with(&self, name: &str, f: impl FnOnce(&mut NameStats)) {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        f(map.entry(name.to_string()).or_default());
    }

    pub(crate) fn resolved(&self, name: &str, addresses: usize) {
        self.with(name, |s| {
            s.resolved += 1;
            s.addresses = addresses;
        });
    }

    pub(crate) fn failed(&self, name: &str) {
        self.with(name, |s| s.failed += 1);
    }

    pub(crate) fn retain(&self, mut keep: impl FnMut(&str) -> bool) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).retain(|n, _| keep(n));
    }

    /// Every name followed now, with its counters.
    pub fn snapshot(&self) -> BTreeMap<String, NameStats> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}
