//! Config load: what key a DER structure holds, and the public key of a certificate, read with x509-parser.
//!
//! aws-lc parses and validates the key itself afterwards; this only names the key type for a clear error and makes
//! sure nothing trails the structure (aws-lc's SPKI parser would ignore trailing bytes).

use x509_parser::der_parser::asn1_rs::Tag;
use x509_parser::oid_registry::{
    OID_EC_P256, OID_KEY_TYPE_EC_PUBLIC_KEY, OID_NIST_EC_P384, OID_NIST_EC_P521, OID_PKCS1_RSAENCRYPTION,
    OID_SIG_ED25519,
};
use x509_parser::prelude::{FromDer, SubjectPublicKeyInfo, X509Certificate};
use x509_parser::public_key::RSAPublicKey;

use crate::KeyError;

/// The kind of key a `SubjectPublicKeyInfo` holds, as far as the algorithms here care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyType {
    /// `rsaEncryption`, with NULL or absent parameters.
    Rsa,
    /// `id-ecPublicKey` on the named curve P-256.
    P256,
    /// `id-ecPublicKey` on P-384.
    P384,
    /// `id-ecPublicKey` on P-521.
    P521,
    /// `id-Ed25519` (RFC 8410), without parameters.
    Ed25519,
    /// Any other algorithm or curve.
    Other,
}

/// What the `SubjectPublicKeyInfo` (RFC 5280 §4.1.2.7) that `spki` must be exactly says the key is.
pub(crate) fn spki_key_type(spki: &[u8]) -> Result<KeyType, KeyError> {
    let (rest, spki) =
        SubjectPublicKeyInfo::from_der(spki).map_err(|_| KeyError::BadDer("not a SubjectPublicKeyInfo"))?;
    nothing_trails(rest)?;
    let algorithm = &spki.algorithm;
    let params = algorithm.parameters.as_ref();
    Ok(if algorithm.algorithm == OID_PKCS1_RSAENCRYPTION {
        match params {
            None => KeyType::Rsa,
            Some(p) if p.tag() == Tag::Null && p.data.is_empty() => KeyType::Rsa,
            Some(_) => KeyType::Other,
        }
    } else if algorithm.algorithm == OID_KEY_TYPE_EC_PUBLIC_KEY {
        match params.and_then(|p| p.as_oid().ok()) {
            Some(curve) if curve == OID_EC_P256 => KeyType::P256,
            Some(curve) if curve == OID_NIST_EC_P384 => KeyType::P384,
            Some(curve) if curve == OID_NIST_EC_P521 => KeyType::P521,
            _ => KeyType::Other,
        }
    } else if algorithm.algorithm == OID_SIG_ED25519 && params.is_none() {
        KeyType::Ed25519
    } else {
        KeyType::Other
    })
}

/// Checks that `der` is exactly one PKCS#1 `RSAPublicKey` (RFC 8017 §A.1.1): a SEQUENCE of two INTEGERs.
pub(crate) fn check_pkcs1_public_key(der: &[u8]) -> Result<(), KeyError> {
    let (rest, _key) = RSAPublicKey::from_der(der).map_err(|_| KeyError::BadDer("not a PKCS#1 RSAPublicKey"))?;
    nothing_trails(rest)
}

/// The modulus and public exponent of a PKCS#1 `RSAPublicKey`, big-endian, as a JWK carries them.
pub(crate) fn rsa_components(der: &[u8]) -> Result<(&[u8], &[u8]), KeyError> {
    let (rest, key) = RSAPublicKey::from_der(der).map_err(|_| KeyError::BadDer("not a PKCS#1 RSAPublicKey"))?;
    nothing_trails(rest)?;
    Ok((strip_leading_zeros(key.modulus), strip_leading_zeros(key.exponent)))
}

/// A big-endian integer without its leading zero bytes.
pub(crate) fn strip_leading_zeros(mut bytes: &[u8]) -> &[u8] {
    while let [0, rest @ ..] = bytes {
        bytes = rest;
    }
    bytes
}

/// The `subjectPublicKeyInfo` of the X.509 certificate (RFC 5280 §4.1) that `cert` must be exactly, as its whole DER
/// encoding.
///
/// The certificate is only a container for the key here: its validity, issuer and extensions are not checked.
pub(crate) fn certificate_spki(cert: &[u8]) -> Result<&[u8], KeyError> {
    let (rest, cert) = X509Certificate::from_der(cert).map_err(|_| KeyError::BadDer("not an X.509 certificate"))?;
    nothing_trails(rest)?;
    Ok(cert.tbs_certificate.subject_pki.raw)
}

fn nothing_trails(rest: &[u8]) -> Result<(), KeyError> {
    match rest {
        [] => Ok(()),
        _ => Err(KeyError::BadDer("trailing data")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SEQUENCE { SEQUENCE { OID `algorithm`, `params` }, BIT STRING {00} }
    fn spki(algorithm: &[u8], params: &[u8]) -> Vec<u8> {
        let inner = [&[0x06, algorithm.len() as u8][..], algorithm, params].concat();
        let body = [&[0x30, inner.len() as u8][..], &inner, &[0x03, 0x01, 0x00]].concat();
        [&[0x30, body.len() as u8][..], &body].concat()
    }

    const RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
    const EC: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
    const P256: &[u8] = &[0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
    const P384: &[u8] = &[0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22];

    #[test]
    fn spki_names_the_key_type() {
        assert_eq!(spki_key_type(&spki(EC, P256)), Ok(KeyType::P256));
        assert_eq!(spki_key_type(&spki(EC, P384)), Ok(KeyType::P384));
        assert_eq!(spki_key_type(&spki(EC, &[0x06, 0x03, 0x2b, 0x65, 0x70])), Ok(KeyType::Other));
        assert_eq!(spki_key_type(&spki(EC, &[])), Ok(KeyType::Other));
        assert_eq!(spki_key_type(&spki(RSA, &[0x05, 0x00])), Ok(KeyType::Rsa));
        assert_eq!(spki_key_type(&spki(RSA, &[])), Ok(KeyType::Rsa));
        assert_eq!(spki_key_type(&spki(RSA, P256)), Ok(KeyType::Other));

        let well_formed = spki(EC, P256);
        assert_eq!(spki_key_type(&[&well_formed[..], &[0]].concat()), Err(KeyError::BadDer("trailing data")));
        assert!(spki_key_type(&well_formed[..10]).is_err());
        assert!(certificate_spki(&well_formed).is_err());
    }

    #[test]
    fn pkcs1_is_two_integers() {
        assert_eq!(check_pkcs1_public_key(&[0x30, 0x06, 0x02, 0x01, 0x05, 0x02, 0x01, 0x03]), Ok(()));
        assert!(check_pkcs1_public_key(&[0x30, 0x03, 0x02, 0x01, 0x05]).is_err());
        assert!(check_pkcs1_public_key(&[0x30, 0x06, 0x02, 0x01, 0x05, 0x02, 0x01, 0x03, 0x00]).is_err());
        assert!(check_pkcs1_public_key(&spki(RSA, &[0x05, 0x00])).is_err(), "an SPKI is not PKCS#1");
    }
}
