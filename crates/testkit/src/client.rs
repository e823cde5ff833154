//! Clients for ordinary requests: a hyper HTTP/1.1 client over a connection of its own, and `curl`,
//! the way a user would call the gateway. Both give back a [`Response`].

use crate::IO_TIMEOUT;
use bytes::Bytes;
use http::{Request, Version};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::process::Command;

/// A response as the client saw it.
#[derive(Clone, Debug)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Protocol of the status line, e.g. `HTTP/1.1` or `HTTP/2`.
    pub version: String,
    /// Headers with lower-case names, in the order received.
    pub headers: Vec<(String, String)>,
    /// The whole body.
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        crate::first_header(&self.headers, name)
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Sends one request on `sender` and reads the whole response.
pub(crate) async fn exchange(
    sender: &mut http1::SendRequest<Full<Bytes>>,
    method: &str,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Response, String> {
    let mut builder = Request::builder().method(method).uri(path).header(http::header::HOST, host);
    for (k, v) in headers {
        builder = builder.header(*k, *v);
    }
    let req = builder.body(Full::new(Bytes::copy_from_slice(body))).map_err(|e| format!("bad request: {e}"))?;
    let work = async {
        sender.ready().await.map_err(|e| format!("connection not ready: {e}"))?;
        let resp = sender.send_request(req).await.map_err(|e| format!("request failed: {e}"))?;
        let (parts, body) = resp.into_parts();
        let body = body.collect().await.map_err(|e| format!("body failed: {e}"))?.to_bytes().to_vec();
        Ok(Response {
            status: parts.status.as_u16(),
            version: version_text(parts.version).to_string(),
            headers: parts
                .headers
                .iter()
                .map(|(k, v)| (k.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
                .collect(),
            body,
        })
    };
    tokio::time::timeout(IO_TIMEOUT, work).await.map_err(|_| format!("no response within {IO_TIMEOUT:?}"))?
}

fn version_text(v: Version) -> &'static str {
    match v {
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_11 => "HTTP/1.1",
        Version::HTTP_2 => "HTTP/2",
        _ => "HTTP/?",
    }
}

/// Opens an HTTP/1.1 connection; the connection's task is spawned on the current runtime.
pub(crate) async fn open(addr: SocketAddr) -> Result<http1::SendRequest<Full<Bytes>>, String> {
    let connect = tokio::net::TcpStream::connect(addr);
    let stream = tokio::time::timeout(IO_TIMEOUT, connect)
        .await
        .map_err(|_| format!("connect to {addr} timed out"))?
        .map_err(|e| format!("connect to {addr}: {e}"))?;
    let _ = stream.set_nodelay(true);
    let (sender, conn) =
        http1::handshake(TokioIo::new(stream)).await.map_err(|e| format!("handshake with {addr}: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

/// One keep-alive HTTP/1.1 client connection, used from synchronous test code.
#[derive(Debug)]
pub struct HttpConn {
    rt: tokio::runtime::Runtime,
    sender: http1::SendRequest<Full<Bytes>>,
}

impl HttpConn {
    /// Connects to `addr`.
    pub fn open(addr: SocketAddr) -> Result<HttpConn, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("client runtime: {e}"))?;
        let sender = rt.block_on(open(addr))?;
        Ok(HttpConn { rt, sender })
    }

    /// Sends a `GET` on this connection.
    pub fn get(&mut self, host: &str, path: &str, headers: &[(&str, &str)]) -> Result<Response, String> {
        self.request("GET", host, path, headers, b"")
    }

    /// Sends a request on this connection.
    pub fn request(
        &mut self,
        method: &str,
        host: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Response, String> {
        let HttpConn { rt, sender } = self;
        rt.block_on(exchange(sender, method, host, path, headers, body))
    }

    /// Whether the server has closed the connection.
    pub fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }
}

/// Sends one request over a fresh connection.
pub fn http_request(
    addr: SocketAddr,
    method: &str,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Response, String> {
    HttpConn::open(addr)?.request(method, host, path, headers, body)
}

/// `GET path` with `Host: host` over a fresh connection; panics if no response comes back.
pub fn http_get(addr: SocketAddr, host: &str, path: &str, headers: &[(&str, &str)]) -> Response {
    match http_request(addr, "GET", host, path, headers, b"") {
        Ok(r) => r,
        Err(e) => panic!("GET {path} (Host: {host}) via {addr}: {e}"),
    }
}

/// Runs `curl` with `args` (never through a proxy, at most 10 s) and parses the response it prints.
/// Pass the URL and any options (`-H`, `--http2-prior-knowledge`, `--data-binary`, ...) in `args`.
/// Panics if curl fails, with its stderr.
pub fn curl(args: &[&str]) -> Response {
    let out = Command::new("curl")
        .args(["-sS", "-i", "--noproxy", "*", "--max-time", "10"])
        .args(args)
        .output()
        .expect("run curl (is it installed?)");
    assert!(out.status.success(), "curl {args:?} failed with {}: {}", out.status, String::from_utf8_lossy(&out.stderr));
    parse_curl(&out.stdout).unwrap_or_else(|e| panic!("curl {args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn parse_curl(out: &[u8]) -> Result<Response, String> {
    // With `-i`, interim responses (100 Continue) come first; the last head is the real one.
    let mut rest = out;
    loop {
        let end = find(rest, b"\r\n\r\n").ok_or("no response head in curl output")?;
        let head = String::from_utf8_lossy(&rest[..end]).into_owned();
        let body = &rest[end + 4..];
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let mut parts = status_line.split_whitespace();
        let version = parts.next().unwrap_or_default().to_string();
        let status: u16 = parts.next().and_then(|s| s.parse().ok()).ok_or("no status in the status line")?;
        if (100..200).contains(&status) && status != 101 && body.starts_with(b"HTTP/") {
            rest = body;
            continue;
        }
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        return Ok(Response { status, version, headers, body: body.to_vec() });
    }
}

pub(crate) fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// What [`h2c_exchange`] got: the response and its trailer fields.
#[derive(Clone, Debug)]
pub struct H2Answer {
    /// The response (version `HTTP/2`).
    pub response: Response,
    /// Trailer fields, names in lower case, in order.
    pub trailers: Vec<(String, String)>,
}

/// A cleartext HTTP/2 connection (prior knowledge) by hyper's client, driven by a task of its own.
async fn h2c_connect<B>(addr: SocketAddr) -> hyper::client::conn::http2::SendRequest<B>
where
    B: http_body::Body + Send + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let stream = tokio::time::timeout(IO_TIMEOUT, tokio::net::TcpStream::connect(addr))
        .await
        .expect("connect in time")
        .expect("connect");
    let (sender, conn) =
        hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), TokioIo::new(stream))
            .await
            .expect("HTTP/2 handshake");
    tokio::spawn(conn);
    sender
}

/// One `POST` over cleartext HTTP/2 (prior knowledge) by hyper's client, with `body` and the
/// trailer fields `trailers` (and `te: trailers`); the answer read whole, trailers included.
pub fn h2c_exchange(addr: SocketAddr, host: &str, path: &str, body: &[u8], trailers: &[(&str, &str)]) -> H2Answer {
    let fields = |map: &http::HeaderMap| -> Vec<(String, String)> {
        map.iter().map(|(k, v)| (k.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned())).collect()
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let mut sender = h2c_connect(addr).await;
        let mut map = http::HeaderMap::new();
        for (k, v) in trailers {
            map.append(http::HeaderName::try_from(*k).expect("name"), http::HeaderValue::try_from(*v).expect("value"));
        }
        let req = Request::post(format!("http://{host}{path}"))
            .header("te", "trailers")
            .body(crate::backend::Frames::new(Bytes::copy_from_slice(body), (!map.is_empty()).then_some(map)))
            .expect("request");
        let resp =
            tokio::time::timeout(IO_TIMEOUT, sender.send_request(req)).await.expect("answer in time").expect("answer");
        let (parts, incoming) = resp.into_parts();
        let collected =
            tokio::time::timeout(IO_TIMEOUT, incoming.collect()).await.expect("body in time").expect("body");
        let trailers = collected.trailers().map(fields).unwrap_or_default();
        H2Answer {
            response: Response {
                status: parts.status.as_u16(),
                version: "HTTP/2".into(),
                headers: fields(&parts.headers),
                body: collected.to_bytes().to_vec(),
            },
            trailers,
        }
    })
}

/// GETs of each target in turn over one cleartext HTTP/2 connection (prior knowledge) by hyper's
/// client; each target goes as `:path` exactly as written (dots, escapes and backslashes kept).
/// The answers in order.
pub fn h2c_get_each(addr: SocketAddr, host: &str, targets: &[&str]) -> Vec<Response> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let mut sender = h2c_connect(addr).await;
        let mut out = Vec::new();
        for target in targets {
            let req = Request::get(format!("http://{host}{target}"))
                .body(Full::new(Bytes::new()))
                .unwrap_or_else(|e| panic!("request for {target:?}: {e}"));
            let resp = tokio::time::timeout(IO_TIMEOUT, sender.send_request(req))
                .await
                .expect("answer in time")
                .unwrap_or_else(|e| panic!("answer to {target:?}: {e}"));
            let (parts, incoming) = resp.into_parts();
            let body = tokio::time::timeout(IO_TIMEOUT, incoming.collect()).await.expect("body in time").expect("body");
            out.push(Response {
                status: parts.status.as_u16(),
                version: "HTTP/2".into(),
                headers: parts
                    .headers
                    .iter()
                    .map(|(k, v)| (k.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
                    .collect(),
                body: body.to_bytes().to_vec(),
            });
        }
        out
    })
}
