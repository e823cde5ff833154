//! Every algorithm, with keys from PEM, from a JWK Set, and from a second implementation (jsonwebtoken) that signs
//! and encodes JWKs on its own.

use aws_lc_rs::signature::{
    EcdsaKeyPair, Ed25519KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING, ECDSA_P384_SHA384_FIXED_SIGNING,
};
use serde_json::json;

use super::*;
use crate::jwk::{JwkSetError, KeySet, Skipped};
use crate::{decode, JwtError, KeyError};

const ASYMMETRIC: [Algorithm; 10] = [
    Algorithm::Rs256,
    Algorithm::Rs384,
    Algorithm::Rs512,
    Algorithm::Ps256,
    Algorithm::Ps384,
    Algorithm::Ps512,
    Algorithm::Es256,
    Algorithm::Es384,
    Algorithm::Es512,
    Algorithm::EdDsa,
];

fn set(keys: &[serde_json::Value]) -> KeySet {
    KeySet::parse(json!({ "keys": keys }).to_string().as_bytes()).expect("a key set")
}

#[test]
fn every_algorithm_verifies_from_pem_and_from_a_jwk_set_and_nothing_else() {
    let keys: Vec<(Algorithm, SigningKey, String)> = ASYMMETRIC
        .iter()
        .map(|alg| {
            let (key, pem) = SigningKey::generate(*alg).expect("generate");
            (*alg, key, pem)
        })
        .collect();
    let jwks: Vec<_> = keys.iter().map(|(alg, k, _)| k.public_jwk(alg.as_str()).expect("jwk")).collect();
    let set = set(&jwks);
    assert_eq!((set.len(), set.skipped()), (10, &[][..]));
    for (alg, key, pem) in &keys {
        assert_eq!(key.algorithm(), *alg);
        let token = sign(&json!({"alg": alg.as_str(), "kid": alg.as_str()}), &good_claims(), key).expect("sign");
        let parsed = decode(&token).expect("decodes");
        let from_pem = VerifyKey::from_pem(*alg, pem.as_bytes()).expect("PEM");
        assert_eq!(parsed.verify(&from_pem), Ok(()), "{alg} from PEM");
        let found: Vec<_> = set.find(parsed.kid(), *alg).collect();
        assert_eq!(found.len(), 1, "{alg}");
        assert_eq!(parsed.verify(found[0]), Ok(()), "{alg} from the set");
        // Every other key of the set refuses it: by algorithm first, and by signature for a same-algorithm key.
        for other in ASYMMETRIC.iter().filter(|a| *a != alg) {
            assert_eq!(set.find(Some(other.as_str()), *alg).count(), 0, "{alg} token, {other} kid");
        }
        // Claims changed under the same signature: the signature no longer verifies.
        let [head, _, sig] = segments(&token);
        let tampered =
            format!("{head}.{}.{sig}", b64(json!({"sub": "admin", "exp": NOW + 300}).to_string().as_bytes()));
        assert_eq!(decode(&tampered).expect("decodes").verify(found[0]), Err(JwtError::BadSignature), "{alg}");
    }
    // A token naming no key is tried against the keys of its algorithm.
    let (alg, key, _) = &keys[7];
    let token = sign(&json!({"alg": alg.as_str()}), &good_claims(), key).expect("sign");
    let parsed = decode(&token).expect("decodes");
    assert!(set.find(None, *alg).any(|k| parsed.verify(k).is_ok()));
}

#[test]
fn hmac_of_every_size() {
    for alg in [Algorithm::Hs256, Algorithm::Hs384, Algorithm::Hs512] {
        let secret = b"a secret of sixty-four bytes, enough for every HMAC hash size!!!";
        let token = sign(&json!({"alg": alg.as_str()}), &good_claims(), &SigningKey::Secret(alg, secret.to_vec()))
            .expect("sign");
        let parsed = decode(&token).expect("decodes");
        assert_eq!(parsed.verify(&VerifyKey::secret(alg, secret).expect("key")), Ok(()), "{alg}");
        for other in [Algorithm::Hs256, Algorithm::Hs384, Algorithm::Hs512].into_iter().filter(|o| *o != alg) {
            let key = VerifyKey::secret(other, secret).expect("key");
            assert_eq!(parsed.verify(&key), Err(JwtError::AlgorithmMismatch), "{alg} token, {other} key");
        }
    }
}

