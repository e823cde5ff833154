//! Connect stage, TLS to endpoints: an upstream's `tls` settings compiled once into a rustls client
//! configuration ([`TlsClient`]), and per endpoint a connector with its own session cache, so a new
//! connection to an endpoint resumes the session of the last one (tickets or session ids) instead
//! of a full handshake. A failed handshake is sorted into a [`TlsFailure`] reason for the log and
//! the metrics.

use crate::sessions::EndpointSessions;
use gatehouse_config as config;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::Resumption;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::hash::{Hash, Hasher};
use std::io;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use tokio_rustls::TlsConnector;

/// Why an upstream's `tls` settings could not be made into a client configuration.
#[derive(Debug)]
#[non_exhaustive]
pub enum TlsSetupError {
    /// A file could not be read.
    Read {
        /// Which setting names it (`ca`, `cert`, `key`).
        field: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A file holds no usable PEM object of the kind expected.
    Pem {
        /// Which setting names it.
        field: &'static str,
        /// The file.
        path: PathBuf,
        /// What was looked for.
        expected: &'static str,
    },
    /// A CA certificate was refused as a trust anchor.
    Anchor {
        /// The file.
        path: PathBuf,
        /// Why.
        source: rustls::Error,
    },
    /// The system has no usable root certificates (`tls.ca` names some instead).
    NoSystemRoots,
    /// rustls refused the versions, the key, or the two together.
    Config(rustls::Error),
}

impl std::fmt::Display for TlsSetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TlsSetupError::Read { field, path, source } => {
                write!(f, "tls.{field}: cannot read {}: {source}", gatehouse_files::shown(path))
            }
            TlsSetupError::Pem { field, path, expected } => {
                write!(f, "tls.{field}: {} holds no {expected}", gatehouse_files::shown(path))
            }
            TlsSetupError::Anchor { path, source } => write!(f, "tls.ca: {}: {source}", gatehouse_files::shown(path)),
            TlsSetupError::NoSystemRoots => {
                f.write_str("tls: the system has no root certificates; name a CA file in `tls.ca`")
            }
            TlsSetupError::Config(e) => write!(f, "tls: {e}"),
        }
    }
}

impl std::error::Error for TlsSetupError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TlsSetupError::Read { source, .. } => Some(source),
            TlsSetupError::Anchor { source, .. } | TlsSetupError::Config(source) => Some(source),
            _ => None,
        }
    }
}

/// An upstream's TLS settings, compiled: immutable, shared by its endpoints.
#[derive(Debug)]
pub struct TlsClient {
    config: ClientConfig,
    /// For `protocol: auto`: the same settings offering `http/1.1` only, for a request that asks to
    /// switch protocols (WebSocket), which HTTP/2 cannot carry.
    h1_alpn: Option<Vec<Vec<u8>>>,
    server_name: Option<ServerName<'static>>,
    session_cache: usize,
    /// Tells two compiled settings apart (including the files' contents), so that a reload that
    /// changes them gives the endpoints new state and new connections.
    fingerprint: u64,
}

/// The cryptography of upstream connections: rustls' aws-lc-rs provider, with the cipher suites
/// that use AES-128-GCM and SHA-256 offered first (BoringSSL's order, so Envoy's; rustls' and
/// OpenSSL's put AES-256-GCM with SHA-384 first). A TLS 1.3 key schedule, and the TLS 1.2 PRF,
/// run on the suite's hash: SHA-256 is computed by the CPU's SHA extensions on current x86 and
/// ARM servers, SHA-384 in software, and a resumed handshake per request spent 12 % of a
/// worker's CPU in SHA-512 blocks (`perf`, `bench/reencrypt.sh` row `new-conn`). Both suites are
/// as strong as a backend needs; the backend still chooses.
fn provider() -> CryptoProvider {
    use rustls::CipherSuite as S;
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    provider.cipher_suites.sort_by_key(|suite| {
        !matches!(
            suite.suite(),
            S::TLS13_AES_128_GCM_SHA256
                | S::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
                | S::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
        )
    });
    provider
}

