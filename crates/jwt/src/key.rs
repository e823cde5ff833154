//! Config load: the keys that verify tokens, parsed and checked once so a bad key fails the config, not a request.

use std::fmt;

use aws_lc_rs::signature::{ParsedPublicKey, RsaParameters, ECDSA_P256_SHA256_FIXED, RSA_PKCS1_2048_8192_SHA256};
use aws_lc_rs::{hmac, rsa};

use crate::{der, pem, Algorithm, JwtError, KeyError};

/// A key that verifies tokens of exactly one algorithm. `Send + Sync`: build it at config load and share it in the
/// config snapshot rather than cloning it per request.
#[derive(Clone)]
pub struct VerifyKey {
    inner: Inner,
}

#[derive(Clone)]
enum Inner {
    // Boxed: aws-lc's HMAC key holds its whole context (over a kilobyte); the public keys are pointers.
    Hmac(Box<hmac::Key>),
    Rsa(ParsedPublicKey),
    Ecdsa(ParsedPublicKey),
}

impl VerifyKey {
    /// An HS256 key from a shared secret.
    ///
    /// Refuses an empty secret and a secret that is a PEM document (a public key used as an HMAC secret is how
    /// algorithm-confusion attacks forge tokens). Whether a short secret (under 32 bytes) deserves a warning is the
    /// caller's call.
    pub fn hmac(secret: &[u8]) -> Result<Self, KeyError> {
        if secret.is_empty() {
            return Err(KeyError::EmptySecret);
        }
        if secret.trim_ascii_start().starts_with(b"-----BEGIN ") {
            return Err(KeyError::SecretIsPem);
        }
        Ok(Self { inner: Inner::Hmac(Box::new(hmac::Key::new(hmac::HMAC_SHA256, secret))) })
    }

    /// An RS256 or ES256 key from PEM text.
    ///
    /// RS256 takes the first `PUBLIC KEY` (SubjectPublicKeyInfo), `RSA PUBLIC KEY` (PKCS#1) or `CERTIFICATE` block;
    /// ES256 the first `PUBLIC KEY` or `CERTIFICATE` block, and the key must be on P-256. From a certificate only the
    /// public key is taken: its validity, issuer and extensions are not checked. RSA keys must have 2048 to 8192 bits.
    pub fn from_pem(alg: Algorithm, pem: &[u8]) -> Result<Self, KeyError> {
        let (expected, labels): (&str, &[&str]) = match alg {
            Algorithm::Hs256 => return Err(KeyError::HmacHasNoPem),
            Algorithm::Rs256 => {
                ("PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE", &["PUBLIC KEY", "RSA PUBLIC KEY", "CERTIFICATE"])
            }
            Algorithm::Es256 => ("PUBLIC KEY or CERTIFICATE", &["PUBLIC KEY", "CERTIFICATE"]),
        };
        let blocks = pem::parse(pem)?;
        let Some(block) = blocks.iter().find(|b| labels.contains(&b.label.as_str())) else {
            return Err(KeyError::NoPemBlock { expected, found: blocks.first().map(|b| b.label.clone()) });
        };
        let der = match block.label.as_str() {
            "CERTIFICATE" => der::certificate_spki(&block.der)?,
            _ => &block.der,
        };
        match (alg, block.label.as_str()) {
            (Algorithm::Rs256, "RSA PUBLIC KEY") => Self::rsa_pkcs1(der),
            (Algorithm::Rs256, _) => Self::rsa_spki(der),
            _ => Self::p256_spki(der),
        }
    }

    /// The algorithm this key verifies; tokens with another `alg` are refused.
    pub fn algorithm(&self) -> Algorithm {
        match self.inner {
            Inner::Hmac(_) => Algorithm::Hs256,
            Inner::Rsa(_) => Algorithm::Rs256,
            Inner::Ecdsa(_) => Algorithm::Es256,
        }
    }

    fn rsa_spki(spki: &[u8]) -> Result<Self, KeyError> {
        match der::spki_key_type(spki)? {
            der::KeyType::Rsa => Self::rsa(spki),
            _ => Err(KeyError::NotRsa),
        }
    }

    fn rsa_pkcs1(pkcs1: &[u8]) -> Result<Self, KeyError> {
        der::check_pkcs1_public_key(pkcs1)?;
        Self::rsa(pkcs1)
    }

    /// aws-lc-rs takes SPKI and PKCS#1 alike; the modulus size is checked here because it would otherwise only be
    /// checked, and fail, on every verification.
    fn rsa(der: &[u8]) -> Result<Self, KeyError> {
        let public = rsa::PublicKey::from_der(der)?;
        let bits = RsaParameters::public_modulus_len(public.as_ref()).map_err(|_| KeyError::BadDer("RSA modulus"))?;
        if !(RSA_PKCS1_2048_8192_SHA256.min_modulus_len()..=RSA_PKCS1_2048_8192_SHA256.max_modulus_len())
            .contains(&bits)
        {
            return Err(KeyError::RsaKeySize { bits });
        }
        Ok(Self { inner: Inner::Rsa(ParsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, der)?) })
    }

    fn p256_spki(spki: &[u8]) -> Result<Self, KeyError> {
        if der::spki_key_type(spki)? != der::KeyType::P256 {
            return Err(KeyError::NotP256);
        }
        // aws-lc checks that the point is on the curve.
        Ok(Self { inner: Inner::Ecdsa(ParsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, spki)?) })
    }

    pub(crate) fn verify_signature(&self, message: &[u8], sig: &[u8]) -> Result<(), JwtError> {
        let verified = match &self.inner {
            Inner::Hmac(key) => hmac::verify(key, message, sig),
            Inner::Rsa(key) | Inner::Ecdsa(key) => key.verify_sig(message, sig),
        };
        verified.map_err(|_| JwtError::BadSignature)
    }
}

impl fmt::Debug for VerifyKey {
    /// The algorithm only: an HMAC key is a secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerifyKey").field("algorithm", &self.algorithm()).finish_non_exhaustive()
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
}
