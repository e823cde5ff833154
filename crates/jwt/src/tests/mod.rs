//! End-to-end tests of the crate: real keys, real signatures, tokens forged the ways attackers forge them.

mod attacks;
mod families;
mod garbage;
mod keys;
mod parsing;
mod round_trip;

use std::sync::OnceLock;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{json, Value};

use crate::sign::{sign, SigningKey};
use crate::{Algorithm, VerifyKey};

/// "Now" for every test: 2023-11-14.
const NOW: i64 = 1_700_000_000;

const ALGORITHMS: [Algorithm; 3] = [Algorithm::Hs256, Algorithm::Rs256, Algorithm::Es256];

/// The bytes of a file in `testdata/`.
macro_rules! testdata {
    ($name:literal) => {
        include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/", $name))
    };
}
use testdata;

const HMAC_SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

/// One generated key per algorithm, shared by the tests (RSA generation is slow): the signing key, the verify key
/// built from its exported PEM, and that PEM.
fn keys(alg: Algorithm) -> &'static (SigningKey, VerifyKey, String) {
    static KEYS: [OnceLock<(SigningKey, VerifyKey, String)>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let slot = ALGORITHMS.iter().position(|a| *a == alg).expect("known algorithm");
    KEYS[slot].get_or_init(|| match alg {
        Algorithm::Hs256 => {
            (SigningKey::Hmac(HMAC_SECRET.to_vec()), VerifyKey::hmac(HMAC_SECRET).expect("HMAC key"), String::new())
        }
        _ => {
            let (signing, pem) = SigningKey::generate(alg).expect("key generation");
            let verify = VerifyKey::from_pem(alg, pem.as_bytes()).expect("exported PEM loads");
            (signing, verify, pem)
        }
    })
}

fn header(alg: Algorithm) -> Value {
    json!({"alg": alg.as_str(), "typ": "JWT"})
}

fn good_claims() -> Value {
    json!({"iss": "https://idp.example", "sub": "app-1", "aud": "api", "exp": NOW + 300, "iat": NOW})
}

/// A token for `claims` under `header`, signed with the shared key of `alg`.
fn token(alg: Algorithm, header: &Value, claims: &Value) -> String {
    sign(header, claims, &keys(alg).0).expect("signing")
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

fn unb64(segment: &str) -> Vec<u8> {
    URL_SAFE_NO_PAD.decode(segment).expect("test segment is base64url")
}

/// The three segments of a compact token.
fn segments(token: &str) -> [&str; 3] {
    let parts: Vec<&str> = token.split('.').collect();
    parts.try_into().expect("three segments")
}
