//! The `listeners` section: a traffic listener's address, limits and timeouts, its TLS, and its
//! HTTP/3 (QUIC) settings.

use super::defaults;
use super::tls::TlsVersion;
use crate::units::{ByteSize, Duration};
use serde::Deserialize;
use std::net::SocketAddr;

/// A traffic listener.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Listener {
    /// Address to bind; port 0 picks a free port.
    pub bind: SocketAddr,
    /// Listen backlog.
    #[serde(default = "defaults::backlog")]
    pub backlog: u32,
    /// Hand a connection to a worker only once its first bytes have arrived (`TCP_DEFER_ACCEPT`):
    /// HTTP and TLS clients speak first, so the accept and the first read share one wake-up.
    #[serde(default = "defaults::yes")]
    pub defer_accept: bool,
    /// Open connections allowed per worker; further connections wait in the backlog.
    #[serde(default = "defaults::max_connections")]
    pub max_connections: usize,
    /// Open connections allowed per client address, across workers (0: no limit).
    #[serde(default)]
    pub max_connections_per_ip: u32,
    /// Which HTTP versions the listener speaks.
    #[serde(default)]
    pub protocol: ListenerProtocol,
    /// Time allowed for a client to send a whole request head.
    #[serde(default = "defaults::header_read_timeout")]
    pub header_read_timeout: Duration,
    /// Longest wait for the next part of a request body; then `408` and the connection closes.
    #[serde(default = "defaults::body_read_timeout")]
    pub body_read_timeout: Duration,
    /// Longest wait for the client to take a write of a response; then the connection closes.
    #[serde(default = "defaults::send_timeout")]
    pub send_timeout: Duration,
    /// Idle time allowed between requests on a keep-alive connection.
    #[serde(default = "defaults::keepalive_timeout")]
    pub keepalive_timeout: Duration,
    /// Largest request head (request line and headers) accepted.
    #[serde(default = "defaults::max_header_bytes")]
    pub max_header_bytes: ByteSize,
    /// Requests served on one connection before it is closed (0: no limit).
    #[serde(default = "defaults::max_requests_per_connection")]
    pub max_requests_per_connection: u64,
    /// Streams an HTTP/2 client may have open at once on one connection; more are refused.
    #[serde(default = "defaults::http2_max_concurrent_streams")]
    pub http2_max_concurrent_streams: u32,
    /// HTTP/2 PING to a client after this long without a frame from it (`0s`: none).
    #[serde(default = "defaults::zero")]
    pub http2_ping_interval: Duration,
    /// A PING unanswered for this long closes the connection.
    #[serde(default = "defaults::ping_timeout")]
    pub http2_ping_timeout: Duration,
    /// Serve HTTPS: TLS is terminated here and ALPN chooses the HTTP version.
    #[serde(default)]
    pub tls: Option<ListenerTls>,
    /// Connections come through balancers that open each with a PROXY protocol header naming the
    /// client; only the balancers listed may connect.
    #[serde(default)]
    pub proxy_protocol: Option<crate::proxy_protocol::ProxyProtocol>,
    /// Also serve HTTP/3 over QUIC on the same port number, over UDP (a TLS listener only).
    #[serde(default)]
    pub http3: bool,
    /// The `Alt-Svc` header of the listener's TCP responses, advertising HTTP/3: `auto` (with
    /// `http3`, `h3=":PORT"; ma=86400`), `off`, or a value sent as it is.
    #[serde(default)]
    pub alt_svc: AltSvc,
    /// `Strict-Transport-Security` on every answer of a TLS listener (a site's own comes first).
    #[serde(default)]
    pub hsts: Option<crate::Hsts>,
    /// QUIC settings of an `http3` listener.
    #[serde(default)]
    pub quic: Quic,
}

/// What a listener's TCP responses say in `Alt-Svc`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum AltSvc {
    /// `h3=":PORT"; ma=86400` when the listener serves HTTP/3, else nothing.
    #[default]
    Auto,
    /// Nothing.
    Off,
    /// This value, as it is.
    Value(String),
}

impl<'de> Deserialize<'de> for AltSvc {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(match s.as_str() {
            "auto" => AltSvc::Auto,
            "off" => AltSvc::Off,
            _ => AltSvc::Value(s),
        })
    }
}

/// QUIC transport settings of an HTTP/3 listener.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Quic {
    /// Requests (bidirectional streams) a client may have open at once on one connection.
    pub max_streams: u32,
    /// A connection with no packet from the client for this long is closed.
    pub idle_timeout: Duration,
    /// Bytes a client may send on one stream before the gateway reads them.
    pub stream_window: ByteSize,
    /// Bytes a client may send on all streams of a connection before the gateway reads them.
    pub connection_window: ByteSize,
    /// When a new client must prove its address first (a Retry packet, one more round trip).
    pub retry: QuicRetry,
    /// 0-RTT: a resuming client's first requests sent with its handshake. Only safe methods are
    /// served so, forwarded with `Early-Data: 1` (RFC 8470); others are answered `425`.
    pub early_data: bool,
    /// Generic segmentation offload: a burst of packets to one client leaves in one system
    /// call (`UDP_SEGMENT`), where the kernel has it.
    pub gso: bool,
}

/// When QUIC clients are sent a Retry (address validation) before their handshake.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuicRetry {
    /// When the worker is busy: many handshakes under way, or near `max_connections`.
    #[default]
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

impl Default for Quic {
    fn default() -> Self {
        Quic {
            max_streams: 100,
            idle_timeout: Duration::secs(30),
            stream_window: ByteSize(1 << 20),
            connection_window: ByteSize(8 << 20),
            retry: QuicRetry::Auto,
            early_data: false,
            gso: true,
        }
    }
}

/// TLS settings of one listener.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ListenerTls {
    /// Protocol versions offered.
    pub versions: Vec<TlsVersion>,
    /// Cipher suites offered in order of preference, by their IANA names
    /// (`TLS13_AES_128_GCM_SHA256`, `TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256`, ...); all of
    /// rustls' suites when absent, in the order of [`crate::PREFERRED_CIPHER_SUITES`].
    pub ciphers: Option<Vec<String>>,
    /// The listener's order of `ciphers` picks the suite, not the client's; a client whose first
    /// choice is a ChaCha20 suite (no AES hardware) still gets ChaCha20.
    pub prefer_server_ciphers: bool,
    /// Certificate name served to clients that send no name (or an IP address), and to names no
    /// certificate matches; overrides `tls.default_certificate`.
    pub default_certificate: Option<String>,
    /// Time allowed for a whole handshake.
    pub handshake_timeout: Duration,
}

impl Default for ListenerTls {
    fn default() -> Self {
        ListenerTls {
            versions: vec![TlsVersion::Tls12, TlsVersion::Tls13],
            ciphers: None,
            prefer_server_ciphers: true,
            default_certificate: None,
            handshake_timeout: Duration::secs(10),
        }
    }
}

/// HTTP versions served on a cleartext listener.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ListenerProtocol {
    /// HTTP/1.x, and HTTP/2 when a connection opens with the HTTP/2 preface (prior knowledge).
    #[default]
    Auto,
    /// HTTP/1.x only.
    Http1,
    /// HTTP/2 only (h2c with prior knowledge); anything else is a connection error.
    H2c,
}
