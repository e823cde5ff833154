//! Traffic split: a route's upstream chosen per request among a weighted list (a canary). An
//! override (`match`) claims the requests it describes; the others are drawn by weight, or kept
//! on the upstream they got before (`sticky`: a cookie, or a hash of a key).
//!
//! The draw is a Weyl sequence over one counter per route (the golden ratio's multiples, modulo
//! one): it spreads any run of requests over the weights within a fraction of a percent, where a
//! random draw strays by its standard deviation (±0.3 % of 10,000 at 10 %), and costs one atomic
//! add.

use gatehouse_config::{Destination, HashKey, Sticky};
use gatehouse_telemetry::{RouteStats, Tally};
use gatehouse_upstream::{cookie, key_hash, stable_hash, SelectKey, Upstream};
use http::header::{HeaderName, HeaderValue};
use http::HeaderMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// 2⁶⁴ divided by the golden ratio: the step of the draw.
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// A compiled split.
#[derive(Debug)]
pub struct Split {
    members: Box<[Member]>,
    /// The sum of the weights.
    total: u64,
    /// Overrides, in the order written: a member's index and what a request must carry.
    overrides: Box<[(usize, Conditions)]>,
    sticky: Stickiness,
    /// Requests drawn so far: the draw's position in its sequence.
    drawn: AtomicU64,
}

#[derive(Debug)]
struct Member {
    upstream: Arc<Upstream>,
    /// The end of its share of `0..total` (the shares follow the list's order).
    upper: u64,
    weight: u64,
    /// Its name's hash, as the sticky cookie names it (the upstream's name stays inside).
    tag: String,
    /// `Set-Cookie` naming it, over plain HTTP and over TLS (`Secure`).
    set_cookie: Option<(HeaderValue, HeaderValue)>,
    tally: Arc<Tally>,
}

#[derive(Debug, Default)]
struct Conditions {
    headers: Vec<(HeaderName, HeaderValue)>,
    cookies: Vec<(String, String)>,
}

impl Conditions {
    fn met(&self, headers: &HeaderMap) -> bool {
        self.headers.iter().all(|(name, want)| headers.get_all(name).iter().any(|v| v == want))
            && self.cookies.iter().all(|(name, want)| cookie(headers, name) == Some(want.as_bytes()))
    }
}

#[derive(Debug)]
enum Stickiness {
    None,
    Cookie(String),
    Hash(HashKey),
}

/// What a split chose for a request: the upstream, and, sticky by cookie when the request did
/// not carry it, the member whose cookie the answer sets ([`Split::set_cookie`]).
pub struct Choice<'s> {
    pub upstream: &'s Arc<Upstream>,
    pub set_cookie: Option<u32>,
}

