//! Certificates from an ACME certificate authority (RFC 8555), on instant-acme: the account made
//! once and kept ([`account`]), orders answered by HTTP-01 or TLS-ALPN-01 from whichever node the
//! CA reaches ([`order`], with the answers on [`gatehouse_tls::challenge::Board`]), one order per
//! name across the cluster ([`lock`]), and renewal in the CA's window (RFC 9773) or before
//! expiry ([`manager`]). Issued certificates go to the certificate store every node serves from.

#![forbid(unsafe_code)]

pub mod account;
pub mod dns01;
pub mod error;
pub mod lock;
pub mod manager;
pub mod on_demand;
pub mod order;
pub mod settings;
pub mod stats;
pub mod status;

pub use error::AcmeError;
pub use manager::{Manager, ManagerSlot, Parts};
pub use settings::{FileError, Settings};
pub use stats::AcmeStats;
pub use status::NameStatus;
