//! Accept stage, `proxy_protocol` listeners: what the PROXY protocol header a balancer sends before
//! anything else says about the client. Version 1 (a text line) and version 2 (binary) are told
//! apart by their first bytes and parsed by the `ppp` crate; this module decides when a header is
//! whole, how long it is, and which addresses count.
//!
//! Parsing is monotone, so it can run on whatever has arrived: a prefix of a valid header is
//! always [`Parsed::Incomplete`], never an error, and a header parses the same whatever follows
//! it. (`ppp` alone refuses some prefixes of valid v1 lines, e.g. one that ends just after the
//! source port's space, so a v1 line is handed to it only once its `\n` has arrived; and it takes
//! some lines that end without `\r`, which are refused here: the fuzz target `proxy_header`
//! found that one.)

use ppp::PartialResult;
use std::fmt;
use std::net::SocketAddr;

/// The longest header accepted, in bytes. A v1 line is at most 107 bytes (the specification's
/// limit); a v2 header is 16 bytes and the length its 15th and 16th give, which could say 64 KiB.
/// Balancers send addresses and a few small TLVs (an AWS endpoint id, an Azure link id), far less.
pub const MAX_HEADER: usize = 4096;

/// The longest v1 line, `\r\n` included (the specification's limit).
const MAX_V1: usize = 107;
/// Every v1 line starts so.
const V1_SIGNATURE: &[u8] = b"PROXY ";
/// The fixed part of a v2 header: signature, version and command, family, length.
const V2_FIXED: usize = 16;

/// The header's version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// The text line (`PROXY TCP4 …\r\n`).
    V1,
    /// The binary header.
    V2,
}

impl Version {
    /// The version's number, 1 or 2.
    pub fn number(self) -> u8 {
        match self {
            Version::V1 => 1,
            Version::V2 => 2,
        }
    }
}

/// A whole header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProxyHeader {
    /// Which version it was.
    pub version: Version,
    /// Its length in bytes: what follows belongs to the client (TLS, HTTP).
    pub len: usize,
    /// The client's address and the one it connected to, as the balancer saw them. `None` when
    /// the header names no TCP client, and the connection's own addresses stand: a v2 `LOCAL`
    /// header (the balancer's own health check), a v1 `UNKNOWN` line, a v2 `PROXY` header of
    /// family `UNSPEC` or `UNIX`.
    pub addresses: Option<Addresses>,
}

/// The two ends of the client's connection to the balancer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Addresses {
    /// The client.
    pub source: SocketAddr,
    /// Where the client connected (the balancer's address).
    pub destination: SocketAddr,
}

/// What the bytes so far come to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A valid start of a header; more bytes are needed.
    Incomplete,
    /// A whole header, in the first [`ProxyHeader::len`] bytes.
    Complete(ProxyHeader),
}

/// Why the bytes cannot be a PROXY protocol header, however many more arrive.
#[derive(Debug, PartialEq)]
#[non_exhaustive]
pub enum HeaderError {
    /// They start with neither signature (a client speaking HTTP or TLS directly, garbage).
    NoSignature,
    /// A v1 line that `ppp` refuses.
    V1(ppp::v1::BinaryParseError),
    /// A v1 line without its `\n` within 107 bytes.
    V1TooLong,
    /// A v2 header that `ppp` refuses (version, command, family, lengths, TLVs).
    V2(ppp::v2::ParseError),
    /// A v2 header longer than [`MAX_HEADER`].
    V2TooLong {
        /// The length it announces, fixed part included.
        len: usize,
    },
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeaderError::NoSignature => f.write_str("no PROXY protocol signature"),
            HeaderError::V1(e) => write!(f, "invalid PROXY protocol v1 line: {e}"),
            HeaderError::V1TooLong => write!(f, "PROXY protocol v1 line longer than {MAX_V1} bytes"),
            HeaderError::V2(e) => write!(f, "invalid PROXY protocol v2 header: {e}"),
            HeaderError::V2TooLong { len } => {
                write!(f, "PROXY protocol v2 header of {len} bytes, over the {MAX_HEADER} accepted")
            }
        }
    }
}

impl std::error::Error for HeaderError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HeaderError::V1(e) => Some(e),
            HeaderError::V2(e) => Some(e),
            _ => None,
        }
    }
}

/// Reads the header at the start of `bytes` (the connection's first bytes, as many as arrived).
pub fn parse(bytes: &[u8]) -> Result<Parsed, HeaderError> {
    if bytes.is_empty() {
        Ok(Parsed::Incomplete)
    } else if starts_as(bytes, ppp::v2::PROTOCOL_PREFIX) {
        v2(bytes)
    } else if starts_as(bytes, V1_SIGNATURE) {
        v1(bytes)
    } else {
        Err(HeaderError::NoSignature)
    }
}

/// Whether `bytes` and `signature` agree as far as both go.
fn starts_as(bytes: &[u8], signature: &[u8]) -> bool {
    let n = bytes.len().min(signature.len());
    bytes[..n] == signature[..n]
}

