//! The request path after a connection is served: give it an id, normalize its path, route,
//! check, rewrite headers, select an endpoint, forward with bounded retries, stream the response
//! back, record.
//!
//! ```text
//! request ─► id ─► path ─► validate ─► route ─► limits ─► rewrite ─► select ─► lease ─► send ─┬► stream response
//!                  400       400        404       413                  503       502    504   └► retry (bounded)
//! ```
//! Everything reads one [`Snapshot`], loaded once per request; errors become responses in exactly
//! one place ([`error::ProxyError::into_response`], or [`error::ProxyError::into_grpc_response`]
//! for a gRPC call).

#![forbid(unsafe_code)]

pub mod acme;
mod body;
pub mod compress;
pub mod error;
mod forward;
pub mod grpc;
mod grpc_web;
mod headers;
mod mirror;
mod path;
pub mod request_id;
mod snapshot;
mod split;
mod trace;
pub mod websocket;

pub use body::ResponseBody;
pub use forward::handle;
pub use headers::{keyless_target, upstream_target};
pub use snapshot::{hsts_of, Rewrite, RouteEntry, RouteStatsRegistry, Snapshot, SnapshotError};

use arc_swap::ArcSwap;
use gatehouse_telemetry::ProcessStats;
use std::net::SocketAddr;
use std::sync::Arc;

/// State shared by every worker: the current snapshot and process counters.
#[derive(Debug)]
pub struct Shared {
    /// The configuration in force; replaced whole on reload.
    pub snapshot: ArcSwap<Snapshot>,
    /// Process-wide counters.
    pub stats: ProcessStats,
}

impl Shared {
    /// Shared state starting from `snapshot`.
    pub fn new(snapshot: Snapshot) -> Arc<Self> {
        Arc::new(Shared { snapshot: ArcSwap::from_pointee(snapshot), stats: ProcessStats::default() })
    }
}

/// Facts about the downstream connection a request came on.
#[derive(Debug, Clone)]
pub struct ConnInfo {
    /// Client address: the connection's peer, or on a `proxy_protocol` listener the source its
    /// balancer's header names. Every use of the client's address (forwarding headers, the
    /// access log, `allow_ips`, rate limits and balancing by client IP) reads this.
    pub peer: SocketAddr,
    /// The client IP as a header value, made once per connection for `X-Real-IP` and
    /// `X-Forwarded-For`.
    pub peer_ip: http::HeaderValue,
    /// Local address of the connection: the listener's (for a listener on an unspecified address,
    /// that address: it is not looked up per connection), also behind a balancer.
    pub local: SocketAddr,
    /// Whether the client connection is TLS.
    pub tls: bool,
    /// The client certificate verified during the handshake, if any.
    pub client_cert: Option<ClientCert>,
    /// Longest wait for the next part of a request body (the listener's `body_read_timeout`).
    pub body_timeout: std::time::Duration,
    /// The listener's `Alt-Svc` for its TCP responses (HTTP/3 advertised), if any.
    pub alt_svc: Option<http::HeaderValue>,
    /// The listener's `Strict-Transport-Security` (TLS listeners), if any; a site's own comes first.
    pub hsts: Option<http::HeaderValue>,
}

/// A client certificate verified during the TLS handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCert {
    /// The site whose `client_auth` verified it: requests for other sites do not count it.
    pub site: Arc<str>,
    /// Subject distinguished name, for the `X-Client-Cert-Subject` header.
    pub subject: Arc<str>,
}

impl ConnInfo {
    /// Facts of a connection from `peer` to `local`.
    pub fn new(peer: SocketAddr, local: SocketAddr, tls: bool) -> Self {
        ConnInfo {
            peer,
            peer_ip: ip_value(peer.ip()),
            local,
            tls,
            client_cert: None,
            body_timeout: std::time::Duration::from_secs(60),
            alt_svc: None,
            hsts: None,
        }
    }
}

/// `ip` as a header value. An IPv4 address, the usual case, is written digit by digit: this runs
/// for every connection, and the formatting machinery costs more than the rest of setting up
/// the connection's facts.
fn ip_value(ip: std::net::IpAddr) -> http::HeaderValue {
    let mut text = [0u8; gatehouse_telemetry::IP_TEXT_MAX];
    let n = gatehouse_telemetry::ip_text(ip, &mut text);
    http::HeaderValue::from_bytes(&text[..n]).unwrap_or_else(|_| http::HeaderValue::from_static("unknown"))
}

#[cfg(test)]
mod ip_tests {
    use super::*;

    #[test]
    fn ip_values_read_as_the_standard_formatting_does() {
        let mut cases: Vec<std::net::IpAddr> = Vec::new();
        for a in [0u8, 1, 9, 10, 99, 100, 199, 200, 255] {
            for b in [0u8, 7, 42, 127, 250] {
                cases.push(std::net::Ipv4Addr::new(a, b, 255 - b, a / 2).into());
            }
        }
        cases.push("::1".parse().expect("v6"));
        cases.push("2001:db8::ff00:42:8329".parse().expect("v6"));
        cases.push("::ffff:192.0.2.1".parse().expect("mapped"));
        for ip in cases {
            assert_eq!(ip_value(ip).to_str().expect("ascii"), ip.to_string(), "{ip:?}");
        }
    }
}
