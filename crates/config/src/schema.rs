//! Reading the YAML tree section by section, so that one bad entry does not hide the errors in the
//! others: each top-level field and each named listener, upstream and site is deserialised on its
//! own, and its errors are recorded with their path.

use crate::compile::ConfigError;
use crate::model::Config;
use serde::de::DeserializeOwned;
use serde_yaml::Value;
use std::collections::BTreeMap;

/// Top-level keys, in the order they are documented.
pub(crate) const TOP_LEVEL: &[&str] = &[
    "workers",
    "reuse_port",
    "cpu_affinity",
    "watch",
    "shutdown_grace",
    "admin",
    "access_log",
    "forwarding",
    "paths",
    "demo_backend",
    "listeners",
    "upstreams",
    "resolver",
    "sites",
    "services",
    "apps",
    "plans",
    "tls",
    "redis",
    "node",
    "control",
];

/// Deserialises `value` as `T`, recording an error at `path` (plus the inner path) on failure.
pub(crate) fn field<T: DeserializeOwned>(value: Value, path: &str, errors: &mut Vec<ConfigError>) -> Option<T> {
    match serde_path_to_error::deserialize::<_, T>(value) {
        Ok(v) => Some(v),
        Err(e) => {
            let inner = e.path().to_string();
            let full = match inner.as_str() {
                "." | "" => path.to_string(),
                _ if inner.starts_with('[') => format!("{path}{inner}"),
                _ => format!("{path}.{inner}"),
            };
            errors.push(ConfigError::new(full, e.into_inner().to_string()));
            None
        }
    }
}

/// Deserialises a map of named entries, each on its own.
fn named<T: DeserializeOwned>(value: Value, section: &str, errors: &mut Vec<ConfigError>) -> BTreeMap<String, T> {
    let mut out = BTreeMap::new();
    let Value::Mapping(map) = value else {
        if !value.is_null() {
            errors.push(ConfigError::new(section, "expected a map of names to entries"));
        }
        return out;
    };
    for (key, entry) in map {
        let Value::String(name) = key else {
            errors.push(ConfigError::new(section, "entry names must be strings"));
            continue;
        };
        let path = format!("{section}.{name}");
        if !valid_name(&name) {
            errors.push(ConfigError::new(&path, "names may use letters, digits, `-`, `_` and `.` only"));
        }
        if let Some(v) = field(entry, &path, errors) {
            out.insert(name, v);
        }
    }
    out
}

/// Whether `name` may name an entry, a node or a label: letters, digits, `-`, `_` and `.`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

/// Reads the whole document into a [`Config`], collecting every structural error.
pub(crate) fn read(text: &str, errors: &mut Vec<ConfigError>) -> Config {
    match serde_yaml::from_str(text) {
        Ok(root) => read_value(root, errors),
        Err(e) => {
            let at = e.location().map(|l| format!("line {} column {}", l.line(), l.column()));
            errors.push(ConfigError::new(at.as_deref().unwrap_or("(document)"), e.to_string()));
            Config::default()
        }
    }
}

/// Reads a parsed document into a [`Config`], collecting every structural error.
pub(crate) fn read_value(root: Value, errors: &mut Vec<ConfigError>) -> Config {
    let mut config = Config::default();
    let map = match root {
        Value::Mapping(m) => m,
        Value::Null => return config,
        _ => {
            errors.push(ConfigError::new("(document)", "the configuration must be a map of settings"));
            return config;
        }
    };
    for (key, value) in map {
        let Value::String(key) = key else {
            errors.push(ConfigError::new("(document)", "setting names must be strings"));
            continue;
        };
        let e = &mut *errors;
        match key.as_str() {
            "workers" => set(&mut config.workers, field(value, &key, e)),
            "reuse_port" => set(&mut config.reuse_port, field(value, &key, e)),
            "cpu_affinity" => set(&mut config.cpu_affinity, field(value, &key, e)),
            "watch" => set(&mut config.watch, field(value, &key, e)),
            "shutdown_grace" => set(&mut config.shutdown_grace, field(value, &key, e)),
            "admin" => config.admin = field(value, &key, e),
            "access_log" => set(&mut config.access_log, field(value, &key, e)),
            "forwarding" => set(&mut config.forwarding, field(value, &key, e)),
            "paths" => set(&mut config.paths, field(value, &key, e)),
            "demo_backend" => config.demo_backend = field(value, &key, e),
            "listeners" => config.listeners = named(value, &key, e),
            "upstreams" => config.upstreams = named(value, &key, e),
            "resolver" => set(&mut config.resolver, field(value, &key, e)),
            "sites" => config.sites = named(value, &key, e),
            "services" => config.services = named(value, &key, e),
            "apps" => config.apps = named(value, &key, e),
            "plans" => config.plans = named(value, &key, e),
            "tls" => set(&mut config.tls, field(value, &key, e)),
            "redis" => config.redis = field(value, &key, e),
            "node" => set(&mut config.node, field(value, &key, e)),
            "control" => set(&mut config.control, field(value, &key, e)),
            _ => errors
                .push(ConfigError::new(&key, format!("unknown setting; expected one of: {}", TOP_LEVEL.join(", ")))),
        }
    }
    config
}

fn set<T>(slot: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *slot = v;
    }
}
