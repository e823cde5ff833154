//! Config load: just enough DER to say what key a PEM block holds, and to take the public key out of a certificate.
//!
//! aws-lc parses and validates the key itself afterwards; this walk only names the key type for a clear error and
//! makes sure nothing trails the structure (aws-lc's SPKI parser would ignore trailing bytes).

use crate::KeyError;

const INTEGER: u8 = 0x02;
const BIT_STRING: u8 = 0x03;
const OID: u8 = 0x06;
const SEQUENCE: u8 = 0x30;
/// `[0] EXPLICIT`, the optional version of a `TBSCertificate`.
const CONTEXT_0: u8 = 0xa0;

/// 1.2.840.113549.1.1.1
pub(crate) const OID_RSA_ENCRYPTION: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
/// 1.2.840.10045.2.1
pub(crate) const OID_EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
/// The EC parameters naming P-256: OID 1.2.840.10045.3.1.7 (`prime256v1`), tag and length included.
pub(crate) const P256_PARAMS: &[u8] = &[OID, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];

/// One tag-length-value: its tag, its contents, and its whole encoding.
#[derive(Clone, Copy)]
struct Tlv<'a> {
    tag: u8,
    content: &'a [u8],
    whole: &'a [u8],
}

/// Reads one TLV from the front of `input`: definite, minimal lengths below 16 MiB, low tag numbers only.
fn read(input: &[u8]) -> Result<(Tlv<'_>, &[u8]), KeyError> {
    let [tag, first_len, rest @ ..] = input else {
        return Err(KeyError::BadDer("truncated"));
    };
    if tag & 0x1f == 0x1f {
        return Err(KeyError::BadDer("unsupported tag"));
    }
    let (len, rest) = match *first_len {
        short @ 0..=0x7f => (usize::from(short), rest),
        0x81..=0x83 => {
            let n = usize::from(first_len & 0x7f);
            let (bytes, rest) = rest.split_at_checked(n).ok_or(KeyError::BadDer("truncated"))?;
            let len = bytes.iter().fold(0usize, |len, b| (len << 8) | usize::from(*b));
            if len < 0x80 || bytes.first() == Some(&0) {
                return Err(KeyError::BadDer("non-minimal length"));
            }
            (len, rest)
        }
        _ => return Err(KeyError::BadDer("unsupported length")),
    };
    let (content, rest) = rest.split_at_checked(len).ok_or(KeyError::BadDer("truncated"))?;
    let whole = input.get(..input.len() - rest.len()).ok_or(KeyError::BadDer("truncated"))?;
    Ok((Tlv { tag: *tag, content, whole }, rest))
}

fn read_tagged<'a>(input: &'a [u8], tag: u8, what: &'static str) -> Result<(Tlv<'a>, &'a [u8]), KeyError> {
    match read(input)? {
        (tlv, rest) if tlv.tag == tag => Ok((tlv, rest)),
        _ => Err(KeyError::BadDer(what)),
    }
}

/// The one TLV that `input` must be exactly.
fn single<'a>(input: &'a [u8], tag: u8, what: &'static str) -> Result<Tlv<'a>, KeyError> {
    match read_tagged(input, tag, what)? {
        (tlv, []) => Ok(tlv),
        _ => Err(KeyError::BadDer("trailing data")),
    }
}

/// The algorithm of a `SubjectPublicKeyInfo` (RFC 5280 §4.1.2.7): its OID, and its parameters' encoding if any.
pub(crate) fn spki_algorithm(spki: &[u8]) -> Result<(&[u8], Option<&[u8]>), KeyError> {
    const NOT_SPKI: &str = "not a SubjectPublicKeyInfo";
    let spki = single(spki, SEQUENCE, NOT_SPKI)?;
    let (algorithm, rest) = read_tagged(spki.content, SEQUENCE, NOT_SPKI)?;
    let (_key, rest) = read_tagged(rest, BIT_STRING, NOT_SPKI)?;
    if !rest.is_empty() {
        return Err(KeyError::BadDer(NOT_SPKI));
    }
    let (oid, params) = read_tagged(algorithm.content, OID, NOT_SPKI)?;
    let params = match params {
        [] => None,
        params => Some(read(params).and_then(|(tlv, rest)| match rest {
            [] => Ok(tlv.whole),
            _ => Err(KeyError::BadDer(NOT_SPKI)),
        })?),
    };
    Ok((oid.content, params))
}

