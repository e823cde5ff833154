//! The three JWS algorithms the gateway accepts, by their JOSE names.

use std::fmt;
use std::str::FromStr;

use crate::JwtError;

/// A JWS signature algorithm (RFC 7518 §3.1 names).
///
/// There is deliberately no `none`: an unsigned token is not a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// HMAC with SHA-256 over a shared secret.
    Hs256,
    /// RSASSA-PKCS1-v1_5 with SHA-256, 2048- to 8192-bit keys.
    Rs256,
    /// ECDSA on P-256 with SHA-256; the signature is the fixed 64-byte `r || s`.
    Es256,
}

impl Algorithm {
    /// The JOSE name: `"HS256"`, `"RS256"` or `"ES256"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hs256 => "HS256",
            Self::Rs256 => "RS256",
            Self::Es256 => "ES256",
        }
    }
}

impl FromStr for Algorithm {
    type Err = JwtError;

    /// Exact, case-sensitive match, as JOSE names are (RFC 7515 §4.1.1): `"hs256"` is refused like `"none"`.
    fn from_str(s: &str) -> Result<Self, JwtError> {
        match s {
            "HS256" => Ok(Self::Hs256),
            "RS256" => Ok(Self::Rs256),
            "ES256" => Ok(Self::Es256),
            _ => Err(JwtError::UnsupportedAlgorithm),
        }
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
        for alg in [Algorithm::Hs256, Algorithm::Rs256, Algorithm::Es256] {
            assert_eq!(alg.to_string().parse::<Algorithm>(), Ok(alg));
        }
        for name in ["none", "None", "NONE", "hs256", "HS384", "RS512", "PS256", "EdDSA", "", "HS256 "] {
            assert_eq!(name.parse::<Algorithm>(), Err(JwtError::UnsupportedAlgorithm), "{name:?}");
        }
    }
}
