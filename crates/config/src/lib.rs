//! Configuration stage: turns one YAML document into a validated [`Config`], reporting every error
//! with its path in the file. Nothing here does I/O; the binary reads the file and hands us the text.

#![forbid(unsafe_code)]

mod acme;
mod compile;
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
mod tracing;
mod units;
mod upstream;
mod validate_gateway;

pub use acme::{Acme, Challenge as AcmeChallenge, Dns01, Eab, OnDemand, Rate as OnDemandRate, Rfc2136, TsigAlgorithm};
pub use compile::{compile, compile_all, compile_value, ConfigError, ConfigErrors, PREFERRED_CIPHER_SUITES};
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
pub use tracing::{Export as TracingExport, Otlp, OtlpProtocol, Sampler, Tracing};
pub use units::{ByteSize, Duration};
pub use upstream::*;
pub use validate_gateway::{check_app_key, check_fetch_url, JWT_ALGORITHMS};

/// The quick-start configuration used by `gatehouse run` without a file.
pub const QUICKSTART: &str = include_str!("quickstart.yaml");
