//! Route stage: picks the site by host (exact name, then the longest `*.` wildcard suffix, then the
//! `*` catch-all) and, within the site, the route with the longest matching path prefix.
//!
//! Lookups are hash probes, never a scan of every route: each site keeps one map per distinct prefix
//! length, probed from the longest length down, so the cost grows with the number of distinct prefix
//! lengths (a few dozen in practice), not with the number of routes.

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// The router's maps. Their keys come from the configuration, so a client cannot fill them with
/// colliding keys; a lookup hashes a host and one path prefix per distinct length on every
/// request, with a hash a few times cheaper than the default SipHash.
type Map<K, V> = HashMap<K, V, BuildHasherDefault<KeyHasher>>;

/// Eight bytes at a time, multiply and rotate, then the splitmix64 finalizer so that the low bits
/// the table indexes by depend on every input byte.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut h = self.0;
        let mut words = bytes.chunks_exact(8);
        for word in &mut words {
            let mut w = [0u8; 8];
            w.copy_from_slice(word);
            h = (h ^ u64::from_le_bytes(w)).wrapping_mul(K).rotate_left(29);
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            h = (h ^ u64::from_le_bytes(w) ^ ((rest.len() as u64) << 59)).wrapping_mul(K).rotate_left(29);
        }
        self.0 = h;
    }

    fn finish(&self) -> u64 {
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// A host + path router whose routes carry a value of type `T`.
#[derive(Debug)]
pub struct Router<T> {
    exact: Map<Box<str>, usize>,
    /// Wildcard suffixes without the `*`, e.g. `.example.com`.
    wildcard: Map<Box<str>, usize>,
    /// Distinct wildcard suffix lengths, longest first.
    wildcard_lens: Vec<usize>,
    catch_all: Option<usize>,
    sites: Vec<PrefixTable<T>>,
}

/// Prefixes of one length and their values.
type SameLength<T> = (usize, Map<Box<[u8]>, T>);

#[derive(Debug)]
struct PrefixTable<T> {
    /// (prefix length, prefixes of that length), longest first.
    by_len: Vec<SameLength<T>>,
}

/// Builds a [`Router`].
pub struct RouterBuilder<T> {
    router: Router<T>,
}

impl<T> Default for RouterBuilder<T> {
    fn default() -> Self {
        RouterBuilder {
            router: Router {
                exact: Map::default(),
                wildcard: Map::default(),
                wildcard_lens: Vec::new(),
                catch_all: None,
                sites: Vec::new(),
            },
        }
    }
}

/// A host pattern or path clash found while building.
#[derive(Debug, PartialEq, Eq)]
pub enum BuildError {
    /// The host pattern is already taken by another site.
    DuplicateHost(String),
    /// The prefix is already routed in this site.
    DuplicatePath(String),
}

impl<T> RouterBuilder<T> {
    /// Adds a site served for `hosts` (exact, `*.suffix` or `*`) with `(prefix, value)` routes.
    pub fn site<'a>(
        &mut self,
        hosts: impl IntoIterator<Item = &'a str>,
        routes: impl IntoIterator<Item = (String, T)>,
    ) -> Result<(), BuildError> {
        let r = &mut self.router;
        let idx = r.sites.len();
        for host in hosts {
            let host = host.to_ascii_lowercase();
            let clash = if host == "*" {
                r.catch_all.replace(idx).is_some()
            } else if let Some(suffix) = host.strip_prefix('*') {
                r.wildcard.insert(suffix.into(), idx).is_some()
            } else {
                r.exact.insert(host.as_str().into(), idx).is_some()
            };
            if clash {
                return Err(BuildError::DuplicateHost(host));
            }
        }
        let mut by_len: Vec<SameLength<T>> = Vec::new();
        for (prefix, value) in routes {
            let len = prefix.len();
            let slot = match by_len.iter().position(|(l, _)| *l == len) {
                Some(i) => i,
                None => {
                    by_len.push((len, Map::default()));
                    by_len.len() - 1
                }
            };
            if by_len[slot].1.insert(prefix.as_bytes().into(), value).is_some() {
                return Err(BuildError::DuplicatePath(prefix));
            }
        }
        by_len.sort_by_key(|entry| std::cmp::Reverse(entry.0));
        r.sites.push(PrefixTable { by_len });
        Ok(())
    }

    /// Finishes the router.
    pub fn build(mut self) -> Router<T> {
        let mut lens: Vec<usize> = self.router.wildcard.keys().map(|k| k.len()).collect();
        lens.sort_unstable_by(|a, b| b.cmp(a));
        lens.dedup();
        self.router.wildcard_lens = lens;
        self.router
    }
}

impl<T> Router<T> {
    /// Starts a builder.
    pub fn builder() -> RouterBuilder<T> {
        RouterBuilder::default()
    }

