//! Config load, or a key set fetched off the request path: the keys that verify tokens, parsed and checked once so a
//! bad key fails there, never a request.

use std::fmt;

use aws_lc_rs::signature::{
    ParsedPublicKey, RsaParameters, RsaPublicKeyComponents, VerificationAlgorithm, ECDSA_P256_SHA256_FIXED,
    ECDSA_P384_SHA384_FIXED, ECDSA_P521_SHA512_FIXED, ED25519, RSA_PKCS1_2048_8192_SHA256, RSA_PKCS1_2048_8192_SHA384,
    RSA_PKCS1_2048_8192_SHA512, RSA_PSS_2048_8192_SHA256, RSA_PSS_2048_8192_SHA384, RSA_PSS_2048_8192_SHA512,
};
use aws_lc_rs::{hmac, rsa};

use crate::algorithm::Family;
use crate::{der, pem, Algorithm, JwtError, KeyError};

/// A key that verifies tokens of exactly one algorithm. `Send + Sync`: build it once and share it rather than cloning
/// it per request.
#[derive(Clone)]
pub struct VerifyKey {
    algorithm: Algorithm,
    inner: Inner,
}

#[derive(Clone)]
enum Inner {
    // Boxed: aws-lc's HMAC key holds its whole context (over a kilobyte); the public keys are pointers.
    Hmac(Box<hmac::Key>),
    Public(ParsedPublicKey),
}

/// The smallest and largest RSA modulus accepted, in bits (aws-lc's `2048_8192` verification algorithms).
const RSA_BITS: std::ops::RangeInclusive<u32> = 2048..=8192;

impl VerifyKey {
    /// An HS256 key from a shared secret; [`VerifyKey::secret`] for HS384 and HS512.
    pub fn hmac(secret: &[u8]) -> Result<Self, KeyError> {
        Self::secret(Algorithm::Hs256, secret)
    }

    /// An `HS*` key from a shared secret.
    ///
    /// Refuses an empty secret and a secret that is a PEM document (a public key used as an HMAC secret is how
    /// algorithm-confusion attacks forge tokens). Whether a short secret (under the hash's size) deserves a warning
    /// is the caller's call.
    pub fn secret(alg: Algorithm, secret: &[u8]) -> Result<Self, KeyError> {
        let hash = match alg {
            Algorithm::Hs256 => hmac::HMAC_SHA256,
            Algorithm::Hs384 => hmac::HMAC_SHA384,
            Algorithm::Hs512 => hmac::HMAC_SHA512,
            _ => return Err(KeyError::NotForAlgorithm { alg }),
        };
        if secret.is_empty() {
            return Err(KeyError::EmptySecret);
        }
        if secret.trim_ascii_start().starts_with(b"-----BEGIN ") {
            return Err(KeyError::SecretIsPem);
        }
        Ok(Self { algorithm: alg, inner: Inner::Hmac(Box::new(hmac::Key::new(hash, secret))) })
    }

