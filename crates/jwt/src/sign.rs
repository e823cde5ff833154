//! Making tokens, for tests, benchmarks and fuzz seeds. The gateway itself only verifies.
//!
//! [`sign`] signs whatever header it is given, so a test can forge `alg: none`, a wrong `kid` or an `alg` that does
//! not match the key, and check that verification refuses it.

use std::fmt;

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::KeySize;
use aws_lc_rs::signature::{
    EcdsaKeyPair, EcdsaSigningAlgorithm, Ed25519KeyPair, KeyPair as _, RsaEncoding, RsaKeyPair,
    ECDSA_P256_SHA256_FIXED_SIGNING, ECDSA_P384_SHA384_FIXED_SIGNING, ECDSA_P521_SHA512_FIXED_SIGNING,
    RSA_PKCS1_SHA256, RSA_PKCS1_SHA384, RSA_PKCS1_SHA512, RSA_PSS_SHA256, RSA_PSS_SHA384, RSA_PSS_SHA512,
};
use aws_lc_rs::{hmac, rand};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{json, Value};

use crate::algorithm::Family;
use crate::{pem, Algorithm, KeyError};

/// A private key, or a shared secret, that signs tokens of one algorithm.
pub enum SigningKey {
    /// HS256 with this secret.
    Hmac(Vec<u8>),
    /// RS256 (PKCS#1 v1.5 padding, SHA-256).
    Rsa(RsaKeyPair),
    /// ES256, ES384 or ES512, by the curve the key pair was built for (`ECDSA_P256_SHA256_FIXED_SIGNING`,
    /// `ECDSA_P384_SHA384_FIXED_SIGNING`, `ECDSA_P521_SHA512_FIXED_SIGNING`: JWS wants `r || s`).
    Ecdsa(EcdsaKeyPair),
    /// HS256, HS384 or HS512 with this secret.
    Secret(Algorithm, Vec<u8>),
    /// Any `RS*` or `PS*` algorithm.
    RsaWith(Algorithm, RsaKeyPair),
    /// EdDSA on Ed25519.
    Ed25519(Ed25519KeyPair),
}

/// The fixed-size ECDSA signing algorithm of each `ES*`.
fn ecdsa_signing(alg: Algorithm) -> Option<&'static EcdsaSigningAlgorithm> {
    match alg {
        Algorithm::Es256 => Some(&ECDSA_P256_SHA256_FIXED_SIGNING),
        Algorithm::Es384 => Some(&ECDSA_P384_SHA384_FIXED_SIGNING),
        Algorithm::Es512 => Some(&ECDSA_P521_SHA512_FIXED_SIGNING),
        _ => None,
    }
}

impl SigningKey {
    /// The algorithm of the signatures this key makes (`None` for an ECDSA key pair built for DER signatures, which
    /// JWS cannot carry).
    pub fn algorithm(&self) -> Algorithm {
        match self {
            Self::Hmac(_) => Algorithm::Hs256,
            Self::Rsa(_) => Algorithm::Rs256,
            Self::Ecdsa(key) => [Algorithm::Es384, Algorithm::Es512]
                .into_iter()
                .find(|a| ecdsa_signing(*a).is_some_and(|s| key.algorithm() == s))
                .unwrap_or(Algorithm::Es256),
            Self::Secret(alg, _) | Self::RsaWith(alg, _) => *alg,
            Self::Ed25519(_) => Algorithm::EdDsa,
        }
    }

    /// A private key for `alg` from PEM: the first `PRIVATE KEY` (PKCS#8) block, or `RSA PRIVATE KEY` (PKCS#1) for
    /// `RS*` and `PS*`, or `EC PRIVATE KEY` (SEC 1) for `ES*`. Encrypted keys are refused.
    pub fn from_pem(alg: Algorithm, pem: &[u8]) -> Result<Self, KeyError> {
        let (expected, labels): (&str, &[&str]) = match alg.family() {
            Family::Hmac => return Err(KeyError::HmacHasNoPem),
            Family::Rsa => ("PRIVATE KEY or RSA PRIVATE KEY", &["PRIVATE KEY", "RSA PRIVATE KEY"]),
            Family::Ec => ("PRIVATE KEY or EC PRIVATE KEY", &["PRIVATE KEY", "EC PRIVATE KEY"]),
            Family::Ed25519 => ("PRIVATE KEY", &["PRIVATE KEY"]),
        };
        let blocks = pem::parse(pem)?;
        let Some(block) = blocks.iter().find(|b| labels.contains(&b.label.as_str())) else {
            if blocks.iter().any(|b| b.label == "ENCRYPTED PRIVATE KEY") {
                return Err(KeyError::EncryptedPem);
            }
            return Err(KeyError::NoPemBlock { expected, found: blocks.first().map(|b| b.label.clone()) });
        };
        let rsa = |key| match alg {
            Algorithm::Rs256 => Self::Rsa(key),
            _ => Self::RsaWith(alg, key),
        };
        Ok(match (alg.family(), block.label.as_str()) {
            (Family::Rsa, "PRIVATE KEY") => rsa(RsaKeyPair::from_pkcs8(&block.der)?),
            (Family::Rsa, _) => rsa(RsaKeyPair::from_der(&block.der)?),
            (Family::Ed25519, _) => Self::Ed25519(Ed25519KeyPair::from_pkcs8_maybe_unchecked(&block.der)?),
            // Takes PKCS#8 and SEC 1 alike, and refuses other curves.
            _ => Self::Ecdsa(EcdsaKeyPair::from_private_key_der(
                ecdsa_signing(alg).ok_or(KeyError::NotForAlgorithm { alg })?,
                &block.der,
            )?),
        })
    }

