//! The `tls` section: certificates and session resumption, shared by every TLS listener, and the
//! protocol versions listeners and upstreams offer.

use super::defaults;
use crate::units::Duration;
use serde::Deserialize;
use std::path::PathBuf;

/// A TLS protocol version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum TlsVersion {
    /// TLS 1.2.
    #[serde(rename = "tls1.2")]
    Tls12,
    /// TLS 1.3.
    #[serde(rename = "tls1.3")]
    Tls13,
}

/// Certificates and resumption, shared by every TLS listener.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Tls {
    /// Bundles always held in memory: PEM files with the chain (leaf first) and the key.
    pub certificates: Vec<CertificateFile>,
    /// Where further certificates are looked up by name when a handshake needs them.
    pub store: Option<CertStore>,
    /// Make a self-signed certificate on first run and keep it (the quick start's).
    pub self_signed: Option<SelfSigned>,
    /// Certificates issued and renewed by an ACME CA, kept in `store`.
    pub acme: Option<crate::Acme>,
    /// Certificate name for clients that send no name, or a name nothing matches. Without it such
    /// handshakes are refused with `unrecognized_name`.
    pub default_certificate: Option<String>,
    /// Stateless session tickets: `off`, `local` (keys made by this node) or `cluster`.
    pub tickets: Tickets,
    /// How often the ticket-sealing key is replaced.
    pub ticket_rotation: Duration,
    /// How long a ticket key keeps opening tickets after it was made.
    pub ticket_window: Duration,
    /// Session cache for TLS 1.2 session ids and stateful TLS 1.3 tickets: `off`, `local` or `redis`.
    pub session_cache: SessionCacheMode,
    /// Sessions kept in the local cache.
    pub session_cache_size: usize,
    /// How long a cached session can be resumed.
    pub session_timeout: Duration,
    /// Certificate names kept in memory after loading from the store.
    pub cert_cache_size: usize,
    /// How long a name the store does not hold is remembered as missing.
    pub negative_cache_ttl: Duration,
}

impl Default for Tls {
    fn default() -> Self {
        Tls {
            certificates: Vec::new(),
            store: None,
            self_signed: None,
            acme: None,
            default_certificate: None,
            tickets: Tickets::Local,
            ticket_rotation: Duration::secs(3600),
            ticket_window: Duration::secs(12 * 3600),
            session_cache: SessionCacheMode::Local,
            session_cache_size: 20_000,
            session_timeout: Duration::secs(300),
            cert_cache_size: 100_000,
            negative_cache_ttl: Duration::secs(10),
        }
    }
}

/// A certificate bundle file.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CertificateFile {
    /// PEM file with the chain, leaf first; it may hold the key too.
    pub cert: PathBuf,
    /// PEM file with the private key, when it is not in `cert`.
    #[serde(default)]
    pub key: Option<PathBuf>,
    /// DER OCSP response stapled to handshakes.
    #[serde(default)]
    pub ocsp: Option<PathBuf>,
}

/// The certificate store: a directory, or the cluster's Redis.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CertStore {
    /// A directory of `*.pem` bundles (chain and key), rescanned for changes.
    #[serde(default)]
    pub dir: Option<PathBuf>,
    /// Certificates kept in the `redis` section's Redis, shared by every node.
    #[serde(default)]
    pub redis: bool,
    /// How often the directory is rescanned.
    #[serde(default = "defaults::scan_interval")]
    pub scan_interval: Duration,
}

/// The quick start's self-signed certificate.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelfSigned {
    /// Directory where it is kept (`self-signed.pem`, mode 0600).
    pub dir: PathBuf,
    /// Names it is made for.
    pub names: Vec<String>,
}

/// Ticket mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tickets {
    /// No tickets.
    Off,
    /// Keys made and rotated by this node.
    Local,
    /// Keys shared by every node through Redis.
    Cluster,
}

/// Session cache mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionCacheMode {
    /// No session cache.
    Off,
    /// In this node's memory.
    Local,
    /// In Redis, shared by every node, with a local copy.
    Redis,
}
