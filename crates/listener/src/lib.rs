//! Accept and serve stages.
//!
//! ```text
//! worker thread (current-thread runtime, optionally pinned)
//!   accept loop per listener ── SO_REUSEPORT socket of its own, or one shared socket
//!     └─ connection task: PROXY protocol header (proxy_protocol listeners, proxy_protocol.rs),
//!        then TLS handshake (ALPN) or sniff of the h2c preface
//!          ├─ HTTP/1.x: Gatehouse's own server loop (h1), heads parsed by gatehouse-http1;
//!          │    keep-alive, pipelining, 100-continue, upgrades (WebSocket tunnel)
//!          └─ HTTP/2: hyper's server; ConnIo enforces the header-read and idle timeouts, follows
//!               frame headers and closes floods with GOAWAY ENHANCE_YOUR_CALM (h2_flood)
//! ```

// Unsafe code is denied, not forbidden: one `setsockopt` no safe binding offers (bind.rs).
#![deny(unsafe_code)]

mod bind;
mod first_bytes;
mod h1;
mod h2;
mod h2_flood;
mod io;
mod per_ip;
pub mod proxy_header;
mod proxy_protocol;
mod serve;
mod transport;
mod workers;

pub use bind::{adopt_listener, bind_listener, bound_socket, BindError, BoundListener};
pub use per_ip::{OverLimit, PerIpGuard, PerIpLimit};
pub use serve::{accept_loop, drained, AcceptorCell, ServeContext};
pub use workers::{Worker, Workers};
