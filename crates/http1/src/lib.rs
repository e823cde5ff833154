//! The HTTP/1.1 codec that the serve stage (client requests) and the forward stage (endpoint
//! responses) share: request and response heads parsed in place, body framing, and the
//! per-worker header maps both sides fill. No I/O beyond the readiness-aware socket read.

#![forbid(unsafe_code)]

pub mod framing;
pub mod header_maps;
mod raw_head;
pub mod request;
pub mod response;

pub use raw_head::{RawHead, MAX_LINES};
pub use request::{parse_request_head, Head as RequestHead};
pub use response::{parse_response_head, Head as ResponseHead, HeadError};
