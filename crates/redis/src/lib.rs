//! The gateway's access to Redis for shared state (TLS sessions and ticket keys, rate limits,
//! certificates, configuration revisions), on the redis-rs client, built so that Redis trouble
//! never stalls a request: every command fails at once while there is no connection and times out
//! otherwise.
//!
//! - [`ClientOptions`]: one server (`redis://`, `rediss://`), a Sentinel group's primary, or a
//!   Redis Cluster ([`Deployment`]); TLS with a private CA and client certificates ([`Tls`]); ACL
//!   user and password.
//! - [`Client`]: one pipelined connection (or Cluster connection) shared by every task on every
//!   runtime, reconnecting in the background; typed commands plus [`Client::cmd`] for the rest.
//! - [`Script`]: Lua scripts run with `EVALSHA`, falling back to `EVAL`.
//! - [`Subscription`]: pub/sub on a dedicated connection, with [`Event::Reconnected`] after gaps.
//!
//! ```no_run
//! # async fn demo() -> Result<(), gatehouse_redis::Error> {
//! use gatehouse_redis::{Client, ClientOptions, Script};
//!
//! let client = Client::new(ClientOptions::from_url("redis://127.0.0.1:6379/0")?)?;
//! client.set_px("session:{42}", "alice", 30_000).await?;
//! let hits = Script::new("local n = redis.call('INCR', KEYS[1]) \
//!                         if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end return n");
//! let n = client.eval(&hits, &["rate:{1.2.3.4}"], &["1000"]).await?;
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod client;
mod commands;
mod connect;
mod error;
mod options;
mod pubsub;
mod script;
mod value;

pub use client::Client;
pub use error::{Error, Result};
pub use options::{parse_host_port, ClientOptions, Deployment, Tls};
pub use pubsub::{Event, Message, Subscription};
pub use script::Script;
pub use value::Value;
