//! The configuration model. Every field is documented in `docs/config.md`; the same types are what
//! the YAML deserialises into, so defaults live in exactly one place.

use crate::control::{Admin, Control, Node};
use crate::gateway::{App, Plan, Service};
use crate::units::{ByteSize, Duration};
use crate::upstream::{Resolver, Upstream};
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

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
    /// Access log settings.
    pub access_log: AccessLog,
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

/// The cluster's Redis: exactly one of `url` (one server), `sentinel` or `cluster`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Redis {
    /// One server: `redis://host:port[/db]`, or `rediss://host:port[/db]` for TLS.
    #[serde(default)]
    pub url: Option<String>,
    /// A primary watched by Sentinels, followed through failovers.
    #[serde(default)]
    pub sentinel: Option<RedisSentinel>,
    /// A Redis Cluster: `host:port` of one or more seed nodes.
    #[serde(default)]
    pub cluster: Option<Vec<String>>,
    /// ACL user name (with `password_file`).
    #[serde(default)]
    pub username: Option<String>,
    /// File holding the password (`requirepass`, or the ACL user's).
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    /// Database for `sentinel` (a `url` names its own in its path; a Cluster has only 0).
    #[serde(default)]
    pub db: u32,
    /// TLS to Redis (and to the Sentinels); `rediss://` for `url`.
    #[serde(default)]
    pub tls: Option<RedisTls>,
    /// First word of every key (`gatehouse:tls:sess:{…}`); each key's hash tag names the thing it
    /// belongs to, so keys spread over a Redis Cluster's shards.
    #[serde(default = "defaults::redis_prefix")]
    pub prefix: String,
    /// File holding the cluster secret (at least 32 bytes): it seals what nodes store in Redis
    /// (ticket keys, sessions, private keys). Every node of a cluster needs the same one.
    pub secret_file: PathBuf,
    /// Time allowed to connect.
    #[serde(default = "defaults::redis_connect_timeout")]
    pub connect_timeout: Duration,
    /// Time allowed for one command; a handshake waits at most this long for a session.
    #[serde(default = "defaults::redis_command_timeout")]
    pub command_timeout: Duration,
}

/// A Sentinel group.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisSentinel {
    /// The group's name (`sentinel monitor NAME ...`).
    pub master: String,
    /// `host:port` of each Sentinel.
    pub nodes: Vec<String>,
    /// ACL user name of the Sentinels themselves.
    #[serde(default)]
    pub username: Option<String>,
    /// File holding the Sentinels' own password, when they have one.
    #[serde(default)]
    pub password_file: Option<PathBuf>,
}

/// TLS towards Redis. The server's certificate is always verified.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisTls {
    /// PEM file of the certificate authorities that sign Redis's certificates; the system's
    /// roots when unset.
    #[serde(default)]
    pub ca: Option<PathBuf>,
    /// PEM file of the client certificate chain (for `tls-auth-clients`).
    #[serde(default)]
    pub cert: Option<PathBuf>,
    /// PEM file of the client certificate's key.
    #[serde(default)]
    pub key: Option<PathBuf>,
    /// Name Redis's certificate is checked against when it is not the URL's host (`url` only).
    #[serde(default)]
    pub server_name: Option<String>,
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
            access_log: AccessLog::default(),
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

/// A site: a set of host names and its routes.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Site {
    /// Host names: exact (`example.com`), wildcard (`*.example.com`) or `*` for any host.
    pub hosts: Vec<String>,
    /// Routes, matched by longest path prefix.
    pub routes: Vec<Route>,
    /// Answer plain-HTTP requests with a `308` to the same URL over HTTPS.
    #[serde(default)]
    pub https_redirect: bool,
    /// Port in redirect URLs (omitted when 443).
    #[serde(default = "defaults::https_port")]
    pub https_port: u16,
    /// Client certificates (mutual TLS) for handshakes naming this site.
    #[serde(default)]
    pub client_auth: Option<ClientAuth>,
    /// Route and forward normalized paths (`false`: each route of the site gets the client's
    /// path as sent, unless the route says otherwise).
    #[serde(default = "defaults::yes")]
    pub normalize_path: bool,
}

