//! Accept stage, `proxy_protocol` listeners: what the PROXY protocol header a balancer sends before
//! anything else says about the client. Version 1 (a text line) and version 2 (binary) are told
//! apart by their first bytes. A v2 header is parsed by the `ppp` crate; a v1 line by
//! [`v1_line`] here, which costs a connection about a tenth of the instructions `ppp`'s v1 parser
//! did (see docs/architecture.md). This module decides when a header is whole, how long it is,
//! and which addresses count.
//!
//! Parsing is monotone, so it can run on whatever has arrived: a prefix of a valid header is
//! always [`Parsed::Incomplete`], never an error, and a header parses the same whatever follows
//! it. A v1 line is parsed only once its `\n` has arrived, and must end in `\r\n` (the fuzz
//! target `proxy_header` checks both).

use ppp::PartialResult;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

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
    /// A v1 line that is not one.
    V1(V1Error),
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

/// What is wrong with a whole v1 line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum V1Error {
    /// The protocol is none of `TCP4`, `TCP6` and `UNKNOWN`.
    Protocol,
    /// Not the four fields (source, destination, source port, destination port), each after one
    /// space.
    Fields,
    /// An address that is not one of the protocol's family.
    Address,
    /// A port that is not a decimal number up to 65535.
    Port,
    /// The line does not end in `\r\n`.
    Ending,
}

impl fmt::Display for V1Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            V1Error::Protocol => "the protocol is not TCP4, TCP6 or UNKNOWN",
            V1Error::Fields => "not four fields after the protocol, each after one space",
            V1Error::Address => "an address not of the protocol's family",
            V1Error::Port => "a port not a decimal number up to 65535",
            V1Error::Ending => "the line does not end in CRLF",
        })
    }
}

impl std::error::Error for HeaderError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
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
    let Some(end) = memchr::memchr(b'\n', window) else {
        return if bytes.len() >= MAX_V1 { Err(HeaderError::V1TooLong) } else { Ok(Parsed::Incomplete) };
    };
    // The line is whole: whatever is missing from it now is missing for good.
    let line = &bytes[..=end];
    let addresses = v1_line(line).map_err(HeaderError::V1)?;
    Ok(Parsed::Complete(ProxyHeader { version: Version::V1, len: line.len(), addresses }))
}

/// The addresses a whole v1 line (`PROXY ` to `\n`) names, after the specification (HAProxy's
/// proxy-protocol.txt, 2.1): `PROXY TCP4|TCP6 <source> <destination> <source port> <destination
/// port>\r\n`, single spaces, addresses of the protocol's family (IPv4 as a dotted quad without
/// leading zeros, as `inet_pton` reads it), ports 0 to 65535; or `PROXY UNKNOWN` and anything up to
/// `\r\n`, which names nobody.
fn v1_line(line: &[u8]) -> Result<Option<Addresses>, V1Error> {
    let body = line.strip_suffix(b"\r\n").ok_or(V1Error::Ending)?;
    let body = body.strip_prefix(V1_SIGNATURE).ok_or(V1Error::Protocol)?;
    let (v6, mut rest) = match body {
        [b'T', b'C', b'P', b'4', b' ', rest @ ..] => (false, rest),
        [b'T', b'C', b'P', b'6', b' ', rest @ ..] => (true, rest),
        [b'U', b'N', b'K', b'N', b'O', b'W', b'N', rest @ ..] if rest.first().is_none_or(|&b| b == b' ') => {
            return Ok(None)
        }
        _ => return Err(V1Error::Protocol),
    };
    let mut next = || {
        let (field, after) = match rest.iter().position(|&b| b == b' ') {
            Some(at) => (&rest[..at], Some(&rest[at + 1..])),
            None => (rest, None),
        };
        match after {
            Some(after) => rest = after,
            None => rest = &[],
        }
        if field.is_empty() {
            Err(V1Error::Fields)
        } else {
            Ok((field, after.is_none()))
        }
    };
    let ((source, _), (destination, _)) = (next()?, next()?);
    let ((source_port, _), (destination_port, last)) = (next()?, next()?);
    if !last {
        return Err(V1Error::Fields);
    }
    let (source, destination) =
        if v6 { (ipv6(source)?, ipv6(destination)?) } else { (ipv4(source)?, ipv4(destination)?) };
    Ok(Some(Addresses {
        source: SocketAddr::new(source, port(source_port)?),
        destination: SocketAddr::new(destination, port(destination_port)?),
    }))
}

