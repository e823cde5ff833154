//! HKDF for the TLS 1.3 key schedule, keyed once per secret.
//!
//! The key schedule derives some twenty keys from a handful of secrets, each an HKDF-Expand: one
//! HMAC keyed with the secret. aws-lc-rs' HKDF (behind rustls' aws-lc-rs provider) redoes work
//! for each of them: its extracted key keeps the salt and the input and runs Extract again inside
//! every Expand, and every HMAC starts by hashing its key into the inner and outer pads. Here the
//! cipher suites keep aws-lc's AEADs and hashes, and HKDF is rustls' own construction over HMAC
//! ([`HkdfUsingHmac`]) with aws-lc's HMAC underneath: Extract runs once, the secret's pads are
//! hashed once when it is made, and each Expand copies them and hashes its label (one block) and
//! the outer digest (one block). The outputs are the same bytes (RFC 5869); the handshake does
//! about a third of the SHA-256 blocks it did.

use aws_lc_rs::hmac;
use rustls::crypto::hmac::{Hmac, Key, Tag};
use rustls::crypto::tls13::HkdfUsingHmac;
use rustls::{SupportedCipherSuite, Tls13CipherSuite};
use std::sync::LazyLock;

/// aws-lc's HMAC as rustls' [`Hmac`].
struct AwsLcHmac(hmac::Algorithm);

impl Hmac for AwsLcHmac {
    fn with_key(&self, key: &[u8]) -> Box<dyn Key> {
        Box::new(AwsLcHmacKey(hmac::Key::new(self.0, key)))
    }
    fn hash_output_len(&self) -> usize {
        self.0.digest_algorithm().output_len()
    }
}

/// A keyed HMAC: the pads are hashed once, here, and copied by every signature.
struct AwsLcHmacKey(hmac::Key);

impl Key for AwsLcHmacKey {
    fn sign_concat(&self, first: &[u8], middle: &[&[u8]], last: &[u8]) -> Tag {
        let mut ctx = hmac::Context::with_key(&self.0);
        ctx.update(first);
        for part in middle {
            ctx.update(part);
        }
        ctx.update(last);
        Tag::new(ctx.sign().as_ref())
    }
    fn tag_len(&self) -> usize {
        self.0.algorithm().digest_algorithm().output_len()
    }
}

static HMAC_SHA256: AwsLcHmac = AwsLcHmac(hmac::HMAC_SHA256);
static HMAC_SHA384: AwsLcHmac = AwsLcHmac(hmac::HMAC_SHA384);
static HKDF_SHA256: HkdfUsingHmac<'static> = HkdfUsingHmac(&HMAC_SHA256);
static HKDF_SHA384: HkdfUsingHmac<'static> = HkdfUsingHmac(&HMAC_SHA384);

/// `suite` (a TLS 1.3 suite of the aws-lc-rs provider) with `hkdf`, the HKDF above of its hash.
fn keyed(suite: SupportedCipherSuite, hkdf: &'static HkdfUsingHmac<'static>) -> Tls13CipherSuite {
    let SupportedCipherSuite::Tls13(s) = suite else { unreachable!("a TLS 1.3 cipher suite") };
    Tls13CipherSuite {
        common: rustls::CipherSuiteCommon {
            suite: s.common.suite,
            hash_provider: s.common.hash_provider,
            confidentiality_limit: s.common.confidentiality_limit,
        },
        hkdf_provider: hkdf,
        aead_alg: s.aead_alg,
        quic: s.quic,
    }
}

use rustls::crypto::aws_lc_rs::cipher_suite as aws;

static AES_128_GCM_SHA256: LazyLock<Tls13CipherSuite> =
    LazyLock::new(|| keyed(aws::TLS13_AES_128_GCM_SHA256, &HKDF_SHA256));
static AES_256_GCM_SHA384: LazyLock<Tls13CipherSuite> =
    LazyLock::new(|| keyed(aws::TLS13_AES_256_GCM_SHA384, &HKDF_SHA384));
static CHACHA20_POLY1305_SHA256: LazyLock<Tls13CipherSuite> =
    LazyLock::new(|| keyed(aws::TLS13_CHACHA20_POLY1305_SHA256, &HKDF_SHA256));

