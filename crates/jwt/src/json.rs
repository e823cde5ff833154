//! Strict JSON for the header and the claims: one top-level object, no member named twice.
//!
//! serde_json keeps the last of two equal member names; a cache, a logger or the issuer may read the first. RFC 7515
//! §4 lets a parser reject such input, so it does, and two readers can never see different claims.

use std::fmt;

use serde::de::{Deserialize, Deserializer, Error as _, MapAccess, Visitor};
use serde_json::{Map, Value};

/// Parses `bytes` as one JSON object with distinct member names, or `None`.
pub(crate) fn object(bytes: &[u8]) -> Option<Map<String, Value>> {
    serde_json::from_slice::<UniqueObject>(bytes).ok().map(|o| o.0)
}

struct UniqueObject(Map<String, Value>);

impl<'de> Deserialize<'de> for UniqueObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(UniqueObjectVisitor)
    }
}

struct UniqueObjectVisitor;

impl<'de> Visitor<'de> for UniqueObjectVisitor {
    type Value = UniqueObject;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<UniqueObject, A::Error> {
        let mut map = Map::new();
        while let Some(name) = access.next_key::<String>()? {
            if map.contains_key(&name) {
                return Err(A::Error::custom("duplicate member"));
            }
            let value = access.next_value::<Value>()?;
            map.insert(name, value);
        }
        Ok(UniqueObject(map))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_objects_with_distinct_names() {
        assert!(object(br#"{"a":1,"b":{"a":2}}"#).is_some());
        assert!(object(br#" {} "#).is_some());
        for bad in [&br#"{"a":1,"a":2}"#[..], b"[]", b"1", b"\"x\"", b"null", b"{", b"{} {}", b"", b"{\"a\":\"\xff\"}"]
        {
            assert!(object(bad).is_none(), "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
