//! A real HTTP backend on `127.0.0.1:0`: HTTP/1.1 and h2c on one port, in a thread of its own with
//! its own runtime. It records every request and counts TCP connections, and answers according to a
//! behaviour the test can change while it runs (status, delay, health, protocol upgrades).

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, Version};
use http_body::Frame;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;

/// The path health checks use; requests for it are counted apart and never recorded.
const HEALTH_PATH: &str = "/healthz";

/// One request as the backend received it.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// Method, e.g. `GET`.
    pub method: String,
    /// Request target as received (origin form for HTTP/1.1, absolute for HTTP/2).
    pub uri: String,
    /// Protocol version.
    pub version: Version,
    /// Headers with lower-case names; values of one name keep their order.
    pub headers: Vec<(String, String)>,
    /// The whole body, or what arrived of it before it failed (see `aborted`).
    pub body: Vec<u8>,
    /// The body ended in an error: the sender gave up mid-body, so the request never arrived whole.
    pub aborted: bool,
    /// The body's trailer fields, names in lower case.
    pub trailers: Vec<(String, String)>,
}

impl Recorded {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        crate::first_header(&self.headers, name)
    }

    /// Every value of header `name`, in order.
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        self.headers.iter().filter(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str()).collect()
    }

    /// Path and query of the target, also for an absolute-form (HTTP/2) target.
    pub fn path_and_query(&self) -> String {
        self.uri
            .parse::<http::Uri>()
            .ok()
            .and_then(|u| u.path_and_query().map(|p| p.as_str().to_string()))
            .unwrap_or_else(|| self.uri.clone())
    }
}