    /// Finds the route for `host` (as sent: any case, optional `:port`, optional trailing dot) and
    /// `path` (the request target's path).
    pub fn lookup(&self, host: &str, path: &str) -> Option<&T> {
        let site = self.site_for(host)?;
        let table = &self.sites[site];
        let path = path.as_bytes();
        table.by_len.iter().filter(|(len, _)| *len <= path.len()).find_map(|(len, map)| map.get(&path[..*len]))
    }

    fn site_for(&self, host: &str) -> Option<usize> {
        let host = strip_port(host);
        let host = host.strip_suffix('.').unwrap_or(host);
        let mut buf = [0u8; 256];
        let host = if host.bytes().any(|b| b.is_ascii_uppercase()) {
            let Some(dst) = buf.get_mut(..host.len()) else {
                return self.catch_all;
            };
            dst.copy_from_slice(host.as_bytes());
            dst.make_ascii_lowercase();
            std::str::from_utf8(dst).unwrap_or(host)
        } else {
            host
        };
        if let Some(&i) = self.exact.get(host) {
            return Some(i);
        }
        for &len in &self.wildcard_lens {
            // A wildcard needs at least one label before the suffix.
            if host.len() > len && host.is_char_boundary(host.len() - len) {
                if let Some(&i) = self.wildcard.get(&host[host.len() - len..]) {
                    return Some(i);
                }
            }
        }
        self.catch_all
    }
}

/// Removes a `:port` suffix; IPv6 literals keep their brackets.
fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    match host.rfind(':') {
        Some(i) if host[i + 1..].bytes().all(|b| b.is_ascii_digit()) => &host[..i],
        _ => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router() -> Router<&'static str> {
        let mut b = Router::builder();
        b.site(
            ["example.com", "www.example.com"],
            [("/".to_string(), "ex-root"), ("/api/".to_string(), "ex-api"), ("/api/v2/".to_string(), "ex-api2")],
        )
        .expect("site");
        b.site(["*.example.com"], [("/".to_string(), "wild")]).expect("site");
        b.site(["*.deep.example.com"], [("/".to_string(), "deep")]).expect("site");
        b.site(["*"], [("/static".to_string(), "any-static")]).expect("site");
        b.build()
    }

    #[test]
    fn exact_host_longest_prefix() {
        let r = router();
        assert_eq!(r.lookup("example.com", "/"), Some(&"ex-root"));
        assert_eq!(r.lookup("example.com", "/api/x"), Some(&"ex-api"));
        assert_eq!(r.lookup("example.com", "/api/v2/x"), Some(&"ex-api2"));
        assert_eq!(r.lookup("EXAMPLE.com:8080", "/api/v2"), Some(&"ex-api"));
        assert_eq!(r.lookup("example.com.", "/"), Some(&"ex-root"));
    }

    #[test]
    fn wildcards_longest_suffix_wins() {
        let r = router();
        assert_eq!(r.lookup("a.example.com", "/x"), Some(&"wild"));
        assert_eq!(r.lookup("a.b.example.com", "/x"), Some(&"wild"));
        assert_eq!(r.lookup("x.deep.example.com", "/x"), Some(&"deep"));
        assert_eq!(r.lookup("deep.example.com", "/x"), Some(&"wild"));
    }

    #[test]
    fn catch_all_and_misses() {
        let r = router();
        assert_eq!(r.lookup("other.org", "/static/a.css"), Some(&"any-static"));
        assert_eq!(r.lookup("other.org", "/"), None);
        assert_eq!(r.lookup("[::1]:80", "/static"), Some(&"any-static"));
        let long = "a".repeat(300);
        assert_eq!(r.lookup(&long, "/static"), Some(&"any-static"));
    }

    #[test]
    fn duplicates_are_refused() {
        let mut b = Router::builder();
        b.site(["a.com"], [("/".to_string(), 1)]).expect("site");
        assert_eq!(b.site(["A.com"], [("/".to_string(), 2)]), Err(BuildError::DuplicateHost("a.com".into())));
        let mut b = Router::builder();
        assert_eq!(
            b.site(["a.com"], [("/".to_string(), 1), ("/".to_string(), 2)]),
            Err(BuildError::DuplicatePath("/".into()))
        );
    }

    #[test]
    fn many_routes_are_found() {
        let mut b = Router::builder();
        b.site(["*"], (0..10_000).map(|i| (format!("/svc{i}/"), i))).expect("site");
        let r = b.build();
        assert_eq!(r.lookup("h", "/svc9999/x"), Some(&9999));
        assert_eq!(r.lookup("h", "/svc1/x"), Some(&1));
        assert_eq!(r.lookup("h", "/svc"), None);
    }
}