impl Split {
    /// The split of `dest`, its sticky cookie scoped to `cookie_path` ([`cookie_path`]),
    /// counted in `stats`; `None` for one upstream. `upstream` finds a compiled upstream by name
    /// (validation made sure there is one).
    pub fn new(
        dest: &Destination,
        sticky: Option<&Sticky>,
        cookie_path: &str,
        stats: &RouteStats,
        upstream: impl Fn(&str) -> Option<Arc<Upstream>>,
    ) -> Option<Split> {
        let Destination::Split(list) = dest else { return None };
        let max_age = match sticky.and_then(|s| s.max_age) {
            Some(d) => format!("; Max-Age={}", d.0.as_secs()),
            None => String::new(),
        };
        let sticky = match sticky {
            Some(Sticky { cookie: Some(name), .. }) => Stickiness::Cookie(name.clone()),
            Some(Sticky { hash: Some(key), .. }) => Stickiness::Hash(key.clone()),
            _ => Stickiness::None,
        };
        let mut members = Vec::with_capacity(list.len());
        let mut overrides = Vec::new();
        let mut total = 0u64;
        for w in list {
            let upstream = upstream(&w.upstream)?;
            let tag = format!("{:016x}", stable_hash(w.upstream.as_bytes()));
            total += u64::from(w.weight);
            let set_cookie = match &sticky {
                Stickiness::Cookie(name) => {
                    let base = format!("{name}={tag}; Path={cookie_path}{max_age}; HttpOnly; SameSite=Lax");
                    let secure = format!("{base}; Secure");
                    HeaderValue::try_from(base).ok().zip(HeaderValue::try_from(secure).ok())
                }
                _ => None,
            };
            if let Some(m) = &w.when {
                let conditions = Conditions {
                    headers: m
                        .header
                        .iter()
                        .filter_map(|(n, v)| {
                            Some((HeaderName::try_from(n.as_str()).ok()?, HeaderValue::try_from(v.as_str()).ok()?))
                        })
                        .collect(),
                    cookies: m.cookie.iter().map(|(n, v)| (n.clone(), v.clone())).collect(),
                };
                overrides.push((members.len(), conditions));
            }
            members.push(Member {
                upstream,
                upper: total,
                weight: u64::from(w.weight),
                tag,
                set_cookie,
                tally: stats.tally(&format!("split:{}", w.upstream)),
            });
        }
        (total > 0).then(|| Split {
            members: members.into(),
            total,
            overrides: overrides.into(),
            sticky,
            drawn: AtomicU64::new(0),
        })
    }

    /// The upstream for a request with these headers from `client_ip` (`uri`: its target, for
    /// a hash on it).
    #[inline(never)] // only on routes that split
    pub fn choose(&self, headers: &HeaderMap, uri: &http::Uri, client_ip: IpAddr) -> Choice<'_> {
        for (i, conditions) in self.overrides.iter() {
            if conditions.met(headers) {
                return self.chosen(*i, None);
            }
        }
        let point = match &self.sticky {
            Stickiness::None => None,
            Stickiness::Cookie(name) => {
                let kept = cookie(headers, name)
                    .and_then(|tag| self.members.iter().position(|m| m.weight > 0 && m.tag.as_bytes() == tag));
                if let Some(i) = kept {
                    return self.chosen(i, None);
                }
                None
            }
            Stickiness::Hash(what) => {
                // A request without the header or cookie is drawn like any other, rather than
                // all such requests sent to one upstream.
                let uri = uri.path_and_query().map_or("/", |p| p.as_str());
                key_hash(what, &SelectKey { client_ip, uri, headers }).map(|h| self.scale(h))
            }
        };
        let point = point.unwrap_or_else(|| self.scale(self.drawn.fetch_add(1, Relaxed).wrapping_mul(GOLDEN)));
        // The first share that ends beyond the point (a weight of 0 has none).
        let i = self.members.iter().position(|m| point < m.upper).unwrap_or(0);
        let set_cookie = self.members[i].set_cookie.is_some().then_some(i as u32);
        self.chosen(i, set_cookie)
    }

    /// The `Set-Cookie` that keeps a client on member `i` (`Secure` over TLS).
    pub fn set_cookie(&self, i: u32, tls: bool) -> Option<HeaderValue> {
        let (plain, secure) = self.members.get(i as usize)?.set_cookie.as_ref()?;
        Some(if tls { secure.clone() } else { plain.clone() })
    }

    fn chosen(&self, i: usize, set_cookie: Option<u32>) -> Choice<'_> {
        let m = &self.members[i];
        m.tally.requests.inc();
        Choice { upstream: &m.upstream, set_cookie }
    }

    /// `x` (uniform over `u64`) scaled to `0..total`.
    fn scale(&self, x: u64) -> u64 {
        ((u128::from(x) * u128::from(self.total)) >> 64) as u64
    }

    /// Each upstream of the split with its counters, for the metrics.
    pub fn tallies(&self) -> impl Iterator<Item = (&str, &Tally)> {
        self.members.iter().map(|m| (&*m.upstream.name, &*m.tally))
    }
}