fn v1(bytes: &[u8]) -> Result<Parsed, HeaderError> {
    let window = &bytes[..bytes.len().min(MAX_V1)];
    let Some(end) = window.iter().position(|&b| b == b'\n') else {
        return if bytes.len() >= MAX_V1 { Err(HeaderError::V1TooLong) } else { Ok(Parsed::Incomplete) };
    };
    // The line is whole: whatever `ppp` finds missing now is missing for good. `ppp` takes a
    // line that ends in ` \n` without the `\r` (`PROXY UNKNOWN \n`), which the specification
    // does not: the line must end in CRLF, and be all that `ppp` read.
    let line = &bytes[..=end];
    let header = ppp::v1::Header::try_from(line).map_err(HeaderError::V1)?;
    if !line.ends_with(b"\r\n") || header.header.len() != line.len() {
        return Err(HeaderError::V1(ppp::v1::ParseError::InvalidSuffix.into()));
    }
    let addresses = match header.addresses {
        ppp::v1::Addresses::Tcp4(a) => Some(Addresses {
            source: (a.source_address, a.source_port).into(),
            destination: (a.destination_address, a.destination_port).into(),
        }),
        ppp::v1::Addresses::Tcp6(a) => Some(Addresses {
            source: (a.source_address, a.source_port).into(),
            destination: (a.destination_address, a.destination_port).into(),
        }),
        ppp::v1::Addresses::Unknown => None,
    };
    Ok(Parsed::Complete(ProxyHeader { version: Version::V1, len: header.header.len(), addresses }))
}