impl TlsClient {
    /// Reads the files and builds the client configuration.
    pub fn new(cfg: &config::UpstreamTls, protocol: config::UpstreamProtocol) -> Result<TlsClient, TlsSetupError> {
        let mut fp = std::collections::hash_map::DefaultHasher::new();
        format!("{cfg:?}{protocol:?}").hash(&mut fp);
        let provider = Arc::new(provider());
        let versions: Vec<&'static rustls::SupportedProtocolVersion> = cfg
            .versions
            .iter()
            .map(|v| match v {
                config::TlsVersion::Tls12 => &rustls::version::TLS12,
                config::TlsVersion::Tls13 => &rustls::version::TLS13,
            })
            .collect();
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(TlsSetupError::Config)?;
        let builder = if !cfg.verify {
            builder.dangerous().with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        } else if let Some(path) = &cfg.ca {
            let pem = read(path, "ca")?;
            pem.hash(&mut fp);
            let mut roots = RootCertStore::empty();
            for der in CertificateDer::pem_slice_iter(&pem).flatten() {
                roots.add(der).map_err(|source| TlsSetupError::Anchor { path: path.clone(), source })?;
            }
            if roots.is_empty() {
                return Err(TlsSetupError::Pem { field: "ca", path: path.clone(), expected: "certificate" });
            }
            builder.with_root_certificates(roots)
        } else {
            builder.with_root_certificates(system_roots()?)
        };
        let mut config = match (&cfg.cert, &cfg.key) {
            (Some(cert), Some(key)) => {
                let chain_pem = read(cert, "cert")?;
                let key_pem = read(key, "key")?;
                chain_pem.hash(&mut fp);
                key_pem.hash(&mut fp);
                let chain: Vec<CertificateDer<'static>> =
                    CertificateDer::pem_slice_iter(&chain_pem).flatten().collect();
                if chain.is_empty() {
                    return Err(TlsSetupError::Pem { field: "cert", path: cert.clone(), expected: "certificate" });
                }
                let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|_| TlsSetupError::Pem {
                    field: "key",
                    path: key.clone(),
                    expected: "private key",
                })?;
                builder.with_client_auth_cert(chain, key).map_err(TlsSetupError::Config)?
            }
            _ => builder.with_no_client_auth(),
        };
        let alpn = |names: &[&str]| names.iter().map(|n| n.as_bytes().to_vec()).collect::<Vec<_>>();
        config.alpn_protocols = match (&cfg.alpn, protocol) {
            (Some(list), _) => list.iter().map(|a| a.as_bytes().to_vec()).collect(),
            (None, config::UpstreamProtocol::Http1) => alpn(&["http/1.1"]),
            (None, config::UpstreamProtocol::Http2) => alpn(&["h2"]),
            (None, config::UpstreamProtocol::Auto) => alpn(&["h2", "http/1.1"]),
        };
        let h1_alpn = (protocol == config::UpstreamProtocol::Auto).then(|| alpn(&["http/1.1"]));
        let server_name = cfg.server_name.as_deref().and_then(|n| ServerName::try_from(n.to_string()).ok());
        Ok(TlsClient { config, h1_alpn, server_name, session_cache: cfg.session_cache, fingerprint: fp.finish() })
    }

    /// Identifies these settings among others, files included.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// The name verified for an endpoint: `server_name` when set, else the target's host name,
    /// else its IP address.
    pub fn server_name(&self, host: Option<&str>, ip: IpAddr) -> ServerName<'static> {
        if let Some(name) = &self.server_name {
            return name.clone();
        }
        host.and_then(|h| ServerName::try_from(h.to_string()).ok()).unwrap_or(ServerName::IpAddress(ip.into()))
    }

    /// The connectors of one endpoint, sharing one session cache that lives as long as the
    /// endpoint's state.
    pub(crate) fn for_endpoint(&self, server_name: ServerName<'static>) -> EndpointTls {
        let resumption = if self.session_cache == 0 {
            Resumption::disabled()
        } else {
            Resumption::store(Arc::new(EndpointSessions::new(self.session_cache)))
        };
        let mut config = self.config.clone();
        config.resumption = resumption;
        let h1 = self.h1_alpn.as_ref().map(|alpn| {
            let mut h1 = config.clone();
            h1.alpn_protocols.clone_from(alpn);
            TlsConnector::from(Arc::new(h1))
        });
        let name_text = match &server_name {
            ServerName::DnsName(n) => n.as_ref().to_string(),
            ServerName::IpAddress(ip) => IpAddr::from(*ip).to_string(),
            other => format!("{other:?}"),
        };
        EndpointTls { connector: TlsConnector::from(Arc::new(config)), h1, server_name, name_text: name_text.into() }
    }
}

