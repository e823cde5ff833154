//! Header rewriting between client and upstream: hop-by-hop headers removed in both directions
//! (including every header named in `Connection`), forwarding headers added, path rewritten.

use crate::snapshot::{Rewrite, Snapshot};
use crate::ConnInfo;
use gatehouse_http1::RawHead;
use gatehouse_plugins::app_key::PathCut;
use gatehouse_plugins::EditHeaders;
use http::header::{self, Entry, HeaderMap, HeaderName, HeaderValue};
use http::uri::PathAndQuery;
use http::Uri;

static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
static X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
static X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");
static KEEP_ALIVE: HeaderName = HeaderName::from_static("keep-alive");
static PROXY_CONNECTION: HeaderName = HeaderName::from_static("proxy-connection");

/// Hop-by-hop headers of RFC 9110 §7.6.1 plus the legacy `Proxy-Connection`, and `Expect`, which
/// the client-side server answers itself (`100 Continue` before the body is forwarded). `Trailer`
/// is not one: it announces the trailer fields, which pass end to end (RFC 9110 §6.6.2).
const HOP_BY_HOP: [&HeaderName; 7] = [
    &header::CONNECTION,
    &KEEP_ALIVE,
    &PROXY_CONNECTION,
    &header::TE,
    &header::TRANSFER_ENCODING,
    &header::UPGRADE,
    &header::EXPECT,
];

/// The bit of `name` (lowercase, as header names are stored) in [`HOP_BY_HOP`], 0 for any other
/// header. Keyed on the length first: most names are ruled out by one compare, with no hashing.
fn hop_by_hop_bit(name: &str) -> u16 {
    let i = match (name.len(), name) {
        (10, "connection") => 0,
        (10, "keep-alive") => 1,
        (16, "proxy-connection") => 2,
        (2, "te") => 3,
        (17, "transfer-encoding") => 4,
        (7, "upgrade") => 5,
        (6, "expect") => 6,
        _ => return 0,
    };
    1 << i
}

/// Which hop-by-hop headers a message keeps on its way through.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Keep {
    /// `Upgrade`, with `Connection: upgrade` restored: a protocol switch.
    pub upgrade: bool,
    /// `TE: trailers` when the client's `TE` names `trailers` (requests): the one `TE` value
    /// HTTP/2 allows, which gRPC requires and which says that the client takes trailers.
    pub te_trailers: bool,
}

/// Removes hop-by-hop headers and those named in `Connection`, but what `keep` keeps.
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap, keep: Keep) {
    // One pass over the names marks which hop-by-hop headers are present; then only those are
    // removed. The usual `Connection: keep-alive` costs no allocation.
    let mut present = 0u16;
    for name in headers.keys() {
        present |= hop_by_hop_bit(name.as_str());
    }
    if present & 1 != 0 {
        let mut named: Vec<HeaderName> = Vec::new();
        for value in headers.get_all(header::CONNECTION) {
            for token in value.to_str().unwrap_or("").split(',').map(str::trim) {
                let ignorable = token.is_empty()
                    || token.eq_ignore_ascii_case("close")
                    || HOP_BY_HOP.iter().any(|h| token.eq_ignore_ascii_case(h.as_str()));
                if !ignorable {
                    if let Ok(name) = HeaderName::from_bytes(token.as_bytes()) {
                        named.push(name);
                    }
                }
            }
        }
        for name in named {
            headers.remove(name);
        }
    }
    let te_trailers = keep.te_trailers && present & (1 << 3) != 0 && names_trailers(headers);
    for (i, name) in HOP_BY_HOP.iter().enumerate() {
        if present & (1 << i) != 0 && !(keep.upgrade && **name == header::UPGRADE) {
            headers.remove(*name);
        }
    }
    // A kept `TE` is for the next hop alone, so `Connection` names it (RFC 9110 §10.1.4); an
    // HTTP/2 upstream drops `Connection` and keeps `TE: trailers`.
    match (keep.upgrade, te_trailers) {
        (false, false) => {}
        (true, false) => {
            headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        }
        (upgrade, true) => {
            headers.insert(header::TE, HeaderValue::from_static("trailers"));
            let connection = if upgrade { "upgrade, te" } else { "te" };
            headers.insert(header::CONNECTION, HeaderValue::from_static(connection));
        }
    }
}