fn v2(bytes: &[u8]) -> Result<Parsed, HeaderError> {
    if let [_, _, _, _, _, _, _, _, _, _, _, _, _, _, hi, lo, ..] = bytes {
        let len = V2_FIXED + usize::from(u16::from_be_bytes([*hi, *lo]));
        if len > MAX_HEADER {
            return Err(HeaderError::V2TooLong { len });
        }
    }
    let header = match ppp::v2::Header::try_from(bytes) {
        Ok(h) => h,
        Err(e) if e.is_incomplete() => return Ok(Parsed::Incomplete),
        Err(e) => return Err(HeaderError::V2(e)),
    };
    // TLVs are not used, but a header whose TLV area does not add up is not a header.
    if let Some(Err(e)) = header.tlvs().find(Result::is_err) {
        return Err(HeaderError::V2(e));
    }
    let addresses = match (header.command, header.addresses) {
        (ppp::v2::Command::Proxy, ppp::v2::Addresses::IPv4(a)) => Some(Addresses {
            source: (a.source_address, a.source_port).into(),
            destination: (a.destination_address, a.destination_port).into(),
        }),
        (ppp::v2::Command::Proxy, ppp::v2::Addresses::IPv6(a)) => Some(Addresses {
            source: (a.source_address, a.source_port).into(),
            destination: (a.destination_address, a.destination_port).into(),
        }),
        _ => None,
    };
    Ok(Parsed::Complete(ProxyHeader { version: Version::V2, len: header.len(), addresses }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A v2 header: command (0 LOCAL, 1 PROXY), family and transport byte, address block, TLVs.
    fn v2_header(command: u8, family: u8, addresses: &[u8], tlvs: &[u8]) -> Vec<u8> {
        let mut h = ppp::v2::PROTOCOL_PREFIX.to_vec();
        h.push(0x20 | command);
        h.push(family);
        let len = u16::try_from(addresses.len() + tlvs.len()).expect("short");
        h.extend_from_slice(&len.to_be_bytes());
        h.extend_from_slice(addresses);
        h.extend_from_slice(tlvs);
        h
    }

    /// 192.0.2.7:51000 → 198.51.100.1:443.
    const V4_ADDRESSES: [u8; 12] = [192, 0, 2, 7, 198, 51, 100, 1, 0xc7, 0x38, 0x01, 0xbb];

    fn complete(bytes: &[u8]) -> ProxyHeader {
        match parse(bytes) {
            Ok(Parsed::Complete(h)) => h,
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(bytes)),
        }
    }

    fn source(h: &ProxyHeader) -> Option<String> {
        h.addresses.map(|a| a.source.to_string())
    }

    /// Every strict prefix of `header` needs more, and the whole parses the same with anything
    /// after it.
    fn check_prefixes(header: &[u8]) -> ProxyHeader {
        for end in 0..header.len() {
            assert_eq!(parse(&header[..end]), Ok(Parsed::Incomplete), "prefix of {end} bytes");
        }
        let whole = complete(header);
        assert_eq!(whole.len, header.len());
        let mut followed = header.to_vec();
        followed.extend_from_slice(b"\x16\x03\x01\x02\x00GET / HTTP/1.1\r\n");
        assert_eq!(complete(&followed), whole, "what follows the header changed it");
        whole
    }

    #[test]
    fn v1_lines_name_the_client_or_nobody() {
        let h = check_prefixes(b"PROXY TCP4 192.0.2.7 198.51.100.1 51000 443\r\n");
        assert_eq!((h.version, source(&h).as_deref()), (Version::V1, Some("192.0.2.7:51000")));
        let h = check_prefixes(b"PROXY TCP6 2001:db8::7 2001:db8::1 51000 443\r\n");
        assert_eq!(source(&h).as_deref(), Some("[2001:db8::7]:51000"));
        assert_eq!(check_prefixes(b"PROXY UNKNOWN\r\n").addresses, None);
        assert_eq!(check_prefixes(b"PROXY UNKNOWN 192.0.2.7 198.51.100.1 1 2\r\n").addresses, None);
    }

    #[test]
    fn v2_headers_name_the_client_except_local_and_other_families() {
        let h = check_prefixes(&v2_header(1, 0x11, &V4_ADDRESSES, &[]));
        assert_eq!((h.version, source(&h).as_deref()), (Version::V2, Some("192.0.2.7:51000")));
        let mut v6 = [0u8; 36];
        v6[..16].copy_from_slice(&"2001:db8::7".parse::<std::net::Ipv6Addr>().expect("ip").octets());
        v6[32..34].copy_from_slice(&51000u16.to_be_bytes());
        let h = check_prefixes(&v2_header(1, 0x21, &v6, &[]));
        assert_eq!(source(&h).as_deref(), Some("[2001:db8::7]:51000"));
        // A TLV (PP2_TYPE_AUTHORITY, "example.com") and a NOOP of three bytes.
        let tlvs = [&[0x02, 0, 11][..], b"example.com", &[0x04, 0, 3, 0, 0, 0]].concat();
        let h = check_prefixes(&v2_header(1, 0x11, &V4_ADDRESSES, &tlvs));
        assert_eq!(source(&h).as_deref(), Some("192.0.2.7:51000"));
        assert_eq!(check_prefixes(&v2_header(0, 0x00, &[], &[])).addresses, None, "LOCAL");
        assert_eq!(check_prefixes(&v2_header(0, 0x11, &V4_ADDRESSES, &[])).addresses, None, "LOCAL with addresses");
        assert_eq!(check_prefixes(&v2_header(1, 0x00, &[], &[])).addresses, None, "PROXY, family UNSPEC");
        assert_eq!(check_prefixes(&v2_header(1, 0x31, &[0; 216], &[])).addresses, None, "PROXY, family UNIX");
    }

    #[test]
    fn a_v1_line_cut_anywhere_is_not_refused_early() {
        // `ppp` alone refuses this prefix (the destination port is there, empty).
        assert_eq!(parse(b"PROXY TCP4 192.0.2.7 198.51.100.1 51000 "), Ok(Parsed::Incomplete));
    }

    #[test]
    fn what_is_not_a_header_is_refused_as_soon_as_it_shows() {
        for (bytes, why) in [
            (&b"GET / HTTP/1.1\r\n"[..], "HTTP"),
            (b"\x16\x03\x01", "a ClientHello"),
            (b"PROXY\r\n", "no space after PROXY"),
            (b"proxy TCP4", "lower case"),
            (b"PROXY TCP4 192.0.2.7 198.51.100.1 51000 443\n", "LF without CR"),
            (b"PROXY UNKNOWN \n", "LF without CR after UNKNOWN (ppp takes it)"),
            (b"PROXY TCP4 2001:db8::7 198.51.100.1 51000 443\r\n", "IPv6 in TCP4"),
            (b"PROXY TCP4 192.0.2.7 198.51.100.1 51000 65536\r\n", "port out of range"),
            (b"PROXY UDP4 192.0.2.7 198.51.100.1 51000 443\r\n", "not TCP"),
            (b"\r\n\r\n\0\r\nQUIT\n\x11\x11\0\x0c", "v2 version 1"),
            (b"\r\n\r\n\0\r\nQUIT\n\x22\x11\0\x0c", "v2 command 2"),
            (b"\r\n\r\n\0\r\nQUIT\n\x21\x11\0\x04", "v2 too short for IPv4"),
            (b"\r\n\r\n\0\r\nQUIT\n\x21\x51\0\x0c", "v2 family 5"),
        ] {
            assert!(parse(bytes).is_err(), "{why}: {:?}", parse(bytes));
        }
        let broken_tlv = v2_header(1, 0x11, &V4_ADDRESSES, &[0x02, 0, 9, b'x']);
        assert!(matches!(parse(&broken_tlv), Err(HeaderError::V2(_))), "a TLV longer than the header");
        assert_eq!(parse(&[b'P'; 200]), Err(HeaderError::NoSignature));
        let long = [&b"PROXY UNKNOWN "[..], &[b'x'; 100]].concat();
        assert_eq!(parse(&long), Err(HeaderError::V1TooLong));
        let mut huge = v2_header(1, 0x11, &V4_ADDRESSES, &[]);
        huge[14..16].copy_from_slice(&5000u16.to_be_bytes());
        assert_eq!(parse(&huge), Err(HeaderError::V2TooLong { len: 5016 }));
    }
}
