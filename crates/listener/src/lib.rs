//! Accept and serve stages.
//!
//! ```text
//! worker thread (current-thread runtime, optionally pinned)
//!   accept loop per listener ── SO_REUSEPORT socket of its own, or one shared socket
//!     └─ connection task: sniff h2c preface ─► hyper HTTP/1.1 (upgrades) or HTTP/2
//!          └─ ConnIo enforces header-read and keep-alive idle timeouts; on HTTP/2 it also follows
//!             frame headers and closes floods with GOAWAY ENHANCE_YOUR_CALM (h2_flood)
//! ```

// Unsafe code is denied, not forbidden: one `setsockopt` no safe binding offers (bind.rs).
#![deny(unsafe_code)]

mod bind;
mod h1;
mod h2_flood;
mod io;
mod per_ip;
mod serve;
mod transport;
mod workers;

pub use bind::{adopt_listener, bind_listener, BoundListener};
pub use h1::{parse_request_head, RequestHead};
pub use per_ip::{OverLimit, PerIpGuard, PerIpLimit};
pub use serve::{accept_loop, AcceptBackoff, AcceptorCell, ServeContext};
pub use workers::{Worker, Workers};
