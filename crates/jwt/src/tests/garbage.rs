//! Property-style: random and mutated input never panics, and no mutation of a good token still verifies.

use gatehouse_testkit::Rng;
use serde_json::json;

use super::*;
use crate::{decode, JwtError, Validation};

/// Characters that matter to the parser, over-weighted.
const INTERESTING: &[char] = &['.', '=', '+', '/', '-', '_', 'A', 'e', 'y', 'J', '0', ' ', '\n', '\0', 'é', '\u{ffff}'];

fn exercise(token: &str) -> Option<Result<(), JwtError>> {
    let parsed = decode(token).ok()?;
    let _ = (parsed.kid(), parsed.claims().get_str("sub"), format!("{parsed:?}"));
    let _ = parsed.claims().validate(NOW, &Validation { leeway_secs: u64::MAX, ..Validation::default() });
    let mut verified = None;
    for alg in ALGORITHMS {
        let result = parsed.verify(&keys(alg).1);
        if alg != parsed.algorithm() {
            assert_eq!(result, Err(JwtError::AlgorithmMismatch));
        } else {
            verified = Some(result);
        }
    }
    verified
}

#[test]
fn random_strings_never_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..20_000 {
        let len = rng.below(120);
        let token: String = (0..len)
            .map(|_| match rng.below(3) {
                0 => *rng.pick(INTERESTING),
                _ => char::from(rng.below(0x80) as u8),
            })
            .collect();
        if let Some(result) = exercise(&token) {
            assert!(result.is_err(), "{token:?} verified");
        }
    }
}

#[test]
fn random_json_segments_never_panic() {
    let pieces: Vec<&str> =
        r#"{ } [ ] , : "alg" "HS256" "none" "exp" "aud" "kid" "typ" "crit" 1e999 -0 18446744073709551616 null true"#
            .split(' ')
            .chain([r#""\u0000""#, r#""\ud800""#, " "])
            .collect();
    let mut rng = Rng(42);
    for _ in 0..20_000 {
        let mut segment = || (0..rng.below(12)).map(|_| *rng.pick(&pieces)).collect::<String>();
        let header = format!("{{\"alg\":\"HS256\",{}", segment());
        let payload = segment();
        let token = format!("{}.{}.{}", b64(header.as_bytes()), b64(payload.as_bytes()), b64(&[0; 32]));
        if let Some(result) = exercise(&token) {
            assert_eq!(result, Err(JwtError::BadSignature), "{header} {payload}");
        }
    }
}

#[test]
fn mutated_tokens_never_verify() {
    let mut rng = Rng(7);
    let claims = json!({"sub": "app-1", "aud": ["a", "b"], "exp": NOW, "nbf": 1.5});
    for alg in ALGORITHMS {
        let original = token(alg, &json!({"alg": alg.as_str(), "kid": "k"}), &claims);
        assert_eq!(exercise(&original), Some(Ok(())));
        for _ in 0..3_000 {
            let mut chars: Vec<char> = original.chars().collect();
            for _ in 0..1 + rng.below(3) {
                let at = rng.below(chars.len());
                match rng.below(4) {
                    0 => chars[at] = *rng.pick(INTERESTING),
                    1 => chars[at] = char::from(b'A' + rng.below(26) as u8),
                    2 => drop(chars.remove(at)),
                    _ => chars.insert(at, *rng.pick(INTERESTING)),
                }
            }
            let mutated: String = chars.into_iter().collect();
            if exercise(&mutated) == Some(Ok(())) {
                assert_eq!(mutated, original, "a mutation verified");
            }
        }
    }
}

#[test]
fn random_bytes_as_keys_never_panic() {
    let mut rng = Rng(99);
    let good = keys(Algorithm::Es256).2.clone();
    for _ in 0..5_000 {
        let mut pem = good.clone().into_bytes();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(pem.len());
            pem[at] = rng.byte();
        }
        for alg in ALGORITHMS {
            let _ = VerifyKey::from_pem(alg, &pem);
            let _ = SigningKey::from_pem(alg, &pem);
        }
        let len = rng.below(64);
        let der: Vec<u8> = (0..len).map(|_| rng.byte()).collect();
        let _ = (crate::der::spki_key_type(&der), crate::der::certificate_spki(&der));
    }
}
