//! HTTP-01 answers (RFC 8555 §8.3): `GET /.well-known/acme-challenge/TOKEN` over plain HTTP gets
//! the token's key authorization, before routing and whatever the site would do with the path
//! (a redirect to HTTPS included); a token no order published gets 404.

use crate::body::ResponseBody;
use crate::error::ProxyError;
use bytes::Bytes;
use http::{header, HeaderValue, Method, Response, StatusCode};
use std::future::Future;
use std::pin::Pin;

/// The path prefix of HTTP-01 challenges.
pub const CHALLENGE_PREFIX: &str = "/.well-known/acme-challenge/";

/// Where key authorizations are found (the node's challenge board).
pub trait Http01: Send + Sync + std::fmt::Debug {
    /// The key authorization for `token`, if an order published one.
    fn key_authorization<'a>(&'a self, token: &'a str) -> Pin<Box<dyn Future<Output = Option<String>> + Send + 'a>>;
}

/// The token of a challenge request: a GET or HEAD for a path under [`CHALLENGE_PREFIX`].
pub(crate) fn token<'p>(method: &Method, path: &'p str) -> Option<&'p str> {
    if method != Method::GET && method != Method::HEAD {
        return None;
    }
    path.strip_prefix(CHALLENGE_PREFIX)
}

/// The answer to the challenge request for `token`.
pub(crate) async fn answer(board: &dyn Http01, token: &str) -> Result<Response<ResponseBody>, ProxyError> {
    let Some(key_authorization) = board.key_authorization(token).await else {
        return Err(ProxyError::NoRoute);
    };
    let mut resp = Response::new(ResponseBody::full(Bytes::from(key_authorization)));
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(resp)
}
