//! Tokens signed here, by OpenSSL and by RFC 7515 verify, with keys in every encoding `from_pem` reads.

use serde_json::json;

use super::*;
use crate::{decode, JwtError, Validation};

#[test]
fn every_algorithm_round_trips() {
    let v = Validation {
        issuer: Some("https://idp.example".into()),
        audience: Some("api".into()),
        ..Validation::default()
    };
    for alg in ALGORITHMS {
        let header = json!({"alg": alg.as_str(), "typ": "JWT", "kid": "k1"});
        let claims = json!({"iss": "https://idp.example", "sub": "app-1", "aud": ["web", "api"], "exp": NOW + 60,
            "nbf": NOW - 60, "iat": NOW - 60, "app": "billing"});
        let token = token(alg, &header, &claims);
        let parsed = decode(&token).expect("decodes");
        assert_eq!(parsed.algorithm(), alg);
        assert_eq!(parsed.kid(), Some("k1"));
        assert_eq!(parsed.verify(&keys(alg).1), Ok(()), "{alg}");
        assert_eq!(parsed.claims().validate(NOW, &v), Ok(()));
        let c = parsed.claims();
        assert_eq!(
            (c.sub.as_deref(), c.exp, c.nbf, c.iat),
            (Some("app-1"), Some(NOW + 60), Some(NOW - 60), Some(NOW - 60))
        );
        assert_eq!(c.get_str("app"), Some("billing"));
        let signature_len = unb64(segments(&token)[2]).len();
        assert_eq!(signature_len, [32, 256, 64][ALGORITHMS.iter().position(|a| *a == alg).expect("known")]);
    }
}

#[test]
fn verify_keys_load_from_every_public_encoding() {
    let pkcs8 = SigningKey::from_pem(Algorithm::Rs256, testdata!("rsa2048.pkcs8.key.pem")).expect("PKCS#8 RSA");
    let pkcs1 = SigningKey::from_pem(Algorithm::Rs256, testdata!("rsa2048.pkcs1.key.pem")).expect("PKCS#1 RSA");
    let spki = pkcs8.public_key_pem().expect("SPKI export");
    let rsa_keys = [
        VerifyKey::from_pem(Algorithm::Rs256, spki.as_bytes()).expect("SPKI"),
        VerifyKey::from_pem(Algorithm::Rs256, testdata!("rsa2048.pkcs1.pub.pem")).expect("PKCS#1 public key"),
        VerifyKey::from_pem(Algorithm::Rs256, testdata!("rsa2048.cert.pem")).expect("certificate"),
    ];
    for signer in [&pkcs8, &pkcs1] {
        let token = sign(&header(Algorithm::Rs256), &good_claims(), signer).expect("signing");
        let token = decode(&token).expect("decodes");
        for key in &rsa_keys {
            assert_eq!(token.verify(key), Ok(()));
        }
    }

    let sec1 = SigningKey::from_pem(Algorithm::Es256, testdata!("p256.sec1.key.pem")).expect("SEC 1 EC key");
    let spki = sec1.public_key_pem().expect("SPKI export");
    let token = sign(&header(Algorithm::Es256), &good_claims(), &sec1).expect("signing");
    let token = decode(&token).expect("decodes");
    for pem in [spki.as_bytes(), testdata!("p256.cert.pem")] {
        assert_eq!(token.verify(&VerifyKey::from_pem(Algorithm::Es256, pem).expect("P-256 key")), Ok(()));
    }
}

#[test]
fn signing_keys_load_from_pkcs8_made_by_aws_lc() {
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};

    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new()).expect("keygen");
    let pem = crate::pem::encode("PRIVATE KEY", pkcs8.as_ref());
    let signer = SigningKey::from_pem(Algorithm::Es256, pem.as_bytes()).expect("PKCS#8 EC key");
    let verify = VerifyKey::from_pem(Algorithm::Es256, signer.public_key_pem().expect("export").as_bytes());
    let token = sign(&header(Algorithm::Es256), &good_claims(), &signer).expect("signing");
    assert_eq!(decode(&token).expect("decodes").verify(&verify.expect("loads")), Ok(()));
}

#[test]
fn tokens_made_by_openssl_verify() {
    let v = Validation { issuer: Some("openssl".into()), audience: Some("gatehouse".into()), ..Validation::default() };
    let cases: [(Algorithm, &[u8], &[u8]); 2] = [
        (Algorithm::Rs256, testdata!("rs256-openssl.jwt"), testdata!("rsa2048.cert.pem")),
        (Algorithm::Es256, testdata!("es256-openssl.jwt"), testdata!("p256.cert.pem")),
    ];
    for (alg, token, cert) in cases {
        let token = std::str::from_utf8(token).expect("ASCII token");
        let parsed = decode(token).expect("decodes");
        assert_eq!((parsed.algorithm(), parsed.kid()), (alg, Some("openssl")));
        assert_eq!(parsed.verify(&VerifyKey::from_pem(alg, cert).expect("certificate key")), Ok(()), "{alg}");
        assert_eq!(parsed.claims().validate(NOW, &v), Ok(()));
        assert_eq!(parsed.claims().get_str("sub"), Some("interop"));
        // The key pair made by aws-lc-rs in this test run did not sign it.
        assert_eq!(parsed.verify(&keys(alg).1), Err(JwtError::BadSignature));
    }
}

/// RFC 7515 appendix A.1: the header and claims hold CR LF and spaces, so verification only passes if the
/// signature is checked over the segments as received, not over a re-encoding.
#[test]
fn rfc7515_hs256_example_verifies() {
    let token = "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9\
        .eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ\
        .dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
    let key = unb64("AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow");
    let parsed = decode(token).expect("decodes");
    assert_eq!(parsed.verify(&VerifyKey::hmac(&key).expect("HMAC key")), Ok(()));
    let claims = parsed.claims();
    assert_eq!((claims.iss.as_deref(), claims.exp), (Some("joe"), Some(1_300_819_380)));
    assert_eq!(claims.raw().get("http://example.com/is_root"), Some(&json!(true)));
    assert_eq!(claims.validate(1_300_819_380, &Validation::default()), Ok(()));
    assert_eq!(claims.validate(1_300_819_381, &Validation::default()), Err(JwtError::Expired));
}
