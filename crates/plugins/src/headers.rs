//! Header rewrite on the request to the backend and the response to the client: remove, then
//! set, then append. Names and values are parsed once when the configuration is compiled.

use gatehouse_config::HeaderOps;
use http::header::{HeaderMap, HeaderName, HeaderValue};

/// Compiled header operations.
#[derive(Debug, Clone, Default)]
pub struct Ops {
    remove: Box<[HeaderName]>,
    set: Box<[(HeaderName, HeaderValue)]>,
    append: Box<[(HeaderName, HeaderValue)]>,
}

impl Ops {
    /// Compiles configured operations; names and values were validated with the configuration.
    pub fn new(ops: &HeaderOps) -> Result<Self, String> {
        let name = |n: &str| HeaderName::from_bytes(n.as_bytes()).map_err(|_| format!("`{n}` is not a header name"));
        let pair = |(n, v): (&String, &String)| -> Result<(HeaderName, HeaderValue), String> {
            Ok((name(n)?, HeaderValue::from_str(v).map_err(|_| format!("invalid value for `{n}`"))?))
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
    pub fn apply(&self, headers: &mut HeaderMap) {
        for n in self.remove.iter() {
            headers.remove(n);
        }
        for (n, v) in self.set.iter() {
            headers.insert(n.clone(), v.clone());
        }
        for (n, v) in self.append.iter() {
            headers.append(n.clone(), v.clone());
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
