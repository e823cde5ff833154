//! `gatehouse check`: every error of a configuration in one run, as a node starting on it would
//! find them. The document's own come first; then what reading its files finds (certificates, CA
//! bundles, upstream TLS files) and what building its services, apps and plans finds (key files,
//! secrets), also when the document has errors elsewhere. The gateway is built only when its
//! sections read cleanly (it resolves their references to each other), and a file's error is left
//! out where the document's already names that place.

use crate::error::NodeError;
use gatehouse_config::{Config, ConfigError};

/// One error `check` reports, by the step that found it.
#[derive(Debug)]
#[non_exhaustive]
pub enum CheckError {
    /// The document's own: schema, values, references, with the path of the place.
    Config(ConfigError),
    /// A file the configuration names that cannot be used (one line of the node's TLS error).
    Files(String),
    /// A service, app or plan that cannot be built: a key file, a secret (one line of the
    /// gateway's error).
    Gateway(String),
}

impl std::fmt::Display for CheckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckError::Config(e) => e.fmt(f),
            CheckError::Files(line) | CheckError::Gateway(line) => f.write_str(line),
        }
    }
}

impl std::error::Error for CheckError {}

/// Every error of the configuration `text`, its relative paths taken in `dir` (the file's
/// directory, [`gatehouse_config::config_dir`]); none when a node could start on it.
pub fn check(text: &str, dir: &std::path::Path) -> Vec<CheckError> {
    let (mut config, errors) = gatehouse_config::compile_all(text);
    config.resolve_paths(dir);
    let reported =
        |line: &str| errors.iter().any(|e| line.strip_prefix(e.path.as_str()).is_some_and(|r| r.starts_with(':')));
    let mut later = Vec::new();
    if let Err(e) = crate::tls::check_certificates(&config) {
        later.extend(e.to_string().lines().map(|l| CheckError::Files(l.to_string())));
    }
    if let Some(t) = &config.tracing {
        if let Err(e) = gatehouse_otel::check_files(t) {
            later.push(CheckError::Files(e.to_string()));
        }
    }
    for e in node_files(&config) {
        later.extend(e.to_string().lines().map(|l| CheckError::Files(l.to_string())));
    }
    let gateway_clean =
        !errors.iter().any(|e| ["services", "apps", "plans"].iter().any(|s| e.path.split('.').next() == Some(*s)));
    if gateway_clean {
        if let Err(e) = gatehouse_plugins::Gateway::build(&config, &gatehouse_plugins::Registry::offline()) {
            later.extend(e.to_string().lines().map(|l| CheckError::Gateway(l.to_string())));
        }
    }
    let later: Vec<CheckError> = later.into_iter().filter(|e| !reported(&e.to_string())).collect();
    errors.into_iter().map(CheckError::Config).chain(later).collect()
}

/// The files `run` reads besides certificates, read the same way: the cluster secret, Redis'
/// password and TLS files, the admin listener's certificate, key and client CA, and its token
/// file when it exists (a missing one is made at start).
fn node_files(config: &Config) -> Vec<NodeError> {
    let mut errors = Vec::new();
    if let Some(r) = &config.redis {
        errors.extend(crate::tls::cluster_secret(r).err());
        match crate::tls::redis_options(r) {
            Ok(opts) => {
                errors.extend(opts.check().err().map(|e| NodeError::Cluster(gatehouse_cluster::ClusterError::Redis(e))))
            }
            Err(e) => errors.push(e),
        }
    }
    if let Some(admin) = &config.admin {
        if let Some(t) = &admin.tls {
            errors.extend(crate::tls::admin_server_config(t).err());
        }
        if let Some(f) = &admin.token_file {
            errors.extend(crate::run::admin::existing_token(&f.path).err());
        }
    }
    errors
}
