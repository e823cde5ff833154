//! Traffic split and mirroring: a route's or service's `upstream` as one name or a weighted list
//! (a canary), its overrides by header or cookie, the stickiness that keeps a client on the
//! upstream it got (`sticky`), and the copy of its requests sent to a shadow upstream (`mirror`).

use crate::units::{ByteSize, Duration};
use crate::upstream::{is_token, HashKey};
use serde::de::{self, Deserializer};
use serde::Deserialize;
use std::collections::BTreeMap;

/// Largest weight of one entry of a split.
pub const MAX_SPLIT_WEIGHT: u32 = 1_000_000;

/// Where a route's or service's requests go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    /// Every request to this upstream.
    One(String),
    /// Each request to one of these: the first whose `match` it meets, else one drawn by weight.
    Split(Vec<Weighted>),
}

impl Destination {
    /// The upstream names it sends to, in the order written.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        let (one, list) = match self {
            Destination::One(name) => (Some(name.as_str()), &[][..]),
            Destination::Split(list) => (None, list.as_slice()),
        };
        one.into_iter().chain(list.iter().map(|w| w.upstream.as_str()))
    }

    /// The upstream of a single destination, or the first of a split.
    pub fn first(&self) -> &str {
        self.names().next().unwrap_or("")
    }

    /// Checks the split at `p` (`….upstream`): known upstreams, each once, weights in range
    /// with one above zero, overrides that name something.
    pub(crate) fn check(&self, p: &str, known: impl Fn(&str) -> bool, err: &mut impl FnMut(String, String)) {
        let list = match self {
            Destination::One(name) => {
                if !known(name) {
                    err(p.to_string(), format!("unknown upstream `{name}`"));
                }
                return;
            }
            Destination::Split(list) => list,
        };
        if list.is_empty() {
            err(p.to_string(), "a weighted list needs at least one entry".into());
        }
        let mut seen = std::collections::HashSet::new();
        for (i, w) in list.iter().enumerate() {
            let wp = format!("{p}[{i}]");
            if !known(&w.upstream) {
                err(format!("{wp}.upstream"), format!("unknown upstream `{}`", w.upstream));
            }
            if !seen.insert(w.upstream.as_str()) {
                err(format!("{wp}.upstream"), format!("`{}` is listed twice", w.upstream));
            }
            if w.weight > MAX_SPLIT_WEIGHT {
                err(format!("{wp}.weight"), format!("at most {MAX_SPLIT_WEIGHT}"));
            }
            if let Some(m) = &w.when {
                m.check(&format!("{wp}.match"), err);
            }
        }
        if !list.is_empty() && list.iter().all(|w| w.weight == 0) {
            err(p.to_string(), "every weight is 0: at least one entry must take the requests no `match` claims".into());
        }
    }
}

impl<'de> Deserialize<'de> for Destination {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            One(String),
            Split(Vec<Weighted>),
        }
        match Either::deserialize(d) {
            Ok(Either::One(name)) => Ok(Destination::One(name)),
            Ok(Either::Split(list)) => Ok(Destination::Split(list)),
            Err(_) => Err(de::Error::custom(
                "an upstream name, or a list of `{upstream, weight, match}` entries (unknown fields are refused)",
            )),
        }
    }
}

/// One entry of a split.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Weighted {
    /// Upstream name.
    pub upstream: String,
    /// Its share of the requests no `match` claims, against the sum of the list's weights
    /// (0: only the requests its `match` claims).
    #[serde(default = "one")]
    pub weight: u32,
    /// Requests that meet this always go to this upstream, whatever the weights and stickiness.
    #[serde(default, rename = "match")]
    pub when: Option<Match>,
}

fn one() -> u32 {
    1
}

/// An override: every header and cookie listed must have the value given.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Match {
    /// Request headers by name (case-insensitive) and the exact value one of them must have.
    #[serde(default)]
    pub header: BTreeMap<String, String>,
    /// Cookies by name and the exact value.
    #[serde(default)]
    pub cookie: BTreeMap<String, String>,
}

