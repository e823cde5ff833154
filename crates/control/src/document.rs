//! The published document: the sections of a configuration that revisions carry, how a node
//! merges them into its own file, their canonical text and hash, and how secrets in them are
//! hashed (app keys) or hidden (HMAC secrets) when they pass through the admin API.

use aws_lc_rs::digest::{digest, SHA256};
use gatehouse_config::PUBLISHED_SECTIONS;
use serde_json::{Map, Value};
use std::fmt;

/// What stands in for a secret the API does not show. Sending it back keeps the stored value.
pub const REDACTED: &str = "(redacted)";
/// What stands in for a secret that differs from the one it is compared with (in diffs).
pub const REDACTED_CHANGED: &str = "(redacted, changed)";

/// A problem in a document, with its path.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct FieldError {
    /// Where (`apps.billing.secret`).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl FieldError {
    fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError { path: path.into(), message: message.into() }
    }
}

/// Why a node's configuration file cannot take part in a document (its published sections read
/// out, or a revision merged in).
#[derive(Debug)]
#[non_exhaustive]
pub enum DocumentError {
    /// The file is not YAML.
    NotYaml(serde_yaml::Error),
    /// The file is YAML but not a map of settings.
    NotAMap,
    /// A published section has no JSON form (a key that is not a string, a number out of range).
    Section {
        /// The section.
        section: &'static str,
        /// Why.
        source: serde_json::Error,
    },
}

impl fmt::Display for DocumentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DocumentError::NotYaml(e) => write!(f, "not YAML: {e}"),
            DocumentError::NotAMap => f.write_str("the configuration must be a map of settings"),
            DocumentError::Section { section, source } => write!(f, "{section}: {source}"),
        }
    }
}

impl std::error::Error for DocumentError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DocumentError::NotYaml(e) => Some(e),
            DocumentError::NotAMap => None,
            DocumentError::Section { source, .. } => Some(source),
        }
    }
}

/// SHA-256 of `data`, hex.
pub fn sha256_hex(data: &[u8]) -> String {
    data_encoding::HEXLOWER.encode(digest(&SHA256, data).as_ref())
}

fn yaml_root(text: &str) -> Result<serde_yaml::Mapping, DocumentError> {
    match serde_yaml::from_str::<serde_yaml::Value>(text).map_err(DocumentError::NotYaml)? {
        serde_yaml::Value::Mapping(m) => Ok(m),
        serde_yaml::Value::Null => Ok(serde_yaml::Mapping::new()),
        _ => Err(DocumentError::NotAMap),
    }
}

/// The published sections of a configuration file, as a JSON object.
pub fn published_of(file_text: &str) -> Result<Value, DocumentError> {
    let root = yaml_root(file_text)?;
    let mut out = Map::new();
    for section in PUBLISHED_SECTIONS {
        if let Some(v) = root.get(*section) {
            if !v.is_null() {
                let json = serde_json::to_value(v).map_err(|source| DocumentError::Section { section, source })?;
                out.insert((*section).to_string(), json);
            }
        }
    }
    Ok(Value::Object(out))
}

/// The node's file with its published sections replaced by `document`'s, ready for
/// `gatehouse_config::compile_value`.
pub fn merge(file_text: &str, document: &Value) -> Result<serde_yaml::Value, DocumentError> {
    let mut root = yaml_root(file_text)?;
    for section in PUBLISHED_SECTIONS {
        root.remove(*section);
        if let Some(v) = document.get(*section) {
            root.insert(serde_yaml::Value::String((*section).to_string()), to_yaml(v));
        }
    }
    Ok(serde_yaml::Value::Mapping(root))
}

/// JSON to YAML with object keys sorted, so equal documents have equal text.
fn to_yaml(v: &Value) -> serde_yaml::Value {
    match v {
        Value::Null => serde_yaml::Value::Null,
        Value::Bool(b) => serde_yaml::Value::Bool(*b),
        Value::Number(n) => serde_yaml::to_value(n).unwrap_or(serde_yaml::Value::Null),
        Value::String(s) => serde_yaml::Value::String(s.clone()),
        Value::Array(a) => serde_yaml::Value::Sequence(a.iter().map(to_yaml).collect()),
        Value::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            let mut m = serde_yaml::Mapping::with_capacity(keys.len());
            for k in keys {
                m.insert(serde_yaml::Value::String(k.clone()), to_yaml(&o[k]));
            }
            serde_yaml::Value::Mapping(m)
        }
    }
}

/// The canonical text of a document: YAML, sections and keys sorted.
pub fn canonical(document: &Value) -> String {
    serde_yaml::to_string(&to_yaml(document)).unwrap_or_default()
}

/// The SHA-256 (hex) of a document's canonical text: equal documents, equal hashes.
pub fn content_hash(document: &Value) -> String {
    sha256_hex(canonical(document).as_bytes())
}

