//! The two requests to a provider: its discovery document and its key set, over hyper's client with rustls.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use gatehouse_jwt::jwk::KeySet;
use http::header::{ACCEPT, CACHE_CONTROL, USER_AGENT};
use http::{HeaderValue, Request, StatusCode, Uri};
use http_body_util::{BodyExt as _, Empty, Limited};
use serde_json::Value;

use crate::{Settings, Source};

/// The largest document read from a provider (Google's key set is under 2 KiB, Entra's under 10).
const MAX_DOCUMENT: usize = 512 * 1024;

/// The admit stage's outbound HTTP client: hyper's pooled client, HTTP/1.1 or HTTP/2 by ALPN,
/// verified rustls.
pub type Client = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Empty<Bytes>,
>;

/// Why a fetch failed, for the log.
#[derive(Debug)]
pub(crate) enum FetchError {
    Url(String),
    Request(String),
    Status(StatusCode),
    TimedOut,
    Body(String),
    Discovery(&'static str),
    Issuer { expected: String, found: String },
    KeySet(gatehouse_jwt::jwk::JwkSetError),
    NoUsableKey,
}

impl fmt::Display for FetchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Url(e) => f.write_str(e),
            Self::Request(e) => write!(f, "request failed: {e}"),
            Self::Status(s) => write!(f, "answered {s}"),
            Self::TimedOut => f.write_str("no answer within the timeout"),
            Self::Body(e) => write!(f, "body: {e}"),
            Self::Discovery(e) => write!(f, "discovery document: {e}"),
            Self::Issuer { expected, found } => {
                write!(f, "discovery document names issuer {found:?}, not {expected:?}")
            }
            Self::KeySet(e) => write!(f, "key set: {e}"),
            Self::NoUsableKey => f.write_str("key set: no usable signature key"),
        }
    }
}

/// A URL keys may be fetched from (the configuration's rule).
pub fn check_url(url: &str) -> Result<Uri, String> {
    gatehouse_config::check_fetch_url(url)
}

/// A client on the current runtime: HTTP/1.1 or HTTP/2 by ALPN, verified TLS with `roots` or the system's.
pub fn client(roots: Option<rustls::RootCertStore>) -> Result<Client, String> {
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = hyper_rustls::HttpsConnectorBuilder::new();
    let builder = match roots {
        Some(roots) => builder.with_tls_config(
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| e.to_string())?
                .with_root_certificates(roots)
                .with_no_client_auth(),
        ),
        None => builder.with_provider_and_native_roots(provider).map_err(|e| format!("the system's CA roots: {e}"))?,
    };
    let connector = builder.https_or_http().enable_http1().enable_http2().build();
    Ok(hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build(connector))
}

/// The key set and how long the provider says it may be kept (`Cache-Control: max-age`).
pub(crate) async fn key_set(client: &Client, s: &Settings) -> Result<(KeySet, Option<Duration>), FetchError> {
    let uri = match &s.source {
        Source::Uri(uri) => check_url(uri).map_err(FetchError::Url)?,
        Source::Discovery { issuer } => discover(client, issuer, s.timeout).await?,
    };
    let (body, max_age) = get(client, uri, "application/jwk-set+json, application/json", s.timeout).await?;
    let set = KeySet::parse(&body).map_err(FetchError::KeySet)?;
    if set.is_empty() {
        return Err(FetchError::NoUsableKey);
    }
    Ok((set, max_age))
}

/// The `jwks_uri` of the issuer's discovery document (OpenID Connect Discovery 1.0 §4), whose `issuer` must be
/// exactly the one configured (§4.3).
async fn discover(client: &Client, issuer: &str, timeout: Duration) -> Result<Uri, FetchError> {
    let url = format!("{}/.well-known/openid-configuration", issuer.trim_end_matches('/'));
    let uri = check_url(&url).map_err(FetchError::Url)?;
    let (body, _) = get(client, uri, "application/json", timeout).await?;
    let doc: Value = serde_json::from_slice(&body).map_err(|_| FetchError::Discovery("not JSON"))?;
    match doc.get("issuer").and_then(Value::as_str) {
        Some(found) if found == issuer => {}
        Some(found) => return Err(FetchError::Issuer { expected: issuer.into(), found: found.into() }),
        None => return Err(FetchError::Discovery("no issuer")),
    }
    let jwks_uri = doc.get("jwks_uri").and_then(Value::as_str).ok_or(FetchError::Discovery("no jwks_uri"))?;
    let uri = check_url(jwks_uri).map_err(FetchError::Url)?;
    // An https issuer's document must not send the gateway to a cleartext (loopback) address.
    if issuer.starts_with("https://") && uri.scheme_str() != Some("https") {
        return Err(FetchError::Discovery("an https issuer names an http jwks_uri"));
    }
    Ok(uri)
}

