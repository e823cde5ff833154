//! Making tokens, for tests, benchmarks and fuzz seeds. The gateway itself only verifies.
//!
//! [`sign`] signs whatever header it is given, so a test can forge `alg: none`, a wrong `kid` or an `alg` that does
//! not match the key, and check that verification refuses it.

use std::fmt;

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::KeySize;
use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair as _, RsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING, RSA_PKCS1_SHA256};
use aws_lc_rs::{hmac, rand};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::Value;

use crate::{pem, Algorithm, KeyError};

/// A private key, or a shared secret, that signs tokens of one algorithm.
pub enum SigningKey {
    /// HS256 with this secret.
    Hmac(Vec<u8>),
    /// RS256 (PKCS#1 v1.5 padding, SHA-256).
    Rsa(RsaKeyPair),
    /// ES256; the key pair must have been built for `ECDSA_P256_SHA256_FIXED_SIGNING` (JWS wants `r || s`).
    Ecdsa(EcdsaKeyPair),
}

impl SigningKey {
    /// The algorithm of the signatures this key makes.
    pub fn algorithm(&self) -> Algorithm {
        match self {
            Self::Hmac(_) => Algorithm::Hs256,
            Self::Rsa(_) => Algorithm::Rs256,
            Self::Ecdsa(_) => Algorithm::Es256,
        }
    }

    /// An RS256 or ES256 private key from PEM: the first `PRIVATE KEY` (PKCS#8) block, or `RSA PRIVATE KEY`
    /// (PKCS#1) for RS256, or `EC PRIVATE KEY` (SEC 1) for ES256. Encrypted keys are refused.
    pub fn from_pem(alg: Algorithm, pem: &[u8]) -> Result<Self, KeyError> {
        let (expected, labels): (&str, &[&str]) = match alg {
            Algorithm::Hs256 => return Err(KeyError::HmacHasNoPem),
            Algorithm::Rs256 => ("PRIVATE KEY or RSA PRIVATE KEY", &["PRIVATE KEY", "RSA PRIVATE KEY"]),
            Algorithm::Es256 => ("PRIVATE KEY or EC PRIVATE KEY", &["PRIVATE KEY", "EC PRIVATE KEY"]),
        };
        let blocks = pem::parse(pem)?;
        let Some(block) = blocks.iter().find(|b| labels.contains(&b.label.as_str())) else {
            if blocks.iter().any(|b| b.label == "ENCRYPTED PRIVATE KEY") {
                return Err(KeyError::EncryptedPem);
            }
            return Err(KeyError::NoPemBlock { expected, found: blocks.first().map(|b| b.label.clone()) });
        };
        Ok(match (alg, block.label.as_str()) {
            (Algorithm::Rs256, "PRIVATE KEY") => Self::Rsa(RsaKeyPair::from_pkcs8(&block.der)?),
            (Algorithm::Rs256, _) => Self::Rsa(RsaKeyPair::from_der(&block.der)?),
            // Takes PKCS#8 and SEC 1 alike, and refuses other curves.
            _ => Self::Ecdsa(EcdsaKeyPair::from_private_key_der(&ECDSA_P256_SHA256_FIXED_SIGNING, &block.der)?),
        })
    }

    /// A fresh RS256 (2048-bit) or ES256 key and its public key as a `PUBLIC KEY` PEM block, which
    /// [`VerifyKey::from_pem`](crate::VerifyKey::from_pem) reads. HS256 has no public key, so it is
    /// [`KeyError::NoPublicKey`]: use [`SigningKey::generate_hmac`] or [`SigningKey::Hmac`].
    pub fn generate(alg: Algorithm) -> Result<(Self, String), KeyError> {
        let key = match alg {
            Algorithm::Hs256 => return Err(KeyError::NoPublicKey),
            Algorithm::Rs256 => {
                Self::Rsa(RsaKeyPair::generate(KeySize::Rsa2048).map_err(|_| crypto("key generation"))?)
            }
            Algorithm::Es256 => Self::Ecdsa(
                EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).map_err(|_| crypto("key generation"))?,
            ),
        };
        let public = key.public_key_pem()?;
        Ok((key, public))
    }

    /// A random 32-byte HS256 secret.
    pub fn generate_hmac() -> Result<Self, KeyError> {
        let secret: [u8; 32] = rand::generate(&SystemRandom::new()).map_err(|_| crypto("random"))?.expose();
        Ok(Self::Hmac(secret.to_vec()))
    }

    /// The public key as a `PUBLIC KEY` (SubjectPublicKeyInfo) PEM block; [`KeyError::NoPublicKey`] for HMAC.
    pub fn public_key_pem(&self) -> Result<String, KeyError> {
        let spki = match self {
            Self::Hmac(_) => return Err(KeyError::NoPublicKey),
            Self::Rsa(key) => key.public_key().as_der(),
            Self::Ecdsa(key) => key.public_key().as_der(),
        };
        Ok(pem::encode("PUBLIC KEY", spki.map_err(|_| crypto("public key encoding"))?.as_ref()))
    }

    fn sign(&self, message: &[u8]) -> Result<Vec<u8>, KeyError> {
        match self {
            Self::Hmac(secret) => Ok(hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, secret), message).as_ref().to_vec()),
            Self::Rsa(key) => {
                let mut signature = vec![0; key.public_modulus_len()];
                key.sign(&RSA_PKCS1_SHA256, &SystemRandom::new(), message, &mut signature)
                    .map_err(|_| crypto("RSA signing"))?;
                Ok(signature)
            }
            Self::Ecdsa(key) => {
                if key.algorithm() != &ECDSA_P256_SHA256_FIXED_SIGNING {
                    return Err(KeyError::NotP256);
                }
                let signature = key.sign(&SystemRandom::new(), message).map_err(|_| crypto("ECDSA signing"))?;
                Ok(signature.as_ref().to_vec())
            }
        }
    }
}

impl fmt::Debug for SigningKey {
    /// The algorithm only: the key is a secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey").field("algorithm", &self.algorithm()).finish_non_exhaustive()
    }
}

/// A compact token: `header` and `claims` serialized as given, signed with `key` whatever `header` says.
pub fn sign(header: &Value, claims: &Value, key: &SigningKey) -> Result<String, KeyError> {
    let signing_input = format!("{}.{}", encode_json(header)?, encode_json(claims)?);
    let signature = key.sign(signing_input.as_bytes())?;
    Ok(format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature)))
}

fn encode_json(value: &Value) -> Result<String, KeyError> {
    let json = serde_json::to_vec(value).map_err(|_| crypto("JSON encoding"))?;
    Ok(URL_SAFE_NO_PAD.encode(json))
}

fn crypto(what: &'static str) -> KeyError {
    KeyError::Crypto(what)
}