    /// A public key for `alg` from PEM text.
    ///
    /// `RS*` and `PS*` take the first `PUBLIC KEY` (SubjectPublicKeyInfo), `RSA PUBLIC KEY` (PKCS#1) or `CERTIFICATE`
    /// block, with 2048 to 8192 bits; `ES*` and `EdDSA` the first `PUBLIC KEY` or `CERTIFICATE` block, on the
    /// algorithm's curve (P-256, P-384, P-521, Ed25519). From a certificate only the public key is taken: its
    /// validity, issuer and extensions are not checked.
    pub fn from_pem(alg: Algorithm, pem: &[u8]) -> Result<Self, KeyError> {
        let (expected, labels): (&str, &[&str]) = match alg.family() {
            Family::Hmac => return Err(KeyError::HmacHasNoPem),
            Family::Rsa => {
                ("PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE", &["PUBLIC KEY", "RSA PUBLIC KEY", "CERTIFICATE"])
            }
            Family::Ec | Family::Ed25519 => ("PUBLIC KEY or CERTIFICATE", &["PUBLIC KEY", "CERTIFICATE"]),
        };
        let blocks = pem::parse(pem)?;
        let Some(block) = blocks.iter().find(|b| labels.contains(&b.label.as_str())) else {
            return Err(KeyError::NoPemBlock { expected, found: blocks.first().map(|b| b.label.clone()) });
        };
        let der = match block.label.as_str() {
            "CERTIFICATE" => der::certificate_spki(&block.der)?,
            _ => &block.der,
        };
        if block.label == "RSA PUBLIC KEY" {
            der::check_pkcs1_public_key(der)?;
            return Self::rsa_der(alg, der);
        }
        let found = der::spki_key_type(der)?;
        match (alg.family(), found) {
            (Family::Rsa, der::KeyType::Rsa) => Self::rsa_der(alg, der),
            (Family::Rsa, _) => Err(KeyError::NotRsa),
            (_, _) if found != curve_of(alg) && alg == Algorithm::Es256 => Err(KeyError::NotP256),
            (_, _) if found != curve_of(alg) => Err(KeyError::WrongCurve { alg }),
            // aws-lc checks that the point is on the curve.
            _ => Self::public(alg, der),
        }
    }

    /// An `RS*` or `PS*` key from its modulus and public exponent, big-endian (a JWK's `n` and `e`).
    pub fn from_rsa_components(alg: Algorithm, n: &[u8], e: &[u8]) -> Result<Self, KeyError> {
        if alg.family() != Family::Rsa {
            return Err(KeyError::NotForAlgorithm { alg });
        }
        let n = der::strip_leading_zeros(n);
        let bits = match n.first() {
            Some(first) => u32::try_from(n.len() * 8).unwrap_or(u32::MAX) - first.leading_zeros(),
            None => 0,
        };
        if !RSA_BITS.contains(&bits) {
            return Err(KeyError::RsaKeySize { bits });
        }
        let components = RsaPublicKeyComponents { n, e: der::strip_leading_zeros(e) };
        let key = components.to_parsed_public_key(rsa_parameters(alg))?;
        Ok(Self { algorithm: alg, inner: Inner::Public(key) })
    }

    /// An `ES*` key from its curve point, uncompressed (`04 || x || y`, a JWK's `x` and `y`), or an `EdDSA` key
    /// from its 32 bytes (a JWK's `x`). The point must be on the algorithm's curve.
    pub fn from_point(alg: Algorithm, point: &[u8]) -> Result<Self, KeyError> {
        let len = match alg {
            Algorithm::Es256 => 65,
            Algorithm::Es384 => 97,
            Algorithm::Es512 => 133,
            Algorithm::EdDsa => 32,
            _ => return Err(KeyError::NotForAlgorithm { alg }),
        };
        // aws-lc would also take a compressed point or a whole SPKI here: a JWK gives neither.
        if point.len() != len || (alg != Algorithm::EdDsa && point.first() != Some(&4)) {
            return Err(KeyError::BadDer("curve point of the wrong length or form"));
        }
        Self::public(alg, point)
    }

    /// The algorithm this key verifies; tokens with another `alg` are refused.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// aws-lc-rs takes SPKI and PKCS#1 alike; the modulus size is checked here because it would otherwise only be
    /// checked, and fail, on every verification.
    fn rsa_der(alg: Algorithm, der: &[u8]) -> Result<Self, KeyError> {
        let public = rsa::PublicKey::from_der(der)?;
        let bits = RsaParameters::public_modulus_len(public.as_ref()).map_err(|_| KeyError::BadDer("RSA modulus"))?;
        if !RSA_BITS.contains(&bits) {
            return Err(KeyError::RsaKeySize { bits });
        }
        Self::public(alg, der)
    }

