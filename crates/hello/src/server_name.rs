//! `server_name` policy: which host names the gateway takes from the ClientHello, and which are IP literals.

use std::net::{IpAddr, Ipv6Addr};

use crate::error::ParseError;

/// Longest `host_name` accepted, in bytes: the longest a DNS name can be.
pub const MAX_HOST_NAME_LEN: usize = 255;

/// Accepts a `host_name` of 1 to 255 printable ASCII bytes (`!` to `~`), exactly as sent.
///
/// Stricter than the RFC 6066 wire format (any 1 to 2^16-1 bytes) because the name becomes a
/// certificate and cache key: no spaces or control bytes, no UTF-8 (IDNs travel as `xn--` A-labels).
/// Case and a trailing dot are left for the caller to normalise.
pub(crate) fn host_name(bytes: &[u8]) -> Result<&str, ParseError> {
    if bytes.is_empty() || bytes.len() > MAX_HOST_NAME_LEN || !bytes.iter().all(u8::is_ascii_graphic) {
        return Err(ParseError::InvalidHostName);
    }
    std::str::from_utf8(bytes).map_err(|_| ParseError::InvalidHostName)
}

/// Whether `name` is an IP address rather than a DNS host name.
///
/// RFC 6066 forbids IP literals in `server_name`, yet some clients send them; [`crate::parse`]
/// returns them as they are, so the gateway can choose to treat them as "no SNI".
///
/// True for IPv4 and IPv6 addresses (bracketed, or with a `%zone`), and for any name whose last
/// label is a number (`127.1`, `0x7f.1`, `1.2.3.4.`): URL parsers and `inet_aton` read those as
/// IPv4, and no DNS host name ends in an all-numeric label.
pub fn is_ip_literal(name: &str) -> bool {
    if name.parse::<IpAddr>().is_ok() {
        return true;
    }
    if name.contains(':') {
        let unbracketed = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')).unwrap_or(name);
        let without_zone = unbracketed.split_once('%').map_or(unbracketed, |(addr, _zone)| addr);
        return without_zone.parse::<Ipv6Addr>().is_ok();
    }
    let trimmed = name.strip_suffix('.').unwrap_or(name);
    let last_label = trimmed.rsplit('.').next().unwrap_or(trimmed);
    is_number(last_label)
}

/// A decimal or `0x` hexadecimal number, as the WHATWG URL host parser reads IPv4 parts.
fn is_number(label: &str) -> bool {
    if let Some(hex) = label.strip_prefix("0x").or_else(|| label.strip_prefix("0X")) {
        return hex.bytes().all(|b| b.is_ascii_hexdigit());
    }
    !label.is_empty() && label.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_are_printable_ascii_up_to_255_bytes() {
        assert_eq!(host_name(b"Example.COM."), Ok("Example.COM."));
        assert_eq!(host_name(&[b'a'; 255]).map(str::len), Ok(255));
        for bad in [&b""[..], &[b'a'; 256], b"a b", b"a\0b", b"caf\xc3\xa9", b"tab\t", b"del\x7f"] {
            assert_eq!(host_name(bad), Err(ParseError::InvalidHostName), "{bad:?}");
        }
    }

    #[test]
    fn ip_literals() {
        for ip in ["127.0.0.1", "::1", "[::1]", "fe80::1%eth0", "2001:db8::1", "127.1", "0x7f.0.0.1", "1.2.3.4.", "10"]
        {
            assert!(is_ip_literal(ip), "{ip}");
        }
        for name in ["example.com", "3com.net", "1.2.3.example", "a.1b", "localhost", "xn--bcher-kva.example", ""] {
            assert!(!is_ip_literal(name), "{name}");
        }
    }
}
