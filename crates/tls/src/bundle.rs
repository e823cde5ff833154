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

/// Why a bundle was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleError(pub String);

impl std::fmt::Display for BundleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BundleError {}

fn err<T>(msg: impl Into<String>) -> Result<T, BundleError> {
    Err(BundleError(msg.into()))
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
        return err("no CERTIFICATE block found");
    }
    let mut keys = all_of::<PrivateKeyDer<'static>>(pem)?;
    match keys.len() {
        0 => err("no PRIVATE KEY block found"),
        1 => Ok((certs, keys.remove(0))),
        n => err(format!("{n} private keys found; a bundle holds exactly one")),
    }
}

/// Every PEM section of one kind, in order.
fn all_of<T: PemObject>(pem: &[u8]) -> Result<Vec<T>, BundleError> {
    T::pem_slice_iter(pem).map(|item| item.map_err(|e| BundleError(format!("unparsable PEM: {e}")))).collect()
}

/// Parses and checks a bundle from PEM text holding the chain (leaf first) and the key.
/// `now` is Unix seconds; warnings (such as expiry) are returned beside the bundle.
pub fn parse(pem: &[u8], ocsp: Option<Vec<u8>>, now: i64) -> Result<(Bundle, Vec<String>), BundleError> {
    let (chain, key) = split_pem(pem)?;
    let facts = describe(&chain)?;
    let provider = provider();
    let mut certified = match CertifiedKey::from_der(chain, key, &provider) {
        Ok(c) => c,
        Err(rustls::Error::InconsistentKeys(_)) => return err("private key does not match the certificate"),
        Err(e) => return err(format!("unusable private key: {e}")),
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
            Err(e) => return err(format!("certificate {} of the chain does not parse: {e}", i + 1)),
        }
    }
    let Some(leaf) = parsed.first() else {
        return err("no CERTIFICATE block found");
    };
    for (i, pair) in parsed.windows(2).enumerate() {
        if pair[0].issuer().as_raw() != pair[1].subject().as_raw() {
            return err(format!(
                "chain in wrong order: certificate {} is issued by \"{}\", but certificate {} is \"{}\" \
                 (put the leaf first, then each issuer)",
                i + 1,
                pair[0].issuer(),
                i + 2,
                pair[1].subject()
            ));
        }
    }
    let names = leaf_names(leaf);
    if names.is_empty() {
        return err("the certificate names no DNS name (subjectAltName or common name)");
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
        Some(Err(e)) => return err(format!("unparsable PEM: {e}")),
        None => return err("no CERTIFICATE block found"),
    };
    match X509Certificate::from_der(leaf.as_ref()) {
        Ok((_, cert)) => Ok(leaf_names(&cert)),
        Err(e) => err(format!("certificate does not parse: {e}")),
    }
}

#[cfg(test)]
mod tests;
