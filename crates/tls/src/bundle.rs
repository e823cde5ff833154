//! A certificate bundle: a chain and its private key, parsed, checked and described.
//!
//! Checks, each with its own message: the PEM parses; there is a certificate and exactly one
//! private key; the key matches the first certificate; each certificate is issued by the next one
//! (chain order); the leaf names at least one DNS name. An expired certificate is accepted with a
//! warning, as browsers will refuse it but the operator may be replacing it.

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use rustls::SignatureAlgorithm;
use std::sync::Arc;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

/// The key algorithm of a bundle, which decides which clients it can serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyKind {
    /// ECDSA (P-256, P-384): preferred when the client offers an ECDSA signature scheme.
    Ecdsa,
    /// RSA: served to clients that offer no ECDSA scheme.
    Rsa,
    /// Ed25519 and anything else rustls can sign with.
    Other,
}

impl KeyKind {
    /// A short name for listings.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyKind::Ecdsa => "ecdsa",
            KeyKind::Rsa => "rsa",
            KeyKind::Other => "other",
        }
    }
}

/// What can be said about a bundle without its key: for listings, the admin API and logs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Facts {
    /// DNS names of the leaf (subjectAltName; the common name only when there is none), lowercase.
    pub names: Vec<String>,
    /// Subject distinguished name of the leaf.
    pub subject: String,
    /// Issuer distinguished name of the leaf.
    pub issuer: String,
    /// Serial number, hex.
    pub serial: String,
    /// Start of validity, Unix seconds.
    pub not_before: i64,
    /// End of validity, Unix seconds.
    pub not_after: i64,
    /// Key algorithm.
    pub key: KeyKind,
    /// Certificates in the chain, leaf included.
    pub chain_len: usize,
}

impl Facts {
    /// Whether the leaf has expired at `now` (Unix seconds).
    pub fn expired_at(&self, now: i64) -> bool {
        now > self.not_after
    }
}

/// A parsed, checked certificate chain with its key, ready for rustls.
#[derive(Debug)]
pub struct Bundle {
    /// The chain and signing key.
    pub certified: Arc<CertifiedKey>,
    /// Description.
    pub facts: Facts,
}

/// Why a bundle was refused, or could not be read or made.
#[derive(Debug)]
#[non_exhaustive]
pub enum BundleError {
    /// A PEM block does not decode.
    Pem(rustls::pki_types::pem::Error),
    /// There is no CERTIFICATE block.
    NoCertificate,
    /// There is no PRIVATE KEY block.
    NoKey,
    /// There is more than one private key.
    SeveralKeys(usize),
    /// The private key is not the certificate's.
    KeyMismatch,
    /// rustls cannot sign with the private key.
    Key(rustls::Error),
    /// A certificate does not parse as X.509.
    Certificate {
        /// Its place in the chain (1 is the leaf), when a chain was read.
        index: Option<usize>,
        /// Why.
        source: x509_parser::nom::Err<x509_parser::error::X509Error>,
    },
    /// A certificate is not issued by the one that follows it.
    ChainOrder {
        /// Its place in the chain (1 is the leaf).
        index: usize,
        /// Its issuer.
        issuer: String,
        /// The subject of the certificate that follows it.
        next: String,
    },
    /// The leaf names no DNS name.
    NoDnsName,
    /// A key or certificate could not be generated.
    Generate {
        /// `generate a key` or `make a certificate`.
        what: &'static str,
        /// Why.
        source: rcgen::Error,
    },
    /// A file or directory could not be read, created or written.
    Io {
        /// `read`, `create` or `write into`.
        action: &'static str,
        /// Which, when the message does not stand beside it already.
        path: Option<std::path::PathBuf>,
        /// Why.
        source: std::io::Error,
    },
    /// A bundle found at a place (a file, a Redis bundle id) was refused.
    At {
        /// The place.
        at: String,
        /// Why.
        source: Box<BundleError>,
    },
}

impl std::fmt::Display for BundleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BundleError::Pem(e) => write!(f, "unparsable PEM: {e}"),
            BundleError::NoCertificate => f.write_str("no CERTIFICATE block found"),
            BundleError::NoKey => f.write_str("no PRIVATE KEY block found"),
            BundleError::SeveralKeys(n) => write!(f, "{n} private keys found; a bundle holds exactly one"),
            BundleError::KeyMismatch => f.write_str("private key does not match the certificate"),
            BundleError::Key(e) => write!(f, "unusable private key: {e}"),
            BundleError::Certificate { index: Some(i), source } => {
                write!(f, "certificate {i} of the chain does not parse: {source}")
            }
            BundleError::Certificate { index: None, source } => write!(f, "certificate does not parse: {source}"),
            BundleError::ChainOrder { index, issuer, next } => write!(
                f,
                "chain in wrong order: certificate {index} is issued by \"{issuer}\", but certificate {} is \"{next}\" \
                 (put the leaf first, then each issuer)",
                index + 1
            ),
            BundleError::NoDnsName => f.write_str("the certificate names no DNS name (subjectAltName or common name)"),
            BundleError::Generate { what, source } => write!(f, "cannot {what}: {source}"),
            BundleError::Io { action, path: Some(p), source } => write!(f, "cannot {action} {}: {source}", p.display()),
            BundleError::Io { action, path: None, source } => write!(f, "cannot {action}: {source}"),
            BundleError::At { at, source } => write!(f, "{at}: {source}"),
        }
    }
}

impl std::error::Error for BundleError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BundleError::Pem(e) => Some(e),
            BundleError::Key(e) => Some(e),
            BundleError::Certificate { source, .. } => Some(source),
            BundleError::Generate { source, .. } => Some(source),
            BundleError::Io { source, .. } => Some(source),
            BundleError::At { source, .. } => Some(&**source),
            _ => None,
        }
    }
}

