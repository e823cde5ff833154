//! Pre-handshake stage: frame and parse a TLS ClientHello before rustls sees the connection.
//!
//! The gateway reads the first bytes of a connection itself, learns the SNI host name, the session
//! id, the resumption tickets (TLS 1.3 PSK identities, TLS 1.2 `session_ticket`), ALPN and the
//! offered versions, suites and signature schemes, fetches certificates and session state from
//! Redis, and only then hands the same bytes to rustls.
//!
//! ```text
//! accept ─► read ─► record_need ──More(n)──► read again
//!                        ├─NotTls────────► not TLS: another handler, or close
//!                        └─Complete(len)─► reassemble(&buf) ─► parse ─► ClientHello<'_>
//!                                                                          └─► Redis lookups ─► rustls
//! ```
//!
//! Nothing here panics on any input, allocates except to join a hello split over several records,
//! or keeps state between calls.
//!
//! ```no_run
//! use std::io::Read;
//! use gatehouse_hello::{parse, reassemble, record_need, Need, DEFAULT_MAX_HELLO_BYTES};
//!
//! fn sni(conn: &mut impl Read) -> Result<Option<String>, Box<dyn std::error::Error>> {
//!     let mut buf = Vec::new();
//!     loop {
//!         match record_need(&buf, DEFAULT_MAX_HELLO_BYTES)? {
//!             Need::Complete(_) => break,
//!             Need::NotTls => return Ok(None),
//!             Need::More(n) => {
//!                 let start = buf.len();
//!                 buf.resize(start + n, 0);
//!                 conn.read_exact(&mut buf[start..])?;
//!             }
//!         }
//!     }
//!     let message = reassemble(&buf)?;
//!     let hello = parse(&message)?;
//!     Ok(hello.server_name.map(str::to_ascii_lowercase))
//! }
//! ```

#![forbid(unsafe_code)]
#![deny(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::unreachable,
    clippy::todo,
    clippy::unimplemented
)]

mod error;
mod extension;
mod hello;
mod lists;
mod reader;
mod record;
mod server_name;

pub use error::{Field, ParseError};
pub use extension::extension_type;
pub use hello::{parse, ClientHello};
pub use lists::{
    Extension, ExtensionIter, Extensions, ProtocolNameIter, ProtocolNames, PskIdentities, PskIdentity, PskIdentityIter,
    U16Iter, U16List,
};
pub use record::{
    reassemble, record_need, Need, DEFAULT_MAX_HELLO_BYTES, MAX_FRAGMENT_LEN, MAX_RECORDS, RECORD_HEADER_LEN,
};
pub use server_name::{is_ip_literal, MAX_HOST_NAME_LEN};
