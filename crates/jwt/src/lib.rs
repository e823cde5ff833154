//! Admit stage JWT check: parse a compact JWS, verify it (HS*, RS*, PS*, ES256/384/512, EdDSA) with aws-lc-rs, check
//! exp/nbf/iss/aud; read the key sets identity providers publish ([`jwk`]). No I/O.
//!
//! ```text
//! config load:  VerifyKey::secret / VerifyKey::from_pem ─► VerifyKey (one algorithm, parsed once)
//! key set:      jwk::KeySet::parse(JWKS document)       ─► VerifyKeys by kid
//! per request:  decode(token) ─► Token (unverified) ─► kid() picks a key ─► verify(&key) ─► claims().validate(now, &v)
//! ```
//!
//! The key, never the token, decides the algorithm: a token whose `alg` differs from the key's is refused before
//! any cryptography. Nothing here panics on any input.
//!
//! ```
//! use gatehouse_jwt::{decode, sign::{sign, SigningKey}, Validation, VerifyKey};
//! use serde_json::json;
//!
//! let key = VerifyKey::hmac(b"a shared secret of at least 32 bytes!")?;
//! let token = sign(
//!     &json!({"alg": "HS256", "typ": "JWT"}),
//!     &json!({"sub": "app-1", "exp": 2_000_000_000}),
//!     &SigningKey::Hmac(b"a shared secret of at least 32 bytes!".to_vec()),
//! )?;
//!
//! let token = decode(&token)?;
//! token.verify(&key)?;
//! token.claims().validate(1_700_000_000, &Validation::default())?;
//! assert_eq!(token.claims().get_str("sub"), Some("app-1"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]
#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::unreachable,
        clippy::todo,
        clippy::unimplemented
    )
)]

mod algorithm;
mod claims;
mod der;
mod error;
mod json;
pub mod jwk;
mod key;
mod pem;
pub mod sign;
mod token;

#[cfg(test)]
mod tests;

pub use algorithm::{Algorithm, Family};
pub use claims::{Claims, Validation};
pub use error::{JwtError, KeyError};
pub use key::VerifyKey;
pub use token::{decode, Token, MAX_TOKEN_LEN};
