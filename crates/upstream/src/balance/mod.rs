//! Select stage: each policy picks one available endpoint that this request has not tried yet.
//! Tables (cumulative weights, the smooth round-robin order, the hash ring) are built once per
//! snapshot; choosing reads atomics only.

use crate::endpoint::Endpoint;
use crate::random::{rand_below, stable_hash};
use gatehouse_config::{Balance, HashKey};
use http::HeaderMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// What a hashing policy may key on.
#[derive(Debug, Clone, Copy)]
pub struct SelectKey<'a> {
    /// The client address.
    pub client_ip: IpAddr,
    /// Request path and query.
    pub uri: &'a str,
    /// Request headers.
    pub headers: &'a HeaderMap,
}

/// Virtual nodes per unit of weight on the consistent-hash ring.
const RING_POINTS_PER_WEIGHT: u32 = 160;
/// How many rehashes `ip_hash` tries before walking to the next endpoint (as nginx: 20).
const IP_HASH_REHASHES: u64 = 20;

/// A balancing policy with its precomputed tables.
#[derive(Debug)]
pub enum Balancer {
    /// Weighted random over cumulative weights.
    Random {
        /// Running sums of weights.
        cumulative: Box<[u64]>,
    },
    /// nginx's smooth weighted round robin, precomputed as one period of its sequence.
    RoundRobin {
        /// Endpoint indices in the smooth order.
        order: Box<[u32]>,
        /// Position shared by all workers.
        next: AtomicUsize,
    },
    /// Fewest in-flight requests per unit of weight.
    LeastConn,
    /// Peak-EWMA cost, best of two random choices.
    Ewma,
    /// Weighted hash of the client's network prefix.
    IpHash {
        /// Running sums of weights.
        cumulative: Box<[u64]>,
    },
    /// Ring of `(point, endpoint index)` sorted by point.
    ConsistentHash {
        /// The ring.
        ring: Box<[(u64, u32)]>,
        /// What to hash.
        key: HashKey,
    },
}

impl Default for Balancer {
    /// A balancer over no endpoints.
    fn default() -> Self {
        Balancer::LeastConn
    }
}

impl Balancer {
    /// Builds the tables for `policy` over `endpoints`.
    pub fn new(policy: Balance, key: Option<HashKey>, endpoints: &[Endpoint]) -> Self {
        let cumulative = || {
            let mut sum = 0u64;
            endpoints
                .iter()
                .map(|e| {
                    sum += u64::from(e.weight);
                    sum
                })
                .collect()
        };
        match policy {
            Balance::Random => Balancer::Random { cumulative: cumulative() },
            Balance::RoundRobin => Balancer::RoundRobin { order: smooth_order(endpoints), next: AtomicUsize::new(0) },
            Balance::LeastConn => Balancer::LeastConn,
            Balance::Ewma => Balancer::Ewma,
            Balance::IpHash => Balancer::IpHash { cumulative: cumulative() },
            Balance::ConsistentHash => {
                let mut ring = Vec::new();
                for (i, e) in endpoints.iter().enumerate() {
                    for p in 0..RING_POINTS_PER_WEIGHT * e.weight {
                        let point = stable_hash(format!("{}#{p}", e.state.addr).as_bytes());
                        ring.push((point, i as u32));
                    }
                }
                ring.sort_unstable();
                Balancer::ConsistentHash { ring: ring.into(), key: key.unwrap_or(HashKey::ClientIp) }
            }
        }
    }