impl Match {
    fn check(&self, p: &str, err: &mut impl FnMut(String, String)) {
        if self.header.is_empty() && self.cookie.is_empty() {
            err(p.to_string(), "name at least one header or cookie".into());
        }
        for (name, value) in &self.header {
            if !is_token(name) {
                err(format!("{p}.header"), format!("`{name}` is not a header name"));
            } else if http_value_error(value) {
                err(format!("{p}.header.{name}"), "not a valid header value".into());
            }
        }
        for (name, value) in &self.cookie {
            if !is_token(name) {
                err(format!("{p}.cookie"), format!("`{name}` is not a cookie name"));
            } else if value.bytes().any(|b| b <= b' ' || matches!(b, b'"' | b',' | b';' | b'\\' | 0x7f..)) {
                err(format!("{p}.cookie.{name}"), "not a valid cookie value (RFC 6265 §4.1.1)".into());
            }
        }
    }
}

fn http_value_error(v: &str) -> bool {
    v.bytes().any(|b| (b < b' ' && b != b'\t') || b == 0x7f)
}

/// How a client is kept on the upstream of a split it got.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sticky {
    /// A cookie of this name remembers the upstream drawn (set on the first answer).
    #[serde(default)]
    pub cookie: Option<String>,
    /// The cookie's lifetime (`Max-Age`); absent: a session cookie.
    #[serde(default)]
    pub max_age: Option<Duration>,
    /// Instead of a cookie: the upstream drawn from a hash of this key (`client_ip`, `uri`,
    /// `header:NAME`, `cookie:NAME`), the same for the same key while the weights stay.
    #[serde(default)]
    pub hash: Option<HashKey>,
}

impl Sticky {
    pub(crate) fn check(&self, p: &str, split: bool, err: &mut impl FnMut(String, String)) {
        if !split {
            err(p.to_string(), "only for an `upstream` that is a weighted list".into());
        }
        match (&self.cookie, &self.hash) {
            (Some(_), Some(_)) | (None, None) => err(p.to_string(), "give either `cookie` or `hash`".into()),
            (Some(name), None) if !is_token(name) => {
                err(format!("{p}.cookie"), format!("`{name}` is not a cookie name"))
            }
            (None, Some(_)) if self.max_age.is_some() => err(format!("{p}.max_age"), "only with `cookie`".into()),
            _ => {}
        }
        if self.max_age.is_some_and(|d| d.0 < std::time::Duration::from_secs(1)) {
            // `Max-Age` counts whole seconds; 0 deletes the cookie.
            err(format!("{p}.max_age"), "at least 1s (leave it out for a session cookie)".into());
        }
    }
}

/// A copy of each request (or of a share of them) sent to another upstream, its answer
/// discarded.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mirror {
    /// Upstream name.
    pub upstream: String,
    /// Share of requests copied, from 0 (none) to 100.
    #[serde(default = "hundred")]
    pub percent: f64,
    /// Longest request body copied; a request with a longer body is not mirrored.
    #[serde(default = "default_max_body")]
    pub max_body: ByteSize,
    /// Longest a copy may take, from its body complete to the end of its answer.
    #[serde(default = "default_timeout")]
    pub timeout: Duration,
    /// Most copies under way at once on the node (sent and not yet answered); beyond it
    /// requests are not mirrored.
    #[serde(default = "default_in_flight")]
    pub max_in_flight: u32,
}

fn hundred() -> f64 {
    100.0
}

fn default_max_body() -> ByteSize {
    ByteSize(1 << 20)
}

fn default_timeout() -> Duration {
    Duration::secs(10)
}

fn default_in_flight() -> u32 {
    256
}

impl Mirror {
    pub(crate) fn check(&self, p: &str, known: impl Fn(&str) -> bool, err: &mut impl FnMut(String, String)) {
        if !known(&self.upstream) {
            err(format!("{p}.upstream"), format!("unknown upstream `{}`", self.upstream));
        }
        if !(0.0..=100.0).contains(&self.percent) {
            err(format!("{p}.percent"), "from 0 to 100".into());
        }
        if self.timeout.0.is_zero() {
            err(format!("{p}.timeout"), "must be more than 0".into());
        }
        if self.max_in_flight == 0 {
            err(format!("{p}.max_in_flight"), "must be at least 1".into());
        }
    }
}