/// A `TCP4` address field: four decimal octets, each `0` or without a leading zero, up to 255.
fn ipv4(field: &[u8]) -> Result<IpAddr, V1Error> {
    let mut octets = [0u8; 4];
    let mut parts = field.split(|&b| b == b'.');
    for octet in &mut octets {
        let part = parts.next().ok_or(V1Error::Address)?;
        if part.is_empty() || part.len() > 3 || (part.len() > 1 && part[0] == b'0') {
            return Err(V1Error::Address);
        }
        *octet = u8::try_from(decimal(part).ok_or(V1Error::Address)?).map_err(|_| V1Error::Address)?;
    }
    if parts.next().is_some() {
        return Err(V1Error::Address);
    }
    Ok(IpAddr::V4(Ipv4Addr::from(octets)))
}

/// A `TCP6` address field, as the standard library reads IPv6 text.
fn ipv6(field: &[u8]) -> Result<IpAddr, V1Error> {
    let text = std::str::from_utf8(field).map_err(|_| V1Error::Address)?;
    text.parse::<Ipv6Addr>().map(IpAddr::V6).map_err(|_| V1Error::Address)
}

/// A port field: one to five decimal digits, at most 65535.
fn port(field: &[u8]) -> Result<u16, V1Error> {
    if field.len() > 5 {
        return Err(V1Error::Port);
    }
    u16::try_from(decimal(field).ok_or(V1Error::Port)?).map_err(|_| V1Error::Port)
}

/// The value of up to five decimal digits; `None` if any byte is not one.
fn decimal(digits: &[u8]) -> Option<u32> {
    digits.iter().try_fold(0u32, |n, &d| d.is_ascii_digit().then(|| n * 10 + u32::from(d - b'0')))
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
        let h = check_prefixes(b"PROXY TCP4 0.0.0.0 255.255.255.255 0 65535\r\n");
        assert_eq!(h.addresses.map(|a| a.destination.to_string()).as_deref(), Some("255.255.255.255:65535"));
        let h = check_prefixes(b"PROXY TCP6 ::ffff:192.0.2.7 ::1 7 08\r\n");
        assert_eq!(h.addresses.map(|a| a.destination.to_string()).as_deref(), Some("[::1]:8"));
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
    fn v1_lines_that_ppp_writes_read_back_the_same() {
        for (source, destination) in [
            ("192.0.2.7:51000", "198.51.100.1:443"),
            ("0.0.0.0:0", "255.255.255.255:65535"),
            ("[2001:db8::7]:1", "[::1]:8443"),
            ("[::ffff:192.0.2.7]:51000", "[fe80::1]:80"),
        ] {
            let (s, d): (SocketAddr, SocketAddr) =
                (source.parse().expect("source"), destination.parse().expect("dest"));
            let line = ppp::v1::Addresses::from((s, d)).to_string();
            let h = complete(line.as_bytes());
            assert_eq!((h.len, h.addresses), (line.len(), Some(Addresses { source: s, destination: d })), "{line:?}");
        }
        let line = ppp::v1::Addresses::Unknown.to_string();
        assert_eq!(complete(line.as_bytes()).addresses, None, "{line:?}");
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
            (b"PROXY UNKNOWN \n", "LF without CR after UNKNOWN"),
            (b"PROXY UNKNOWNX\r\n", "a protocol that starts as UNKNOWN"),
            (b"PROXY TCP4 192.0.2.7  198.51.100.1 51000 443\r\n", "two spaces"),
            (b"PROXY TCP4 192.0.2.7 198.51.100.1 51000\r\n", "three fields"),
            (b"PROXY TCP4 192.0.2.7 198.51.100.1 51000 443 7\r\n", "five fields"),
            (b"PROXY TCP4 192.0.2.7 198.51.100.1 51000 443 \r\n", "a space before CRLF"),
            (b"PROXY TCP4 192.0.2.7 198.51.100.1 -1 443\r\n", "a negative port"),
            (b"PROXY TCP4 192.0.2.7 198.51.100.1 +1 443\r\n", "a signed port"),
            (b"PROXY TCP4 192.0.2.7 198.51.100.1 000443 443\r\n", "six digits"),
            (b"PROXY TCP4 192.0.2.7 198.51.100.1 51000 4\r43\r\n", "CR inside"),
            (b"PROXY TCP6 192.0.2.7 198.51.100.1 51000 443\r\n", "IPv4 in TCP6"),
            (b"PROXY TCP4 192.0.2 198.51.100.1 51000 443\r\n", "three octets"),
            (b"PROXY TCP4 192.0.2.7.1 198.51.100.1 51000 443\r\n", "five octets"),
            (b"PROXY TCP4 192.0.2.07 198.51.100.1 51000 443\r\n", "a leading zero"),
            (b"PROXY TCP4 192.0.2.256 198.51.100.1 51000 443\r\n", "an octet over 255"),
            (b"PROXY TCP4 192.0..7 198.51.100.1 51000 443\r\n", "an empty octet"),
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
