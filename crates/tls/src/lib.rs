//! The TLS edge: certificates parsed and checked ([`bundle`]), indexed by name ([`index`]),
//! resolved per SNI from the configuration and a store ([`certs`], [`dir`]); ticket keys
//! ([`ticket`]) and a session cache ([`session`]) for resumption, shared through the cluster's Redis
//! ([`cluster`]); the handshake ([`accept`]) and
//! the IO of a TLS connection ([`conn`]).

pub mod accept;
pub mod bundle;
pub mod catalog;
pub mod certs;
pub mod challenge;
pub mod client_auth;
pub mod cluster;
pub mod conn;
pub mod dir;
mod hkdf;
pub mod index;
pub mod issue;
pub mod on_demand;
pub mod redis_store;
pub mod session;
pub mod stats;
pub mod ticket;

pub use accept::{Established, Offer, Resumption, TlsAcceptor};
pub use certs::{Certs, CertsOptions};
pub use conn::TlsConn;
pub use stats::{Failure, TlsStats};
