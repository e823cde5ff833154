//! The fuzz targets' checks: one module per target, each with `check(data)`, which must never panic.
//!
//! | target | what the bytes are | where the code lives |
//! |---|---|---|
//! | `client_hello` | the first bytes of a TLS connection | `crates/hello` |
//! | `jwt` | a bearer token | `crates/jwt` |
//! | `config` | a configuration file | `crates/config`, `crates/plugins`, `crates/proxy` |
//! | `router` | route tables, then requests' host and path | `crates/router` |
//! | `path` | a request path as a client writes it | `crates/path` |
//! | `app_key` | a service's key sources, a request target and an `X-APP-KEY` header | `crates/plugins`, `crates/proxy` |
//! | `body_framing` | an HTTP/1.1 body as it arrives, split into reads | `crates/upstream` (`framing`) |
//! | `response_head` | what an endpoint answers, as it arrives | `crates/upstream` (`h1`) |
//! | `request_head` | what a client sends, as it arrives | `crates/listener` (`h1`) |
//! | `huffman` | a QPACK string literal's Huffman-coded bytes (HTTP/3 header blocks) | `crates/huffman` |
//! | `proxy_header` | a connection's first bytes on a `proxy_protocol` listener, as they arrive | `crates/listener` (`proxy_header`) |
//!
//! Each module uses only the products' public API, so the products' tests include the same file
//! (`#[path]`) and replay `corpus/<target>/` and `regressions/<target>/` with [`replay`] on
//! stable: an input that once crashed a target stays a test.

#![forbid(unsafe_code)]

pub mod app_key;
pub mod body_framing;
pub mod client_hello;
pub mod config;
pub mod huffman;
pub mod jwt;
pub mod path;
pub mod proxy_header;
pub mod replay;
pub mod request_head;
pub mod response_head;
pub mod router;
