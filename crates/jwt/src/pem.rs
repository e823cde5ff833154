//! Config load: strict PEM (RFC 7468) in and out, for key files written by operators and by `openssl`.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

use crate::KeyError;

/// One `-----BEGIN label-----` … `-----END label-----` block, decoded.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Block<'a> {
    pub(crate) label: &'a str,
    pub(crate) der: Vec<u8>,
}

/// Every block of `pem`, in order. Text between blocks is ignored, as RFC 7468 allows; inside a block only base64
/// lines are allowed (no `Proc-Type` headers: those mean encryption).
pub(crate) fn parse(pem: &[u8]) -> Result<Vec<Block<'_>>, KeyError> {
    let text = std::str::from_utf8(pem).map_err(|_| KeyError::BadPem("not UTF-8"))?;
    let mut blocks = Vec::new();
    let mut open: Option<(&str, String)> = None;
    for line in text.lines().map(str::trim) {
        match open.take() {
            None => {
                if let Some(label) = boundary(line, "BEGIN") {
                    open = Some((label, String::new()));
                } else if boundary(line, "END").is_some() {
                    return Err(KeyError::BadPem("END line without BEGIN"));
                }
            }
            Some((label, body)) if line.starts_with("-----") => {
                if boundary(line, "END") != Some(label) {
                    return Err(KeyError::BadPem("BEGIN and END lines do not match"));
                }
                if body.is_empty() {
                    return Err(KeyError::BadPem("empty block"));
                }
                let der = STANDARD.decode(&body).map_err(|_| KeyError::BadPem("body is not base64"))?;
                blocks.push(Block { label, der });
            }
            Some((label, mut body)) => {
                if line.contains(':') {
                    return Err(if line.starts_with("Proc-Type:") || line.starts_with("DEK-Info:") {
                        KeyError::EncryptedPem
                    } else {
                        KeyError::BadPem("headers inside a block are not supported")
                    });
                }
                body.push_str(line);
                open = Some((label, body));
            }
        }
    }
    if open.is_some() {
        return Err(KeyError::BadPem("block has no END line"));
    }
    Ok(blocks)
}

/// The label of a `-----{kind} label-----` line.
fn boundary<'a>(line: &'a str, kind: &str) -> Option<&'a str> {
    let label = line.strip_prefix("-----")?.strip_prefix(kind)?.strip_prefix(' ')?.strip_suffix("-----")?;
    (!label.is_empty() && label.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b' '))
        .then_some(label)
}

/// `der` as a PEM block labelled `label`, 64 base64 characters a line.
pub(crate) fn encode(label: &str, der: &[u8]) -> String {
    let body = STANDARD.encode(der);
    let mut pem = format!("-----BEGIN {label}-----\n");
    for line in body.as_bytes().chunks(64) {
        // Base64 output is ASCII, so every chunk is UTF-8.
        pem.extend(line.iter().map(|&b| char::from(b)));
        pem.push('\n');
    }
    pem.push_str(&format!("-----END {label}-----\n"));
    pem
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_then_parse() {
        let der: Vec<u8> = (0..=255).collect();
        let pem = encode("PUBLIC KEY", &der);
        assert!(pem.lines().all(|l| l.len() <= 64));
        let text = format!("explanatory text\r\n{}\n{}", pem.replace('\n', "\r\n"), encode("CERTIFICATE", b"x"));
        let blocks = parse(text.as_bytes()).expect("valid PEM");
        assert_eq!(
            blocks,
            vec![Block { label: "PUBLIC KEY", der }, Block { label: "CERTIFICATE", der: b"x".to_vec() }]
        );
        assert_eq!(parse(b"no blocks at all"), Ok(vec![]));
    }

    #[test]
    fn broken_pem_is_refused() {
        let cases: [(&[u8], KeyError); 8] = [
            (b"-----BEGIN PUBLIC KEY-----\nAAAA\n", KeyError::BadPem("block has no END line")),
            (
                b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
                KeyError::BadPem("BEGIN and END lines do not match"),
            ),
            (b"-----BEGIN PUBLIC KEY-----\n-----END PUBLIC KEY-----\n", KeyError::BadPem("empty block")),
            (b"-----BEGIN PUBLIC KEY-----\nAA*A\n-----END PUBLIC KEY-----\n", KeyError::BadPem("body is not base64")),
            (b"-----BEGIN PUBLIC KEY-----\nAAA\n-----END PUBLIC KEY-----\n", KeyError::BadPem("body is not base64")),
            (b"-----END PUBLIC KEY-----\n", KeyError::BadPem("END line without BEGIN")),
            (
                b"-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nAAAA\n-----END RSA PRIVATE KEY-----\n",
                KeyError::EncryptedPem,
            ),
            (b"\xff", KeyError::BadPem("not UTF-8")),
        ];
        for (pem, expected) in cases {
            assert_eq!(parse(pem), Err(expected), "{}", String::from_utf8_lossy(pem));
        }
        assert!(
            parse(b"-----BEGIN PUBLIC KEY-----\n-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n").is_err()
        );
    }
}