    /// A fresh key for `alg` (RSA keys of 2048 bits) and its public key as a `PUBLIC KEY` PEM block, which
    /// [`VerifyKey::from_pem`](crate::VerifyKey::from_pem) reads. `HS*` have no public key, so they are
    /// [`KeyError::NoPublicKey`]: use [`SigningKey::generate_hmac`] or [`SigningKey::Secret`].
    pub fn generate(alg: Algorithm) -> Result<(Self, String), KeyError> {
        let failed = |_| crypto("key generation");
        let key = match alg.family() {
            Family::Hmac => return Err(KeyError::NoPublicKey),
            Family::Rsa => {
                let key = RsaKeyPair::generate(KeySize::Rsa2048).map_err(failed)?;
                match alg {
                    Algorithm::Rs256 => Self::Rsa(key),
                    _ => Self::RsaWith(alg, key),
                }
            }
            Family::Ec => Self::Ecdsa(
                EcdsaKeyPair::generate(ecdsa_signing(alg).ok_or(KeyError::NotForAlgorithm { alg })?).map_err(failed)?,
            ),
            Family::Ed25519 => Self::Ed25519(Ed25519KeyPair::generate().map_err(failed)?),
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
            Self::Hmac(_) | Self::Secret(..) => return Err(KeyError::NoPublicKey),
            Self::Rsa(key) | Self::RsaWith(_, key) => key.public_key().as_der(),
            Self::Ecdsa(key) => key.public_key().as_der(),
            Self::Ed25519(key) => key.public_key().as_der(),
        };
        Ok(pem::encode("PUBLIC KEY", spki.map_err(|_| crypto("public key encoding"))?.as_ref()))
    }

    /// The public key as a JWK (RFC 7517) with `kid`, `alg` and `use: sig`, as an OpenID provider publishes it;
    /// [`KeyError::NoPublicKey`] for HMAC.
    pub fn public_jwk(&self, kid: &str) -> Result<Value, KeyError> {
        let b64 = |bytes: &[u8]| URL_SAFE_NO_PAD.encode(bytes);
        let alg = self.algorithm().as_str();
        Ok(match self {
            Self::Hmac(_) | Self::Secret(..) => return Err(KeyError::NoPublicKey),
            Self::Rsa(key) | Self::RsaWith(_, key) => {
                let (n, e) = crate::der::rsa_components(key.public_key().as_ref())?;
                json!({"kty": "RSA", "kid": kid, "alg": alg, "use": "sig", "n": b64(n), "e": b64(e)})
            }
            Self::Ecdsa(key) => {
                let point = key.public_key().as_ref();
                let (x, y) = point.get(1..).map(|xy| xy.split_at(xy.len() / 2)).ok_or(crypto("public key"))?;
                let crv = match self.algorithm() {
                    Algorithm::Es384 => "P-384",
                    Algorithm::Es512 => "P-521",
                    _ => "P-256",
                };
                json!({"kty": "EC", "kid": kid, "alg": alg, "use": "sig", "crv": crv, "x": b64(x), "y": b64(y)})
            }
            Self::Ed25519(key) => {
                json!({"kty": "OKP", "kid": kid, "alg": alg, "use": "sig", "crv": "Ed25519", "x": b64(key.public_key().as_ref())})
            }
        })
    }

    fn sign(&self, message: &[u8]) -> Result<Vec<u8>, KeyError> {
        match self {
            Self::Hmac(secret) => Ok(hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, secret), message).as_ref().to_vec()),
            Self::Secret(alg, secret) => {
                let hash = match alg {
                    Algorithm::Hs384 => hmac::HMAC_SHA384,
                    Algorithm::Hs512 => hmac::HMAC_SHA512,
                    _ => hmac::HMAC_SHA256,
                };
                Ok(hmac::sign(&hmac::Key::new(hash, secret), message).as_ref().to_vec())
            }
            Self::Rsa(key) | Self::RsaWith(_, key) => {
                let padding: &'static dyn RsaEncoding = match self.algorithm() {
                    Algorithm::Rs384 => &RSA_PKCS1_SHA384,
                    Algorithm::Rs512 => &RSA_PKCS1_SHA512,
                    Algorithm::Ps256 => &RSA_PSS_SHA256,
                    Algorithm::Ps384 => &RSA_PSS_SHA384,
                    Algorithm::Ps512 => &RSA_PSS_SHA512,
                    _ => &RSA_PKCS1_SHA256,
                };
                let mut signature = vec![0; key.public_modulus_len()];
                key.sign(padding, &SystemRandom::new(), message, &mut signature).map_err(|_| crypto("RSA signing"))?;
                Ok(signature)
            }
            Self::Ecdsa(key) => {
                if ecdsa_signing(self.algorithm()).is_none_or(|s| key.algorithm() != s) {
                    return Err(KeyError::NotP256);
                }
                let signature = key.sign(&SystemRandom::new(), message).map_err(|_| crypto("ECDSA signing"))?;
                Ok(signature.as_ref().to_vec())
            }
            Self::Ed25519(key) => Ok(key.sign(message).as_ref().to_vec()),
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