/// Whether a `TE` header names `trailers` (its other codings, with or without a weight, are
/// for this hop only).
fn names_trailers(headers: &HeaderMap) -> bool {
    headers.get_all(header::TE).iter().any(|v| {
        v.to_str().is_ok_and(|v| {
            v.split(',').any(|t| t.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("trailers"))
        })
    })
}

/// A response's headers as the proxy edits them on its way to the client: the response's map, and
/// the endpoint's lines when they are passed on unparsed. Removing or replacing a name applies to
/// both; what is added goes in the map, which is written after the lines.
pub(crate) struct ResponseHeaders<'a> {
    pub map: &'a mut HeaderMap,
    pub raw: Option<&'a mut RawHead>,
}

impl EditHeaders for ResponseHeaders<'_> {
    fn remove(&mut self, name: &HeaderName) {
        if let Some(raw) = self.raw.as_deref_mut() {
            raw.remove(name);
        }
        self.map.remove(name);
    }

    fn insert(&mut self, name: &HeaderName, value: HeaderValue) {
        if let Some(raw) = self.raw.as_deref_mut() {
            raw.remove(name);
        }
        self.map.insert(name, value);
    }

    fn append(&mut self, name: &HeaderName, value: HeaderValue) {
        self.map.append(name, value);
    }

    fn remove_all(&mut self, names: &[&HeaderName]) {
        if let Some(raw) = self.raw.as_deref_mut() {
            raw.remove_all(names);
        }
        self.map.remove_all(names);
    }
}

/// Whether the client asks to switch protocols (`Connection: upgrade` with `Upgrade`).
pub(crate) fn wants_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE)
        && headers
            .get_all(header::CONNECTION)
            .iter()
            .any(|v| v.to_str().is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("upgrade"))))
}

/// Adds `X-Forwarded-For`, `X-Forwarded-Proto`, `X-Real-IP` and `Via` as configured.
pub(crate) fn add_forwarding(headers: &mut HeaderMap, snap: &Snapshot, conn: &ConnInfo, h2: bool) {
    let f = &snap.forwarding;
    if f.x_forwarded_for {
        // One hash probe whether the client sent the header or not.
        match headers.entry(&X_FORWARDED_FOR) {
            Entry::Vacant(e) => {
                e.insert(conn.peer_ip.clone());
            }
            Entry::Occupied(mut e) => {
                let mut value = String::new();
                for prior in e.iter() {
                    if let Ok(p) = prior.to_str() {
                        value.push_str(p);
                        value.push_str(", ");
                    }
                }
                value.push_str(conn.peer_ip.to_str().unwrap_or_default());
                if let Ok(v) = HeaderValue::try_from(value) {
                    // Replaces every earlier value with the one joined list.
                    e.insert(v);
                }
            }
        }
    }
    if f.x_real_ip {
        headers.insert(&X_REAL_IP, conn.peer_ip.clone());
    }
    if f.x_forwarded_proto {
        headers.insert(&X_FORWARDED_PROTO, HeaderValue::from_static(if conn.tls { "https" } else { "http" }));
    }
    if let Some((v1, v2)) = &snap.via {
        headers.append(header::VIA, if h2 { v2.clone() } else { v1.clone() });
    }
}

