//! A client of the admin API, for `gatehouse admin` and for the tests that drive a node's API:
//! one request a connection, the bearer token, `If-Match` and `ETag` as the draft's version, the
//! answer's JSON (or its text as `{"error": …}` when it is not JSON).

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};

/// Where the admin API is (`http://host:port`) and the token to call it with.
#[derive(Debug, Clone)]
pub struct AdminClient {
    authority: String,
    token: Option<String>,
}

/// An answer of the API: status, JSON body, and the version an `ETag` gave.
#[derive(Debug)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// The body, parsed.
    pub body: Value,
    /// The `ETag`'s version (drafts).
    pub version: Option<u64>,
}

/// Why a call did not return a successful answer.
#[derive(Debug)]
#[non_exhaustive]
pub enum ClientError {
    /// The URL is not `http://host:port` or `host:port`.
    UnsupportedUrl(String),
    /// No token was given, and the call needs one.
    NoToken,
    /// The listener could not be reached.
    Unreachable {
        /// `host:port`.
        authority: String,
        /// Why.
        source: std::io::Error,
    },
    /// The exchange broke off, or the request could not be made.
    Exchange(String),
    /// The API answered with an error status.
    Refused {
        /// The call, as `METHOD /path`.
        call: String,
        /// Its status.
        status: u16,
        /// The answer.
        body: Value,
    },
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::UnsupportedUrl(url) => {
                write!(f, "not an admin listener's address (http://host:port or host:port): {url}")
            }
            ClientError::NoToken => f.write_str(
                "no admin token: give --token-file, set GATEHOUSE_TOKEN, or run where .gatehouse/admin-token is",
            ),
            ClientError::Unreachable { authority, source } => write!(f, "cannot reach {authority}: {source}"),
            ClientError::Exchange(why) => f.write_str(why),
            ClientError::Refused { call, status, body } => {
                write!(f, "{call}: {status}: {}", body["error"].as_str().unwrap_or("error"))?;
                for e in body["errors"].as_array().into_iter().flatten() {
                    let (path, message) = (e["path"].as_str().unwrap_or("?"), e["message"].as_str().unwrap_or("?"));
                    write!(f, "\n  {path}: {message}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClientError::Unreachable { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl AdminClient {
    /// A client of the API at `url` (`http://host:port`, or `host:port` alone; a trailing `/`
    /// allowed), calling with `token` when it has one.
    pub fn new(url: &str, token: Option<String>) -> Result<AdminClient, ClientError> {
        let rest = match url.split_once("://") {
            Some(("http", rest)) => rest,
            Some(_) => return Err(ClientError::UnsupportedUrl(url.to_string())),
            None => url,
        };
        let authority = rest.trim_end_matches('/');
        if authority.is_empty() || authority.contains('/') {
            return Err(ClientError::UnsupportedUrl(url.to_string()));
        }
        Ok(AdminClient { authority: authority.to_string(), token: token.map(|t| t.trim().to_string()) })
    }

    /// Calls `method /api/v1{path}`, with `If-Match` when `if_match` is given and `body` as JSON.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        if_match: Option<u64>,
        body: Option<&Value>,
    ) -> Result<Answer, ClientError> {
        let token = self.token.as_deref().ok_or(ClientError::NoToken)?;
        let exchange = |e: &dyn std::fmt::Display| ClientError::Exchange(format!("{method} {path}: {e}"));
        let stream = tokio::net::TcpStream::connect(&self.authority)
            .await
            .map_err(|source| ClientError::Unreachable { authority: self.authority.clone(), source })?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| exchange(&e))?;
        tokio::spawn(conn);
        let body = body.map(Value::to_string).unwrap_or_default();
        let mut req = http::Request::builder()
            .method(method)
            .uri(format!("/api/v1{path}"))
            .header(http::header::HOST, &self.authority)
            .header(http::header::AUTHORIZATION, format!("Bearer {token}"))
            .header(http::header::CONTENT_TYPE, "application/json");
        if let Some(v) = if_match {
            req = req.header(http::header::IF_MATCH, format!("\"{v}\""));
        }
        let req = req.body(Full::new(Bytes::from(body))).map_err(|e| exchange(&e))?;
        let resp = sender.send_request(req).await.map_err(|e| exchange(&e))?;
        let status = resp.status().as_u16();
        let version = resp
            .headers()
            .get(http::header::ETAG)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim_matches('"').parse().ok());
        let bytes = resp.into_body().collect().await.map_err(|e| exchange(&e))?.to_bytes();
        let body =
            serde_json::from_slice(&bytes).unwrap_or_else(|_| json!({ "error": String::from_utf8_lossy(&bytes) }));
        Ok(Answer { status, body, version })
    }

    /// [`AdminClient::call`], a 2xx answer's body and version, or the API's refusal.
    pub async fn ok(
        &self,
        method: &str,
        path: &str,
        if_match: Option<u64>,
        body: Option<&Value>,
    ) -> Result<(Value, Option<u64>), ClientError> {
        let answer = self.call(method, path, if_match, body).await?;
        if (200..300).contains(&answer.status) {
            return Ok((answer.body, answer.version));
        }
        Err(ClientError::Refused { call: format!("{method} {path}"), status: answer.status, body: answer.body })
    }
}
