//! Admit stage, app key: find the key in the header, the query or a `/~KEY/` path segment right
//! after the service prefix, and take it out of the request in every place it appears, so the
//! backend never sees it.

use gatehouse_config::AppKeySources;
use http::header::{HeaderMap, HeaderName};
use http::uri::{PathAndQuery, Uri};

/// Where a service looks for the key.
#[derive(Debug, Clone)]
pub struct Sources {
    header: Option<HeaderName>,
    query: Option<Box<str>>,
    path: bool,
}

/// A key as the client sent it, decoded.
pub type Key = Vec<u8>;

impl Sources {
    /// Compiles the configured sources (validated names).
    pub fn new(cfg: &AppKeySources) -> Result<Self, String> {
        let header = match cfg.header.as_str() {
            "" => None,
            h => Some(HeaderName::from_bytes(h.as_bytes()).map_err(|_| format!("`{h}` is not a header name"))?),
        };
        let query = (!cfg.query.is_empty()).then(|| cfg.query.as_str().into());
        Ok(Sources { header, query, path: cfg.path })
    }

    /// Takes the key out of the request: the header first, then the query, then the path
    /// segment. `base_len` is the length of the service prefix without its trailing `/`.
    /// Returns `Err` for a request whose target cannot be rebuilt without the key.
    pub fn take(&self, uri: &mut Uri, headers: &mut HeaderMap, base_len: usize) -> Result<Option<Key>, &'static str> {
        let mut found = None;
        if let Some(name) = &self.header {
            if let Some(v) = headers.remove(name) {
                found = Some(v.as_bytes().to_vec());
            }
        }
        let Some(pq) = uri.path_and_query() else { return Ok(found) };
        let (path, query) = (pq.path(), pq.query());
        let mut new_path = None;
        if self.path {
            if let Some(seg) = path.get(base_len..).and_then(|rest| rest.strip_prefix("/~")) {
                let end = seg.find('/').unwrap_or(seg.len());
                if found.is_none() {
                    found = Some(percent_decode(&seg.as_bytes()[..end]));
                }
                new_path = Some(format!("{}{}", &path[..base_len], &seg[end..]));
            }
        }
        let mut new_query = None;
        if let (Some(param), Some(q)) = (&self.query, query) {
            if q.split('&').any(|pair| pair.split('=').next() == Some(param)) {
                let mut kept = String::with_capacity(q.len());
                for pair in q.split('&') {
                    let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
                    if name == &**param {
                        if found.is_none() {
                            found = Some(percent_decode(value.as_bytes()));
                        }
                    } else {
                        if !kept.is_empty() {
                            kept.push('&');
                        }
                        kept.push_str(pair);
                    }
                }
                new_query = Some(kept);
            }
        }
        if new_path.is_some() || new_query.is_some() {
            let path = match new_path.as_deref() {
                Some("") => "/",
                Some(p) => p,
                None => path,
            };
            let mut text = String::with_capacity(path.len() + query.map_or(0, |q| q.len() + 1));
            text.push_str(path);
            match new_query.as_deref().or(query) {
                Some("") | None => {}
                Some(q) => {
                    text.push('?');
                    text.push_str(q);
                }
            }
            let pq = PathAndQuery::try_from(text).map_err(|_| "invalid request target")?;
            let mut parts = std::mem::take(uri).into_parts();
            parts.path_and_query = Some(pq);
            *uri = Uri::from_parts(parts).map_err(|_| "invalid request target")?;
        }
        Ok(found)
    }
}

/// Decodes `%XX` escapes (and keeps anything else as it is).
fn percent_decode(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (b[i], b.get(i + 1).and_then(|&c| hex(c)), b.get(i + 2).and_then(|&c| hex(c))) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(target: &str, header: Option<&str>, base: usize) -> (Option<String>, String, bool) {
        let s = Sources::new(&AppKeySources::default()).expect("valid");
        let mut uri: Uri = target.parse().expect("uri");
        let mut h = HeaderMap::new();
        if let Some(v) = header {
            h.insert("x-app-key", v.parse().expect("value"));
        }
        let key = s.take(&mut uri, &mut h, base).expect("ok").map(|k| String::from_utf8(k).expect("utf-8"));
        (key, uri.to_string(), h.contains_key("x-app-key"))
    }

    #[test]
    fn path_segment_is_taken_out() {
        assert_eq!(take("/mws/~K1/test.html", None, 4), (Some("K1".into()), "/mws/test.html".into(), false));
        assert_eq!(take("/mws/~K1", None, 4), (Some("K1".into()), "/mws".into(), false));
        assert_eq!(take("/~K1/a?x=1", None, 0), (Some("K1".into()), "/a?x=1".into(), false));
        assert_eq!(take("/mws/a/~K1/b", None, 4), (None, "/mws/a/~K1/b".into(), false), "only right after the prefix");
        assert_eq!(take("/mws/~K%31/b", None, 4).0.as_deref(), Some("K1"));
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
