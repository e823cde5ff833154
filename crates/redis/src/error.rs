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
    /// The TCP connection failed while connecting or handshaking.
    Io(std::io::Error),
    /// No reply within the configured timeout. The command may or may not have run.
    Timeout,
    /// There is no connection to Redis right now, or it broke while the command was in flight (the
    /// command may or may not have run). The client keeps reconnecting in the background.
    Disconnected,
    /// The bounded queue to the connection is full: Redis is not keeping up.
    QueueFull,
    /// Redis sent bytes that are not valid RESP2, or a reply of an unexpected shape or size.
    Protocol(String),
    /// The command cannot be sent on a shared, pipelined connection (or is empty).
    InvalidCommand(String),
    /// A `redis://` URL could not be parsed.
    InvalidUrl(String),
}

impl Error {
    /// Whether the reply stream is still in sync after this error, so the connection can stay
    /// open: true only for error replies from Redis.
    pub(crate) fn keeps_connection(&self) -> bool {
        matches!(self, Error::Server(_))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Server(msg) => write!(f, "redis error: {msg}"),
            Error::Io(e) => write!(f, "redis connection: {e}"),
            Error::Timeout => f.write_str("redis command timed out"),
            Error::Disconnected => f.write_str("not connected to redis"),
            Error::QueueFull => f.write_str("redis command queue is full"),
            Error::Protocol(msg) => write!(f, "redis protocol error: {msg}"),
            Error::InvalidCommand(msg) => write!(f, "invalid redis command: {msg}"),
            Error::InvalidUrl(msg) => write!(f, "invalid redis URL: {msg}"),
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
