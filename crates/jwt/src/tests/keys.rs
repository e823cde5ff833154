//! Key material refused at config load, with a reason an operator can act on.

use super::*;
use crate::KeyError;

fn verify_key_error(alg: Algorithm, pem: &[u8]) -> KeyError {
    VerifyKey::from_pem(alg, pem).expect_err("key must be refused")
}

#[test]
fn hmac_secrets() {
    assert_eq!(VerifyKey::hmac(b"").err(), Some(KeyError::EmptySecret));
    assert_eq!(VerifyKey::hmac(b" \n-----BEGIN PUBLIC KEY-----\n").err(), Some(KeyError::SecretIsPem));
    assert!(VerifyKey::hmac(b"x").is_ok(), "short secrets are the caller's warning to give");
    assert_eq!(VerifyKey::from_pem(Algorithm::Hs256, testdata!("p256.cert.pem")).err(), Some(KeyError::HmacHasNoPem));
    assert_eq!(SigningKey::from_pem(Algorithm::Hs256, b"").err(), Some(KeyError::HmacHasNoPem));
}

#[test]
fn wrong_key_types() {
    for pem in [&testdata!("p384.pub.pem")[..], testdata!("ed25519.pub.pem"), testdata!("rsa2048.cert.pem")] {
        assert_eq!(verify_key_error(Algorithm::Es256, pem), KeyError::NotP256);
    }
    for pem in [&testdata!("p384.pub.pem")[..], testdata!("ed25519.pub.pem"), testdata!("p256.cert.pem")] {
        assert_eq!(verify_key_error(Algorithm::Rs256, pem), KeyError::NotRsa);
    }
    assert_eq!(verify_key_error(Algorithm::Rs256, testdata!("rsa1024.pub.pem")), KeyError::RsaKeySize { bits: 1024 });
    assert_eq!(KeyError::NotP256.to_string(), "not a P-256 key");
    assert_eq!(KeyError::RsaKeySize { bits: 1024 }.to_string(), "RSA key is 1024 bits; 2048 to 8192 required");
}

#[test]
fn wrong_pem_blocks() {
    let error = verify_key_error(Algorithm::Es256, testdata!("p256.sec1.key.pem"));
    assert_eq!(error.to_string(), "PEM has no PUBLIC KEY or CERTIFICATE block (found EC PRIVATE KEY)");
    let error = verify_key_error(Algorithm::Rs256, testdata!("rsa2048.pkcs8.key.pem"));
    assert_eq!(error.to_string(), "PEM has no PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE block (found PRIVATE KEY)");
    assert_eq!(
        verify_key_error(Algorithm::Es256, b"just text"),
        KeyError::NoPemBlock { expected: "PUBLIC KEY or CERTIFICATE", found: None }
    );
    // An ES256 key in an RSA PUBLIC KEY block is not looked at.
    assert!(matches!(
        verify_key_error(Algorithm::Es256, testdata!("rsa2048.pkcs1.pub.pem")),
        KeyError::NoPemBlock { .. }
    ));
    assert!(matches!(
        SigningKey::from_pem(Algorithm::Rs256, testdata!("p256.cert.pem")),
        Err(KeyError::NoPemBlock { found: Some(label), .. }) if label == "CERTIFICATE"
    ));
    let encrypted = crate::pem::encode("ENCRYPTED PRIVATE KEY", b"ciphertext");
    assert_eq!(SigningKey::from_pem(Algorithm::Rs256, encrypted.as_bytes()).err(), Some(KeyError::EncryptedPem));
}

