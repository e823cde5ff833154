//! The configuration model. Every field is documented in `docs/config.md`; the same types are what
//! the YAML deserialises into, so defaults live in exactly one place. This file holds the whole
//! [`Config`] and the process-wide settings; each larger section has a module of its own.

use crate::control::{Admin, Control, Node};
use crate::gateway::{App, Plan, Service};
use crate::units::Duration;
use crate::upstream::{Resolver, Upstream};
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;

pub(crate) mod defaults;
mod listener;
mod redis;
mod site;
mod tls;

pub use listener::{AltSvc, Listener, ListenerProtocol, ListenerTls, Quic, QuicRetry};
pub use redis::{Redis, RedisSentinel, RedisTls};
pub use site::{ClientAuth, HostHeader, Route, Site};
pub use tls::{CertStore, CertificateFile, SelfSigned, SessionCacheMode, Tickets, Tls, TlsVersion};

/// The whole validated configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Number of worker threads.
    pub workers: Workers,
    /// One SO_REUSEPORT listener socket per worker (`true`) or one socket shared by all (`false`).
    pub reuse_port: bool,
    /// Pin worker `i` to core `i`.
    pub cpu_affinity: CpuAffinity,
    /// Reload when the configuration file changes.
    pub watch: bool,
    /// How long in-flight requests may finish after SIGTERM/SIGINT.
    pub shutdown_grace: Duration,
    /// The admin listener (metrics, status); none when absent.
    pub admin: Option<Admin>,
    /// The process log: format, level, where.
    pub log: crate::Log,
    /// Access log settings.
    pub access_log: AccessLog,
    /// OpenTelemetry traces; none when absent.
    pub tracing: Option<crate::Tracing>,
    /// Forwarding headers added to upstream requests.
    pub forwarding: Forwarding,
    /// How request paths are normalized.
    pub paths: crate::paths::Paths,
    /// Address of the built-in demo backend, started by the binary when set.
    pub demo_backend: Option<SocketAddr>,
    /// Traffic listeners by name.
    pub listeners: BTreeMap<String, Listener>,
    /// Upstream pools by name.
    pub upstreams: BTreeMap<String, Upstream>,
    /// How upstream host names are resolved.
    pub resolver: Resolver,
    /// Sites (virtual hosts) by name.
    pub sites: BTreeMap<String, Site>,
    /// API services (path prefixes guarded by gateway plugins) by name.
    pub services: BTreeMap<String, Service>,
    /// API consumers by app id.
    pub apps: BTreeMap<String, App>,
    /// Plans (plugin sets granted to apps) by name.
    pub plans: BTreeMap<String, Plan>,
    /// Certificates and session resumption, for every TLS listener.
    pub tls: Tls,
    /// The Redis that nodes of a cluster share; none for a single node.
    pub redis: Option<Redis>,
    /// This node's id and labels.
    pub node: Node,
    /// Where published revisions are kept and how this node follows them.
    pub control: Control,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            workers: Workers::Auto,
            reuse_port: true,
            cpu_affinity: CpuAffinity::Off,
            watch: false,
            shutdown_grace: Duration::secs(30),
            admin: None,
            log: crate::Log::default(),
            access_log: AccessLog::default(),
            tracing: None,
            forwarding: Forwarding::default(),
            paths: crate::paths::Paths::default(),
            demo_backend: None,
            listeners: BTreeMap::new(),
            upstreams: BTreeMap::new(),
            resolver: Resolver::default(),
            sites: BTreeMap::new(),
            services: BTreeMap::new(),
            apps: BTreeMap::new(),
            plans: BTreeMap::new(),
            tls: Tls::default(),
            redis: None,
            node: Node::default(),
            control: Control::default(),
        }
    }
}

/// Worker thread count: `auto` (one per core) or a number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workers {
    /// One worker per available core.
    Auto,
    /// Exactly this many workers (at least one).
    Count(usize),
}

impl<'de> Deserialize<'de> for Workers {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Workers;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("`auto` or a number of workers from 1 to 1024")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Workers, E> {
                match usize::try_from(v) {
                    Ok(n @ 1..=1024) => Ok(Workers::Count(n)),
                    _ => Err(E::custom("workers must be `auto` or from 1 to 1024")),
                }
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Workers, E> {
                u64::try_from(v)
                    .map_err(|_| E::custom("workers must be `auto` or from 1 to 1024"))
                    .and_then(|v| self.visit_u64(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Workers, E> {
                match v {
                    "auto" => Ok(Workers::Auto),
                    _ => v
                        .parse::<u64>()
                        .map_err(|_| E::custom("workers must be `auto` or a number"))
                        .and_then(|n| self.visit_u64(n)),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// CPU pinning of worker threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CpuAffinity {
    /// Pin worker `i` to the `i`-th available core.
    Auto,
    /// Leave scheduling to the kernel.
    Off,
}

/// Access log output.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AccessLog {
    /// `off`, `stdout`, `stderr` or a file path.
    pub path: String,
    /// Line format.
    pub format: LogFormat,
}

impl Default for AccessLog {
    fn default() -> Self {
        AccessLog { path: "off".into(), format: LogFormat::Combined }
    }
}

/// Access log line format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// The NCSA combined format, as nginx's `combined`.
    Combined,
    /// One JSON object per line.
    Json,
}

/// Which forwarding headers the proxy adds.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Forwarding {
    /// Append the client address to `X-Forwarded-For`.
    pub x_forwarded_for: bool,
    /// Set `X-Forwarded-Proto` to the downstream scheme.
    pub x_forwarded_proto: bool,
    /// Set `X-Real-IP` to the client address.
    pub x_real_ip: bool,
    /// Append `Via: <version> <this value>` when set.
    pub via: Option<String>,
    /// The request id sent upstream, echoed and logged; `None` when `off`.
    #[serde(deserialize_with = "crate::request_id::off_or_settings")]
    pub request_id: Option<crate::request_id::RequestId>,
}

impl Default for Forwarding {
    fn default() -> Self {
        Forwarding {
            x_forwarded_for: true,
            x_forwarded_proto: true,
            x_real_ip: true,
            via: None,
            request_id: Some(crate::request_id::RequestId::default()),
        }
    }
}
