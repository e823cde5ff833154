//! Forward stage, failures: why an exchange with an endpoint failed, with its cause, and whether
//! the request may be tried again on another endpoint. Whether it may is decided here, where it is
//! known what reached the endpoint; the proxy's retry rule reads it ([`UpstreamError::retry`]).

use crate::body::BoxError;
use crate::tls::TlsFailure;
use gatehouse_http1::HeadError;
use std::io;

/// Whether a failed attempt may be made again on another endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// Nothing of the request reached the endpoint: it may go elsewhere as it is, whatever its
    /// method.
    Unsent,
    /// The request, or part of it, reached the endpoint: only a request that can be replayed
    /// exactly and is idempotent (RFC 9110 §9.2.2) may go again.
    IfIdempotent,
    /// The client's side failed: another endpoint would fare no better.
    Never,
}

/// Why an exchange with an endpoint failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum UpstreamError {
    /// The TCP connect did not finish within the connect timeout.
    ConnectTimeout,
    /// The TCP connect failed.
    Connect(io::Error),
    /// The HTTP/2 handshake failed.
    Handshake(h2::Error),
    /// TLS with the endpoint failed: in the handshake, or by an alert on the connection after it.
    Tls {
        /// The name the endpoint was verified for.
        server_name: Box<str>,
        /// Why, as counted in the metrics.
        failure: TlsFailure,
        /// rustls' error (or the I/O error that broke the handshake).
        source: io::Error,
        /// Whether the request, or part of it, had been written.
        sent: bool,
    },
    /// Writing the request failed.
    Write {
        /// Why.
        source: io::Error,
        /// Whether any of it had reached the socket.
        sent: bool,
    },
    /// No response head within the read timeout.
    Timeout,
    /// The endpoint closed the connection before the response head.
    Closed,
    /// Reading the response head failed.
    Read(io::Error),
    /// The response head is larger than the proxy accepts.
    HeadTooLarge,
    /// The response head was refused.
    Head(HeadError),
    /// The HTTP/2 exchange failed.
    H2 {
        /// Why.
        source: h2::Error,
        /// Whether the request's stream had been opened.
        sent: bool,
    },
    /// There was no connection to send on.
    NoConnection,
    /// The client's body went over the route's limit.
    BodyTooLarge,
    /// The client's body failed (the client went away).
    ClientBody(BoxError),
    /// The client stopped sending its body for longer than allowed.
    ClientTimeout,
}

impl UpstreamError {
    /// Whether the request may be tried again on another endpoint.
    pub fn retry(&self) -> Retry {
        match self {
            UpstreamError::ConnectTimeout
            | UpstreamError::Connect(_)
            | UpstreamError::Handshake(_)
            | UpstreamError::Tls { sent: false, .. }
            | UpstreamError::NoConnection
            | UpstreamError::Write { sent: false, .. }
            | UpstreamError::H2 { sent: false, .. } => Retry::Unsent,
            UpstreamError::Write { sent: true, .. }
            | UpstreamError::Tls { sent: true, .. }
            | UpstreamError::H2 { sent: true, .. }
            | UpstreamError::Timeout
            | UpstreamError::Closed
            | UpstreamError::Read(_)
            | UpstreamError::HeadTooLarge
            | UpstreamError::Head(_) => Retry::IfIdempotent,
            UpstreamError::BodyTooLarge | UpstreamError::ClientBody(_) | UpstreamError::ClientTimeout => Retry::Never,
        }
    }

    /// Whether no connection could be made (the endpoint never saw the request).
    pub fn is_connect(&self) -> bool {
        matches!(
            self,
            UpstreamError::ConnectTimeout
                | UpstreamError::Connect(_)
                | UpstreamError::Handshake(_)
                | UpstreamError::Tls { sent: false, .. }
        )
    }

    /// Whether the endpoint did not answer in time.
    pub fn is_timeout(&self) -> bool {
        matches!(self, UpstreamError::Timeout)
    }
}