/// `suite`, a TLS 1.3 suite of the aws-lc-rs provider, with the HKDF of this module; other
/// suites as they are.
pub(crate) fn with_keyed_hkdf(suite: SupportedCipherSuite) -> SupportedCipherSuite {
    let SupportedCipherSuite::Tls13(s) = suite else {
        return suite;
    };
    let ours: &'static Tls13CipherSuite = match s.common.suite {
        rustls::CipherSuite::TLS13_AES_128_GCM_SHA256 => &AES_128_GCM_SHA256,
        rustls::CipherSuite::TLS13_AES_256_GCM_SHA384 => &AES_256_GCM_SHA384,
        rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256 => &CHACHA20_POLY1305_SHA256,
        _ => return suite,
    };
    SupportedCipherSuite::Tls13(ours)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::crypto::tls13::{Hkdf, HkdfExpander};

    /// aws-lc-rs' own HKDF, as rustls' aws-lc-rs provider wires it.
    fn theirs(suite: SupportedCipherSuite) -> &'static dyn Hkdf {
        match suite {
            SupportedCipherSuite::Tls13(s) => s.hkdf_provider,
            _ => unreachable!(),
        }
    }

    fn ours(suite: SupportedCipherSuite) -> &'static dyn Hkdf {
        match with_keyed_hkdf(suite) {
            SupportedCipherSuite::Tls13(s) => s.hkdf_provider,
            _ => unreachable!(),
        }
    }

    fn expand(e: &dyn HkdfExpander, info: &[&[u8]], len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        e.expand_slice(info, &mut out).expect("length");
        out
    }

    /// RFC 5869, test case 1 (SHA-256).
    #[test]
    fn matches_rfc_5869() {
        let ikm = [0x0bu8; 22];
        let salt: Vec<u8> = (0x00..=0x0c).collect();
        let info: Vec<u8> = (0xf0..=0xf9).collect();
        let okm = expand(&*ours(aws::TLS13_AES_128_GCM_SHA256).extract_from_secret(Some(&salt), &ikm), &[&info], 42);
        let want = "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865";
        assert_eq!(data_encoding::HEXLOWER.encode(&okm), want);
    }

    /// Every operation the key schedule uses gives aws-lc-rs' bytes, for every suite and for
    /// inputs of the lengths TLS uses.
    #[test]
    fn agrees_with_aws_lc_rs() {
        for suite in [aws::TLS13_AES_128_GCM_SHA256, aws::TLS13_AES_256_GCM_SHA384, aws::TLS13_CHACHA20_POLY1305_SHA256]
        {
            let (a, b) = (ours(suite), theirs(suite));
            for (salt, secret) in
                [(None, &[0x11u8; 32][..]), (Some(&[0x22u8; 48][..]), &[0x33u8; 48][..]), (None, &[][..])]
            {
                let (ea, eb) = (a.extract_from_secret(salt, secret), b.extract_from_secret(salt, secret));
                for (info, len) in
                    [(&[&b"tls13 c hs traffic"[..], &[0x44; 32][..]][..], 32), (&[&b"key"[..]][..], 16), (&[][..], 80)]
                {
                    assert_eq!(expand(&*ea, info, len), expand(&*eb, info, len));
                }
                assert_eq!(ea.expand_block(&[b"derived"]).as_ref(), eb.expand_block(&[b"derived"]).as_ref());
            }
            let (za, zb) = (a.extract_from_zero_ikm(None), b.extract_from_zero_ikm(None));
            assert_eq!(za.expand_block(&[b"x"]).as_ref(), zb.expand_block(&[b"x"]).as_ref());
            let okm = zb.expand_block(&[b"okm"]);
            assert_eq!(
                a.expander_for_okm(&okm).expand_block(&[b"y"]).as_ref(),
                b.expander_for_okm(&okm).expand_block(&[b"y"]).as_ref()
            );
            assert_eq!(a.hmac_sign(&okm, b"finished").as_ref(), b.hmac_sign(&okm, b"finished").as_ref());
        }
    }
}
