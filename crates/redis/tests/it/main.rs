//! Integration tests, linked into one binary: the client against real `redis-server` processes,
//! each on its own free port.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod auth;
mod commands;
mod deployments;
mod failover;
mod pipeline;
mod pubsub;
mod scripts;
mod support;
