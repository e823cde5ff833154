//! Admit stage, app key: find the key in the header, the query or a `/~KEY/` path segment right
//! after the service prefix, and take it out of the request in every place it appears, so the
//! backend never sees it.

use crate::error::GatewayError;
use gatehouse_config::AppKeySources;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::uri::{PathAndQuery, Uri};

/// Where a service looks for the key.
#[derive(Debug, Clone)]
pub struct Sources {
    header: Option<HeaderName>,
    query: Option<Box<str>>,
    path: bool,
}

/// A key as the client sent it, decoded.
#[derive(Debug)]
pub enum Key {
    /// From the header, as it came.
    Header(HeaderValue),
    /// From the query or the path, percent-decoded, when short (no allocation).
    Inline {
        /// The bytes, `len` of them.
        buf: [u8; INLINE_KEY],
        /// How many.
        len: usize,
    },
    /// From the query or the path, percent-decoded.
    Decoded(Vec<u8>),
}

/// Keys up to this long are decoded without allocating.
const INLINE_KEY: usize = 64;

impl Key {
    /// The key's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Key::Header(v) => v.as_bytes(),
            Key::Inline { buf, len } => &buf[..*len],
            Key::Decoded(v) => v,
        }
    }

    /// Decodes `%XX` escapes (and keeps anything else as it is).
    fn decode(b: &[u8]) -> Key {
        let mut inline = [0u8; INLINE_KEY];
        if b.len() <= INLINE_KEY && !b.contains(&b'%') {
            inline[..b.len()].copy_from_slice(b);
            return Key::Inline { buf: inline, len: b.len() };
        }
        let mut len = 0;
        let mut i = 0;
        let hex = |c: u8| (c as char).to_digit(16);
        while i < b.len() {
            let byte = match (b[i], b.get(i + 1).and_then(|&c| hex(c)), b.get(i + 2).and_then(|&c| hex(c))) {
                (b'%', Some(h), Some(l)) => {
                    i += 3;
                    (h * 16 + l) as u8
                }
                (c, _, _) => {
                    i += 1;
                    c
                }
            };
            if len == INLINE_KEY {
                let mut v = inline.to_vec();
                v.push(byte);
                v.extend(Key::decode(&b[i..]).as_bytes());
                return Key::Decoded(v);
            }
            inline[len] = byte;
            len += 1;
        }
        Key::Inline { buf: inline, len }
    }
}

/// The bytes of the request path that held a `/~KEY` segment, which the forwarded target leaves
/// out. Kept as a range rather than applied, so the target is rebuilt once, together with the
/// route's own prefix rewrite.
pub type PathCut = Option<std::ops::Range<usize>>;

impl Sources {
    /// Compiles the configured sources (validated names).
    pub fn new(cfg: &AppKeySources) -> Result<Self, GatewayError> {
        let header = match cfg.header.as_str() {
            "" => None,
            h => Some(
                HeaderName::from_bytes(h.as_bytes()).map_err(|_| GatewayError::NotAHeaderName { name: h.into() })?,
            ),
        };
        let query = (!cfg.query.is_empty()).then(|| cfg.query.as_str().into());
        Ok(Sources { header, query, path: cfg.path })
    }

