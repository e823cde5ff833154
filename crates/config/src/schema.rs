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
    "log",
    "access_log",
    "tracing",
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

/// Entries that could not be read (`upstreams.u`), or whole sections (`listeners`). Their
/// errors are reported where they are; a reference to one (a route's `upstream: u`) is not
/// reported again as unknown, nor is a section left empty by them.
#[derive(Debug, Default)]
pub(crate) struct Unread(std::collections::HashSet<String>);

impl Unread {
    /// Whether entry `name` of `section` was there but could not be read.
    pub(crate) fn has(&self, section: &str, name: &str) -> bool {
        self.0.contains(DOCUMENT) || self.0.contains(section) || self.0.contains(&format!("{section}.{name}"))
    }

    /// Whether anything of `section` could not be read.
    pub(crate) fn any(&self, section: &str) -> bool {
        self.0
            .iter()
            .any(|u| u == DOCUMENT || u == section || u.strip_prefix(section).is_some_and(|r| r.starts_with('.')))
    }
}

/// What [`Unread`] holds when the document itself is not YAML.
const DOCUMENT: &str = "(document)";

/// Deserialises a map of named entries, each on its own.
fn named<T: DeserializeOwned>(
    value: Value,
    section: &str,
    errors: &mut Vec<ConfigError>,
    unread: &mut Unread,
) -> BTreeMap<String, T> {
    let mut out = BTreeMap::new();
    let Value::Mapping(map) = value else {
        if !value.is_null() {
            errors.push(ConfigError::new(section, "expected a map of names to entries"));
            unread.0.insert(section.to_string());
        }
        return out;
    };
    for (key, entry) in map {
        let Value::String(name) = key else {
            errors.push(ConfigError::new(section, "entry names must be strings"));
            continue;
        };
        let path = format!("{section}.{name}");
        if let Some(why) = name_error(&name) {
            errors.push(ConfigError::new(&path, why));
        }
        match field(entry, &path, errors) {
            Some(v) => drop(out.insert(name, v)),
            None => drop(unread.0.insert(path)),
        }
    }
    out
}

/// Whether `name` may name an entry, a node or a label ([`name_error`] says why not).
pub fn valid_name(name: &str) -> bool {
    name_error(name).is_none()
}

/// Why `name` may not name an entry, a node or a label: 1 to 128 letters, digits, `-`, `_` and
/// `.`, not `.` or `..` alone (names become path segments of the admin API and file names).
/// The file check and the admin API both answer with this.
pub fn name_error(name: &str) -> Option<&'static str> {
    if name.is_empty() || name.len() > 128 {
        Some("names are 1 to 128 characters long")
    } else if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) {
        Some("names may use letters, digits, `-`, `_` and `.` only")
    } else if name.bytes().all(|b| b == b'.') {
        Some("a name needs a letter, digit, `-` or `_`")
    } else {
        None
    }
}

/// Reads the whole document into a [`Config`], collecting every structural error.
pub(crate) fn read(text: &str, errors: &mut Vec<ConfigError>, unread: &mut Unread) -> Config {
    match serde_yaml::from_str(text) {
        Ok(root) => read_value(root, errors, unread),
        Err(e) => {
            let at = e.location().map(|l| format!("line {} column {}", l.line(), l.column()));
            errors.push(ConfigError::new(at.as_deref().unwrap_or("(document)"), e.to_string()));
            unread.0.insert(DOCUMENT.to_string());
            Config::default()
        }
    }
}

/// Reads a parsed document into a [`Config`], collecting every structural error.
pub(crate) fn read_value(root: Value, errors: &mut Vec<ConfigError>, unread: &mut Unread) -> Config {
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
            "log" => set(&mut config.log, field(value, &key, e)),
            "access_log" => set(&mut config.access_log, field(value, &key, e)),
            "tracing" => config.tracing = field(value, &key, e),
            "forwarding" => set(&mut config.forwarding, field(value, &key, e)),
            "paths" => set(&mut config.paths, field(value, &key, e)),
            "demo_backend" => config.demo_backend = field(value, &key, e),
            "listeners" => config.listeners = named(value, &key, e, unread),
            "upstreams" => config.upstreams = named(value, &key, e, unread),
            "resolver" => set(&mut config.resolver, field(value, &key, e)),
            "sites" => config.sites = named(value, &key, e, unread),
            "services" => config.services = named(value, &key, e, unread),
            "apps" => config.apps = named(value, &key, e, unread),
            "plans" => config.plans = named(value, &key, e, unread),
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