/// Checks a route's or service's (at `p`) `upstream`, `sticky` and `mirror`.
pub(crate) fn check_destination(
    p: &str,
    upstream: &Destination,
    sticky: Option<&Sticky>,
    mirror: Option<&Mirror>,
    known: impl Fn(&str) -> bool,
    err: &mut impl FnMut(String, String),
) {
    upstream.check(&format!("{p}.upstream"), &known, err);
    if let Some(s) = sticky {
        s.check(&format!("{p}.sticky"), matches!(upstream, Destination::Split(_)), err);
    }
    if let Some(m) = mirror {
        m.check(&format!("{p}.mirror"), &known, err);
    }
}

#[cfg(test)]
mod tests {
    /// The errors of a configuration with upstreams `u` and `v` and these sections.
    fn errors(yaml: &str) -> Vec<String> {
        let head = "listeners: {http: {bind: \"127.0.0.1:0\"}}\n";
        match crate::compile(&format!("{head}{yaml}")) {
            Ok(_) => Vec::new(),
            Err(e) => e.0.iter().map(ToString::to_string).collect(),
        }
    }

    fn route(extra: &str) -> Vec<String> {
        errors(&format!(
            "upstreams: {{u: {{targets: [\"127.0.0.1:1\"]}}, v: {{targets: [\"127.0.0.1:2\"]}}}}\n\
             sites: {{s: {{hosts: [\"*\"], routes: [{{path: /, {extra}}}]}}}}\n"
        ))
    }

    #[test]
    fn a_weighted_list_with_overrides_and_stickiness_compiles() {
        let ok = route(
            "upstream: [{upstream: u, weight: 90}, {upstream: v, weight: 10, match: {header: {x-canary: \"1\"}}}], \
             sticky: {cookie: gh_split, max_age: 1h}, mirror: {upstream: v, percent: 12.5}",
        );
        assert!(ok.is_empty(), "{ok:?}");
        assert!(route("upstream: u").is_empty());
        assert!(route("upstream: [{upstream: v, weight: 0, match: {cookie: {beta: yes}}}, {upstream: u}]").is_empty());
    }

    #[test]
    fn every_mistake_is_named_with_its_place() {
        let e = route(
            "upstream: [{upstream: u, weight: 0}, {upstream: u, weight: 2000000}, {upstream: w, match: {}}], \
             sticky: {cookie: \"a b\", hash: client_ip, max_age: 500ms}, mirror: {upstream: x, percent: 101, timeout: 0s, max_in_flight: 0}",
        );
        let text = e.join("\n");
        for want in [
            "routes[0].upstream[1].upstream: `u` is listed twice",
            "routes[0].upstream[1].weight: at most 1000000",
            "routes[0].upstream[2].upstream: unknown upstream `w`",
            "routes[0].upstream[2].match: name at least one header or cookie",
            "routes[0].sticky: give either `cookie` or `hash`",
            "routes[0].sticky.max_age: at least 1s",
            "routes[0].mirror.upstream: unknown upstream `x`",
            "routes[0].mirror.percent: from 0 to 100",
            "routes[0].mirror.timeout: must be more than 0",
            "routes[0].mirror.max_in_flight: must be at least 1",
        ] {
            assert!(text.contains(want), "missing {want:?} in:\n{text}");
        }
        let e = route("upstream: [{upstream: u, weight: 0}]").join("\n");
        assert!(e.contains("every weight is 0"), "{e}");
        let e = route("upstream: u, sticky: {hash: client_ip}").join("\n");
        assert!(e.contains("sticky: only for an `upstream` that is a weighted list"), "{e}");
        let e = route("upstream: [{upstream: u, wieght: 3}]").join("\n");
        assert!(e.contains("an upstream name, or a list"), "{e}");
        let e = route("upstream: [{upstream: u, match: {header: {\"x y\": a}, cookie: {c: \"a;b\"}}}]").join("\n");
        assert!(e.contains("`x y` is not a header name") && e.contains("not a valid cookie value"), "{e}");
    }

    #[test]
    fn services_take_the_same_destinations() {
        let e = errors(
            "upstreams: {u: {targets: [\"127.0.0.1:1\"]}, v: {targets: [\"127.0.0.1:2\"]}}\n\
             services: {api: {path: /api, upstream: [{upstream: u, weight: 3}, {upstream: nope}], \
             sticky: {hash: \"header:x-user\"}, mirror: {upstream: v}}}\n",
        );
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains("services.api.upstream[1].upstream: unknown upstream `nope`"), "{e:?}");
    }
}
