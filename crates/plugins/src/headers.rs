//! Header rewrite on the request to the backend and the response to the client: remove, then
//! set, then append. Names and values are parsed once when the configuration is compiled.

use crate::error::GatewayError;
use gatehouse_config::HeaderOps;
use http::header::{HeaderMap, HeaderName, HeaderValue};

/// Where header edits land: a header map, or a response whose endpoint head is passed on
/// unparsed (its lines and the map of what the proxy adds, edited together).
pub trait EditHeaders {
    /// Removes every value of `name`.
    fn remove(&mut self, name: &HeaderName);
    /// Replaces every value of `name` with `value`.
    fn insert(&mut self, name: &HeaderName, value: HeaderValue);
    /// Adds `value` after any values of `name`.
    fn append(&mut self, name: &HeaderName, value: HeaderValue);
    /// Removes every value of each of `names`.
    fn remove_all(&mut self, names: &[&HeaderName]);
}

impl EditHeaders for HeaderMap {
    fn remove(&mut self, name: &HeaderName) {
        HeaderMap::remove(self, name);
    }

    fn insert(&mut self, name: &HeaderName, value: HeaderValue) {
        HeaderMap::insert(self, name, value);
    }

    fn append(&mut self, name: &HeaderName, value: HeaderValue) {
        HeaderMap::append(self, name, value);
    }

    fn remove_all(&mut self, names: &[&HeaderName]) {
        // Most maps here hold a few headers: each is looked for in `names`, not each name in the map.
        let found: Vec<HeaderName> = self.keys().filter(|k| names.contains(k)).cloned().collect();
        for name in found {
            HeaderMap::remove(self, name);
        }
    }
}

/// Compiled header operations.
#[derive(Debug, Clone, Default)]
pub struct Ops {
    remove: Box<[HeaderName]>,
    set: Box<[(HeaderName, HeaderValue)]>,
    append: Box<[(HeaderName, HeaderValue)]>,
}

impl Ops {
    /// Compiles configured operations; names and values were validated with the configuration.
    pub fn new(ops: &HeaderOps) -> Result<Self, GatewayError> {
        let name =
            |n: &str| HeaderName::from_bytes(n.as_bytes()).map_err(|_| GatewayError::NotAHeaderName { name: n.into() });
        let pair = |(n, v): (&String, &String)| -> Result<(HeaderName, HeaderValue), GatewayError> {
            let parsed = name(n)?;
            Ok((parsed, HeaderValue::from_str(v).map_err(|_| GatewayError::InvalidHeaderValue { name: n.clone() })?))
        };
        Ok(Ops {
            remove: ops.remove.iter().map(|n| name(n)).collect::<Result<_, _>>()?,
            set: ops.set.iter().map(pair).collect::<Result<_, _>>()?,
            append: ops.append.iter().map(pair).collect::<Result<_, _>>()?,
        })
    }

    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.remove.is_empty() && self.set.is_empty() && self.append.is_empty()
    }

    /// Applies the operations.
    pub fn apply<H: EditHeaders + ?Sized>(&self, headers: &mut H) {
        for n in self.remove.iter() {
            headers.remove(n);
        }
        for (n, v) in self.set.iter() {
            headers.insert(n, v.clone());
        }
        for (n, v) in self.append.iter() {
            headers.append(n, v.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remove_set_append_in_order() {
        let cfg = HeaderOps {
            remove: vec!["x-internal".into()],
            set: [("x-env".to_string(), "prod".to_string())].into(),
            append: [("x-tag".to_string(), "gw".to_string())].into(),
        };
        let ops = Ops::new(&cfg).expect("valid");
        let mut h = HeaderMap::new();
        h.insert("x-internal", HeaderValue::from_static("1"));
        h.insert("x-env", HeaderValue::from_static("dev"));
        h.insert("x-tag", HeaderValue::from_static("client"));
        ops.apply(&mut h);
        assert!(!h.contains_key("x-internal"));
        assert_eq!(h["x-env"], "prod");
        let tags: Vec<_> = h.get_all("x-tag").iter().collect();
        assert_eq!(tags, ["client", "gw"]);
    }
}