/// Checks the shape of a document sent to the API and makes it safe to keep: only published
/// sections, each a map; app keys replaced by their SHA-256; redacted secrets restored from
/// `current`.
pub fn normalise(document: Value, current: Option<&Value>) -> Result<Value, Vec<FieldError>> {
    let Value::Object(mut map) = document else {
        return Err(vec![FieldError::new("(document)", "must be an object of sections")]);
    };
    let mut errors = Vec::new();
    map.retain(|k, v| {
        if !PUBLISHED_SECTIONS.contains(&k.as_str()) {
            errors.push(FieldError::new(
                k.clone(),
                format!("not a published section; expected one of: {}", PUBLISHED_SECTIONS.join(", ")),
            ));
            return false;
        }
        if !(v.is_object() || v.is_null()) {
            errors.push(FieldError::new(k.clone(), "must be a map of names to entries"));
        }
        !v.is_null()
    });
    if let Some(Value::Object(apps)) = map.get_mut("apps") {
        for (id, app) in apps.iter_mut() {
            let Value::Object(app) = app else { continue };
            if let Some(Err(e)) = app.get("key").and_then(Value::as_str).map(gatehouse_config::check_app_key) {
                errors.push(FieldError::new(format!("apps.{id}.key"), e.to_string()));
            }
            hash_app_key(app);
            let stored = current.and_then(|c| c.get("apps")).and_then(|a| a.get(id));
            restore_secrets(id, app, stored, &mut errors);
        }
    }
    if errors.is_empty() {
        Ok(Value::Object(map))
    } else {
        Err(errors)
    }
}

/// The draft never holds an app key, only its hash; the gateway looks such apps up by hash.
fn hash_app_key(app: &mut Map<String, Value>) {
    if app.contains_key("key_sha256") || app.contains_key("key_hmac") {
        return;
    }
    if let Some(Value::String(key)) = app.remove("key") {
        app.insert("key_sha256".into(), Value::String(sha256_hex(key.as_bytes())));
    }
}

fn is_placeholder(v: &Value) -> bool {
    v.as_str().is_some_and(|s| s.starts_with("(redacted"))
}

fn restore_secrets(id: &str, app: &mut Map<String, Value>, stored: Option<&Value>, errors: &mut Vec<FieldError>) {
    let mut restore = |path: String, slot: &mut Value, from: Option<&Value>| {
        if is_placeholder(slot) {
            match from.filter(|v| !is_placeholder(v)) {
                Some(v) => *slot = v.clone(),
                None => errors.push(FieldError::new(path, "a redacted placeholder with no stored secret to keep")),
            }
        }
    };
    if let Some(slot) = app.get_mut("secret") {
        restore(format!("apps.{id}.secret"), slot, stored.and_then(|s| s.get("secret")));
    }
    if let Some(Value::Array(keys)) = app.get_mut("jwt_keys") {
        let old = stored.and_then(|s| s.get("jwt_keys")).and_then(Value::as_array);
        for (i, key) in keys.iter_mut().enumerate() {
            let kid = key.get("kid").cloned();
            let before = old.and_then(|o| match &kid {
                Some(kid) => o.iter().find(|k| k.get("kid") == Some(kid)),
                None => o.get(i),
            });
            if let Some(slot) = key.get_mut("secret") {
                restore(format!("apps.{id}.jwt_keys[{i}].secret"), slot, before.and_then(|b| b.get("secret")));
            }
        }
    }
}