/// One endpoint's TLS: its connectors and the name it is verified by.
pub(crate) struct EndpointTls {
    pub(crate) connector: TlsConnector,
    /// Offers `http/1.1` only (`protocol: auto`, for protocol switches).
    pub(crate) h1: Option<TlsConnector>,
    pub(crate) server_name: ServerName<'static>,
    /// The name as text, for logs.
    pub(crate) name_text: Box<str>,
}

impl std::fmt::Debug for EndpointTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointTls").field("server_name", &self.name_text).finish_non_exhaustive()
    }
}

fn read(path: &Path, field: &'static str) -> Result<Vec<u8>, TlsSetupError> {
    gatehouse_files::read(path).map_err(|source| TlsSetupError::Read { field, path: path.to_path_buf(), source })
}

/// The system's root certificates, read once per process (a few milliseconds of parsing).
fn system_roots() -> Result<Arc<RootCertStore>, TlsSetupError> {
    static ROOTS: OnceLock<Arc<RootCertStore>> = OnceLock::new();
    let roots = ROOTS.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs();
        for e in &found.errors {
            tracing::warn!(error = %e, "reading the system's root certificates");
        }
        let mut roots = RootCertStore::empty();
        let (_added, ignored) = roots.add_parsable_certificates(found.certs);
        if ignored > 0 {
            tracing::debug!(ignored, "system root certificates rustls cannot use");
        }
        Arc::new(roots)
    });
    if roots.is_empty() {
        return Err(TlsSetupError::NoSystemRoots);
    }
    Ok(roots.clone())
}

/// `verify: false`: any certificate is taken; the handshake's signatures are still checked, so
/// the session is at least with the holder of the certificate's key.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Why TLS with an endpoint failed, as counted in `gatehouse_upstream_tls_failures_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsFailure {
    /// The certificate does not chain to a trusted root (or its signature is bad).
    Untrusted,
    /// The certificate is valid, but not for the name verified.
    WrongName,
    /// The certificate has expired or is not valid yet.
    Expired,
    /// Any other fault of the certificate (encoding, purpose, revocation).
    BadCertificate,
    /// The endpoint refused the handshake with an alert: most often, it wanted a client
    /// certificate it did not get or did not accept.
    Refused,
    /// No protocol version, cipher suite or ALPN protocol in common; a malformed or unexpected
    /// message.
    Protocol,
    /// The connection broke or timed out during the handshake.
    Io,
}

