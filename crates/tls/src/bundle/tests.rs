use super::*;
use crate::issue::{self_signed, Algorithm, Authority};

const NOW: i64 = 1_700_000_000;

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(NOW, |d| d.as_secs() as i64)
}

#[test]
fn parses_names_and_facts() {
    let pem = self_signed(&["Example.com", "*.example.com"], Algorithm::EcdsaP256, 30).expect("test setup");
    let (bundle, warnings) = parse(pem.as_bytes(), None, now()).expect("test setup");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(bundle.facts.names, vec!["example.com", "*.example.com"]);
    assert_eq!(bundle.facts.key, KeyKind::Ecdsa);
    assert_eq!(bundle.facts.chain_len, 1);
    assert!(bundle.facts.not_after > now());
}

#[test]
fn rsa_is_recognised() {
    let pem = self_signed(&["rsa.test"], Algorithm::Rsa2048, 30).expect("test setup");
    let (bundle, _) = parse(pem.as_bytes(), None, now()).expect("test setup");
    assert_eq!(bundle.facts.key, KeyKind::Rsa);
}

#[test]
fn expired_is_accepted_with_a_warning() {
    let pem = self_signed(&["old.test"], Algorithm::EcdsaP256, -2).expect("test setup");
    let (_, warnings) = parse(pem.as_bytes(), None, now()).expect("test setup");
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("expired"), "{warnings:?}");
}

#[test]
fn key_of_another_certificate_is_refused() {
    let a = self_signed(&["a.test"], Algorithm::EcdsaP256, 30).expect("test setup");
    let b = self_signed(&["b.test"], Algorithm::EcdsaP256, 30).expect("test setup");
    let cert_a = &a[..a.find("-----BEGIN PRIVATE KEY").expect("test setup")];
    let key_b = &b[b.find("-----BEGIN PRIVATE KEY").expect("test setup")..];
    let e = parse(format!("{cert_a}{key_b}").as_bytes(), None, now()).expect_err("refused");
    assert!(matches!(e, BundleError::KeyMismatch), "{e:?}");
    assert_eq!(e.to_string(), "private key does not match the certificate");
}

#[test]
fn chain_in_wrong_order_is_refused() {
    let ca = Authority::new("Test CA").expect("test setup");
    let pem = ca.issue(&["leaf.test"], Algorithm::EcdsaP256, 30).expect("test setup");
    let (bundle, _) = parse(pem.as_bytes(), None, now()).expect("test setup");
    assert_eq!(bundle.facts.chain_len, 2);
    // CA first, then the leaf.
    let blocks: Vec<&str> = pem.split_inclusive("-----END CERTIFICATE-----\n").collect();
    let swapped = format!("{}{}{}", blocks[1], blocks[0], blocks[2]);
    let e = parse(swapped.as_bytes(), None, now()).expect_err("refused");
    assert!(matches!(e, BundleError::ChainOrder { index: 1, .. }), "{e:?}");
    assert!(e.to_string().starts_with("chain in wrong order"), "{e}");
}

#[test]
fn garbage_and_missing_parts_are_refused() {
    assert_eq!(parse(b"hello", None, now()).expect_err("refused").to_string(), "no CERTIFICATE block found");
    let pem = self_signed(&["a.test"], Algorithm::EcdsaP256, 30).expect("test setup");
    let cert_only = &pem[..pem.find("-----BEGIN PRIVATE KEY").expect("test setup")];
    assert!(matches!(parse(cert_only.as_bytes(), None, now()).expect_err("refused"), BundleError::NoKey));
    let broken = pem.replacen("MI", "!!", 1);
    assert!(parse(broken.as_bytes(), None, now()).is_err());
}

#[test]
fn names_without_loading_the_key() {
    let pem = self_signed(&["x.test", "y.test"], Algorithm::EcdsaP256, 30).expect("test setup");
    assert_eq!(pem_names(pem.as_bytes()).expect("test setup"), vec!["x.test", "y.test"]);
}
