//! HTTP/3: QUIC (quinn) on a listener's UDP sockets, HTTP/3 (h3) over it, each request through the
//! same request path as HTTP/1.1 and HTTP/2 ([`gatehouse_proxy::handle`]).
//!
//! ```text
//! UDP socket (one per worker) ─► quinn Endpoint ─► Incoming ─► limits ─► handshake (rustls, h3)
//!   ─► h3 Connection ─► request stream ─► Request<H3Body> ─► handle ─► send head, data, trailers
//! ```
//! Each worker runs its own endpoint on its own socket (`SO_REUSEPORT`), so a connection lives on
//! the worker whose socket the kernel gave its first packet, and every later packet from the same
//! client address and port reaches the same socket. A client whose address changes (NAT
//! rebinding, a phone changing networks) may land on another worker's socket: the connection ids
//! carry the index of the socket whose endpoint has the connection, so that socket's wrapper
//! hands the packet over (`handover`), and the endpoint validates the new path and goes on
//! there (RFC 9000 §9).

mod body;
mod connection;
mod endpoint;
mod handover;
mod hello;
mod request;
mod socket;

pub use endpoint::quic_loop;
pub use handover::{follow_generation, quic_generation, QuicLink};
pub use socket::{adopt_udp, bind_udp, QuicSocket};
