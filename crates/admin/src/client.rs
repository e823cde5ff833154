//! A client of the admin API, for `gatehouse admin` and for the tests that drive a node's API:
//! one request a connection (plain, or TLS verified against the system's roots or a CA file,
//! with a client certificate when the listener asks for one), the bearer token, `If-Match` and
//! `ETag` as the draft's version, the answer's JSON (or its text as `{"error": …}` when it is not
//! JSON).

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};

/// Where the admin API is (`http://host:port` or `https://host:port`) and the token to call it
/// with.
#[derive(Debug, Clone)]
pub struct AdminClient {
    authority: String,
    token: Option<String>,
    tls: Option<Tls>,
}

/// TLS to an `https://` listener.
#[derive(Clone)]
struct Tls {
    config: std::sync::Arc<rustls::ClientConfig>,
    name: rustls::pki_types::ServerName<'static>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("name", &self.name).finish_non_exhaustive()
    }
}

/// Files for TLS to an `https://` admin listener.
#[derive(Debug, Default, Clone, Copy)]
pub struct TlsFiles<'a> {
    /// PEM CA certificates the listener's certificate must chain to; without it the system's roots.
    pub ca: Option<&'a std::path::Path>,
    /// Client certificate chain and its key, for a listener with `admin.tls.client_ca`.
    pub identity: Option<(&'a std::path::Path, &'a std::path::Path)>,
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
    /// The URL is not `http://host:port`, `https://host:port` or `host:port`.
    UnsupportedUrl(String),
    /// A TLS file could not be used, or TLS could not be set up.
    Tls(String),
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
                write!(f, "not an admin listener's address (http://host:port, https://host:port or host:port): {url}")
            }
            ClientError::Tls(why) => f.write_str(why),
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
    /// A client of the API at `url` (`http://host:port`, `https://host:port` verified against
    /// the system's roots, or `host:port` alone; a trailing `/` allowed), calling with `token`
    /// when it has one.
    pub fn new(url: &str, token: Option<String>) -> Result<AdminClient, ClientError> {
        Self::with_tls(url, token, TlsFiles::default())
    }

    /// [`AdminClient::new`], an `https://` listener verified against `files.ca` and shown
    /// `files.identity` when given.
    pub fn with_tls(url: &str, token: Option<String>, files: TlsFiles<'_>) -> Result<AdminClient, ClientError> {
        let (https, rest) = match url.split_once("://") {
            Some(("http", rest)) => (false, rest),
            Some(("https", rest)) => (true, rest),
            Some(_) => return Err(ClientError::UnsupportedUrl(url.to_string())),
            None => (false, url),
        };
        let authority = rest.trim_end_matches('/');
        if authority.is_empty() || authority.contains('/') {
            return Err(ClientError::UnsupportedUrl(url.to_string()));
        }
        if !https && (files.ca.is_some() || files.identity.is_some()) {
            return Err(ClientError::Tls(format!("--ca, --cert and --key need an https:// URL, not {url}")));
        }
        let tls = match https {
            true => Some(Tls::new(authority, files)?),
            false => None,
        };
        Ok(AdminClient { authority: authority.to_string(), token: token.map(|t| t.trim().to_string()), tls })
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
        let unreachable = |source| ClientError::Unreachable { authority: self.authority.clone(), source };
        let stream = tokio::net::TcpStream::connect(&self.authority).await.map_err(unreachable)?;
        let mut sender = match &self.tls {
            None => handshake(stream).await.map_err(|e| exchange(&e))?,
            Some(tls) => {
                let connector = tokio_rustls::TlsConnector::from(tls.config.clone());
                let stream = connector.connect(tls.name.clone(), stream).await.map_err(unreachable)?;
                handshake(stream).await.map_err(|e| exchange(&e))?
            }
        };
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

    /// Whether calls go over TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
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

/// HTTP/1.1 over `stream`, its connection driven by a task of its own.
async fn handshake<S>(stream: S) -> Result<hyper::client::conn::http1::SendRequest<Full<Bytes>>, hyper::Error>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    Ok(sender)
}

impl Tls {
    /// Verified TLS to `authority` (`host:port`): its host is the name checked.
    fn new(authority: &str, files: TlsFiles<'_>) -> Result<Tls, ClientError> {
        use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer, ServerName};
        let host = match authority.rsplit_once(':') {
            Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
            _ => authority,
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(host.to_string())
            .map_err(|_| ClientError::Tls(format!("`{host}` is not a host name or IP address to verify")))?;
        let read = |p: &std::path::Path| {
            gatehouse_files::read(p).map_err(|e| ClientError::Tls(format!("cannot read {}: {e}", p.display())))
        };
        let certs = |p: &std::path::Path| -> Result<Vec<CertificateDer<'static>>, ClientError> {
            let pem = read(p)?;
            let certs: Vec<_> = CertificateDer::pem_slice_iter(&pem)
                .collect::<Result<_, _>>()
                .map_err(|e| ClientError::Tls(format!("{}: {e}", p.display())))?;
            match certs.is_empty() {
                true => Err(ClientError::Tls(format!("{} holds no certificate", p.display()))),
                false => Ok(certs),
            }
        };
        let mut roots = rustls::RootCertStore::empty();
        match files.ca {
            Some(ca) => {
                for c in certs(ca)? {
                    roots.add(c).map_err(|e| ClientError::Tls(format!("{}: {e}", ca.display())))?;
                }
            }
            None => {
                roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
            }
        }
        let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| ClientError::Tls(e.to_string()))?
            .with_root_certificates(roots);
        let mut config = match files.identity {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = certs(cert)?;
                let key = PrivateKeyDer::from_pem_slice(&read(key)?)
                    .map_err(|e| ClientError::Tls(format!("{}: {e}", key.display())))?;
                builder.with_client_auth_cert(chain, key).map_err(|e| ClientError::Tls(e.to_string()))?
            }
        };
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls { config: std::sync::Arc::new(config), name })
    }
}