    /// Takes the key out of the request: the header first, then the query, then the path
    /// segment. `base_len` is the length of the service prefix without its trailing `/`. The
    /// header and the query parameter are removed here; a path segment is returned as a cut for
    /// the caller to leave out. `Err` for a target that cannot be rebuilt without the key.
    pub fn take(
        &self,
        uri: &mut Uri,
        headers: &mut HeaderMap,
        base_len: usize,
    ) -> Result<(Option<Key>, PathCut), &'static str> {
        let mut found = None;
        if let Some(name) = &self.header {
            if let Some(v) = headers.remove(name) {
                found = Some(Key::Header(v));
            }
        }
        let Some(pq) = uri.path_and_query() else { return Ok((found, None)) };
        let (path, query) = (pq.path(), pq.query());
        let mut cut = None;
        if self.path {
            if let Some(seg) = path.get(base_len..).and_then(|rest| rest.strip_prefix("/~")) {
                // A byte loop: keys are short, and `str::find` costs more to set up than to run.
                let end = seg.bytes().position(|b| b == b'/').unwrap_or(seg.len());
                if found.is_none() {
                    found = Some(Key::decode(&seg.as_bytes()[..end]));
                }
                cut = Some(base_len..base_len + 2 + end);
            }
        }
        if let (Some(param), Some(q)) = (&self.query, query) {
            if q.split('&').any(|pair| pair.split('=').next() == Some(param)) {
                let mut kept = String::with_capacity(path.len() + q.len());
                kept.push_str(path);
                let mut first = true;
                for pair in q.split('&') {
                    let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
                    if name == &**param {
                        if found.is_none() {
                            found = Some(Key::decode(value.as_bytes()));
                        }
                    } else {
                        kept.push(if first { '?' } else { '&' });
                        first = false;
                        kept.push_str(pair);
                    }
                }
                let pq = PathAndQuery::try_from(kept).map_err(|_| "invalid request target")?;
                let mut parts = std::mem::take(uri).into_parts();
                parts.path_and_query = Some(pq);
                *uri = Uri::from_parts(parts).map_err(|_| "invalid request target")?;
            }
        }
        Ok((found, cut))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key found, the target the backend would get (path cut applied), and whether the
    /// header is still there.
    fn take(target: &str, header: Option<&str>, base: usize) -> (Option<String>, String, bool) {
        let s = Sources::new(&AppKeySources::default()).expect("valid");
        let mut uri: Uri = target.parse().expect("uri");
        let mut h = HeaderMap::new();
        if let Some(v) = header {
            h.insert("x-app-key", v.parse().expect("value"));
        }
        let (key, cut) = s.take(&mut uri, &mut h, base).expect("ok");
        let key = key.map(|k| String::from_utf8(k.as_bytes().to_vec()).expect("utf-8"));
        let mut out = String::new();
        if let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) {
            out = format!("{scheme}://{authority}");
        }
        let path = uri.path();
        let rest = match cut {
            Some(r) => format!("{}{}", &path[..r.start], &path[r.end..]),
            None => path.to_string(),
        };
        out.push_str(if rest.is_empty() { "/" } else { &rest });
        if let Some(q) = uri.query() {
            out.push('?');
            out.push_str(q);
        }
        (key, out, h.contains_key("x-app-key"))
    }

    #[test]
    fn path_segment_is_taken_out() {
        assert_eq!(take("/mws/~K1/test.html", None, 4), (Some("K1".into()), "/mws/test.html".into(), false));
        assert_eq!(take("/mws/~K1", None, 4), (Some("K1".into()), "/mws".into(), false));
        assert_eq!(take("/~K1/a?x=1", None, 0), (Some("K1".into()), "/a?x=1".into(), false));
        assert_eq!(take("/mws/a/~K1/b", None, 4), (None, "/mws/a/~K1/b".into(), false), "only right after the prefix");
        assert_eq!(take("/mws/~K%31/b", None, 4).0.as_deref(), Some("K1"));
        let long = "k".repeat(100);
        assert_eq!(take(&format!("/mws/~{long}%41/b"), None, 4).0, Some(format!("{long}A")), "past the inline buffer");
    }

    #[test]
    fn query_parameter_is_taken_out() {
        assert_eq!(take("/mws/a?_app_key=K2&x=1", None, 4), (Some("K2".into()), "/mws/a?x=1".into(), false));
        assert_eq!(take("/mws/a?x=1&_app_key=K2", None, 4), (Some("K2".into()), "/mws/a?x=1".into(), false));
        assert_eq!(take("/mws/a?_app_key=K2", None, 4), (Some("K2".into()), "/mws/a".into(), false));
        assert_eq!(take("/mws/a?_app_keys=K2", None, 4).0, None);
    }

    #[test]
    fn header_wins_and_every_copy_goes() {
        let (key, uri, header_left) = take("/mws/~P/a?_app_key=Q", Some("H"), 4);
        assert_eq!(key.as_deref(), Some("H"));
        assert_eq!(uri, "/mws/a");
        assert!(!header_left);
    }

    #[test]
    fn absolute_targets_keep_their_authority() {
        assert_eq!(take("http://api.test/mws/~K/x", None, 4).1, "http://api.test/mws/x");
    }
}
