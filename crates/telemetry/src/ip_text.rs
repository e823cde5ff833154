//! An address as text without the formatting machinery, for what runs per connection or per
//! traced request (a header value, a span attribute).

use std::net::IpAddr;

/// The longest text of an address (`ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255`).
pub const IP_TEXT_MAX: usize = 45;

/// `ip` as text in `out`, its length returned: an IPv4 address (the usual case) written digit by
/// digit, an IPv6 address by the standard library.
pub fn ip_text(ip: IpAddr, out: &mut [u8; IP_TEXT_MAX]) -> usize {
    match ip {
        IpAddr::V4(v4) => {
            let mut n = 0;
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out[n] = b'.';
                    n += 1;
                }
                if octet >= 100 {
                    out[n] = b'0' + octet / 100;
                    n += 1;
                }
                if octet >= 10 {
                    out[n] = b'0' + octet / 10 % 10;
                    n += 1;
                }
                out[n] = b'0' + octet % 10;
                n += 1;
            }
            n
        }
        IpAddr::V6(v6) => {
            use std::io::Write;
            let mut cursor = std::io::Cursor::new(&mut out[..]);
            let _ = write!(cursor, "{v6}");
            cursor.position() as usize
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_read_as_the_standard_library_writes_them() {
        let mut out = [0u8; IP_TEXT_MAX];
        let mut check = |ip: IpAddr| {
            let n = ip_text(ip, &mut out);
            assert_eq!(std::str::from_utf8(&out[..n]).ok(), Some(ip.to_string().as_str()));
        };
        for ip in [
            "0.0.0.0",
            "127.0.0.1",
            "10.20.30.40",
            "255.255.255.255",
            "192.168.1.100",
            "::1",
            "2001:db8::8a2e:370:7334",
            "::ffff:192.0.2.128",
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        ] {
            check(ip.parse().unwrap_or(IpAddr::from([0, 0, 0, 0])));
        }
        for i in 0..=255u8 {
            check(IpAddr::from([i, i / 3, 255 - i, i % 10]));
        }
    }
}
