//! Configuration stage: turns one YAML document into a validated [`Config`], reporting every error
//! with its path in the file. Nothing here does I/O; the binary reads the file and hands us the text.

#![forbid(unsafe_code)]

mod acme;
mod compile;
mod compression;
mod control;
mod cors;
mod error;
mod gateway;
mod hsts;
mod log;
mod model;
mod paths;
mod proxy_protocol;
mod relative;
mod request_id;
mod schema;
mod split;
mod tracing;
mod units;
mod upstream;
mod validate_gateway;

pub use acme::{Acme, Challenge as AcmeChallenge, Dns01, Eab, OnDemand, Rate as OnDemandRate, Rfc2136, TsigAlgorithm};
pub use compile::{compile, compile_all, compile_value, ConfigError, ConfigErrors, PREFERRED_CIPHER_SUITES};
pub use compression::{media_type_error, Coding, Compression, Levels, DEFAULT_TYPES};
pub use control::*;
pub use cors::{origin_error, Cors};
pub use error::ValueError;
pub use gateway::*;
pub use hsts::Hsts;
pub use log::{check_log_level, Log, ProcessLogFormat};
pub use model::*;
pub use paths::{EscapedSlashes, Paths};
pub use proxy_protocol::ProxyProtocol;
pub use relative::config_dir;
pub use request_id::RequestId;
pub use schema::{name_error, valid_name};
pub use split::{Destination, Match, Mirror, Sticky, Weighted, MAX_SPLIT_WEIGHT};
pub use tracing::{Export as TracingExport, Otlp, OtlpProtocol, Sampler, Tracing};
pub use units::{ByteSize, Duration};
pub use upstream::*;
pub use validate_gateway::{check_app_key, check_fetch_url, JWT_ALGORITHMS};

/// The quick-start configuration used by `gatehouse run` without a file.
pub const QUICKSTART: &str = include_str!("quickstart.yaml");

/// What the unit tests of validation share: a configuration's errors.
#[cfg(test)]
pub(crate) mod test_support {
    /// A listener and upstream `u`, for the sections a test adds.
    pub(crate) const HEAD: &str =
        "listeners: {http: {bind: \"127.0.0.1:0\"}}\nupstreams: {u: {targets: [\"127.0.0.1:1\"]}}\n";

    /// The errors of [`HEAD`] followed by `yaml`, one per line (none: it compiles).
    pub(crate) fn errors(yaml: &str) -> Vec<String> {
        match crate::compile(&format!("{HEAD}{yaml}")) {
            Ok(_) => Vec::new(),
            Err(e) => e.0.iter().map(ToString::to_string).collect(),
        }
    }
}