    /// Picks an endpoint index.
    pub fn select(&self, eps: &[Endpoint], key: &SelectKey<'_>, tried: &[usize], now: u64) -> Option<usize> {
        let ok = |i: usize| !tried.contains(&i) && eps[i].available(now);
        match self {
            Balancer::Random { cumulative } => {
                let total = *cumulative.last()?;
                let pick = by_weight(cumulative, rand_below(total));
                if ok(pick) {
                    return Some(pick);
                }
                // Another weighted draw among the rest, then any that is left.
                let pick = by_weight(cumulative, rand_below(total));
                if ok(pick) {
                    return Some(pick);
                }
                scan_from(eps.len(), rand_below(eps.len() as u64) as usize, ok)
            }
            Balancer::RoundRobin { order, next } => {
                let len = order.len();
                let start = next.fetch_add(1, Relaxed);
                (0..len.min(4 * eps.len() + 4))
                    .map(|k| order[(start + k) % len] as usize)
                    .find(|&i| ok(i))
                    .or_else(|| scan_from(eps.len(), start, ok))
            }
            Balancer::LeastConn => {
                let start = rand_below(eps.len() as u64) as usize;
                let mut best: Option<usize> = None;
                for k in 0..eps.len() {
                    let i = (start + k) % eps.len();
                    if !ok(i) {
                        continue;
                    }
                    let better = match best {
                        None => true,
                        Some(b) => {
                            let (a, bb) = (&eps[i], &eps[b]);
                            u64::from(a.state.inflight()) * u64::from(bb.weight)
                                < u64::from(bb.state.inflight()) * u64::from(a.weight)
                        }
                    };
                    if better {
                        best = Some(i);
                    }
                }
                best
            }
            Balancer::Ewma => {
                let n = eps.len();
                let a = rand_below(n as u64) as usize;
                let b = if n > 1 { (a + 1 + rand_below(n as u64 - 1) as usize) % n } else { a };
                match (ok(a), ok(b)) {
                    (true, true) => {
                        Some(if eps[a].state.ewma_cost(eps[a].weight) <= eps[b].state.ewma_cost(eps[b].weight) {
                            a
                        } else {
                            b
                        })
                    }
                    (true, false) => Some(a),
                    (false, true) => Some(b),
                    (false, false) => scan_from(n, a, ok),
                }
            }
            Balancer::IpHash { cumulative } => {
                let total = *cumulative.last()?;
                let prefix = ip_prefix(key.client_ip);
                let mut h = stable_hash(&prefix);
                for _ in 0..IP_HASH_REHASHES {
                    let pick = by_weight(cumulative, h % total);
                    if ok(pick) {
                        return Some(pick);
                    }
                    h = crate::random::mix(h.wrapping_add(1));
                }
                scan_from(eps.len(), (h % eps.len() as u64) as usize, ok)
            }
            Balancer::ConsistentHash { ring, key: what } => {
                let h = key_hash(what, key).unwrap_or_else(|| stable_hash(&[]));
                let start = ring.partition_point(|(p, _)| *p < h);
                (0..ring.len()).map(|k| ring[(start + k) % ring.len()].1 as usize).find(|&i| ok(i))
            }
        }
    }
}

fn by_weight(cumulative: &[u64], r: u64) -> usize {
    cumulative.partition_point(|&c| c <= r).min(cumulative.len() - 1)
}

fn scan_from(n: usize, start: usize, ok: impl Fn(usize) -> bool) -> Option<usize> {
    (0..n).map(|k| (start + k) % n).find(|&i| ok(i))
}

/// The first two octets of an IPv4 address, or the first 48 bits of an IPv6 one.
fn ip_prefix(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(v4) => v4.octets()[..2].to_vec(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.octets()[..2].to_vec(),
            None => v6.octets()[..6].to_vec(),
        },
    }
}

/// The hash of the request's `what`; `None` when the request has no such header or cookie (the
/// consistent hash then hashes it as empty, so such requests still land on one endpoint; a
/// traffic split draws them instead).
pub fn key_hash(what: &HashKey, key: &SelectKey<'_>) -> Option<u64> {
    match what {
        HashKey::ClientIp => Some(match key.client_ip {
            IpAddr::V4(v4) => stable_hash(&v4.octets()),
            IpAddr::V6(v6) => stable_hash(&v6.octets()),
        }),
        HashKey::Uri => Some(stable_hash(key.uri.as_bytes())),
        HashKey::Header(name) => key.headers.get(name.as_str()).map(|v| stable_hash(v.as_bytes())),
        HashKey::Cookie(name) => cookie(key.headers, name).map(stable_hash),
    }
}

/// The value of cookie `name` in the request's `Cookie` headers, if it has one.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a [u8]> {
    headers.get_all(http::header::COOKIE).iter().flat_map(|v| v.as_bytes().split(|&b| b == b';')).find_map(|pair| {
        let pair = pair.trim_ascii();
        let eq = pair.iter().position(|&b| b == b'=')?;
        (pair[..eq].trim_ascii() == name.as_bytes()).then(|| pair[eq + 1..].trim_ascii())
    })
}

/// One period of nginx's smooth weighted round robin: each step adds every weight to its current
/// value, picks the largest, and subtracts the total from it.
fn smooth_order(eps: &[Endpoint]) -> Box<[u32]> {
    let gcd = eps.iter().map(|e| u64::from(e.weight)).fold(0, gcd);
    let weights: Vec<i64> = eps.iter().map(|e| (u64::from(e.weight) / gcd.max(1)) as i64).collect();
    let total: i64 = weights.iter().sum();
    let mut current = vec![0i64; eps.len()];
    let mut order = Vec::with_capacity(total as usize);
    for _ in 0..total {
        let mut best = 0;
        for i in 0..weights.len() {
            current[i] += weights[i];
            if current[i] > current[best] {
                best = i;
            }
        }
        current[best] -= total;
        order.push(best as u32);
    }
    order.into()
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests;
