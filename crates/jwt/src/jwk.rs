//! Key sets published by identity providers: a JWK Set (RFC 7517 §5) read into [`VerifyKey`]s. No I/O.
//!
//! Only signature keys of the asymmetric families are taken (`RSA`, `EC` on P-256/P-384/P-521, `OKP` on Ed25519).
//! A published `oct` key is never used: a secret anyone can download would let anyone sign. A key's `alg`, when given,
//! must fit its type; without one, an RSA key verifies the six `RS*`/`PS*` algorithms and an EC or Ed25519 key the one
//! algorithm of its curve. Either way the key, never the token, decides what verifies it.

use std::fmt;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{Map, Value};

use crate::algorithm::Family;
use crate::{Algorithm, VerifyKey};

/// The most keys read from one set; real providers publish two to five.
pub const MAX_KEYS: usize = 64;

/// A key set, parsed.
#[derive(Clone, Default)]
pub struct KeySet {
    keys: Vec<(Option<String>, VerifyKey)>,
    skipped: Vec<Skipped>,
}

/// A member of the set that is not used, and why (for the log: a provider publishing encryption keys beside its
/// signing keys is normal, a broken key is worth a warning).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The key's `kid`, if it has a string one.
    pub kid: Option<String>,
    /// Why it is not used.
    pub reason: &'static str,
}

/// Why a whole document is not a key set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JwkSetError {
    /// Not a JSON object.
    NotJson,
    /// No `keys` array.
    NoKeys,
    /// More than [`MAX_KEYS`] members.
    TooManyKeys,
}

impl fmt::Display for JwkSetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NotJson => "not a JSON object",
            Self::NoKeys => "no \"keys\" array",
            Self::TooManyKeys => "more than 64 keys",
        })
    }
}

impl std::error::Error for JwkSetError {}

impl KeySet {
    /// Reads a JWK Set document. Members that cannot be used are listed in [`KeySet::skipped`], not errors: one odd key
    /// must not cost the provider's other keys.
    pub fn parse(document: &[u8]) -> Result<Self, JwkSetError> {
        let Ok(Value::Object(mut set)) = serde_json::from_slice::<Value>(document) else {
            return Err(JwkSetError::NotJson);
        };
        let Some(Value::Array(members)) = set.remove("keys") else { return Err(JwkSetError::NoKeys) };
        if members.len() > MAX_KEYS {
            return Err(JwkSetError::TooManyKeys);
        }
        let mut out = KeySet::default();
        for member in &members {
            let kid = match member.get("kid") {
                None => None,
                Some(Value::String(kid)) => Some(kid.clone()),
                Some(_) => {
                    out.skipped.push(Skipped { kid: None, reason: "kid is not a string" });
                    continue;
                }
            };
            let Value::Object(jwk) = member else {
                out.skipped.push(Skipped { kid, reason: "not a JSON object" });
                continue;
            };
            match keys_of(jwk) {
                Ok(keys) => out.keys.extend(keys.into_iter().map(|k| (kid.clone(), k))),
                Err(reason) => out.skipped.push(Skipped { kid, reason }),
            }
        }
        Ok(out)
    }

    /// The keys that may verify a token with this `kid` and `alg`: those with that `kid` when the token names one
    /// (and keys published without a `kid`, which RFC 7517 lets match any), every key of the algorithm when it does
    /// not.
    pub fn find<'a>(&'a self, kid: Option<&'a str>, alg: Algorithm) -> impl Iterator<Item = &'a VerifyKey> + 'a {
        self.keys
            .iter()
            .filter(move |(k, key)| key.algorithm() == alg && (kid.is_none() || k.is_none() || k.as_deref() == kid))
            .map(|(_, key)| key)
    }

    /// Whether some key has this `kid`, whatever its algorithm.
    pub fn has_kid(&self, kid: &str) -> bool {
        self.keys.iter().any(|(k, _)| k.as_deref() == Some(kid))
    }

    /// How many distinct keys are usable (an RSA key without `alg` counts once).
    pub fn len(&self) -> usize {
        let mut kids: Vec<Option<&str>> = self.keys.iter().map(|(k, _)| k.as_deref()).collect();
        kids.dedup();
        kids.len()
    }

    /// Whether no key is usable.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The members not used, and why.
    pub fn skipped(&self) -> &[Skipped] {
        &self.skipped
    }
}

