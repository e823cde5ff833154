//! Why the Admit stage refused a request, as facts; the proxy turns them into responses.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};
use std::sync::Arc;

/// A refusal.
#[derive(Debug, Clone)]
pub enum Denial {
    /// No credentials were sent (401).
    MissingCredentials {
        /// The `WWW-Authenticate` challenge.
        challenge: HeaderValue,
    },
    /// The credentials name no app or do not verify (401).
    InvalidCredentials {
        /// The `WWW-Authenticate` challenge.
        challenge: HeaderValue,
        /// What was wrong, for the log only.
        reason: &'static str,
    },
    /// The app may not call from this address (403).
    AddressRefused {
        /// App id.
        app: Arc<str>,
    },
    /// The app has no grant for the service (403).
    NotGranted {
        /// App id.
        app: Arc<str>,
    },
    /// An ACL refused the method and path (403).
    AclDenied,
    /// Over a rate limit (429).
    RateLimited {
        /// Seconds until a request would be admitted (at least 1).
        retry_after_secs: u64,
        /// The limit that refused, for `RateLimit-Limit`.
        limit: u64,
    },
    /// A cluster limit that fails closed could not reach Redis (503).
    LimiterUnavailable,
    /// The target could not be rebuilt without the key (400).
    BadTarget,
    /// The token's provider has never given its key set, so no token of it can be verified (503).
    KeysUnavailable,
    /// The authorization service said no: its answer goes back to the client as it came.
    External(Box<ExternalAnswer>),
    /// The authorization service could not be asked (503).
    ExternalUnavailable,
}

/// An authorization service's answer other than 2xx.
#[derive(Debug, Clone)]
pub struct ExternalAnswer {
    /// Its status.
    pub status: StatusCode,
    /// Its headers (the hop-by-hop ones are not passed on).
    pub headers: HeaderMap,
    /// Its body.
    pub body: Bytes,
}

impl Denial {
    /// The status code.
    pub fn status(&self) -> StatusCode {
        match self {
            Denial::MissingCredentials { .. } | Denial::InvalidCredentials { .. } => StatusCode::UNAUTHORIZED,
            Denial::AddressRefused { .. } | Denial::NotGranted { .. } | Denial::AclDenied => StatusCode::FORBIDDEN,
            Denial::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Denial::LimiterUnavailable | Denial::KeysUnavailable | Denial::ExternalUnavailable => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Denial::External(a) => a.status,
            Denial::BadTarget => StatusCode::BAD_REQUEST,
        }
    }

    /// What refused the request, for traces: `missing_credentials`, `invalid_credentials`,
    /// `address_refused`, `not_granted`, `acl_denied`, `rate_limited`, `limiter_unavailable`,
    /// `bad_target`, `keys_unavailable`, `external_refused`, `external_unavailable`.
    pub fn label(&self) -> &'static str {
        match self {
            Denial::MissingCredentials { .. } => "missing_credentials",
            Denial::InvalidCredentials { .. } => "invalid_credentials",
            Denial::AddressRefused { .. } => "address_refused",
            Denial::NotGranted { .. } => "not_granted",
            Denial::AclDenied => "acl_denied",
            Denial::RateLimited { .. } => "rate_limited",
            Denial::LimiterUnavailable => "limiter_unavailable",
            Denial::BadTarget => "bad_target",
            Denial::KeysUnavailable => "keys_unavailable",
            Denial::External(_) => "external_refused",
            Denial::ExternalUnavailable => "external_unavailable",
        }
    }

    /// A short machine-readable code and a sentence for the client's JSON body; neither says
    /// which part of a credential was wrong.
    pub fn public(&self) -> (&'static str, &'static str) {
        match self {
            Denial::MissingCredentials { .. } => ("unauthorized", "credentials are required"),
            Denial::InvalidCredentials { .. } => ("unauthorized", "invalid credentials"),
            Denial::AddressRefused { .. } => ("forbidden", "not allowed from this address"),
            Denial::NotGranted { .. } => ("forbidden", "no access to this service"),
            Denial::AclDenied => ("forbidden", "not allowed"),
            Denial::RateLimited { .. } => ("rate_limited", "too many requests"),
            Denial::LimiterUnavailable | Denial::KeysUnavailable | Denial::ExternalUnavailable => {
                ("unavailable", "try again later")
            }
            Denial::External(_) => ("refused", "refused by the authorization service"),
            Denial::BadTarget => ("bad_request", "invalid request target"),
        }
    }
}