async fn get(
    client: &Client,
    uri: Uri,
    accept: &'static str,
    timeout: Duration,
) -> Result<(Bytes, Option<Duration>), FetchError> {
    let mut headers = http::HeaderMap::new();
    headers.insert(ACCEPT, HeaderValue::from_static(accept));
    let answer = call(client, uri, headers, timeout, MAX_DOCUMENT).await.map_err(|e| match e {
        CallError::TimedOut => FetchError::TimedOut,
        CallError::Request(e) => FetchError::Request(e),
        CallError::Body(e) => FetchError::Body(e),
    })?;
    if answer.status != StatusCode::OK {
        return Err(FetchError::Status(answer.status));
    }
    let max_age = answer.headers.get_all(CACHE_CONTROL).iter().find_map(max_age);
    Ok((answer.body, max_age))
}

/// What a service the gateway calls answered: status, headers, and the body (bounded).
#[derive(Debug, Clone)]
pub struct Answer {
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: http::HeaderMap,
    /// The body, whole.
    pub body: Bytes,
}

/// Why a call got no answer.
#[derive(Debug)]
pub enum CallError {
    /// Nothing within the timeout.
    TimedOut,
    /// The request could not be made or sent (connect, TLS, protocol); the causes, on one line.
    Request(String),
    /// The body failed or was longer than allowed.
    Body(String),
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TimedOut => f.write_str("no answer within the timeout"),
            Self::Request(e) => write!(f, "request failed: {e}"),
            Self::Body(e) => write!(f, "body: {e}"),
        }
    }
}

/// `GET uri` with `headers` (and Gatehouse's `User-Agent`), the answer read whole up to
/// `max_body` bytes, all within `timeout`.
pub async fn call(
    client: &Client,
    uri: Uri,
    headers: http::HeaderMap,
    timeout: Duration,
    max_body: usize,
) -> Result<Answer, CallError> {
    let mut request = Request::get(uri).body(Empty::new()).map_err(|e| CallError::Request(e.to_string()))?;
    *request.headers_mut() = headers;
    request
        .headers_mut()
        .insert(USER_AGENT, HeaderValue::from_static(concat!("gatehouse/", env!("CARGO_PKG_VERSION"))));
    let exchange = async {
        let response =
            client.request(request).await.map_err(|e| CallError::Request(gatehouse_telemetry::error_chain(&e)))?;
        let (head, body) = response.into_parts();
        let body = Limited::new(body, max_body).collect().await.map_err(|e| CallError::Body(e.to_string()))?.to_bytes();
        Ok(Answer { status: head.status, headers: head.headers, body })
    };
    tokio::time::timeout(timeout, exchange).await.map_err(|_| CallError::TimedOut)?
}

/// `max-age=N` of a `Cache-Control` value; `no-cache` and `no-store` count as zero (then `min_refetch` applies).
fn max_age(value: &HeaderValue) -> Option<Duration> {
    let text = value.to_str().ok()?;
    text.split(',').map(str::trim).find_map(|directive| {
        let (name, arg) = directive.split_once('=').unwrap_or((directive, ""));
        if name.eq_ignore_ascii_case("max-age") {
            arg.trim_matches('"').parse::<u64>().ok().map(Duration::from_secs)
        } else if name.eq_ignore_ascii_case("no-cache") || name.eq_ignore_ascii_case("no-store") {
            Some(Duration::ZERO)
        } else {
            None
        }
    })
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn max_age_is_read_from_cache_control() {
        let v = |s: &'static str| max_age(&HeaderValue::from_static(s));
        assert_eq!(v("public, max-age=21600, must-revalidate"), Some(Duration::from_secs(21600)));
        assert_eq!(v("MAX-AGE=\"60\""), Some(Duration::from_secs(60)));
        assert_eq!(v("no-store"), Some(Duration::ZERO));
        assert_eq!(v("public"), None);
        assert_eq!(v("max-age=soon"), None);
    }

    #[test]
    fn keys_come_over_https_or_from_loopback() {
        assert!(check_url("https://id.example.com/certs").is_ok());
        assert!(check_url("http://127.0.0.1:8080/jwks").is_ok());
        assert!(check_url("http://[::1]:8080/jwks").is_ok());
        assert!(check_url("http://localhost/jwks").is_ok());
        assert!(check_url("http://id.example.com/certs").is_err());
        assert!(check_url("http://10.0.0.1/certs").is_err());
        assert!(check_url("ftp://id.example.com/certs").is_err());
        assert!(check_url("/certs").is_err());
    }
}
