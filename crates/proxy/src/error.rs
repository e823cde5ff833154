//! The one place where failures become HTTP responses: a short generic body for the client, the
//! detail in the log.

use crate::body::ResponseBody;
use crate::grpc::Code;
use gatehouse_plugins::{quota_headers, Denial};
use gatehouse_upstream::UpstreamError;
use http::header::HeaderValue;
use http::{header, Response, StatusCode};

/// Why a request could not be answered by an upstream.
#[derive(Debug)]
pub enum ProxyError {
    /// The site is served over HTTPS only: a `308` to this URL.
    RedirectHttps(String),
    /// The site requires a client certificate, and this connection's handshake did not verify
    /// one for it (`421`: the client should connect again naming the site).
    MisdirectedRequest,
    /// The site requires a client certificate, and the request came over plain HTTP.
    ClientCertRequired,
    /// The request is malformed; it is never forwarded.
    BadRequest(&'static str),
    /// An HTTP/1.x request head that cannot be read: malformed (`400`), a CONNECT (`405`), a head
    /// too long (`431`), a transfer coding not known (`501`), another HTTP version (`505`). The
    /// status is the parser's; the connection closes after the answer.
    HeadRefused(StatusCode),
    /// A request in TLS early data (0-RTT) whose method is not safe (`425`, RFC 8470): early data
    /// can be replayed, so the client sends it again once the handshake is complete.
    TooEarly,
    /// A request the gateway does not forward (`501`): a CONNECT other than a WebSocket's, or a
    /// WebSocket over HTTP/2 to an upstream that speaks HTTP/2.
    NotForwarded(&'static str),
    /// The service's Admit stage refused the request.
    Denied(Denial),
    /// No site or route matches the host and path.
    NoRoute,
    /// The client stopped sending its request body for longer than `body_read_timeout`.
    ClientTimeout,
    /// The declared body is larger than the route allows.
    BodyTooLarge {
        /// The route's limit.
        limit: u64,
    },
    /// Every endpoint is down, ejected, at its limit or already tried.
    NoHealthyEndpoint {
        /// Upstream name.
        upstream: String,
    },
    /// The upstream has no endpoint: none of its names has resolved yet.
    Unresolved {
        /// Upstream name.
        upstream: String,
        /// Each target left out, with why.
        why: String,
    },
    /// The request's time (`stream_timeout`, `grpc-timeout`) ran out before an answer came.
    DeadlineExceeded,
    /// The endpoint's answer cannot be passed on (`502`): a WebSocket handshake answer that does
    /// not accept the key sent.
    BadUpstreamAnswer(&'static str),
    /// The last endpoint tried failed: no connection, no answer in time, or a broken exchange
    /// (reset, protocol error).
    Upstream {
        /// The endpoint.
        endpoint: String,
        /// What failed.
        source: UpstreamError,
    },
}

impl ProxyError {
    /// The status the client sees.
    pub fn status(&self) -> StatusCode {
        match self {
            ProxyError::RedirectHttps(_) => StatusCode::PERMANENT_REDIRECT,
            ProxyError::MisdirectedRequest => StatusCode::MISDIRECTED_REQUEST,
            ProxyError::ClientCertRequired => StatusCode::FORBIDDEN,
            ProxyError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ProxyError::HeadRefused(status) => *status,
            ProxyError::TooEarly => StatusCode::TOO_EARLY,
            ProxyError::NotForwarded(_) => StatusCode::NOT_IMPLEMENTED,
            ProxyError::Denied(d) => d.status(),
            ProxyError::NoRoute => StatusCode::NOT_FOUND,
            ProxyError::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ProxyError::ClientTimeout => StatusCode::REQUEST_TIMEOUT,
            ProxyError::NoHealthyEndpoint { .. } | ProxyError::Unresolved { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ProxyError::Upstream { source, .. } if source.is_timeout() => StatusCode::GATEWAY_TIMEOUT,
            ProxyError::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
            ProxyError::Upstream { .. } | ProxyError::BadUpstreamAnswer(_) => StatusCode::BAD_GATEWAY,
        }
    }

    /// The gRPC status a gRPC client gets for this failure, and the message that goes with it
    /// (as generic as the HTTP answer's body: the detail is in the log).
    pub fn grpc_status(&self) -> (Code, &'static str) {
        match self {
            ProxyError::RedirectHttps(_) => (Code::Unavailable, "the site is served over HTTPS only"),
            ProxyError::MisdirectedRequest => (Code::Unavailable, "misdirected request: connect again for this site"),
            ProxyError::ClientCertRequired => (Code::Unauthenticated, "a client certificate is required"),
            ProxyError::BadRequest(_) | ProxyError::HeadRefused(_) => (Code::Internal, "bad request"),
            ProxyError::TooEarly => (Code::Unavailable, "too early: send again after the handshake"),
            ProxyError::NotForwarded(_) => (Code::Unimplemented, "not forwarded"),
            ProxyError::Denied(d) => match d {
                Denial::MissingCredentials { .. } | Denial::InvalidCredentials { .. } => {
                    (Code::Unauthenticated, d.public().1)
                }
                Denial::AddressRefused { .. } | Denial::NotGranted { .. } | Denial::AclDenied => {
                    (Code::PermissionDenied, d.public().1)
                }
                Denial::RateLimited { .. } => (Code::ResourceExhausted, d.public().1),
                Denial::LimiterUnavailable | Denial::KeysUnavailable | Denial::ExternalUnavailable => {
                    (Code::Unavailable, d.public().1)
                }
                Denial::External(a) => match a.status.as_u16() {
                    401 => (Code::Unauthenticated, d.public().1),
                    403 => (Code::PermissionDenied, d.public().1),
                    429 => (Code::ResourceExhausted, d.public().1),
                    _ => (Code::Unavailable, d.public().1),
                },
                Denial::BadTarget => (Code::Internal, d.public().1),
            },
            ProxyError::NoRoute => (Code::Unimplemented, "no route"),
            ProxyError::DeadlineExceeded => (Code::DeadlineExceeded, "deadline exceeded"),
            ProxyError::ClientTimeout => (Code::DeadlineExceeded, "the request body stopped arriving"),
            ProxyError::BodyTooLarge { .. } => (Code::ResourceExhausted, "request body too large"),
            ProxyError::NoHealthyEndpoint { .. } => (Code::Unavailable, "no healthy upstream"),
            ProxyError::Unresolved { .. } => (Code::Unavailable, "no upstream address"),
            ProxyError::Upstream { source, .. } if source.is_timeout() => {
                (Code::DeadlineExceeded, "upstream timed out")
            }
            ProxyError::Upstream { source, .. } if source.is_connect() => {
                (Code::Unavailable, "upstream connect failed")
            }
            ProxyError::Upstream { .. } | ProxyError::BadUpstreamAnswer(_) => (Code::Unavailable, "upstream failed"),
        }
    }

    /// Logs the detail and builds a gRPC client's answer: trailers-only, with
    /// [`ProxyError::grpc_status`] and what a refusal adds (a challenge, a wait).
    pub fn into_grpc_response(self) -> Response<ResponseBody> {
        self.log(self.status());
        let (code, message) = self.grpc_status();
        let mut headers = http::HeaderMap::new();
        if let ProxyError::Denied(d) = self {
            denial_headers(d, &mut headers);
        }
        crate::grpc::answer(code, message, headers)
    }

    fn log(&self, status: StatusCode) {
        match self {
            ProxyError::RedirectHttps(_) => {}
            ProxyError::MisdirectedRequest => {
                tracing::debug!(%status, "request for a client-certificate site on another site's connection")
            }
            ProxyError::ClientCertRequired => tracing::debug!(%status, "client-certificate site asked over plain HTTP"),
            ProxyError::BadRequest(why) => tracing::debug!(%status, why, "rejected request"),
            ProxyError::HeadRefused(_) => tracing::debug!(%status, "request head refused"),
            ProxyError::TooEarly => tracing::debug!(%status, "a method that is not safe in early data"),
            ProxyError::BadUpstreamAnswer(why) => tracing::warn!(%status, why, "upstream answer not passed on"),
            ProxyError::NotForwarded(why) => tracing::debug!(%status, why, "request not forwarded"),
            ProxyError::Denied(d) => tracing::debug!(%status, denial = ?d, "refused by the service"),
            ProxyError::NoRoute => tracing::debug!(%status, "no route"),
            ProxyError::BodyTooLarge { limit } => {
                tracing::debug!(%status, limit, "request body too large")
            }
            ProxyError::ClientTimeout => tracing::debug!(%status, "the client stopped sending its body"),
            ProxyError::DeadlineExceeded => tracing::debug!(%status, "the request's deadline passed"),
            ProxyError::NoHealthyEndpoint { upstream } => {
                tracing::warn!(%status, upstream, "no healthy endpoint")
            }
            ProxyError::Unresolved { upstream, why } => {
                tracing::warn!(%status, upstream, unresolved = %why, "no endpoint: no target has resolved")
            }
            ProxyError::Upstream { endpoint, source } if source.is_connect() => {
                tracing::warn!(%status, endpoint, reason = %source, "connect failed")
            }
            ProxyError::Upstream { endpoint, source } if source.is_timeout() => {
                tracing::warn!(%status, endpoint, "upstream timed out")
            }
            ProxyError::Upstream { endpoint, source } => {
                tracing::warn!(%status, endpoint, reason = %source, "upstream failed")
            }
        }
    }

    /// Logs the detail and builds the client's response.
    pub fn into_response(self) -> Response<ResponseBody> {
        let status = self.status();
        self.log(status);
        if let ProxyError::Denied(d) = self {
            return denied(status, d);
        }
        let close = matches!(
            self,
            ProxyError::BadRequest(_)
                | ProxyError::HeadRefused(_)
                | ProxyError::BodyTooLarge { .. }
                | ProxyError::ClientTimeout
        );
        let mut resp = simple(status, close);
        if let ProxyError::RedirectHttps(location) = self {
            if let Ok(v) = header::HeaderValue::try_from(location) {
                resp.headers_mut().insert(header::LOCATION, v);
            }
        }
        resp
    }
}

/// A short plain-text response such as `502 Bad Gateway`.
fn simple(status: StatusCode, close: bool) -> Response<ResponseBody> {
    let text = format!("{} {}\n", status.as_u16(), status.canonical_reason().unwrap_or(""));
    let mut resp = Response::new(ResponseBody::full(text.into()));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, header::HeaderValue::from_static("text/plain; charset=utf-8"));
    if close {
        h.insert(header::CONNECTION, header::HeaderValue::from_static("close"));
    }
    resp
}

/// A refusal by a service: a short JSON body, the challenge of a 401, the wait of a 429; or the
/// authorization service's own answer, as it came (its hop-by-hop headers and framing aside).
fn denied(status: StatusCode, d: Denial) -> Response<ResponseBody> {
    if let Denial::External(a) = d {
        let a = *a;
        let mut resp = Response::new(ResponseBody::full(a.body));
        *resp.status_mut() = a.status;
        let mut headers = a.headers;
        for name in [
            header::CONNECTION,
            header::TRANSFER_ENCODING,
            header::CONTENT_LENGTH,
            header::TE,
            header::TRAILER,
            header::UPGRADE,
            header::PROXY_AUTHENTICATE,
        ] {
            headers.remove(name);
        }
        headers.remove("keep-alive");
        *resp.headers_mut() = headers;
        return resp;
    }
    let (code, message) = d.public();
    let body = format!("{{\"error\":\"{code}\",\"message\":\"{message}\"}}\n");
    let mut resp = Response::new(ResponseBody::full(body.into()));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    denial_headers(d, h);
    resp
}

/// What a refusal tells beside its status: the challenge of a 401, the wait of a 429.
fn denial_headers(d: Denial, h: &mut http::HeaderMap) {
    match d {
        Denial::MissingCredentials { challenge } | Denial::InvalidCredentials { challenge, .. } => {
            h.insert(header::WWW_AUTHENTICATE, challenge);
        }
        Denial::RateLimited { retry_after_secs, limit } => {
            h.insert(header::RETRY_AFTER, retry_after_secs.into());
            quota_headers(h, limit.into(), 0, retry_after_secs);
        }
        _ => {}
    }
}
