//! Integration tests, linked into one binary: the client against real `redis-server` processes,
//! each on its own free port, plus the RESP codec through its public API.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod auth;
mod commands;
mod failover;
mod pipeline;
mod pubsub;
mod resp;
mod scripts;
mod support;