/// The origin-form target sent upstream for `uri`, routed by a prefix `prefix_len` bytes long: the
/// path without the service's key segment (`cut`), rewritten by the route, the query kept. Built
/// in one pass whatever applies.
pub fn upstream_target(rewrite: &Rewrite, prefix_len: usize, uri: &Uri, cut: &PathCut) -> Result<Uri, &'static str> {
    let pq = uri.path_and_query().cloned().unwrap_or_else(|| PathAndQuery::from_static("/"));
    let new_pq = match (rewrite, cut) {
        (Rewrite::Keep, None) => pq,
        (rewrite, cut) => {
            // The path as the route sees it: without the key segment.
            let (head, tail) = split_cut(pq.path(), cut);
            let (to, pieces) = match rewrite {
                Rewrite::Keep => ("", [head, tail]),
                // The prefix comes off that path: past the head into the tail when the head is
                // shorter (the service `/`, whose key segment starts the path).
                Rewrite::Prefix(to) => (
                    to.as_str(),
                    [
                        head.get(prefix_len..).unwrap_or(""),
                        tail.get(prefix_len.saturating_sub(head.len())..).unwrap_or(""),
                    ],
                ),
            };
            let query = pq.query();
            // Measured first, so the buffer is exactly as long as the target and becomes the
            // target's bytes without another allocation.
            let mut len = 0;
            join_target(to, pieces, query, |piece| len += piece.len());
            let mut out = String::with_capacity(len);
            join_target(to, pieces, query, |piece| out.push_str(piece));
            PathAndQuery::try_from(out).map_err(|_| "invalid rewritten path")?
        }
    };
    Uri::from_parts({
        let mut parts = http::uri::Parts::default();
        parts.path_and_query = Some(new_pq);
        parts
    })
    .map_err(|_| "invalid request target")
}

/// The target as the client sent it, less the app-key segment (`cut`): what the access log shows.
pub fn keyless_target(uri: &Uri, cut: &PathCut) -> String {
    let (head, tail) = split_cut(uri.path(), cut);
    let mut out = String::new();
    join_target("", [head, tail], uri.query(), |piece| out.push_str(piece));
    out
}

/// The path before and after the app-key segment (all of it before, when there is none).
fn split_cut<'a>(path: &'a str, cut: &PathCut) -> (&'a str, &'a str) {
    match cut {
        Some(r) if r.end <= path.len() => (&path[..r.start], &path[r.end..]),
        _ => (path, ""),
    }
}

/// Writes `to` and the pieces with exactly one `/` between each, `/` for an empty path, then the
/// query.
fn join_target(to: &str, pieces: [&str; 2], query: Option<&str>, mut push: impl FnMut(&str)) {
    push(to);
    let mut wrote = !to.is_empty();
    let mut slash = to.ends_with('/');
    for piece in pieces {
        if piece.is_empty() {
            continue;
        }
        match (slash, piece.starts_with('/')) {
            (true, true) => push(&piece[1..]),
            (false, false) => {
                push("/");
                push(piece);
            }
            _ => push(piece),
        }
        wrote = true;
        slash = piece.ends_with('/');
    }
    if !wrote {
        push("/");
    }
    if let Some(q) = query {
        push("?");
        push(q);
    }
}