/// `document` with every secret replaced by [`REDACTED`], or by [`REDACTED_CHANGED`] where
/// `other` holds a different value at the same place.
pub fn redact(document: &Value, other: Option<&Value>) -> Value {
    let mut out = document.clone();
    let Some(Value::Object(apps)) = out.get_mut("apps") else { return out };
    for (id, app) in apps.iter_mut() {
        let before = other.and_then(|o| o.get("apps")).and_then(|a| a.get(id));
        let mark = |slot: &mut Value, was: Option<&Value>| {
            if slot.is_string() {
                let changed = other.is_some() && was != Some(&*slot);
                *slot = Value::String(if changed { REDACTED_CHANGED } else { REDACTED }.into());
            }
        };
        for field in ["secret", "key"] {
            if let Some(slot) = app.get_mut(field) {
                mark(slot, before.and_then(|b| b.get(field)));
            }
        }
        if let Some(Value::Array(keys)) = app.get_mut("jwt_keys") {
            for (i, key) in keys.iter_mut().enumerate() {
                let was = before.and_then(|b| b.get("jwt_keys")).and_then(|k| k.get(i)).and_then(|k| k.get("secret"));
                if let Some(slot) = key.get_mut("secret") {
                    mark(slot, was);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn published_sections_come_out_of_a_file_and_go_back_in() {
        let file = "workers: 2\nlisteners:\n  web: {bind: '127.0.0.1:0'}\nupstreams:\n  a: {targets: [{address: '127.0.0.1:1'}]}\n";
        let doc = published_of(file).expect("file");
        assert_eq!(doc, json!({"upstreams": {"a": {"targets": [{"address": "127.0.0.1:1"}]}}}));
        let back = merge(file, &json!({"sites": {"s": {"hosts": ["x"]}}})).expect("merge");
        assert!(back.get("upstreams").is_none(), "the file's upstreams are replaced");
        assert!(back.get("sites").is_some());
        assert_eq!(back.get("workers"), Some(&serde_yaml::Value::from(2)));
    }

    #[test]
    fn a_file_that_is_not_a_map_of_settings_is_refused() {
        let e = published_of("- a\n- b\n").expect_err("a list");
        assert!(matches!(e, DocumentError::NotAMap), "{e:?}");
        assert_eq!(e.to_string(), "the configuration must be a map of settings");
        let e = merge("listeners: [\n", &json!({})).expect_err("broken YAML");
        assert!(matches!(e, DocumentError::NotYaml(_)) && e.to_string().starts_with("not YAML: "), "{e}");
    }

    #[test]
    fn canonical_text_does_not_depend_on_key_order() {
        let a: Value = serde_json::from_str(r#"{"sites":{"b":{"hosts":["x"]},"a":{"hosts":["y"]}}}"#).expect("a");
        let b: Value = serde_json::from_str(r#"{"sites":{"a":{"hosts":["y"]},"b":{"hosts":["x"]}}}"#).expect("b");
        assert_eq!(canonical(&a), canonical(&b));
        let back: Value = serde_yaml::from_str(&canonical(&a)).expect("parse");
        assert_eq!(back, a);
    }

    #[test]
    fn app_keys_are_hashed_and_secrets_redacted_and_restored() {
        let sent = json!({"apps": {"shop": {"key": "k-123", "secret": "s3cret", "jwt_keys": [{"kid": "a", "alg": "HS256", "secret": "hm"}]}}});
        let stored = normalise(sent, None).expect("valid");
        assert_eq!(stored["apps"]["shop"]["key_sha256"], json!(sha256_hex(b"k-123")));
        assert!(stored["apps"]["shop"].get("key").is_none());
        let shown = redact(&stored, None);
        assert_eq!(shown["apps"]["shop"]["secret"], json!(REDACTED));
        assert_eq!(shown["apps"]["shop"]["jwt_keys"][0]["secret"], json!(REDACTED));
        assert!(!shown.to_string().contains("s3cret") && !shown.to_string().contains("\"hm\""));
        let again = normalise(shown, Some(&stored)).expect("round trip");
        assert_eq!(again, stored, "sending the redacted view back keeps the secrets");
        let errs = normalise(json!({"apps": {"new": {"secret": REDACTED}}}), Some(&stored)).expect_err("nothing kept");
        assert_eq!(errs[0].path, "apps.new.secret");
    }

    #[test]
    fn a_changed_secret_shows_as_changed_without_its_value() {
        let a = json!({"apps": {"shop": {"secret": "one"}}});
        let b = json!({"apps": {"shop": {"secret": "two"}}});
        assert_eq!(redact(&b, Some(&a))["apps"]["shop"]["secret"], json!(REDACTED_CHANGED));
        assert_eq!(redact(&a, Some(&a))["apps"]["shop"]["secret"], json!(REDACTED));
    }

    #[test]
    fn unknown_sections_are_named() {
        let errs = normalise(json!({"listeners": {}, "sites": []}), None).expect_err("bad");
        let paths: Vec<_> = errs.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["listeners", "sites"]);
    }
}

#[cfg(test)]
mod timing {
    use super::*;
    use serde_json::json;

    /// `cargo test --release -p gatehouse-control -- --ignored --nocapture`: where the time of
    /// applying a 10,000-route revision goes.
    #[test]
    #[ignore]
    fn ten_thousand_routes() {
        let mut sites = serde_json::Map::new();
        for s in 0..100 {
            let routes: Vec<Value> = (0..100).map(|r| json!({"path": format!("/r{r}"), "upstream": "u"})).collect();
            sites.insert(format!("s{s}"), json!({"hosts": [format!("s{s}.test")], "routes": routes}));
        }
        let doc = json!({"upstreams": {"u": {"targets": ["127.0.0.1:1"]}}, "sites": sites});
        let t = std::time::Instant::now();
        let content = canonical(&doc);
        let c = t.elapsed();
        let t = std::time::Instant::now();
        let json_text = serde_json::to_string(&doc).expect("json");
        let _: Value = serde_json::from_str(&json_text).expect("json");
        let j = t.elapsed();
        let base = "listeners:\n  http: {bind: '127.0.0.1:0'}\n";
        let t = std::time::Instant::now();
        let merged = merge(base, &doc).expect("merge");
        let m = t.elapsed();
        let t = std::time::Instant::now();
        gatehouse_config::compile_value(merged).expect("compile");
        let k = t.elapsed();
        println!("{} bytes: canonical {c:?}, json round trip {j:?}, merge {m:?}, compile {k:?}", content.len());
    }
}