#[derive(Debug)]
struct State {
    name: String,
    requests: Mutex<Vec<Recorded>>,
    connections: AtomicUsize,
    health_checks: AtomicUsize,
    status: AtomicU16,
    health_status: AtomicU16,
    delay_ms: AtomicU64,
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` of new HTTP/2 connections (0: hyper's default).
    h2_max_streams: AtomicU32,
    extra_headers: Mutex<Vec<(String, String)>>,
    body: Mutex<Option<Bytes>>,
    trailers: Mutex<Vec<(String, String)>>,
}

/// A running backend; stopped when dropped.
#[derive(Debug)]
pub struct Backend {
    addr: SocketAddr,
    state: Arc<State>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Backend {
    /// Starts a backend called `name`. By default it answers `200` with body `name` and header
    /// `x-backend: name`, and `/healthz` answers `200`.
    pub fn start(name: &str) -> Backend {
        Backend::start_at(name, SocketAddr::from(([127, 0, 0, 1], 0)))
    }

    /// [`Backend::start`] on `addr`: another loopback address (`127.0.0.2:0`), or the port of a
    /// backend already on another address, so that one DNS name can point at either.
    pub fn start_at(name: &str, addr: SocketAddr) -> Backend {
        let listener = TcpListener::bind(addr).unwrap_or_else(|e| panic!("bind a backend on {addr}: {e}"));
        listener.set_nonblocking(true).expect("make the backend socket non-blocking");
        let addr = listener.local_addr().expect("backend address");
        let state = Arc::new(State {
            name: name.to_string(),
            requests: Mutex::new(Vec::new()),
            connections: AtomicUsize::new(0),
            health_checks: AtomicUsize::new(0),
            status: AtomicU16::new(200),
            health_status: AtomicU16::new(200),
            delay_ms: AtomicU64::new(0),
            h2_max_streams: AtomicU32::new(0),
            extra_headers: Mutex::new(Vec::new()),
            body: Mutex::new(None),
            trailers: Mutex::new(Vec::new()),
        });
        let (tx, rx) = oneshot::channel();
        let st = state.clone();
        let thread = std::thread::Builder::new()
            .name(format!("backend-{name}"))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("build the backend runtime");
                rt.block_on(serve(listener, st, rx));
            })
            .expect("spawn the backend thread");
        Backend { addr, state, shutdown: Some(tx), thread: Some(thread) }
    }

    /// An address on 127.0.0.1 where nothing listens: a socket bound there and never listening,
    /// kept for the life of the test process, so connecting is refused and no other listener
    /// (another test's gateway) can take the port meanwhile.
    pub fn closed_port() -> SocketAddr {
        let socket =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("create a probe socket");
        let any: SocketAddr = ([127, 0, 0, 1], 0).into();
        socket.bind(&any.into()).expect("bind a probe socket");
        let addr = socket.local_addr().ok().and_then(|a| a.as_socket()).expect("probe address");
        std::mem::forget(socket);
        addr
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its name, as sent in `x-backend` and the body.
    pub fn name(&self) -> &str {
        &self.state.name
    }

    /// Every request received so far (health checks excluded), oldest first.
    pub fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Number of requests received so far (health checks excluded).
    pub fn request_count(&self) -> usize {
        self.state.requests.lock().map(|r| r.len()).unwrap_or_default()
    }

    /// Forgets the recorded requests (connection and health-check counts are kept).
    pub fn clear(&self) {
        if let Ok(mut r) = self.state.requests.lock() {
            r.clear();
        }
    }

    /// TCP connections accepted so far, health checks included.
    pub fn connections(&self) -> usize {
        self.state.connections.load(SeqCst)
    }

    /// `/healthz` requests received so far.
    pub fn health_checks(&self) -> usize {
        self.state.health_checks.load(SeqCst)
    }

    /// Status of the answers to ordinary requests from now on.
    pub fn set_status(&self, status: u16) {
        self.state.status.store(status, SeqCst);
    }

    /// Status of `/healthz` from now on.
    pub fn set_health(&self, status: u16) {
        self.state.health_status.store(status, SeqCst);
    }

    /// Adds a header to the answers to ordinary requests from now on (appended, so a name may repeat).
    pub fn add_response_header(&self, name: &str, value: &str) {
        if let Ok(mut h) = self.state.extra_headers.lock() {
            h.push((name.to_string(), value.to_string()));
        }
    }

    /// Body of the answers to ordinary requests from now on, instead of the backend's name.
    pub fn set_body(&self, body: impl Into<Bytes>) {
        if let Ok(mut b) = self.state.body.lock() {
            *b = Some(body.into());
        }
    }

    /// Trailer fields of the answers to ordinary requests from now on (the body is then sent
    /// without a length; over HTTP/1.1 chunked, with a `Trailer` header naming them, to clients
    /// that sent `TE: trailers`, as hyper does).
    pub fn set_trailers(&self, fields: &[(&str, &str)]) {
        if let Ok(mut t) = self.state.trailers.lock() {
            *t = fields.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        }
    }

    /// The stream limit new HTTP/2 connections announce (`SETTINGS_MAX_CONCURRENT_STREAMS`).
    pub fn set_h2_max_streams(&self, max: u32) {
        self.state.h2_max_streams.store(max, SeqCst);
    }

    /// Delay before answering ordinary requests from now on (health checks are answered at once).
    pub fn set_delay(&self, delay: Duration) {
        self.state.delay_ms.store(u64::try_from(delay.as_millis()).unwrap_or(u64::MAX), SeqCst);
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn serve(listener: TcpListener, state: Arc<State>, mut shutdown: oneshot::Receiver<()>) {
    let listener = tokio::net::TcpListener::from_std(listener).expect("register the backend socket");
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                state.connections.fetch_add(1, SeqCst);
                let st = state.clone();
                let max = state.h2_max_streams.load(SeqCst);
                tokio::spawn(async move {
                    let service = service_fn(move |req| answer(st.clone(), req));
                    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    if max > 0 {
                        builder.http2().max_concurrent_streams(max);
                    }
                    let _ = builder.serve_connection_with_upgrades(TokioIo::new(stream), service).await;
                });
            }
        }
    }
}

/// A body of data and, maybe, trailers; its length is known unless it has trailers.
#[derive(Debug)]
pub(crate) struct Frames {
    frames: std::collections::VecDeque<Frame<Bytes>>,
    exact: Option<u64>,
}

impl Frames {
    pub(crate) fn new(data: Bytes, trailers: Option<http::HeaderMap>) -> Frames {
        let exact = trailers.is_none().then_some(data.len() as u64);
        let mut frames = std::collections::VecDeque::new();
        if !data.is_empty() {
            frames.push_back(Frame::data(data));
        }
        frames.extend(trailers.map(Frame::trailers));
        Frames { frames, exact }
    }
}

impl http_body::Body for Frames {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        std::task::Poll::Ready(self.frames.pop_front().map(Ok))
    }

    fn is_end_stream(&self) -> bool {
        self.frames.is_empty()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.exact.map_or_else(http_body::SizeHint::default, http_body::SizeHint::with_exact)
    }
}

fn response(status: u16, name: &str, body: Bytes) -> Response<Frames> {
    let mut resp = Response::new(Frames::new(body, None));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(v) = HeaderValue::try_from(name) {
        resp.headers_mut().insert("x-backend", v);
    }
    resp
}

async fn answer(state: Arc<State>, mut req: Request<Incoming>) -> Result<Response<Frames>, Infallible> {
    if req.uri().path() == HEALTH_PATH {
        state.health_checks.fetch_add(1, SeqCst);
        let status = state.health_status.load(SeqCst);
        return Ok(response(status, &state.name, Bytes::from_static(b"health\n")));
    }
    let upgrade = req.headers().get(http::header::UPGRADE).cloned();
    let on_upgrade = upgrade.as_ref().map(|_| hyper::upgrade::on(&mut req));
    let (parts, body) = req.into_parts();
    let (body, aborted, trailers) = if on_upgrade.is_some() {
        (Vec::new(), false, Vec::new())
    } else {
        match body.collect().await {
            Ok(b) => {
                let trailers = b.trailers().map_or_else(Vec::new, |t| {
                    t.iter()
                        .map(|(k, v)| (k.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
                        .collect()
                });
                (b.to_bytes().to_vec(), false, trailers)
            }
            Err(_) => (Vec::new(), true, Vec::new()),
        }
    };
    let recorded = Recorded {
        method: parts.method.to_string(),
        uri: parts.uri.to_string(),
        version: parts.version,
        headers: parts
            .headers
            .iter()
            .map(|(k, v)| (k.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
            .collect(),
        body,
        aborted,
        trailers,
    };
    if let Ok(mut r) = state.requests.lock() {
        r.push(recorded);
    }
    if let (Some(proto), Some(on_upgrade)) = (upgrade, on_upgrade) {
        tokio::spawn(echo(on_upgrade));
        let mut resp = response(101, &state.name, Bytes::new());
        resp.headers_mut().insert(http::header::CONNECTION, HeaderValue::from_static("upgrade"));
        resp.headers_mut().insert(http::header::UPGRADE, proto);
        return Ok(resp);
    }
    let delay = state.delay_ms.load(SeqCst);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    let status = state.status.load(SeqCst);
    let body = state.body.lock().ok().and_then(|b| b.clone()).unwrap_or_else(|| Bytes::from(state.name.clone()));
    let mut resp = response(status, &state.name, body.clone());
    let trailers = state.trailers.lock().map(|t| t.clone()).unwrap_or_default();
    if !trailers.is_empty() {
        let mut map = http::HeaderMap::new();
        for (k, v) in &trailers {
            if let (Ok(k), Ok(v)) = (http::HeaderName::try_from(k.as_str()), HeaderValue::try_from(v.as_str())) {
                map.append(k, v);
            }
        }
        let names: Vec<&str> = trailers.iter().map(|(k, _)| k.as_str()).collect();
        if let Ok(v) = HeaderValue::try_from(names.join(", ")) {
            resp.headers_mut().insert(http::header::TRAILER, v);
        }
        *resp.body_mut() = Frames::new(body, Some(map));
    }
    if let Ok(extra) = state.extra_headers.lock() {
        for (k, v) in extra.iter() {
            if let (Ok(k), Ok(v)) = (http::HeaderName::try_from(k.as_str()), HeaderValue::try_from(v.as_str())) {
                resp.headers_mut().append(k, v);
            }
        }
    }
    Ok(resp)
}

/// Echoes every byte of the upgraded connection back until the peer closes it.
async fn echo(on_upgrade: hyper::upgrade::OnUpgrade) {
    let Ok(upgraded) = on_upgrade.await else {
        return;
    };
    let mut io = TokioIo::new(upgraded);
    let mut buf = [0u8; 4096];
    loop {
        match io.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if io.write_all(&buf[..n]).await.is_err() || io.flush().await.is_err() {
                    return;
                }
            }
        }
    }
}