#[test]
fn broken_key_bytes_fail_at_load_not_per_request() {
    let spki = crate::pem::parse(keys(Algorithm::Es256).2.as_bytes()).expect("PEM").remove(0).der;
    // The last byte of the point's y coordinate: the point leaves the curve.
    let mut off_curve = spki.clone();
    *off_curve.last_mut().expect("non-empty") ^= 1;
    let pem = crate::pem::encode("PUBLIC KEY", &off_curve);
    assert!(matches!(verify_key_error(Algorithm::Es256, pem.as_bytes()), KeyError::Rejected(_)));

    let truncated = crate::pem::encode("PUBLIC KEY", &spki[..spki.len() - 1]);
    assert!(matches!(verify_key_error(Algorithm::Es256, truncated.as_bytes()), KeyError::BadDer(_)));
    let trailing = crate::pem::encode("PUBLIC KEY", &[&spki[..], &[0]].concat());
    assert_eq!(verify_key_error(Algorithm::Es256, trailing.as_bytes()), KeyError::BadDer("trailing data"));
    let garbage = crate::pem::encode("CERTIFICATE", b"\x30\x03\x02\x01\x00");
    assert!(matches!(verify_key_error(Algorithm::Rs256, garbage.as_bytes()), KeyError::BadDer(_)));

    let pkcs1 = crate::pem::parse(testdata!("rsa2048.pkcs1.pub.pem")).expect("PEM").remove(0).der;
    let mut zero_modulus = pkcs1.clone();
    zero_modulus[9..9 + 256].fill(0);
    let pem = crate::pem::encode("RSA PUBLIC KEY", &zero_modulus);
    // A zero modulus is also a non-minimal DER INTEGER, which the DER reader already refuses.
    assert!(matches!(
        verify_key_error(Algorithm::Rs256, pem.as_bytes()),
        KeyError::BadDer(_) | KeyError::Rejected(_) | KeyError::RsaKeySize { .. }
    ));
    // A third element inside the SEQUENCE, and an SPKI where PKCS#1 belongs.
    let mut three = pkcs1.clone();
    three.extend_from_slice(&[0x05, 0x00]);
    three[3] += 2;
    let pem = crate::pem::encode("RSA PUBLIC KEY", &three);
    assert!(matches!(verify_key_error(Algorithm::Rs256, pem.as_bytes()), KeyError::BadDer(_) | KeyError::Rejected(_)));
    let spki = crate::pem::parse(keys(Algorithm::Rs256).2.as_bytes()).expect("PEM").remove(0).der;
    let pem = crate::pem::encode("RSA PUBLIC KEY", &spki);
    assert!(matches!(verify_key_error(Algorithm::Rs256, pem.as_bytes()), KeyError::BadDer(_)));
}

#[test]
fn signing_keys() {
    assert_eq!(SigningKey::generate(Algorithm::Hs256).err(), Some(KeyError::NoPublicKey));
    let hmac = SigningKey::generate_hmac().expect("random secret");
    assert!(matches!(&hmac, SigningKey::Hmac(secret) if secret.len() == 32));
    assert_eq!(hmac.public_key_pem().err(), Some(KeyError::NoPublicKey));
    // A P-256 key file offered for RS256 and the other way round.
    assert!(SigningKey::from_pem(Algorithm::Rs256, testdata!("p256.sec1.key.pem")).is_err());
    assert!(SigningKey::from_pem(Algorithm::Es256, testdata!("rsa2048.pkcs8.key.pem")).is_err());
    for alg in ALGORITHMS {
        assert_eq!(keys(alg).0.algorithm(), alg);
        assert_eq!(keys(alg).1.algorithm(), alg);
    }
}

#[test]
fn debug_output_holds_no_secret() {
    let signing = format!("{:?}", SigningKey::Hmac(HMAC_SECRET.to_vec()));
    let verify = format!("{:?}", VerifyKey::hmac(HMAC_SECRET).expect("HMAC key"));
    for shown in [signing, verify] {
        assert!(shown.contains("Hs256") && !shown.contains("0123") && !shown.contains("48, 49"), "{shown}");
    }
    let token = token(Algorithm::Hs256, &header(Algorithm::Hs256), &good_claims());
    let shown = format!("{:?}", crate::decode(&token).expect("decodes"));
    assert!(!shown.contains(segments(&token)[2]) && shown.contains("app-1"), "{shown}");
}