impl TlsFailure {
    /// Every reason, in the order the metrics list them.
    pub const ALL: [TlsFailure; 7] = [
        TlsFailure::Untrusted,
        TlsFailure::WrongName,
        TlsFailure::Expired,
        TlsFailure::BadCertificate,
        TlsFailure::Refused,
        TlsFailure::Protocol,
        TlsFailure::Io,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            TlsFailure::Untrusted => "untrusted",
            TlsFailure::WrongName => "wrong_name",
            TlsFailure::Expired => "expired",
            TlsFailure::BadCertificate => "bad_certificate",
            TlsFailure::Refused => "refused",
            TlsFailure::Protocol => "protocol",
            TlsFailure::Io => "io",
        }
    }

    /// The reason of an I/O error from a TLS stream: `None` when rustls did not raise it (a plain
    /// reset or end of stream after the handshake).
    pub fn of(e: &io::Error) -> Option<TlsFailure> {
        let tls = e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>())?;
        Some(match tls {
            rustls::Error::InvalidCertificate(c) => match c {
                CertificateError::UnknownIssuer | CertificateError::BadSignature => TlsFailure::Untrusted,
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                    TlsFailure::WrongName
                }
                CertificateError::Expired
                | CertificateError::ExpiredContext { .. }
                | CertificateError::NotValidYet
                | CertificateError::NotValidYetContext { .. } => TlsFailure::Expired,
                _ => TlsFailure::BadCertificate,
            },
            rustls::Error::AlertReceived(_) => TlsFailure::Refused,
            _ => TlsFailure::Protocol,
        })
    }

    fn index(self) -> usize {
        TlsFailure::ALL.iter().position(|r| *r == self).unwrap_or(0)
    }
}

/// Upstream TLS counters of one endpoint.
#[derive(Debug, Default)]
pub struct TlsStats {
    /// Full handshakes.
    pub full: std::sync::atomic::AtomicU64,
    /// Resumed handshakes.
    pub resumed: std::sync::atomic::AtomicU64,
    /// Time spent in handshakes (connect excluded), microseconds.
    pub handshake_micros: std::sync::atomic::AtomicU64,
    failures: [std::sync::atomic::AtomicU64; 7],
}

impl TlsStats {
    /// Failures for `reason`.
    pub fn failures(&self, reason: TlsFailure) -> u64 {
        self.failures[reason.index()].load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn failed(&self, reason: TlsFailure) {
        self.failures[reason.index()].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificate_faults_are_sorted_by_reason() {
        let wrap = |e: rustls::Error| io::Error::new(io::ErrorKind::InvalidData, e);
        let cert = |c: CertificateError| wrap(rustls::Error::InvalidCertificate(c));
        assert_eq!(TlsFailure::of(&cert(CertificateError::UnknownIssuer)), Some(TlsFailure::Untrusted));
        assert_eq!(TlsFailure::of(&cert(CertificateError::NotValidForName)), Some(TlsFailure::WrongName));
        assert_eq!(TlsFailure::of(&cert(CertificateError::Expired)), Some(TlsFailure::Expired));
        assert_eq!(TlsFailure::of(&cert(CertificateError::Revoked)), Some(TlsFailure::BadCertificate));
        let alert = wrap(rustls::Error::AlertReceived(rustls::AlertDescription::CertificateRequired));
        assert_eq!(TlsFailure::of(&alert), Some(TlsFailure::Refused));
        assert_eq!(TlsFailure::of(&io::Error::from(io::ErrorKind::ConnectionReset)), None);
    }

    #[test]
    fn the_verified_name_defaults_to_the_host_then_the_address() {
        let cfg = config::UpstreamTls { verify: false, ..Default::default() };
        let t = TlsClient::new(&cfg, config::UpstreamProtocol::Auto).expect("compiles");
        let ip: IpAddr = [127, 0, 0, 1].into();
        assert!(
            matches!(t.server_name(Some("api.internal"), ip), ServerName::DnsName(n) if n.as_ref() == "api.internal")
        );
        assert!(matches!(t.server_name(None, ip), ServerName::IpAddress(_)));
        assert_eq!(t.config.alpn_protocols, vec![b"h2".to_vec(), b"http/1.1".to_vec()]);
        let named = config::UpstreamTls { verify: false, server_name: Some("b.example".into()), ..Default::default() };
        let t = TlsClient::new(&named, config::UpstreamProtocol::Http1).expect("compiles");
        assert!(matches!(t.server_name(Some("api.internal"), ip), ServerName::DnsName(n) if n.as_ref() == "b.example"));
    }
}