    fn public(alg: Algorithm, bytes: &[u8]) -> Result<Self, KeyError> {
        let verification: &'static dyn VerificationAlgorithm = match alg.family() {
            Family::Hmac => return Err(KeyError::HmacHasNoPem),
            Family::Rsa => rsa_parameters(alg),
            Family::Ec | Family::Ed25519 => match alg {
                Algorithm::Es256 => &ECDSA_P256_SHA256_FIXED,
                Algorithm::Es384 => &ECDSA_P384_SHA384_FIXED,
                Algorithm::Es512 => &ECDSA_P521_SHA512_FIXED,
                _ => &ED25519,
            },
        };
        Ok(Self { algorithm: alg, inner: Inner::Public(ParsedPublicKey::new(verification, bytes)?) })
    }

    pub(crate) fn verify_signature(&self, message: &[u8], sig: &[u8]) -> Result<(), JwtError> {
        let verified = match &self.inner {
            Inner::Hmac(key) => hmac::verify(key, message, sig),
            Inner::Public(key) => key.verify_sig(message, sig),
        };
        verified.map_err(|_| JwtError::BadSignature)
    }
}

fn rsa_parameters(alg: Algorithm) -> &'static RsaParameters {
    match alg {
        Algorithm::Rs384 => &RSA_PKCS1_2048_8192_SHA384,
        Algorithm::Rs512 => &RSA_PKCS1_2048_8192_SHA512,
        Algorithm::Ps256 => &RSA_PSS_2048_8192_SHA256,
        Algorithm::Ps384 => &RSA_PSS_2048_8192_SHA384,
        Algorithm::Ps512 => &RSA_PSS_2048_8192_SHA512,
        _ => &RSA_PKCS1_2048_8192_SHA256,
    }
}

/// The key type an `ES*` or `EdDSA` SPKI must hold.
fn curve_of(alg: Algorithm) -> der::KeyType {
    match alg {
        Algorithm::Es384 => der::KeyType::P384,
        Algorithm::Es512 => der::KeyType::P521,
        Algorithm::EdDsa => der::KeyType::Ed25519,
        _ => der::KeyType::P256,
    }
}

impl fmt::Debug for VerifyKey {
    /// The algorithm only: an HMAC key is a secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerifyKey").field("algorithm", &self.algorithm).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_can_live_in_a_shared_snapshot() {
        fn shareable<T: Send + Sync + 'static>() {}
        shareable::<VerifyKey>();
        shareable::<crate::sign::SigningKey>();
    }

    #[test]
    fn components_are_checked_before_aws_lc_sees_them() {
        let n = [&[0u8, 0, 0x80][..], &[1; 255]].concat();
        assert!(VerifyKey::from_rsa_components(Algorithm::Rs256, &n, &[1, 0, 1]).is_ok(), "2048 bits after zeros");
        assert_eq!(
            VerifyKey::from_rsa_components(Algorithm::Rs256, &[0x7f; 256], &[1, 0, 1]).err(),
            Some(KeyError::RsaKeySize { bits: 2047 })
        );
        assert_eq!(
            VerifyKey::from_rsa_components(Algorithm::Rs256, &[], &[3]).err(),
            Some(KeyError::RsaKeySize { bits: 0 })
        );
        assert_eq!(
            VerifyKey::from_rsa_components(Algorithm::Es256, &n, &[3]).err(),
            Some(KeyError::NotForAlgorithm { alg: Algorithm::Es256 })
        );
        assert!(VerifyKey::from_point(Algorithm::Es256, &[4; 64]).is_err(), "one byte short");
        assert!(VerifyKey::from_point(Algorithm::Es256, &[2; 65]).is_err(), "not uncompressed");
        assert!(VerifyKey::from_point(Algorithm::Es256, &[4; 65]).is_err(), "not on the curve");
        assert!(VerifyKey::from_point(Algorithm::Rs256, &[4; 65]).is_err());
        assert!(VerifyKey::secret(Algorithm::Rs256, b"secret").is_err());
        assert_eq!(VerifyKey::secret(Algorithm::Hs512, b"s").map(|k| k.algorithm()), Ok(Algorithm::Hs512));
    }
}