/// Client-certificate verification for a site.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientAuth {
    /// PEM file with the CA certificates client certificates must chain to.
    pub ca: PathBuf,
    /// Refuse handshakes without a certificate (`true`); with `false` a handshake without one is
    /// accepted (any certificate sent is still verified) and the backend is told in
    /// `X-Client-Verify`.
    #[serde(default = "defaults::yes")]
    pub required: bool,
}

/// A route: a path prefix sent to an upstream.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// Path prefix, starting with `/`.
    pub path: String,
    /// Upstream name.
    pub upstream: String,
    /// Remove the prefix before forwarding (a path that becomes empty is sent as `/`).
    #[serde(default)]
    pub strip_prefix: bool,
    /// Replace the prefix with this before forwarding.
    #[serde(default)]
    pub rewrite: Option<String>,
    /// Host header sent upstream: `preserve` (default), `upstream` (the endpoint address) or a literal.
    #[serde(default)]
    pub host_header: HostHeader,
    /// Largest request body accepted (413 beyond it).
    #[serde(default = "defaults::max_body")]
    pub max_body: ByteSize,
    /// Longest a request may take, from its head to the end of the response (a long-lived
    /// stream's bound); none by default. A gRPC call's `grpc-timeout` may shorten it.
    #[serde(default)]
    pub stream_timeout: Option<Duration>,
    /// Forward the normalized path (`true`) or the client's path as sent (`false`); the site's
    /// `normalize_path` when absent.
    #[serde(default)]
    pub normalize_path: Option<bool>,
}

/// Host header policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum HostHeader {
    /// Forward the client's Host.
    #[default]
    Preserve,
    /// Send the endpoint's `ip:port`.
    Upstream,
    /// Send this value.
    Literal(String),
}

impl<'de> Deserialize<'de> for HostHeader {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(match s.as_str() {
            "preserve" => HostHeader::Preserve,
            "upstream" => HostHeader::Upstream,
            _ => HostHeader::Literal(s),
        })
    }
}

pub(crate) mod defaults {
    use crate::units::{ByteSize, Duration};
    pub fn backlog() -> u32 {
        4096
    }
    pub fn max_connections() -> usize {
        20_000
    }
    pub fn https_port() -> u16 {
        443
    }
    pub fn yes() -> bool {
        true
    }
    pub fn redis_prefix() -> String {
        "gatehouse".into()
    }
    pub fn redis_connect_timeout() -> Duration {
        Duration::secs(1)
    }
    pub fn redis_command_timeout() -> Duration {
        Duration::millis(200)
    }
    pub fn scan_interval() -> Duration {
        Duration::secs(2)
    }
    pub fn header_read_timeout() -> Duration {
        Duration::secs(10)
    }
    pub fn body_read_timeout() -> Duration {
        Duration::secs(60)
    }
    pub fn send_timeout() -> Duration {
        Duration::secs(60)
    }
    pub fn keepalive_timeout() -> Duration {
        Duration::secs(75)
    }
    pub fn max_header_bytes() -> ByteSize {
        ByteSize(64 << 10)
    }
    pub fn max_requests_per_connection() -> u64 {
        10_000
    }
    pub fn http2_max_concurrent_streams() -> u32 {
        256
    }
    pub fn zero() -> Duration {
        Duration::secs(0)
    }
    pub fn ping_timeout() -> Duration {
        Duration::secs(20)
    }
    pub fn weight() -> u32 {
        1
    }
    pub fn retries() -> u32 {
        1
    }
    pub fn hc_interval() -> Duration {
        Duration::secs(5)
    }
    pub fn hc_timeout() -> Duration {
        Duration::secs(2)
    }
    pub fn rise() -> u32 {
        2
    }
    pub fn fall() -> u32 {
        3
    }
    pub fn max_body() -> ByteSize {
        ByteSize(16 << 20)
    }
}
