//! Any bearer token a client sends: decoding must not panic, and verification must refuse every algorithm the key
//! does not have.
//!
//! Run from the crate root: `cargo +nightly fuzz run decode fuzz/corpus/decode`.
//! The seed corpus holds tokens of each algorithm signed with the keys below (they verify), OpenSSL-made tokens,
//! and broken ones (alg none, padding, standard alphabet, crit, duplicate members, wrong segment counts).

#![no_main]

use std::sync::OnceLock;

use gatehouse_jwt::{decode, Algorithm, JwtError, Validation, VerifyKey, MAX_TOKEN_LEN};
use libfuzzer_sys::fuzz_target;

/// The keys the seed tokens are signed with: the corpus secret and the test certificates of `testdata/`.
fn keys() -> &'static [VerifyKey] {
    static KEYS: OnceLock<Vec<VerifyKey>> = OnceLock::new();
    KEYS.get_or_init(|| {
        vec![
            VerifyKey::hmac(b"gatehouse fuzz secret, 32 bytes!").expect("HMAC key"),
            VerifyKey::from_pem(Algorithm::Rs256, include_bytes!("../../testdata/rsa2048.cert.pem")).expect("RSA key"),
            VerifyKey::from_pem(Algorithm::Es256, include_bytes!("../../testdata/p256.cert.pem")).expect("P-256 key"),
        ]
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(token) = decode(text) else {
        return;
    };
    assert!(text.len() <= MAX_TOKEN_LEN);
    assert_eq!(text.matches('.').count(), 2);
    let _ = (token.kid(), token.claims().get_str("sub"), format!("{token:?}"));
    for key in keys() {
        match token.verify(key) {
            Err(JwtError::AlgorithmMismatch) => assert_ne!(key.algorithm(), token.algorithm()),
            _ => assert_eq!(key.algorithm(), token.algorithm()),
        }
    }
    for leeway_secs in [0, 60, u64::MAX] {
        let v = Validation { leeway_secs, issuer: Some("https://idp.example".into()), ..Validation::default() };
        let _ = token.claims().validate(i64::from(u32::MAX), &v);
        let _ = token.claims().validate(i64::MIN, &v);
    }
});
