//! Admit stage, first step: split a compact JWS from the request into header, claims and signature, strictly.
//!
//! Nothing here trusts the token; [`Token::verify`] decides whether it came from the key holder.

use std::fmt;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{Map, Value};

use crate::{json, Algorithm, Claims, JwtError, VerifyKey};

/// The longest token [`decode`] reads. Real tokens are well under 2 KiB; the cap bounds the work a client can cause.
pub const MAX_TOKEN_LEN: usize = 8 * 1024;

/// A token split and parsed, its signature NOT yet verified.
///
/// Everything it returns is attacker-controlled until [`Token::verify`] has succeeded.
pub struct Token<'a> {
    /// `header.payload` exactly as received: the signature covers these bytes, not a re-encoding.
    signing_input: &'a str,
    signature: Vec<u8>,
    algorithm: Algorithm,
    kid: Option<String>,
    claims: Claims,
}

/// Splits and parses a compact JWS (`header.payload.signature`, each unpadded base64url).
///
/// Refuses, as [`JwtError::Malformed`]: tokens over [`MAX_TOKEN_LEN`], anything but three segments, padding or
/// characters outside the base64url alphabet, a header or payload that is not one JSON object with distinct member
/// names, a `crit` header, a `typ` other than `JWT` or `at+jwt`, a non-string `kid`, wrongly typed registered claims. Refuses
/// `alg: none` and every name that is not an [`Algorithm`] as [`JwtError::UnsupportedAlgorithm`].
pub fn decode(token: &str) -> Result<Token<'_>, JwtError> {
    if token.len() > MAX_TOKEN_LEN {
        return Err(JwtError::Malformed("too long"));
    }
    let mut segments = token.split('.');
    let (Some(header_b64), Some(payload_b64), Some(signature_b64), None) =
        (segments.next(), segments.next(), segments.next(), segments.next())
    else {
        return Err(JwtError::Malformed("not three segments"));
    };
    let signing_input =
        token.get(..header_b64.len() + 1 + payload_b64.len()).ok_or(JwtError::Malformed("not three segments"))?;

    let header = json::object(&base64url(header_b64)?).ok_or(JwtError::Malformed("header is not a JSON object"))?;
    let (algorithm, kid) = parse_header(&header)?;
    let payload = json::object(&base64url(payload_b64)?).ok_or(JwtError::Malformed("payload is not a JSON object"))?;
    let claims = Claims::from_object(payload)?;
    let signature = base64url(signature_b64)?;

    Ok(Token { signing_input, signature, algorithm, kid, claims })
}

impl Token<'_> {
    /// The header's `alg`.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The header's `kid`, to pick the key; unverified, so a wrong `kid` must only ever select a key, never skip one.
    pub fn kid(&self) -> Option<&str> {
        self.kid.as_deref()
    }

    /// The claims, unverified until [`Token::verify`] succeeds.
    pub fn claims(&self) -> &Claims {
        &self.claims
    }

    /// Checks the signature over `header.payload` as received with `key`.
    ///
    /// The key's algorithm must be the header's `alg` ([`JwtError::AlgorithmMismatch`] otherwise): the key decides
    /// how to verify, never the token, so an RSA public key can never be used as an HMAC secret.
    pub fn verify(&self, key: &VerifyKey) -> Result<(), JwtError> {
        if key.algorithm() != self.algorithm {
            return Err(JwtError::AlgorithmMismatch);
        }
        key.verify_signature(self.signing_input.as_bytes(), &self.signature)
    }
}

impl fmt::Debug for Token<'_> {
    /// Header fields and claims; never the signature or the raw token.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("algorithm", &self.algorithm)
            .field("kid", &self.kid)
            .field("claims", &self.claims)
            .finish_non_exhaustive()
    }
}

/// Unpadded base64url, canonical: `=`, `+`, `/`, whitespace and non-zero trailing bits are all refused.
fn base64url(segment: &str) -> Result<Vec<u8>, JwtError> {
    URL_SAFE_NO_PAD.decode(segment).map_err(|_| JwtError::Malformed("segment is not unpadded base64url"))
}

fn parse_header(header: &Map<String, Value>) -> Result<(Algorithm, Option<String>), JwtError> {
    let algorithm = match header.get("alg") {
        Some(Value::String(alg)) => alg.parse::<Algorithm>()?,
        Some(_) => return Err(JwtError::Malformed("alg is not a string")),
        None => return Err(JwtError::Malformed("header has no alg")),
    };
    // Critical extensions (RFC 7515 §4.1.11) change how the token must be read; none is understood here.
    if header.contains_key("crit") {
        return Err(JwtError::Malformed("crit header is not supported"));
    }
    match header.get("typ") {
        None => {}
        Some(Value::String(typ)) if is_jwt_type(typ) => {}
        Some(_) => return Err(JwtError::Malformed("typ is not JWT")),
    }
    let kid = match header.get("kid") {
        None => None,
        Some(Value::String(kid)) => Some(kid.clone()),
        Some(_) => return Err(JwtError::Malformed("kid is not a string")),
    };
    Ok((algorithm, kid))
}

/// `JWT`, or `at+jwt` (RFC 9068 access tokens), with or without the `application/` prefix.
fn is_jwt_type(typ: &str) -> bool {
    let short = match typ.get(..12) {
        Some(prefix) if prefix.eq_ignore_ascii_case("application/") => &typ[12..],
        _ => typ,
    };
    short.eq_ignore_ascii_case("JWT") || short.eq_ignore_ascii_case("at+jwt")
}