impl std::fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpstreamError::ConnectTimeout => f.write_str("connect timed out"),
            UpstreamError::Connect(e) => write!(f, "connect failed: {e}"),
            UpstreamError::Handshake(e) => write!(f, "handshake failed: {e}"),
            UpstreamError::Tls { server_name: name, failure, source, .. } => match failure {
                TlsFailure::Untrusted => write!(f, "upstream certificate not trusted for {name}: {source}"),
                TlsFailure::WrongName => write!(f, "upstream certificate not valid for {name}: {source}"),
                TlsFailure::Expired => write!(f, "upstream certificate for {name} expired or not yet valid: {source}"),
                TlsFailure::BadCertificate => write!(f, "upstream certificate for {name} refused: {source}"),
                TlsFailure::Refused => write!(f, "upstream {name} refused the TLS session: {source}"),
                TlsFailure::Protocol => write!(f, "TLS with upstream {name} failed: {source}"),
                TlsFailure::Io => write!(f, "TLS handshake with upstream {name} broke: {source}"),
            },
            UpstreamError::Write { source, .. } => write!(f, "writing request: {source}"),
            UpstreamError::Timeout => f.write_str("no response head within the read timeout"),
            UpstreamError::Closed => f.write_str("connection closed before the response head"),
            UpstreamError::Read(e) => write!(f, "reading response head: {e}"),
            UpstreamError::HeadTooLarge => f.write_str("response head too large"),
            UpstreamError::Head(e) => e.fmt(f),
            UpstreamError::H2 { source, .. } => source.fmt(f),
            UpstreamError::NoConnection => f.write_str("no connection"),
            UpstreamError::BodyTooLarge => f.write_str("request body too large"),
            UpstreamError::ClientBody(e) => write!(f, "client body: {e}"),
            UpstreamError::ClientTimeout => f.write_str("the client stopped sending its body"),
        }
    }
}

impl std::error::Error for UpstreamError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            UpstreamError::Connect(e)
            | UpstreamError::Read(e)
            | UpstreamError::Write { source: e, .. }
            | UpstreamError::Tls { source: e, .. } => Some(e),
            UpstreamError::Handshake(e) | UpstreamError::H2 { source: e, .. } => Some(e),
            UpstreamError::Head(e) => Some(e),
            UpstreamError::ClientBody(e) => Some(&**e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_reached_the_endpoint_decides_the_retry() {
        let io = || io::Error::from(io::ErrorKind::BrokenPipe);
        assert_eq!(UpstreamError::Connect(io()).retry(), Retry::Unsent);
        assert_eq!(UpstreamError::ConnectTimeout.retry(), Retry::Unsent);
        assert_eq!(UpstreamError::Write { source: io(), sent: false }.retry(), Retry::Unsent);
        assert_eq!(UpstreamError::Write { source: io(), sent: true }.retry(), Retry::IfIdempotent);
        assert_eq!(UpstreamError::Timeout.retry(), Retry::IfIdempotent);
        assert_eq!(UpstreamError::Closed.retry(), Retry::IfIdempotent);
        assert_eq!(UpstreamError::Head(HeadError::Status).retry(), Retry::IfIdempotent);
        assert_eq!(UpstreamError::BodyTooLarge.retry(), Retry::Never);
        assert_eq!(UpstreamError::ClientTimeout.retry(), Retry::Never);
        assert_eq!(UpstreamError::ClientBody("gone".into()).retry(), Retry::Never);
    }

    #[test]
    fn the_cause_is_kept() {
        let e = UpstreamError::Write { source: io::Error::from(io::ErrorKind::ConnectionReset), sent: true };
        let source = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<io::Error>());
        assert_eq!(source.map(io::Error::kind), Some(io::ErrorKind::ConnectionReset));
        assert!(e.to_string().starts_with("writing request: "), "{e}");
    }
}