impl BundleError {
    /// This error, found at `at` (a file, a Redis bundle id).
    pub fn at(self, at: impl Into<String>) -> Self {
        BundleError::At { at: at.into(), source: Box::new(self) }
    }
}

/// The provider every certificate and connection uses.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(crypto_provider())
}

/// rustls' aws-lc-rs provider, its TLS 1.3 suites with the HKDF of [`crate::hkdf`]; for a
/// listener to trim to its own suites.
pub fn crypto_provider() -> CryptoProvider {
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    for suite in &mut provider.cipher_suites {
        *suite = crate::hkdf::with_keyed_hkdf(*suite);
    }
    provider
}

/// Splits PEM text into its certificates and its one private key.
pub fn split_pem(pem: &[u8]) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), BundleError> {
    let certs = all_of::<CertificateDer<'static>>(pem)?;
    if certs.is_empty() {
        return Err(BundleError::NoCertificate);
    }
    let mut keys = all_of::<PrivateKeyDer<'static>>(pem)?;
    match keys.len() {
        0 => Err(BundleError::NoKey),
        1 => Ok((certs, keys.remove(0))),
        n => Err(BundleError::SeveralKeys(n)),
    }
}

/// Every PEM section of one kind, in order.
fn all_of<T: PemObject>(pem: &[u8]) -> Result<Vec<T>, BundleError> {
    T::pem_slice_iter(pem).map(|item| item.map_err(BundleError::Pem)).collect()
}

/// Parses and checks a bundle from PEM text holding the chain (leaf first) and the key.
/// `now` is Unix seconds; warnings (such as expiry) are returned beside the bundle.
pub fn parse(pem: &[u8], ocsp: Option<Vec<u8>>, now: i64) -> Result<(Bundle, Vec<String>), BundleError> {
    let (chain, key) = split_pem(pem)?;
    let facts = describe(&chain)?;
    let provider = provider();
    let mut certified = match CertifiedKey::from_der(chain, key, &provider) {
        Ok(c) => c,
        Err(rustls::Error::InconsistentKeys(_)) => return Err(BundleError::KeyMismatch),
        Err(e) => return Err(BundleError::Key(e)),
    };
    certified.ocsp = ocsp;
    let key_kind = match certified.key.algorithm() {
        SignatureAlgorithm::ECDSA => KeyKind::Ecdsa,
        SignatureAlgorithm::RSA => KeyKind::Rsa,
        _ => KeyKind::Other,
    };
    let mut warnings = Vec::new();
    if facts.expired_at(now) {
        warnings.push(format!("certificate for {} expired at Unix time {}", facts.names.join(", "), facts.not_after));
    }
    let facts = Facts { key: key_kind, ..facts };
    Ok((Bundle { certified: Arc::new(certified), facts }, warnings))
}

/// Describes a chain and checks its order; the key kind is filled in by [`parse`].
pub fn describe(chain: &[CertificateDer<'_>]) -> Result<Facts, BundleError> {
    let mut parsed = Vec::with_capacity(chain.len());
    for (i, der) in chain.iter().enumerate() {
        match X509Certificate::from_der(der.as_ref()) {
            Ok((_, cert)) => parsed.push(cert),
            Err(source) => return Err(BundleError::Certificate { index: Some(i + 1), source }),
        }
    }
    let Some(leaf) = parsed.first() else {
        return Err(BundleError::NoCertificate);
    };
    for (i, pair) in parsed.windows(2).enumerate() {
        if pair[0].issuer().as_raw() != pair[1].subject().as_raw() {
            return Err(BundleError::ChainOrder {
                index: i + 1,
                issuer: pair[0].issuer().to_string(),
                next: pair[1].subject().to_string(),
            });
        }
    }
    let names = leaf_names(leaf);
    if names.is_empty() {
        return Err(BundleError::NoDnsName);
    }
    Ok(Facts {
        names,
        subject: leaf.subject().to_string(),
        issuer: leaf.issuer().to_string(),
        serial: leaf.raw_serial_as_string(),
        not_before: leaf.validity().not_before.timestamp(),
        not_after: leaf.validity().not_after.timestamp(),
        key: KeyKind::Other,
        chain_len: parsed.len(),
    })
}

/// DNS names of a leaf, lowercase, without duplicates: subjectAltName dNSName entries, or the
/// common name when there is no subjectAltName extension (as older certificates do).
fn leaf_names(leaf: &X509Certificate<'_>) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut push = |n: &str| {
        let n = n.trim_end_matches('.').to_ascii_lowercase();
        if !n.is_empty() && !names.contains(&n) {
            names.push(n);
        }
    };
    match leaf.subject_alternative_name() {
        Ok(Some(san)) => {
            for gn in &san.value.general_names {
                if let GeneralName::DNSName(n) = gn {
                    push(n);
                }
            }
        }
        _ => {
            for cn in leaf.subject().iter_common_name() {
                if let Ok(n) = cn.as_str() {
                    push(n);
                }
            }
        }
    }
    names
}

/// The names of the leaf of PEM text, without checking the key: what a store scan reads to
/// index a file without loading it.
pub fn pem_names(pem: &[u8]) -> Result<Vec<String>, BundleError> {
    let leaf = match CertificateDer::pem_slice_iter(pem).next() {
        Some(Ok(c)) => c,
        Some(Err(e)) => return Err(BundleError::Pem(e)),
        None => return Err(BundleError::NoCertificate),
    };
    match X509Certificate::from_der(leaf.as_ref()) {
        Ok((_, cert)) => Ok(leaf_names(&cert)),
        Err(source) => Err(BundleError::Certificate { index: None, source }),
    }
}

#[cfg(test)]
mod tests;
