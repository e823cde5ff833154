//! The one error type of the crate: what went wrong between a caller and Redis, stated as a fact.

use std::fmt;

/// Result of a Redis operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a Redis operation failed.
///
/// Only [`Error::Server`] comes from Redis itself; everything else is the client's view of the
/// connection. Errors never contain the password.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Redis answered with an error reply (`-ERR ...`, `-NOSCRIPT ...`, `-WRONGPASS ...`).
    Server(String),
    /// The connection failed while connecting or handshaking (TCP, TLS, Sentinel lookup).
    Io(std::io::Error),
    /// No reply within the configured timeout. The command may or may not have run.
    Timeout,
    /// There is no connection to Redis right now, or it broke while the command was in flight (the
    /// command may or may not have run). The client keeps reconnecting in the background.
    Disconnected,
    /// Redis sent a reply of an unexpected shape, or bytes the client could not parse.
    Protocol(String),
    /// The command cannot be sent on a shared, pipelined connection (or is empty).
    InvalidCommand(String),
    /// A `redis://` URL could not be parsed.
    InvalidUrl(String),
    /// The options cannot work (no Sentinel nodes, half a client certificate, a PEM that does not
    /// parse, a database other than 0 on a Cluster).
    Config(String),
}

impl Error {
    /// The error for a failure reported by redis-rs. An error reply keeps its code first
    /// (`NOSCRIPT ...`, `READONLY ...`, `MOVED ...`), as Redis sent it.
    pub(crate) fn from_redis(e: redis::RedisError) -> Error {
        use redis::ErrorKind;
        if e.is_timeout() {
            return Error::Timeout;
        }
        if e.is_connection_refusal() {
            return Error::Io(std::io::Error::new(std::io::ErrorKind::ConnectionRefused, e.to_string()));
        }
        if e.is_connection_dropped() {
            return Error::Disconnected;
        }
        if e.is_io_error() {
            return Error::Io(std::io::Error::other(e.to_string()));
        }
        match e.kind() {
            ErrorKind::Server(_) | ErrorKind::Extension => match (e.code(), e.detail()) {
                (Some(code), Some(detail)) => Error::Server(format!("{code} {detail}")),
                (Some(code), None) => Error::Server(code.to_string()),
                _ => Error::Server(e.to_string()),
            },
            ErrorKind::Parse | ErrorKind::UnexpectedReturnType => Error::Protocol(e.to_string()),
            ErrorKind::InvalidClientConfig => Error::Config(e.to_string()),
            ErrorKind::AuthenticationFailed => Error::Server(e.to_string()),
            _ => Error::Io(std::io::Error::other(e.to_string())),
        }
    }

    /// Whether the connection this came from is of no more use: broken, stalled (a reply overdue),
    /// or on a server that is no longer the primary (`READONLY` from a demoted one after a
    /// Sentinel failover).
    pub(crate) fn breaks_connection(&self) -> bool {
        match self {
            Error::Io(_) | Error::Disconnected | Error::Timeout => true,
            Error::Server(msg) => msg.starts_with("READONLY") || msg.starts_with("MASTERDOWN"),
            _ => false,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Server(msg) => write!(f, "redis error: {msg}"),
            Error::Io(e) => write!(f, "redis connection: {e}"),
            Error::Timeout => f.write_str("redis command timed out"),
            Error::Disconnected => f.write_str("not connected to redis"),
            Error::Protocol(msg) => write!(f, "redis protocol error: {msg}"),
            Error::InvalidCommand(msg) => write!(f, "invalid redis command: {msg}"),
            Error::InvalidUrl(msg) => write!(f, "invalid redis URL: {msg}"),
            Error::Config(msg) => write!(f, "redis settings: {msg}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}
