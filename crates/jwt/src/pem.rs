//! Config load: PEM (RFC 7468) in and out, for key files written by operators and by `openssl`, with the `pem`
//! crate. It keeps each block's label whatever it is, so `RSA PUBLIC KEY` and `ENCRYPTED PRIVATE KEY` blocks can be
//! named in errors (rustls-pki-types skips labels it does not know).

use ::pem::{EncodeConfig, LineEnding, Pem, PemError};

use crate::KeyError;

/// One `-----BEGIN label-----` … `-----END label-----` block, decoded.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Block {
    pub(crate) label: String,
    pub(crate) der: Vec<u8>,
}

/// Every block of `pem`, in order. Text between blocks is ignored, as RFC 7468 allows; inside a block only base64
/// lines are allowed (no `Proc-Type` headers: those mean encryption).
pub(crate) fn parse(pem: &[u8]) -> Result<Vec<Block>, KeyError> {
    let blocks = ::pem::parse_many(pem).map_err(bad_pem)?;
    // The parser passes over a BEGIN line it finds no END line for.
    if pem.windows(BEGIN.len()).filter(|w| *w == BEGIN).count() > blocks.len() {
        return Err(KeyError::BadPem("block has no END line"));
    }
    blocks.into_iter().map(block).collect()
}

const BEGIN: &[u8] = b"-----BEGIN ";

fn block(pem: Pem) -> Result<Block, KeyError> {
    let mut headers = pem.headers().iter();
    if let Some((name, _)) = headers.next() {
        return Err(if name == "Proc-Type" || name == "DEK-Info" {
            KeyError::EncryptedPem
        } else {
            KeyError::BadPem("headers inside a block are not supported")
        });
    }
    if pem.contents().is_empty() {
        return Err(KeyError::BadPem("empty block"));
    }
    Ok(Block { label: pem.tag().to_owned(), der: pem.into_contents() })
}

fn bad_pem(error: PemError) -> KeyError {
    KeyError::BadPem(match error {
        PemError::MismatchedTags(..) => "BEGIN and END lines do not match",
        PemError::InvalidData(_) => "body is not base64",
        PemError::NotUtf8(_) => "not UTF-8",
        PemError::InvalidHeader(_) => "blank line inside a block",
        _ => "broken BEGIN or END line",
    })
}

/// `der` as a PEM block labelled `label`, 64 base64 characters a line.
pub(crate) fn encode(label: &str, der: &[u8]) -> String {
    ::pem::encode_config(&Pem::new(label, der), EncodeConfig::new().set_line_ending(LineEnding::LF))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_then_parse() {
        let der: Vec<u8> = (0..=255).collect();
        let pem = encode("PUBLIC KEY", &der);
        assert!(pem.starts_with("-----BEGIN PUBLIC KEY-----\n") && pem.ends_with("\n-----END PUBLIC KEY-----\n"));
        assert!(pem.lines().all(|l| l.len() <= 64) && !pem.contains('\r'));
        let text = format!("explanatory text\r\n{}\n{}", pem.replace('\n', "\r\n"), encode("CERTIFICATE", b"x"));
        let blocks = parse(text.as_bytes()).expect("valid PEM");
        assert_eq!(
            blocks,
            vec![Block { label: "PUBLIC KEY".into(), der }, Block { label: "CERTIFICATE".into(), der: b"x".to_vec() }]
        );
        assert_eq!(parse(b"no blocks at all"), Ok(vec![]));
    }

    #[test]
    fn broken_pem_is_refused() {
        let cases: [(&[u8], KeyError); 6] = [
            (
                b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
                KeyError::BadPem("BEGIN and END lines do not match"),
            ),
            (b"-----BEGIN PUBLIC KEY-----\n-----END PUBLIC KEY-----\n", KeyError::BadPem("empty block")),
            (b"-----BEGIN PUBLIC KEY-----\nAA*A\n-----END PUBLIC KEY-----\n", KeyError::BadPem("body is not base64")),
            (b"-----BEGIN PUBLIC KEY-----\nAAA\n-----END PUBLIC KEY-----\n", KeyError::BadPem("body is not base64")),
            (
                b"-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\nAAAA\n-----END RSA PRIVATE KEY-----\n",
                KeyError::EncryptedPem,
            ),
            (b"-----BEGIN \xff-----\nAAAA\n-----END \xff-----\n", KeyError::BadPem("not UTF-8")),
        ];
        for (pem, expected) in cases {
            assert_eq!(parse(pem), Err(expected), "{}", String::from_utf8_lossy(pem));
        }
        for refused in [
            &b"-----BEGIN PUBLIC KEY-----\n-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"[..],
            b"-----BEGIN PUBLIC KEY-----\nX-Note: 1\n\nAAAA\n-----END PUBLIC KEY-----\n",
        ] {
            assert!(parse(refused).is_err(), "{}", String::from_utf8_lossy(refused));
        }
        let complete = encode("PUBLIC KEY", b"x");
        for unfinished in [String::new(), complete] {
            let pem = format!("{unfinished}-----BEGIN PUBLIC KEY-----\nAAAA\n");
            assert_eq!(parse(pem.as_bytes()), Err(KeyError::BadPem("block has no END line")), "{pem}");
        }
        assert_eq!(
            parse(b"-----BEGIN PUBLIC KEY-----\nAAAA\n\nAAAA\n-----END PUBLIC KEY-----\n"),
            Err(KeyError::BadPem("blank line inside a block"))
        );
    }
}