impl fmt::Debug for KeySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeySet")
            .field("keys", &self.keys.iter().map(|(kid, k)| (kid, k.algorithm())).collect::<Vec<_>>())
            .field("skipped", &self.skipped)
            .finish()
    }
}

const RSA_FAMILY: [Algorithm; 6] =
    [Algorithm::Rs256, Algorithm::Rs384, Algorithm::Rs512, Algorithm::Ps256, Algorithm::Ps384, Algorithm::Ps512];

/// The verify keys of one JWK: one, or six for an RSA key without `alg`.
fn keys_of(jwk: &Map<String, Value>) -> Result<Vec<VerifyKey>, &'static str> {
    match jwk.get("use") {
        None => {}
        Some(Value::String(u)) if u == "sig" => {}
        Some(_) => return Err("not a signature key (use)"),
    }
    match jwk.get("key_ops") {
        None => {}
        Some(Value::Array(ops)) if ops.iter().any(|op| op.as_str() == Some("verify")) => {}
        Some(_) => return Err("not a verification key (key_ops)"),
    }
    let alg = match jwk.get("alg") {
        None => None,
        Some(Value::String(name)) => Some(name.parse::<Algorithm>().map_err(|_| "alg is not a JWS algorithm")?),
        Some(_) => return Err("alg is not a string"),
    };
    let text = |name| match jwk.get(name) {
        Some(Value::String(s)) => Ok(s.as_str()),
        _ => Err("a member of the key is missing or not a string"),
    };
    let bytes = |name| URL_SAFE_NO_PAD.decode(text(name)?).map_err(|_| "a member of the key is not base64url");
    match text("kty")? {
        "RSA" => {
            let algs = match alg {
                None => &RSA_FAMILY[..],
                Some(a) if a.family() == Family::Rsa => {
                    std::slice::from_ref(RSA_FAMILY.iter().find(|r| **r == a).ok_or("alg does not fit the key")?)
                }
                Some(_) => return Err("alg does not fit the key"),
            };
            let (n, e) = (bytes("n")?, bytes("e")?);
            algs.iter()
                .map(|a| VerifyKey::from_rsa_components(*a, &n, &e).map_err(|_| "RSA key refused (2048 to 8192 bits)"))
                .collect()
        }
        "EC" => {
            let curve_alg = match text("crv")? {
                "P-256" => Algorithm::Es256,
                "P-384" => Algorithm::Es384,
                "P-521" => Algorithm::Es512,
                _ => return Err("curve not supported"),
            };
            if alg.is_some_and(|a| a != curve_alg) {
                return Err("alg does not fit the key");
            }
            let (x, y) = (bytes("x")?, bytes("y")?);
            // Each coordinate at the curve's full size (RFC 7518 §6.2.1.2), not only their sum.
            let size = match curve_alg {
                Algorithm::Es256 => 32,
                Algorithm::Es384 => 48,
                _ => 66,
            };
            if x.len() != size || y.len() != size {
                return Err("EC point refused");
            }
            let point = [&[4u8][..], &x, &y].concat();
            Ok(vec![VerifyKey::from_point(curve_alg, &point).map_err(|_| "EC point refused")?])
        }
        "OKP" => {
            if text("crv")? != "Ed25519" {
                return Err("curve not supported");
            }
            if alg.is_some_and(|a| a != Algorithm::EdDsa) {
                return Err("alg does not fit the key");
            }
            Ok(vec![VerifyKey::from_point(Algorithm::EdDsa, &bytes("x")?).map_err(|_| "Ed25519 key refused")?])
        }
        "oct" => Err("symmetric keys are never taken from a key set"),
        _ => Err("key type not supported"),
    }
}
