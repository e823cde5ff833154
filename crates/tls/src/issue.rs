//! Certificate generation: the quick start's self-signed certificate, and a small CA for tests
//! and benchmarks that need many names.

use crate::bundle::BundleError;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair, KeyUsagePurpose, SanType,
    PKCS_ECDSA_P256_SHA256, PKCS_RSA_SHA256,
};
use std::path::{Path, PathBuf};
use time::OffsetDateTime;

/// Which key a generated certificate gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// ECDSA P-256 with SHA-256.
    EcdsaP256,
    /// RSA 2048 with SHA-256.
    Rsa2048,
}

fn key_pair(alg: Algorithm) -> Result<KeyPair, BundleError> {
    let made = match alg {
        Algorithm::EcdsaP256 => KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256),
        Algorithm::Rsa2048 => KeyPair::generate_for(&PKCS_RSA_SHA256),
    };
    made.map_err(|source| BundleError::Generate { what: "generate a key", source })
}

fn gen_err(e: rcgen::Error) -> BundleError {
    BundleError::Generate { what: "make a certificate", source: e }
}

/// How far back a generated certificate's validity starts, so a client whose clock is a little
/// behind accepts it at once.
const BACKDATED_DAYS: i64 = 1;

/// The validity period of the quick start's certificate, backdating included: Mozilla's
/// "intermediate" TLS profile allows at most 366 days.
pub const SELF_SIGNED_DAYS: i64 = 365;

fn leaf_params(names: &[&str], valid_days: i64) -> Result<CertificateParams, BundleError> {
    let mut params = CertificateParams::default();
    for n in names {
        let san = match n.parse::<std::net::IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName((*n).try_into().map_err(gen_err)?),
        };
        params.subject_alt_names.push(san);
    }
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, names.first().copied().unwrap_or("gatehouse"));
    params.distinguished_name = dn;
    let now = OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::days(BACKDATED_DAYS);
    params.not_after = now + time::Duration::days(valid_days);
    Ok(params)
}

/// A self-signed certificate and key for `names`, valid for `valid_days` from now (negative:
/// already expired), as one PEM text (certificate first, then key).
pub fn self_signed(names: &[&str], alg: Algorithm, valid_days: i64) -> Result<String, BundleError> {
    let key = key_pair(alg)?;
    let cert = leaf_params(names, valid_days)?.self_signed(&key).map_err(gen_err)?;
    Ok(format!("{}{}", cert.pem(), key.serialize_pem()))
}

/// The certificate that answers a TLS-ALPN-01 challenge for `name` (RFC 8737 §3): self-signed,
/// `name` its only subjectAltName, and the critical `acmeIdentifier` extension holding `digest`,
/// the SHA-256 of the key authorization; as DER (certificate, PKCS#8 key).
pub fn acme_alpn(name: &str, digest: &[u8]) -> Result<(Vec<u8>, Vec<u8>), BundleError> {
    let key = key_pair(Algorithm::EcdsaP256)?;
    let mut params = leaf_params(&[name], 7)?;
    params.custom_extensions.push(rcgen::CustomExtension::new_acme_identifier(digest));
    let cert = params.self_signed(&key).map_err(gen_err)?;
    Ok((cert.der().to_vec(), key.serialize_der()))
}

/// A certificate authority that issues leaf bundles.
pub struct Authority {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Authority {
    /// A new self-signed CA named `name`.
    pub fn new(name: &str) -> Result<Self, BundleError> {
        let key = key_pair(Algorithm::EcdsaP256)?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name);
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let cert = params.self_signed(&key).map_err(gen_err)?;
        Ok(Authority { cert, key })
    }

    /// The CA certificate, PEM.
    pub fn cert_pem(&self) -> String {
        self.cert.pem()
    }

    /// A leaf for `names` issued by this CA: PEM text with the leaf, the CA certificate, and the
    /// leaf's key.
    pub fn issue(&self, names: &[&str], alg: Algorithm, valid_days: i64) -> Result<String, BundleError> {
        let key = key_pair(alg)?;
        let leaf = leaf_params(names, valid_days)?.signed_by(&key, &self.cert, &self.key).map_err(gen_err)?;
        Ok(format!("{}{}{}", leaf.pem(), self.cert.pem(), key.serialize_pem()))
    }
}

/// How long before its end the quick start's certificate is made anew (at a start or reload).
pub const SELF_SIGNED_RENEW_DAYS: i64 = 30;

/// The quick start's certificate: `dir/self-signed.pem`, made on first use for `names`, valid
/// [`SELF_SIGNED_DAYS`], and kept, so browsers can be told to trust it once; made anew when a
/// start or reload finds it within [`SELF_SIGNED_RENEW_DAYS`] of its end (or past it). The
/// directory is created with mode 0700 and the file with 0600: it holds a private key.
pub fn ensure_self_signed(dir: &Path, names: &[&str]) -> Result<PathBuf, BundleError> {
    use std::os::unix::fs::DirBuilderExt;
    let path = dir.join("self-signed.pem");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    if let Ok(pem) = std::fs::read(&path) {
        // A file that does not parse is left for the caller to report, never overwritten.
        let ends = crate::bundle::parse(&pem, None, now).map(|(b, _)| b.facts.not_after);
        match ends {
            Ok(end) if end - now < SELF_SIGNED_RENEW_DAYS * 86_400 => {
                tracing::warn!(path = %path.display(), ends = end, "the self-signed certificate ends soon; making a new one");
            }
            _ => return Ok(path),
        }
    }
    let io = |action, source| BundleError::Io { action, path: Some(dir.to_path_buf()), source };
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(|e| io("create", e))?;
    let pem = self_signed(names, Algorithm::EcdsaP256, SELF_SIGNED_DAYS - BACKDATED_DAYS)?;
    gatehouse_files::write_private(&path, pem.as_bytes()).map_err(|e| io("write into", e))?;
    tracing::info!(path = %path.display(), names = ?names, "made a self-signed certificate");
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn not_after(path: &Path) -> i64 {
        let pem = std::fs::read(path).expect("the certificate file");
        crate::bundle::parse(&pem, None, 0).expect("a bundle").0.facts.not_after
    }

    #[test]
    fn the_self_signed_certificate_is_kept_and_made_anew_near_its_end() {
        let dir = std::env::temp_dir().join(format!("gatehouse-self-signed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let names = ["localhost"];
        let path = ensure_self_signed(&dir, &names).expect("made");
        let first = std::fs::read(&path).expect("read");
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        assert!((not_after(&path) - now - (SELF_SIGNED_DAYS - BACKDATED_DAYS) * 86_400).abs() < 86_400);
        // Kept while it has long to go.
        ensure_self_signed(&dir, &names).expect("kept");
        assert_eq!(std::fs::read(&path).expect("read"), first);
        // Ten days left: made anew, for a full year again.
        let short = self_signed(&names, Algorithm::EcdsaP256, 10).expect("a short one");
        gatehouse_files::write_private(&path, short.as_bytes()).expect("write");
        ensure_self_signed(&dir, &names).expect("renewed");
        assert!(not_after(&path) - now > 300 * 86_400, "not renewed");
        // A file that is not a certificate is left alone, for the caller to report.
        gatehouse_files::write_private(&path, b"not a certificate").expect("write");
        ensure_self_signed(&dir, &names).expect("left");
        assert_eq!(std::fs::read(&path).expect("read"), b"not a certificate");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