/// Checks a Host value: a host name or address with an optional port, nothing else.
pub(crate) fn valid_host(host: &str) -> bool {
    !host.is_empty() && host.len() <= 255 && host.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._:[]".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_and_connection_named_headers_go() {
        let mut h = HeaderMap::new();
        h.insert(header::CONNECTION, HeaderValue::from_static("keep-alive, X-Secret"));
        h.insert("x-secret", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert(header::TE, HeaderValue::from_static("trailers"));
        h.append("x-keep", HeaderValue::from_static("a"));
        h.append("x-keep", HeaderValue::from_static("b"));
        strip_hop_by_hop(&mut h, Keep::default());
        assert_eq!(h.len(), 2);
        let kept: Vec<_> = h.get_all("x-keep").iter().collect();
        assert_eq!(kept, ["a", "b"]);
    }

    #[test]
    fn te_trailers_is_kept_on_requests_and_other_codings_go() {
        let keep = Keep { te_trailers: true, ..Keep::default() };
        for (sent, kept) in [
            (&["trailers"][..], Some("trailers")),
            (&["gzip;q=0.5, Trailers"], Some("trailers")),
            (&["deflate", "trailers"], Some("trailers")),
            (&["gzip, deflate"], None),
            (&["x-trailers"], None),
        ] {
            let mut h = HeaderMap::new();
            h.insert(header::CONNECTION, HeaderValue::from_static("TE"));
            for v in sent {
                h.append(header::TE, HeaderValue::from_static(v));
            }
            strip_hop_by_hop(&mut h, keep);
            let te: Vec<_> = h.get_all(header::TE).iter().map(|v| v.to_str().unwrap_or("")).collect();
            assert_eq!(te, kept.into_iter().collect::<Vec<_>>(), "{sent:?}");
            let connection = h.get(header::CONNECTION).map(|v| v.to_str().unwrap_or(""));
            assert_eq!(connection, kept.map(|_| "te"), "{sent:?}: Connection names a kept TE");
        }
        let mut h = HeaderMap::new();
        h.insert(header::TE, HeaderValue::from_static("trailers"));
        strip_hop_by_hop(&mut h, Keep::default());
        assert!(h.is_empty(), "responses drop TE");
    }

    #[test]
    fn the_bit_of_each_hop_by_hop_name_is_its_place_in_the_list() {
        for (i, name) in HOP_BY_HOP.iter().enumerate() {
            assert_eq!(hop_by_hop_bit(name.as_str()), 1 << i, "{name}");
        }
        for other in ["host", "server", "accept", "user-agent", "content-length", "x-te", "connectio"] {
            assert_eq!(hop_by_hop_bit(other), 0, "{other}");
        }
    }

    #[test]
    fn upgrade_is_kept_for_switches() {
        let mut h = HeaderMap::new();
        h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        assert!(wants_upgrade(&h));
        strip_hop_by_hop(&mut h, Keep { upgrade: true, ..Keep::default() });
        assert_eq!(h.get(header::UPGRADE).map(|v| v.as_bytes()), Some(&b"websocket"[..]));
        assert_eq!(h.get(header::CONNECTION).map(|v| v.as_bytes()), Some(&b"upgrade"[..]));
    }

    #[test]
    fn targets_are_joined_with_one_slash() {
        let join = |to: &str, a: &str, b: &str, q: Option<&str>| {
            let mut out = String::new();
            join_target(to, [a, b], q, |p| out.push_str(p));
            out
        };
        assert_eq!(join("", "", "", None), "/");
        assert_eq!(join("", "x", "", None), "/x");
        assert_eq!(join("", "/x", "", Some("a=1")), "/x?a=1");
        assert_eq!(join("/v2", "x", "", None), "/v2/x");
        assert_eq!(join("/v2/", "/x", "", None), "/v2/x");
        assert_eq!(join("/v2/", "", "", None), "/v2/");
        assert_eq!(join("", "/mws", "/test.html", None), "/mws/test.html", "key segment cut out");
        assert_eq!(join("", "", "/test.html", Some("x=1")), "/test.html?x=1", "prefix stripped, key cut out");
        assert_eq!(join("/new", "", "", None), "/new");
    }

    #[test]
    fn the_key_segment_goes_before_the_prefix_is_stripped() {
        let target = |rewrite: &Rewrite, prefix_len: usize, uri: &str, cut: PathCut| {
            let uri: Uri = uri.parse().expect("uri");
            upstream_target(rewrite, prefix_len, &uri, &cut).expect("target").to_string()
        };
        let strip = Rewrite::Prefix(String::new());
        assert_eq!(target(&strip, 4, "/mws/~K/a?x=1", Some(4..7)), "/a?x=1");
        assert_eq!(target(&strip, 4, "/mws/a?x=1", None), "/a?x=1");
        // The service `/` (prefix `/`, key segment at 0) forwards the same with the key anywhere.
        assert_eq!(target(&strip, 1, "/~K//a", Some(0..3)), target(&strip, 1, "//a", None));
        assert_eq!(target(&strip, 1, "/~K/a", Some(0..3)), "/a");
        assert_eq!(target(&Rewrite::Keep, 1, "/~K//a", Some(0..3)), "//a");
    }

    #[test]
    fn hosts() {
        assert!(valid_host("example.com:8080"));
        assert!(valid_host("[::1]:80"));
        assert!(!valid_host("a b"));
        assert!(!valid_host("a/b"));
        assert!(!valid_host(""));
    }
}
