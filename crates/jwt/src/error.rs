//! Why a token is refused ([`JwtError`], per request) and why a key is refused ([`KeyError`], at config load).

use std::fmt;

/// Why a token was refused.
///
/// `Display` gives a short reason that is safe to log: it never repeats bytes of the token. None of these should
/// reach the client beyond a generic 401.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JwtError {
    /// The token is not a well-formed compact JWS with JSON header and claims; the reason names the rule broken.
    Malformed(&'static str),
    /// The header's `alg` is `none` or not a JWS algorithm the gateway knows.
    UnsupportedAlgorithm,
    /// The header's `alg` is not the algorithm of the key the token was checked against.
    AlgorithmMismatch,
    /// The signature does not verify with the key.
    BadSignature,
    /// `exp` plus the leeway is in the past.
    Expired,
    /// `nbf` minus the leeway is in the future.
    NotYetValid,
    /// `iss` is missing or differs from the expected issuer.
    WrongIssuer,
    /// No `aud` entry equals the expected audience.
    WrongAudience,
    /// `exp` is required and absent.
    MissingExpiry,
}

impl fmt::Display for JwtError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Malformed(reason) => write!(f, "malformed token: {reason}"),
            Self::UnsupportedAlgorithm => f.write_str("unsupported token algorithm"),
            Self::AlgorithmMismatch => f.write_str("token algorithm does not match the key"),
            Self::BadSignature => f.write_str("bad token signature"),
            Self::Expired => f.write_str("token expired"),
            Self::NotYetValid => f.write_str("token not yet valid"),
            Self::WrongIssuer => f.write_str("wrong token issuer"),
            Self::WrongAudience => f.write_str("wrong token audience"),
            Self::MissingExpiry => f.write_str("token has no exp claim"),
        }
    }
}

impl std::error::Error for JwtError {}

/// Why key material was refused when building a [`VerifyKey`](crate::VerifyKey) or
/// [`SigningKey`](crate::sign::SigningKey).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyError {
    /// An HMAC secret of zero bytes.
    EmptySecret,
    /// An HMAC secret that is a PEM document: a public key used as a shared secret is the algorithm-confusion attack.
    SecretIsPem,
    /// HS256 keys are shared secrets; there is no PEM form.
    HmacHasNoPem,
    /// The PEM text has no block with an accepted label.
    NoPemBlock {
        /// The labels that would have been accepted, for the message.
        expected: &'static str,
        /// The label of the first block found, if any (it comes from the operator's file, not from a client).
        found: Option<String>,
    },
    /// The PEM text is broken; the reason names the rule broken.
    BadPem(&'static str),
    /// The PEM block is encrypted; keys must be given unencrypted.
    EncryptedPem,
    /// The DER inside the PEM is not the expected structure.
    BadDer(&'static str),
    /// The key is not an RSA key (RS256).
    NotRsa,
    /// The key is not an EC key on curve P-256 (ES256).
    NotP256,
    /// The key is not on the algorithm's curve (P-256, P-384, P-521 or Ed25519).
    WrongCurve {
        /// The algorithm whose curve was expected.
        alg: crate::Algorithm,
    },
    /// The key material is of another kind than the algorithm needs (a secret for `RS256`, a curve point for `HS256`).
    NotForAlgorithm {
        /// The algorithm asked for.
        alg: crate::Algorithm,
    },
    /// The RSA modulus is outside 2048..=8192 bits.
    RsaKeySize {
        /// The modulus length found.
        bits: u32,
    },
    /// aws-lc-rs rejected the key; the reason is its own.
    Rejected(&'static str),
    /// The signing key has no public half to export (HMAC).
    NoPublicKey,
    /// A cryptographic operation failed (key generation, signing, encoding).
    Crypto(&'static str),
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::EmptySecret => f.write_str("HMAC secret is empty"),
            Self::SecretIsPem => f.write_str("HMAC secret is a PEM document, not a shared secret"),
            Self::HmacHasNoPem => f.write_str("HS256, HS384 and HS512 keys are shared secrets, not PEM"),
            Self::NoPemBlock { expected, found: None } => write!(f, "PEM has no {expected} block"),
            Self::NoPemBlock { expected, found: Some(label) } => {
                write!(f, "PEM has no {expected} block (found {label})")
            }
            Self::BadPem(reason) => write!(f, "malformed PEM: {reason}"),
            Self::EncryptedPem => f.write_str("encrypted PEM keys are not supported"),
            Self::BadDer(reason) => write!(f, "malformed key: {reason}"),
            Self::NotRsa => f.write_str("not an RSA key"),
            Self::NotP256 => f.write_str("not a P-256 key"),
            Self::WrongCurve { alg } => write!(f, "not a key on the curve of {alg}"),
            Self::NotForAlgorithm { alg } => write!(f, "this kind of key cannot verify {alg}"),
            Self::RsaKeySize { bits } => write!(f, "RSA key is {bits} bits; 2048 to 8192 required"),
            Self::Rejected(reason) => write!(f, "key rejected: {reason}"),
            Self::NoPublicKey => f.write_str("HMAC keys have no public key"),
            Self::Crypto(what) => write!(f, "{what} failed"),
        }
    }
}

impl std::error::Error for KeyError {}

impl From<aws_lc_rs::error::KeyRejected> for KeyError {
    fn from(e: aws_lc_rs::error::KeyRejected) -> Self {
        Self::Rejected(e.description_())
    }
}