#[test]
fn an_rsa_key_without_alg_verifies_the_rsa_family_only() {
    let (key, _) = SigningKey::generate(Algorithm::Ps384).expect("generate");
    let mut jwk = key.public_jwk("r").expect("jwk");
    jwk.as_object_mut().expect("object").remove("alg");
    let set = set(&[jwk]);
    assert_eq!(set.len(), 1);
    for alg in Algorithm::ALL {
        let expected = usize::from(alg.family() == crate::Family::Rsa);
        assert_eq!(set.find(Some("r"), alg).count(), expected, "{alg}");
    }
    let token = sign(&json!({"alg": "PS384", "kid": "r"}), &good_claims(), &key).expect("sign");
    let parsed = decode(&token).expect("decodes");
    assert!(set.find(parsed.kid(), parsed.algorithm()).any(|k| parsed.verify(k).is_ok()));
    // The same key cannot stand in for PKCS#1 v1.5: the padding differs.
    let rs384 = set.find(Some("r"), Algorithm::Rs384).next().expect("RS384 view");
    let forged = format!("{}.{}", b64(br#"{"alg":"RS384","kid":"r"}"#), &token[token.find('.').expect("dot") + 1..]);
    assert_eq!(decode(&forged).expect("decodes").verify(rs384), Err(JwtError::BadSignature));
}

#[test]
fn odd_members_are_skipped_with_a_reason_and_never_cost_the_others() {
    let (ec, _) = SigningKey::generate(Algorithm::Es256).expect("generate");
    let good = ec.public_jwk("good").expect("jwk");
    let with = |edit: &dyn Fn(&mut serde_json::Map<String, serde_json::Value>)| {
        let mut jwk = good.clone();
        edit(jwk.as_object_mut().expect("object"));
        jwk
    };
    let cases: Vec<(serde_json::Value, &str)> = vec![
        (json!({"kty": "oct", "kid": "s", "k": "c2VjcmV0"}), "symmetric keys are never taken from a key set"),
        (with(&|j| drop(j.insert("use".into(), json!("enc")))), "not a signature key (use)"),
        (with(&|j| drop(j.insert("key_ops".into(), json!(["encrypt"])))), "not a verification key (key_ops)"),
        (with(&|j| drop(j.insert("alg".into(), json!("ES384")))), "alg does not fit the key"),
        (with(&|j| drop(j.insert("alg".into(), json!("RS256")))), "alg does not fit the key"),
        (with(&|j| drop(j.insert("alg".into(), json!("none")))), "alg is not a JWS algorithm"),
        (with(&|j| drop(j.insert("crv".into(), json!("secp256k1")))), "curve not supported"),
        (with(&|j| drop(j.insert("x".into(), json!("AAAA")))), "EC point refused"),
        (
            // 31 and 33 bytes: the right total, not the right coordinates.
            with(&|j| {
                let x = j["x"].as_str().map(unb64).expect("x");
                let y = j["y"].as_str().map(unb64).expect("y");
                j.insert("x".into(), json!(b64(&x[1..])));
                j.insert("y".into(), json!(b64(&[&y[..], &[0]].concat())));
            }),
            "EC point refused",
        ),
        (with(&|j| drop(j.insert("y".into(), json!("not base64!")))), "a member of the key is not base64url"),
        (with(&|j| drop(j.remove("x"))), "a member of the key is missing or not a string"),
        (with(&|j| drop(j.insert("kty".into(), json!("RSA")))), "alg does not fit the key"),
        (with(&|j| drop(j.remove("kty"))), "a member of the key is missing or not a string"),
        (
            json!({"kty": "RSA", "kid": "small", "n": b64(&[0xc5; 128]), "e": "AQAB"}),
            "RSA key refused (2048 to 8192 bits)",
        ),
        (json!({"kty": "OKP", "kid": "x448", "crv": "X448", "x": "AAAA"}), "curve not supported"),
        (json!({"kty": "OKP", "kid": "e", "crv": "Ed25519", "x": b64(&[1; 31])}), "Ed25519 key refused"),
        (json!({"kty": "PQ"}), "key type not supported"),
        (json!({"kid": 7, "kty": "EC"}), "kid is not a string"),
        (json!("a string"), "not a JSON object"),
    ];
    let mut members: Vec<_> = cases.iter().map(|(jwk, _)| jwk.clone()).collect();
    members.push(good.clone());
    let set = set(&members);
    assert_eq!(set.len(), 1, "{set:?}");
    assert!(set.has_kid("good") && !set.has_kid("s"));
    // A key published without `kid` may verify a token that names one.
    let mut anonymous = good.clone();
    anonymous.as_object_mut().expect("object").remove("kid");
    let with_anonymous = super::families::set(&[anonymous]);
    assert!(!with_anonymous.has_kid("any") && with_anonymous.find(Some("any"), Algorithm::Es256).count() == 1);
    let reasons: Vec<&str> = set.skipped().iter().map(|s| s.reason).collect();
    let expected: Vec<&str> = cases.iter().map(|(_, r)| *r).collect();
    assert_eq!(reasons, expected);
    assert_eq!(
        set.skipped()[0],
        Skipped { kid: Some("s".into()), reason: "symmetric keys are never taken from a key set" }
    );

    assert_eq!(KeySet::parse(b"[]").err(), Some(JwkSetError::NotJson));
    assert_eq!(KeySet::parse(b"{\"keys\": {}}").err(), Some(JwkSetError::NoKeys));
    assert_eq!(KeySet::parse(b"not json").err(), Some(JwkSetError::NotJson));
    let many = json!({"keys": vec![good; 65]}).to_string();
    assert_eq!(KeySet::parse(many.as_bytes()).err(), Some(JwkSetError::TooManyKeys));
    assert!(KeySet::parse(b"{\"keys\": []}").expect("empty set").is_empty());
}

#[test]
fn pem_keys_of_the_wrong_curve_or_kind_are_refused() {
    let p384 = testdata!("p384.pub.pem");
    let ed25519 = testdata!("ed25519.pub.pem");
    assert!(VerifyKey::from_pem(Algorithm::Es384, p384).is_ok());
    assert!(VerifyKey::from_pem(Algorithm::EdDsa, ed25519).is_ok());
    assert_eq!(VerifyKey::from_pem(Algorithm::Es512, p384).err(), Some(KeyError::WrongCurve { alg: Algorithm::Es512 }));
    assert_eq!(VerifyKey::from_pem(Algorithm::EdDsa, p384).err(), Some(KeyError::WrongCurve { alg: Algorithm::EdDsa }));
    assert_eq!(VerifyKey::from_pem(Algorithm::Ps256, ed25519).err(), Some(KeyError::NotRsa));
    assert_eq!(VerifyKey::from_pem(Algorithm::Hs384, ed25519).err(), Some(KeyError::HmacHasNoPem));
    assert!(VerifyKey::from_pem(Algorithm::Ps512, testdata!("rsa2048.pkcs1.pub.pem")).is_ok());
}

/// jsonwebtoken signs and writes the JWK; this crate reads the set and verifies.
#[test]
fn tokens_and_jwks_from_jsonwebtoken_verify() {
    use jsonwebtoken::{encode, jwk::Jwk, Algorithm as J, EncodingKey, Header};

    let rsa = EncodingKey::from_rsa_pem(testdata!("rsa2048.pkcs1.key.pem")).expect("RSA PEM");
    let p256 = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).expect("P-256");
    let p384 = EcdsaKeyPair::generate(&ECDSA_P384_SHA384_FIXED_SIGNING).expect("P-384");
    let ed = Ed25519KeyPair::generate().expect("Ed25519");
    let p256 = EncodingKey::from_ec_der(p256.to_pkcs8v1().expect("PKCS#8").as_ref());
    let p384 = EncodingKey::from_ec_der(p384.to_pkcs8v1().expect("PKCS#8").as_ref());
    let ed = EncodingKey::from_ed_der(ed.to_pkcs8v1().expect("PKCS#8").as_ref());
    let cases: [(J, Algorithm, &EncodingKey); 9] = [
        (J::RS256, Algorithm::Rs256, &rsa),
        (J::RS384, Algorithm::Rs384, &rsa),
        (J::RS512, Algorithm::Rs512, &rsa),
        (J::PS256, Algorithm::Ps256, &rsa),
        (J::PS384, Algorithm::Ps384, &rsa),
        (J::PS512, Algorithm::Ps512, &rsa),
        (J::ES256, Algorithm::Es256, &p256),
        (J::ES384, Algorithm::Es384, &p384),
        (J::EdDSA, Algorithm::EdDsa, &ed),
    ];
    let claims = good_claims();
    for (j, alg, key) in cases {
        let mut jwk = Jwk::from_encoding_key(key, j).expect("JWK");
        jwk.common.key_id = Some("k".into());
        let set = KeySet::parse(json!({"keys": [jwk]}).to_string().as_bytes()).expect("set");
        assert_eq!(set.skipped(), &[][..], "{alg}");
        let mut header = Header::new(j);
        header.kid = Some("k".into());
        let token = encode(&header, &claims, key).expect("jsonwebtoken signs");
        let parsed = decode(&token).expect("decodes");
        assert_eq!(parsed.algorithm(), alg);
        assert!(set.find(parsed.kid(), alg).any(|k| parsed.verify(k).is_ok()), "{alg}");
        assert_eq!(parsed.claims().validate(NOW, &crate::Validation::default()), Ok(()));
    }
    for (j, alg) in [(J::HS256, Algorithm::Hs256), (J::HS384, Algorithm::Hs384), (J::HS512, Algorithm::Hs512)] {
        let token =
            encode(&Header::new(j), &claims, &EncodingKey::from_secret(HMAC_SECRET).expect("secret")).expect("signs");
        let parsed = decode(&token).expect("decodes");
        assert_eq!(parsed.verify(&VerifyKey::secret(alg, HMAC_SECRET).expect("key")), Ok(()), "{alg}");
    }
}
