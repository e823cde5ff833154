//! Test kit for end-to-end tests: the real `gatehouse` binary on port 0 ([`Gateway`]), real HTTP
//! backends that record what reaches them ([`Backend`]), and the clients a user or an attacker would
//! use: a hyper client ([`HttpConn`], [`http_get`]), `curl` ([`curl`]), raw TCP ([`RawConn`], [`raw`]),
//! raw HTTP/2 frames ([`h2raw`]) and a keep-alive load generator ([`Load`]); real `redis-server`s
//! ([`RedisServer`], with TLS [`RedisTlsFiles`], [`RedisCluster`], [`RedisSentinels`]); what the gateway process costs ([`ProcStats`]).
//!
//! Nothing here sleeps to synchronise: the gateway is awaited through its `--status-json` events,
//! conditions are polled with a deadline ([`wait_until`]), and every loop is bounded in time.

#![forbid(unsafe_code)]

mod backend;
mod client;
mod dns;
mod gateway;
pub mod h2raw;
mod haproxy;
mod jaeger;
mod knot;
mod load;
mod nginx;
mod pebble;
mod ports;
mod proc;
mod raw;
mod raw_backend;
mod redis;
mod rng;
mod wait;

pub use backend::{Backend, Recorded};
pub use client::{curl, h2c_exchange, h2c_get_each, http_get, http_request, H2Answer, HttpConn, Response};
pub use dns::DnsServer;
pub use gateway::{metric_value, Gateway, TempDir};
pub use haproxy::Haproxy;
pub use jaeger::{jaeger_binary, span_tag, Jaeger, JAEGER_VERSION};
pub use knot::{Knot, KNOT_KEY_NAME};
pub use load::{Load, LoadReport};
pub use nginx::Nginx;
pub use pebble::{Pebble, PebbleOptions, PEBBLE_VERSION};
pub use ports::free_port;
pub use proc::ProcStats;
pub use raw::{connect_refused, raw, RawConn, RawResponse};
pub use raw_backend::{Fault, RawBackend};
pub use redis::{RedisCluster, RedisSentinels, RedisServer, RedisTlsFiles, SENTINEL_MASTER};
pub use rng::Rng;
pub use wait::wait_until;

/// Bound on any single network exchange made by the kit's clients.
pub const IO_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The first value of header `name` (case-insensitive) in a recorded header list.
pub(crate) fn first_header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

/// Whether the tests run as root: servers that drop privileges (nginx, dnsmasq) are then told to
/// stay root, so they can read the test's private files.
pub(crate) fn is_root() -> bool {
    std::process::Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}
