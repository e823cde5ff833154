//! Connect stage, PROXY protocol to endpoints: the header that opens each connection of an
//! upstream with `send_proxy_protocol`, naming the client connection its requests came on. A
//! connection so opened belongs to that client: it goes back to the pool tagged with its
//! [`Origin`] and is taken again only for a request with the same one.

use gatehouse_config::ProxyProtocolVersion;
use ppp::v2;
use std::net::SocketAddr;

/// The client connection a request came on: the client's address and the address it connected
/// to, as a PROXY header names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The client.
    pub client: SocketAddr,
    /// The address it connected to.
    pub local: SocketAddr,
}

/// Both addresses in one family: an IPv4 one beside an IPv6 one is written IPv4-mapped.
fn same_family(a: SocketAddr, b: SocketAddr) -> (SocketAddr, SocketAddr) {
    let v6 = |s: SocketAddr| match s {
        SocketAddr::V4(v4) => SocketAddr::new(v4.ip().to_ipv6_mapped().into(), v4.port()),
        v6 => v6,
    };
    if a.is_ipv4() == b.is_ipv4() {
        (a, b)
    } else {
        (v6(a), v6(b))
    }
}

/// The header for a connection made for `origin`'s requests; without one (a health check), the
/// header says so: `PROXY UNKNOWN` (v1) or the `LOCAL` command (v2), so the endpoint uses the
/// connection's own addresses.
pub(crate) fn header(version: ProxyProtocolVersion, origin: Option<Origin>) -> Vec<u8> {
    let addresses = origin.map(|o| same_family(o.client, o.local));
    match version {
        ProxyProtocolVersion::V1 => {
            let a: ppp::v1::Addresses = addresses.map_or(ppp::v1::Addresses::Unknown, Into::into);
            a.to_string().into_bytes()
        }
        ProxyProtocolVersion::V2 => {
            let built = match addresses {
                Some(a) => v2::Builder::with_addresses(v2::Version::Two | v2::Command::Proxy, v2::Protocol::Stream, a),
                None => v2::Builder::with_addresses(
                    v2::Version::Two | v2::Command::Local,
                    v2::Protocol::Unspecified,
                    v2::Addresses::Unspecified,
                ),
            }
            .build();
            // Building into a vector fails only when the length overflows 16 bits, which two
            // addresses cannot reach.
            built.unwrap_or_default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(client: &str, local: &str) -> Option<Origin> {
        Some(Origin { client: client.parse().expect("client"), local: local.parse().expect("local") })
    }

    #[test]
    fn headers_name_the_client_and_parse_back() {
        let v1 = header(ProxyProtocolVersion::V1, origin("127.0.0.2:5000", "127.0.0.1:8080"));
        assert_eq!(v1, b"PROXY TCP4 127.0.0.2 127.0.0.1 5000 8080\r\n");
        let mixed = header(ProxyProtocolVersion::V1, origin("10.0.0.1:1", "[::1]:80"));
        assert_eq!(mixed, b"PROXY TCP6 ::ffff:10.0.0.1 ::1 1 80\r\n");
        assert_eq!(header(ProxyProtocolVersion::V1, None), b"PROXY UNKNOWN\r\n");

        let v2 = header(ProxyProtocolVersion::V2, origin("127.0.0.2:5000", "127.0.0.1:8080"));
        let parsed = v2::Header::try_from(v2.as_slice()).expect("a v2 header");
        assert_eq!(parsed.command, v2::Command::Proxy);
        assert_eq!(
            parsed.addresses,
            v2::Addresses::from((
                "127.0.0.2:5000".parse::<SocketAddr>().expect("a"),
                "127.0.0.1:8080".parse::<SocketAddr>().expect("b")
            ))
        );
        let local = header(ProxyProtocolVersion::V2, None);
        assert_eq!(v2::Header::try_from(local.as_slice()).expect("a v2 header").command, v2::Command::Local);
    }
}
