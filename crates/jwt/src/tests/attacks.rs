//! Forged tokens: no signature, the wrong algorithm, the public key as an HMAC secret, altered bits.

use serde_json::json;

use super::*;
use crate::{decode, JwtError, KeyError};

#[test]
fn alg_none_is_refused_with_or_without_a_signature() {
    let claims = b64(good_claims().to_string().as_bytes());
    for alg in ["none", "None", "NONE", "nOnE"] {
        let header = b64(json!({"alg": alg, "typ": "JWT"}).to_string().as_bytes());
        let unsigned = format!("{header}.{claims}.");
        assert_eq!(decode(&unsigned).err(), Some(JwtError::UnsupportedAlgorithm), "{alg}");
        // Signed by a key the gateway trusts, still `none`.
        let signed = token(Algorithm::Hs256, &json!({"alg": alg}), &good_claims());
        assert_eq!(decode(&signed).err(), Some(JwtError::UnsupportedAlgorithm), "{alg}");
    }
}

#[test]
fn other_algorithms_are_refused() {
    for alg in [
        json!("ES256K"),
        json!("RSA-OAEP"),
        json!("A128GCM"),
        json!("HS1"),
        json!("Ed25519"),
        json!("EDDSA"),
        json!("hs256"),
        json!(""),
    ] {
        let forged = token(Algorithm::Hs256, &json!({"alg": alg}), &good_claims());
        assert_eq!(decode(&forged).err(), Some(JwtError::UnsupportedAlgorithm), "{alg}");
    }
    for alg in [json!(null), json!(256), json!(["HS256"])] {
        let forged = token(Algorithm::Hs256, &json!({"alg": alg}), &good_claims());
        assert_eq!(decode(&forged).err(), Some(JwtError::Malformed("alg is not a string")), "{alg}");
    }
}

#[test]
fn a_key_only_verifies_its_own_algorithm() {
    for token_alg in ALGORITHMS {
        let token = token(token_alg, &header(token_alg), &good_claims());
        let parsed = decode(&token).expect("decodes");
        for key_alg in ALGORITHMS {
            let expected = if key_alg == token_alg { Ok(()) } else { Err(JwtError::AlgorithmMismatch) };
            assert_eq!(parsed.verify(&keys(key_alg).1), expected, "{token_alg} token, {key_alg} key");
        }
    }
}

/// The classic confusion attack: the RSA public key is public, so an attacker HMACs a token with its PEM text and
/// says `HS256`, hoping the verifier feeds "the key" to HMAC.
#[test]
fn rsa_public_key_as_hmac_secret_is_refused() {
    let (_, rsa_key, rsa_pem) = keys(Algorithm::Rs256);
    let forged = sign(&header(Algorithm::Hs256), &good_claims(), &SigningKey::Hmac(rsa_pem.as_bytes().to_vec()))
        .expect("signing");
    let parsed = decode(&forged).expect("well-formed");
    assert_eq!(parsed.verify(rsa_key), Err(JwtError::AlgorithmMismatch));
    // And the configuration that would make it work is refused at load.
    assert_eq!(VerifyKey::hmac(rsa_pem.as_bytes()).err(), Some(KeyError::SecretIsPem));
    // Same with the signature the RSA key would expect, relabelled RS256: a MAC is not an RSA signature.
    let [_, payload, signature] = segments(&forged);
    let relabelled = format!("{}.{payload}.{signature}", b64(header(Algorithm::Rs256).to_string().as_bytes()));
    assert_eq!(decode(&relabelled).expect("well-formed").verify(rsa_key), Err(JwtError::BadSignature));
}

#[test]
fn every_flipped_signature_bit_is_caught() {
    for alg in ALGORITHMS {
        let token = token(alg, &header(alg), &good_claims());
        let [h, p, s] = segments(&token);
        let signature = unb64(s);
        for bit in 0..signature.len() * 8 {
            let mut flipped = signature.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            let forged = format!("{h}.{p}.{}", b64(&flipped));
            assert_eq!(decode(&forged).expect("well-formed").verify(&keys(alg).1), Err(JwtError::BadSignature));
        }
    }
}

#[test]
fn altered_claims_and_cut_signatures_are_caught() {
    for alg in ALGORITHMS {
        let key = &keys(alg).1;
        let token = token(alg, &header(alg), &good_claims());
        let [h, p, s] = segments(&token);
        let mut claims = unb64(p);
        let sub = claims.windows(5).position(|w| w == b"app-1").expect("sub in claims");
        claims[sub + 4] ^= 1; // "app-0": still valid JSON, another application.
        let altered = format!("{h}.{}.{s}", b64(&claims));
        assert_eq!(decode(&altered).expect("well-formed").verify(key), Err(JwtError::BadSignature), "{alg}");

        let signature = unb64(s);
        for cut in [0, 1, signature.len() - 1] {
            let forged = format!("{h}.{p}.{}", b64(&signature[..cut]));
            assert_eq!(decode(&forged).expect("well-formed").verify(key), Err(JwtError::BadSignature), "{alg}");
        }
        let longer = format!("{h}.{p}.{}", b64(&[&signature[..], &[0]].concat()));
        assert_eq!(decode(&longer).expect("well-formed").verify(key), Err(JwtError::BadSignature), "{alg}");
    }
}

#[test]
fn a_key_of_the_same_algorithm_from_elsewhere_does_not_verify() {
    let other_hmac = VerifyKey::hmac(b"another secret, also 32 bytes long").expect("HMAC key");
    let hs256 = token(Algorithm::Hs256, &header(Algorithm::Hs256), &good_claims());
    assert_eq!(decode(&hs256).expect("decodes").verify(&other_hmac), Err(JwtError::BadSignature));
    for alg in [Algorithm::Rs256, Algorithm::Es256] {
        let (_, pem) = SigningKey::generate(alg).expect("keygen");
        let other = VerifyKey::from_pem(alg, pem.as_bytes()).expect("loads");
        let token = token(alg, &header(alg), &good_claims());
        assert_eq!(decode(&token).expect("decodes").verify(&other), Err(JwtError::BadSignature));
    }
}

/// Choosing the key by `kid` is the caller's job; the crate reports it and the key still decides.
#[test]
fn kid_is_reported_not_trusted() {
    let header = json!({"alg": "ES256", "kid": "some-other-key"});
    let es256 = token(Algorithm::Es256, &header, &good_claims());
    let parsed = decode(&es256).expect("decodes");
    assert_eq!(parsed.kid(), Some("some-other-key"));
    assert_eq!(parsed.verify(&keys(Algorithm::Es256).1), Ok(()));
    let no_kid = token(Algorithm::Es256, &json!({"alg": "ES256"}), &good_claims());
    assert_eq!(decode(&no_kid).expect("decodes").kid(), None);
}
