//! Target `jwt`: any bearer token a client sends. Decoding must not panic, and verification must
//! refuse every algorithm the key does not have. The seed corpus holds tokens of each algorithm
//! signed with the keys below (they verify), OpenSSL-made tokens, and broken ones (alg none,
//! padding, standard alphabet, crit, duplicate members, wrong segment counts).
//!
//! Input that starts with `{` is a key set an OpenID provider serves instead (its seeds: `jwks-*`):
//! reading it must not panic, and every key it yields verifies only its own algorithm, of the
//! family its JWK type allows.

use std::sync::OnceLock;

use gatehouse_jwt::{decode, Algorithm, JwtError, Validation, VerifyKey, MAX_TOKEN_LEN};

/// The keys the seed tokens are signed with: the corpus secret and the test certificates of `crates/jwt/testdata/`.
fn keys() -> &'static [VerifyKey] {
    static KEYS: OnceLock<Vec<VerifyKey>> = OnceLock::new();
    KEYS.get_or_init(|| {
        vec![
            VerifyKey::hmac(b"gatehouse fuzz secret, 32 bytes!").expect("HMAC key"),
            VerifyKey::from_pem(Algorithm::Rs256, include_bytes!("../../crates/jwt/testdata/rsa2048.cert.pem"))
                .expect("RSA key"),
            VerifyKey::from_pem(Algorithm::Es256, include_bytes!("../../crates/jwt/testdata/p256.cert.pem"))
                .expect("P-256 key"),
        ]
    })
}

/// Decodes `data` as a token, verifies it with every key and validates its claims; or reads it as
/// a key set.
pub fn check(data: &[u8]) {
    if data.first() == Some(&b'{') {
        return key_set(data);
    }
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
}

/// A JWK Set: read without panicking; what `find` gives is of the algorithm asked for, and never a
/// shared secret (sets carry public keys only).
fn key_set(data: &[u8]) {
    use gatehouse_jwt::{jwk::KeySet, Family};
    let Ok(set) = KeySet::parse(data) else {
        return;
    };
    let _ = (set.len(), set.is_empty(), set.skipped(), format!("{set:?}"));
    for alg in Algorithm::ALL {
        for key in set.find(None, alg) {
            assert_eq!(key.algorithm(), alg);
            assert_ne!(alg.family(), Family::Hmac, "a key set gave a shared secret");
        }
    }
}