/// The `Path` of a split's sticky cookie for requests under `prefix`: a service's path as it is
/// (matched on whole segments, as a cookie's path is, RFC 6265 §5.1.4); a route's (matched as a
/// plain string prefix: `/api` serves `/apiary` too) cut after its last `/`, so that every
/// request the route serves sends the cookie back. A path a cookie attribute cannot hold
/// (`;`, control characters) gives `/`.
pub fn cookie_path(prefix: &str, whole_segments: bool) -> &str {
    let path = match whole_segments {
        true => prefix,
        false => prefix.rfind('/').map_or("/", |i| &prefix[..=i]),
    };
    match path.bytes().all(|b| b > b' ' && b != b';' && b != 0x7f) && path.starts_with('/') {
        true => path,
        false => "/",
    }
}

#[cfg(test)]
mod tests {
    use crate::snapshot::{RouteStatsRegistry, Snapshot};
    use http::HeaderMap;
    use std::collections::BTreeMap;
    use std::net::{IpAddr, Ipv4Addr};
    use std::sync::Arc;

    /// The split of the only route of a configuration whose site routes `/` with `route`.
    fn split(route: &str) -> Arc<super::Split> {
        let yaml = format!(
            "listeners: {{h: {{bind: \"127.0.0.1:0\"}}}}\n\
             upstreams: {{v1: {{targets: [\"127.0.0.1:1\"]}}, v2: {{targets: [\"127.0.0.1:2\"]}}, \
             v3: {{targets: [\"127.0.0.1:3\"]}}}}\n\
             sites: {{s: {{hosts: [\"*\"], routes: [{{path: /app, {route}}}]}}}}\n"
        );
        let config = gatehouse_config::compile(&yaml).expect("config");
        let snap = Snapshot::build(
            Arc::new(config),
            1,
            &gatehouse_upstream::Registry::new(1),
            &RouteStatsRegistry::default(),
            &gatehouse_plugins::Registry::new(None),
            None,
            &Default::default(),
        )
        .expect("snapshot");
        snap.routes[0].split.clone().expect("a split")
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs.iter().map(|(n, v)| (http::HeaderName::from_static(n), v.parse().expect("a header value"))).collect()
    }

    const IP: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

    fn counts(s: &super::Split, n: usize, h: &HeaderMap) -> BTreeMap<String, usize> {
        let uri = http::Uri::from_static("/app");
        let mut out = BTreeMap::new();
        for _ in 0..n {
            *out.entry(s.choose(h, &uri, IP).upstream.name.to_string()).or_default() += 1;
        }
        out
    }

    #[test]
    fn draws_follow_the_weights_closely_over_any_run() {
        let s = split("upstream: [{upstream: v1, weight: 90}, {upstream: v2, weight: 10}]");
        let none = HeaderMap::new();
        for n in [100, 1000, 10_000] {
            let c = counts(&s, n, &none);
            let v2 = c.get("v2").copied().unwrap_or(0) as f64 / n as f64;
            assert!((v2 - 0.10).abs() <= 0.01, "{n}: {c:?}");
        }
        let s = split("upstream: [{upstream: v1, weight: 1}, {upstream: v2, weight: 2}, {upstream: v3, weight: 7}]");
        let c = counts(&s, 10_000, &none);
        for (name, want) in [("v1", 1000.0), ("v2", 2000.0), ("v3", 7000.0)] {
            let got = c[name] as f64;
            assert!((got - want).abs() <= 20.0, "{c:?}");
        }
        let tallies: Vec<_> = s.tallies().map(|(n, t)| (n.to_string(), t.requests.get())).collect();
        assert_eq!(tallies.iter().map(|t| t.1).sum::<u64>(), 10_000, "{tallies:?}");
    }

