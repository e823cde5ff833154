//! The JWS algorithms the gateway accepts, by their JOSE names (RFC 7518 §3.1, RFC 8037 §3.1).

use std::fmt;
use std::str::FromStr;

use crate::JwtError;

/// A JWS signature algorithm.
///
/// There is deliberately no `none`: an unsigned token is not a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// HMAC with SHA-256 over a shared secret.
    Hs256,
    /// HMAC with SHA-384.
    Hs384,
    /// HMAC with SHA-512.
    Hs512,
    /// RSASSA-PKCS1-v1_5 with SHA-256, 2048- to 8192-bit keys.
    Rs256,
    /// RSASSA-PKCS1-v1_5 with SHA-384.
    Rs384,
    /// RSASSA-PKCS1-v1_5 with SHA-512.
    Rs512,
    /// RSASSA-PSS with SHA-256 (MGF1 with SHA-256, salt of 32 bytes).
    Ps256,
    /// RSASSA-PSS with SHA-384.
    Ps384,
    /// RSASSA-PSS with SHA-512.
    Ps512,
    /// ECDSA on P-256 with SHA-256; the signature is the fixed 64-byte `r || s`.
    Es256,
    /// ECDSA on P-384 with SHA-384; 96-byte signature.
    Es384,
    /// ECDSA on P-521 with SHA-512; 132-byte signature.
    Es512,
    /// EdDSA; the key decides the curve, and only Ed25519 keys are read.
    EdDsa,
}

/// What kind of key an algorithm needs: tokens are only ever checked against keys of their family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// A shared secret (`HS*`).
    Hmac,
    /// An RSA public key (`RS*`, `PS*`).
    Rsa,
    /// An EC public key on the algorithm's curve (`ES*`).
    Ec,
    /// An Ed25519 public key (`EdDSA`).
    Ed25519,
}

impl Algorithm {
    /// Every algorithm, in the order of RFC 7518's table.
    pub const ALL: [Algorithm; 13] = [
        Self::Hs256,
        Self::Hs384,
        Self::Hs512,
        Self::Rs256,
        Self::Rs384,
        Self::Rs512,
        Self::Es256,
        Self::Es384,
        Self::Es512,
        Self::Ps256,
        Self::Ps384,
        Self::Ps512,
        Self::EdDsa,
    ];

    /// The JOSE name: `"HS256"`, `"PS384"`, `"EdDSA"`, …
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hs256 => "HS256",
            Self::Hs384 => "HS384",
            Self::Hs512 => "HS512",
            Self::Rs256 => "RS256",
            Self::Rs384 => "RS384",
            Self::Rs512 => "RS512",
            Self::Ps256 => "PS256",
            Self::Ps384 => "PS384",
            Self::Ps512 => "PS512",
            Self::Es256 => "ES256",
            Self::Es384 => "ES384",
            Self::Es512 => "ES512",
            Self::EdDsa => "EdDSA",
        }
    }

    /// The kind of key that verifies it.
    pub fn family(self) -> Family {
        match self {
            Self::Hs256 | Self::Hs384 | Self::Hs512 => Family::Hmac,
            Self::Rs256 | Self::Rs384 | Self::Rs512 | Self::Ps256 | Self::Ps384 | Self::Ps512 => Family::Rsa,
            Self::Es256 | Self::Es384 | Self::Es512 => Family::Ec,
            Self::EdDsa => Family::Ed25519,
        }
    }
}

impl FromStr for Algorithm {
    type Err = JwtError;

    /// Exact, case-sensitive match, as JOSE names are (RFC 7515 §4.1.1): `"hs256"` is refused like `"none"`.
    fn from_str(s: &str) -> Result<Self, JwtError> {
        Self::ALL.into_iter().find(|a| a.as_str() == s).ok_or(JwtError::UnsupportedAlgorithm)
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_nothing_else_parses() {
        for alg in Algorithm::ALL {
            assert_eq!(alg.to_string().parse::<Algorithm>(), Ok(alg));
        }
        for name in ["none", "None", "NONE", "hs256", "EDDSA", "Ed25519", "ES256K", "RSA-OAEP", "A128GCM", "", "HS256 "]
        {
            assert_eq!(name.parse::<Algorithm>(), Err(JwtError::UnsupportedAlgorithm), "{name:?}");
        }
    }
}