/// Checks that `der` is a PKCS#1 `RSAPublicKey` (RFC 8017 §A.1.1): a SEQUENCE of two INTEGERs.
pub(crate) fn check_pkcs1_public_key(der: &[u8]) -> Result<(), KeyError> {
    const NOT_PKCS1: &str = "not a PKCS#1 RSAPublicKey";
    let key = single(der, SEQUENCE, NOT_PKCS1)?;
    let (_n, rest) = read_tagged(key.content, INTEGER, NOT_PKCS1)?;
    single(rest, INTEGER, NOT_PKCS1).map(|_e| ())
}

/// The `subjectPublicKeyInfo` of an X.509 certificate (RFC 5280 §4.1), as its whole DER encoding.
///
/// Nothing else of the certificate is read or checked: it is only a container for the key here.
pub(crate) fn certificate_spki(cert: &[u8]) -> Result<&[u8], KeyError> {
    const NOT_CERT: &str = "not an X.509 certificate";
    let cert = single(cert, SEQUENCE, NOT_CERT)?;
    let (tbs, _signature_and_algorithm) = read_tagged(cert.content, SEQUENCE, NOT_CERT)?;
    let mut fields = tbs.content;
    if let (Tlv { tag: CONTEXT_0, .. }, rest) = read(fields)? {
        fields = rest;
    }
    // serialNumber, signature, issuer, validity, subject.
    for _ in 0..5 {
        fields = read(fields)?.1;
    }
    let (spki, _extensions) = read_tagged(fields, SEQUENCE, NOT_CERT)?;
    Ok(spki.whole)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_are_bounded_and_minimal() {
        assert!(read(&[0x04, 0x01, 0xaa]).is_ok());
        assert!(read(&[0x04, 0x81, 0x80]).is_err(), "claims 128 bytes, has 0");
        assert!(read(&[0x04, 0x81, 0x05, 1, 2, 3, 4, 5]).is_err(), "non-minimal long form");
        assert!(read(&[0x04, 0x82, 0x00, 0x80]).is_err(), "leading zero length byte");
        assert!(read(&[0x04, 0x80]).is_err(), "indefinite length");
        assert!(read(&[0x04, 0x84, 0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(read(&[0x1f, 0x01, 0x00]).is_err(), "high tag number");
        assert!(read(&[0x04]).is_err() && read(&[]).is_err());
        let long = [&[0x04, 0x81, 0x80][..], &[0u8; 0x80]].concat();
        let (tlv, rest) = read(&long).expect("minimal long form");
        assert_eq!((tlv.content.len(), tlv.whole.len(), rest.len()), (0x80, 0x83, 0));
    }

    #[test]
    fn spki_shape_is_checked() {
        // SEQUENCE { SEQUENCE { OID ecPublicKey, OID P-256 }, BIT STRING {00} }
        let mut spki = vec![0x30, 0x18, 0x30, 0x13, 0x06, 0x07];
        spki.extend_from_slice(OID_EC_PUBLIC_KEY);
        spki.extend_from_slice(P256_PARAMS);
        spki.extend_from_slice(&[0x03, 0x01, 0x00]);
        let (oid, params) = spki_algorithm(&spki).expect("well-formed");
        assert_eq!(oid, OID_EC_PUBLIC_KEY);
        assert_eq!(params, Some(P256_PARAMS));

        spki.push(0);
        assert_eq!(spki_algorithm(&spki), Err(KeyError::BadDer("trailing data")));
        assert!(spki_algorithm(&spki[..10]).is_err());
        assert!(certificate_spki(&spki[..spki.len() - 1]).is_err());
    }

    #[test]
    fn pkcs1_is_two_integers() {
        assert_eq!(check_pkcs1_public_key(&[0x30, 0x06, 0x02, 0x01, 0x05, 0x02, 0x01, 0x03]), Ok(()));
        assert!(check_pkcs1_public_key(&[0x30, 0x03, 0x02, 0x01, 0x05]).is_err());
        assert!(check_pkcs1_public_key(&[0x30, 0x09, 0x02, 0x01, 0x05, 0x02, 0x01, 0x03, 0x05, 0x00]).is_err());
    }
}