    #[test]
    fn an_override_wins_over_weights_and_stickiness() {
        let s = split(
            "upstream: [{upstream: v1, weight: 100}, {upstream: v2, weight: 0, match: {header: {x-canary: \"1\"}, \
             cookie: {beta: \"yes\"}}}], sticky: {cookie: gh}",
        );
        let both = headers(&[("x-canary", "1"), ("cookie", "a=b; beta=yes")]);
        assert_eq!(counts(&s, 50, &both), BTreeMap::from([("v2".to_string(), 50)]));
        // One condition short: drawn by weight, and v2 (weight 0) never is.
        let half = headers(&[("x-canary", "1"), ("cookie", "beta=no")]);
        assert_eq!(counts(&s, 50, &half), BTreeMap::from([("v1".to_string(), 50)]));
        // A matched request is not given the sticky cookie; a sticky cookie naming v2 does not
        // reach it (weight 0) without the match.
        let uri = http::Uri::from_static("/app");
        assert!(s.choose(&both, &uri, IP).set_cookie.is_none());
        let tag = format!("{:016x}", gatehouse_upstream::stable_hash(b"v2"));
        let sticky_v2 = headers(&[("cookie", &format!("gh={tag}"))]);
        assert_eq!(&*s.choose(&sticky_v2, &uri, IP).upstream.name, "v1");
    }

    #[test]
    fn a_sticky_cookie_keeps_the_client_and_is_set_once() {
        let s = split(
            "upstream: [{upstream: v1, weight: 50}, {upstream: v2, weight: 50}], sticky: {cookie: gh, max_age: 1h}",
        );
        let uri = http::Uri::from_static("/app/x");
        for _ in 0..20 {
            let first = s.choose(&HeaderMap::new(), &uri, IP);
            let member = first.set_cookie.expect("set on a draw");
            let cookie = s.set_cookie(member, true).expect("a cookie").to_str().expect("text").to_string();
            assert!(cookie.ends_with("; Path=/; Max-Age=3600; HttpOnly; SameSite=Lax; Secure"), "{cookie}");
            let pair = cookie.split(";").next().unwrap_or_default().to_string();
            let again = headers(&[("cookie", &pair)]);
            for _ in 0..5 {
                let next = s.choose(&again, &uri, IP);
                assert_eq!(next.upstream.name, first.upstream.name);
                assert!(next.set_cookie.is_none());
            }
        }
        // A cookie naming no upstream of the split: drawn again, and told anew.
        let stale = headers(&[("cookie", "gh=0123456789abcdef")]);
        let member = s.choose(&stale, &uri, IP).set_cookie.expect("told anew");
        assert!(s.set_cookie(member, false).is_some_and(|c| !c.as_bytes().ends_with(b"; Secure")));
    }

    #[test]
    fn the_cookie_covers_every_path_its_route_serves() {
        use super::cookie_path;
        for (prefix, segments, want) in [
            ("/", false, "/"),
            ("/api", false, "/"),
            ("/api/", false, "/api/"),
            ("/shop/v2", false, "/shop/"),
            ("/api", true, "/api"),
            ("/a;b/", false, "/"),
            ("/a b/", false, "/"),
        ] {
            assert_eq!(cookie_path(prefix, segments), want, "{prefix}");
        }
    }

    #[test]
    fn a_hash_key_keeps_each_key_on_one_upstream_and_spreads_keys_by_weight() {
        let s = split(
            "upstream: [{upstream: v1, weight: 80}, {upstream: v2, weight: 20}], sticky: {hash: \"header:x-user\"}",
        );
        let uri = http::Uri::from_static("/app");
        let mut v2 = 0;
        for user in 0..2000 {
            let h = headers(&[("x-user", &format!("user-{user}"))]);
            let first = s.choose(&h, &uri, IP).upstream.name.clone();
            assert_eq!(s.choose(&h, &uri, IP).upstream.name, first);
            assert!(s.choose(&h, &uri, IP).set_cookie.is_none());
            v2 += usize::from(&*first == "v2");
        }
        assert!((300..=500).contains(&v2), "{v2} of 2000 keys on v2");
        // Requests without the key are drawn, not all sent to one upstream.
        let c = counts(&s, 1000, &HeaderMap::new());
        assert_eq!(c.get("v2"), Some(&200), "{c:?}");
    }
}
