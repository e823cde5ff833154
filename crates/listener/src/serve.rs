//! Serve stage: accept with a per-worker connection limit (and, on `proxy_protocol` listeners,
//! only from trusted balancers, whose header names the client), pick HTTP/1.1 or HTTP/2 (prior
//! knowledge) from the first bytes or refuse a broken HTTP/2 preface, run hyper, and drain on
//! shutdown.

use crate::first_bytes::{read_until, Undecided};
use crate::io::{BusyGuard, ConnIo, ConnState, StallMark};
use crate::per_ip::{PerIpGuard, PerIpLimit};
use crate::proxy_protocol::{serve_proxied, serve_proxied_tls, Trusted};
use crate::transport::Transport;
use bytes::{Bytes, BytesMut};
use gatehouse_clock::ClockScoped;
use gatehouse_config::{AltSvc, Listener, ListenerProtocol};
use gatehouse_proxy::error::ProxyError;
use gatehouse_proxy::{ClientCert, ConnInfo, ResponseBody, Shared};
use gatehouse_tls::TlsAcceptor;
use http_body::{Body, Frame, SizeHint};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The preface's first line: a connection that sends it means HTTP/2, whatever follows.
const H2_PREFACE_LINE: usize = b"PRI * HTTP/2.0\r\n".len();
/// Response bytes an HTTP/2 stream may hold before its client takes them: with every stream open,
/// a client that stops reading pins at most `http2_max_concurrent_streams` times this (16 MiB at
/// the default 256; hyper's own default, 400 KiB, would be 100 MiB).
const H2_SEND_BUFFER: usize = 64 << 10;

/// What every connection of a process needs.
#[derive(Debug, Clone)]
pub struct ServeContext {
    /// Snapshot and counters.
    pub shared: Arc<Shared>,
    /// Becomes `true` when connections should finish their current requests and close.
    pub drain: watch::Receiver<bool>,
}

/// The TLS acceptor of a listener, replaced in place when a reload changes certificates or client
/// authentication, so the accept tasks keep running.
pub type AcceptorCell = Arc<arc_swap::ArcSwap<TlsAcceptor>>;

/// A connection's places under the listener's limits, given back when it closes, and its count
/// as open.
pub(crate) struct Admitted {
    _permit: OwnedSemaphorePermit,
    /// Its place under `max_connections_per_ip`, taken at accept, or once a PROXY protocol header
    /// has named the client.
    pub(crate) _per_ip: Option<PerIpGuard>,
    _active: ActiveGuard,
}

/// Accepts connections on `socket` until the task is aborted; `tls` terminates TLS first.
/// `per_ip`, shared by the listener's workers, closes a connection at once when its address
/// already has the listener's `max_connections_per_ip` open (on a `proxy_protocol` listener, the
/// client's address once the header has named it).
pub async fn accept_loop(
    socket: std::net::TcpListener,
    config: Arc<Listener>,
    tls: Option<AcceptorCell>,
    per_ip: Option<Arc<PerIpLimit>>,
    ctx: ServeContext,
) {
    let listener = match tokio::net::TcpListener::from_std(socket) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "cannot register listener socket");
            return;
        }
    };
    // The connections' local address: the listener's (getsockname once, not per connection).
    let local = listener.local_addr().unwrap_or(config.bind);
    let config = advertised(config, local.port());
    let limit = Arc::new(Semaphore::new(config.max_connections));
    let mut backoff = gatehouse_telemetry::AcceptBackoff::default();
    let name = config.bind.to_string();
    let trusted = config.proxy_protocol.as_ref().map(Trusted::new);
    loop {
        // At the limit, new connections wait in the kernel's backlog.
        let Ok(permit) = limit.clone().acquire_owned().await else {
            return;
        };
        match listener.accept().await {
            Ok((stream, peer)) => {
                backoff.succeeded(&name);
                // Each connection's future is spawned boxed: tokio moves a task's future by value
                // several times (into the task, and its stage again as it finishes), and these are
                // hundreds of bytes (plain) to kilobytes (TLS); a box is moved as a pointer, and
                // the task itself stays small enough for the allocator's per-thread cache. Each
                // poll reads the clock at most once (`ClockScoped`).
                if let Some(trusted) = &trusted {
                    if !trusted.admits(peer.ip()) {
                        ctx.shared.stats.proxy_protocol_refused(gatehouse_telemetry::ProxyRefusal::Untrusted);
                        tracing::debug!(listener = %name, %peer, "PROXY protocol: refused a peer that is not trusted");
                        continue;
                    }
                    let admitted =
                        Admitted { _permit: permit, _per_ip: None, _active: opened(&stream, tls.is_some(), &ctx) };
                    let (config, ctx, per_ip) = (config.clone(), ctx.clone(), per_ip.clone());
                    // One future per transport, so a cleartext connection's task is not as large
                    // as a TLS one's.
                    match &tls {
                        None => tokio::spawn(ClockScoped(Box::pin(serve_proxied(
                            stream,
                            (peer, local),
                            config,
                            ctx,
                            (admitted, per_ip),
                        )))),
                        Some(tls) => tokio::spawn(ClockScoped(Box::pin(serve_proxied_tls(
                            stream,
                            (peer, local),
                            config,
                            tls.load_full(),
                            ctx,
                            (admitted, per_ip),
                        )))),
                    };
                    continue;
                }
                let per_ip = match per_ip.as_ref().map(|t| t.admit(peer.ip())) {
                    None => None,
                    Some(Ok(guard)) => guard,
                    Some(Err(_)) => {
                        ctx.shared.stats.connections_over_ip_limit.inc();
                        continue;
                    }
                };
                let admitted =
                    Admitted { _permit: permit, _per_ip: per_ip, _active: opened(&stream, tls.is_some(), &ctx) };
                match &tls {
                    None => tokio::spawn(ClockScoped(Box::pin(serve_connection(
                        stream,
                        (peer, local),
                        config.clone(),
                        ctx.clone(),
                        admitted,
                        BytesMut::new(),
                    )))),
                    Some(tls) => tokio::spawn(ClockScoped(Box::pin(serve_tls(
                        stream,
                        (peer, local),
                        config.clone(),
                        tls.load_full(),
                        ctx.clone(),
                        admitted,
                    )))),
                };
            }
            Err(e) => {
                ctx.shared.stats.accept_errors.inc();
                tokio::time::sleep(backoff.failed(&name, &e)).await;
            }
        }
    }
}

/// Counts an open connection until dropped.
struct ActiveGuard(Arc<Shared>);

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.stats.connections_active.dec();
    }
}

/// How a cleartext connection opens, from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opening {
    /// The whole HTTP/2 preface (prior knowledge).
    H2,
    /// The preface's first line, `PRI * HTTP/2.0`, then something else: an HTTP/2 client whose
    /// preface is invalid. RFC 9113 §3.4 makes that a connection error, so it gets no HTTP/1.x
    /// answer (which it could not read anyway).
    BadPreface,
    /// Anything else: HTTP/1.x.
    Http1,
}

impl Opening {
    /// What `first` says, or `None` while it could still become the HTTP/2 preface.
    fn of(first: &[u8]) -> Option<Opening> {
        match first.iter().zip(H2_PREFACE).position(|(got, want)| got != want) {
            Some(at) if at >= H2_PREFACE_LINE => Some(Opening::BadPreface),
            Some(_) => Some(Opening::Http1),
            None if first.len() >= H2_PREFACE.len() => Some(Opening::H2),
            None => None,
        }
    }
}

/// How the client's first bytes open (with [`Opening::H2`], the whole preface is in the buffer,
/// maybe frames after it), from the sniff's read: `None` when the socket failed or nothing came
/// within the time. A plain function: the read's future is awaited in the connection's task
/// itself, as a wrapping future would hold it a second time.
fn sniffed(read: Result<(BytesMut, Opening), Undecided>) -> Option<(BytesMut, Opening)> {
    match read {
        Ok(sniffed) => Some(sniffed),
        Err(Undecided::Ended(buf)) => Some((buf, Opening::Http1)),
        Err(Undecided::TimedOut | Undecided::Failed) => None,
    }
}

/// Closes a connection that did not open with the HTTP/2 preface where one is required: FIN
/// first, then read what the client already sent (bounded), so the close is clean rather than a
/// reset.
async fn refuse_gracefully(mut stream: TcpStream) {
    use tokio::io::AsyncWriteExt;
    let _ = stream.shutdown().await;
    // On the heap: this path is rare, and a buffer here would otherwise sit in every connection's
    // task.
    let mut sink = vec![0u8; 4096];
    let drain = async {
        for _ in 0..16 {
            if matches!(stream.read(&mut sink).await, Ok(0) | Err(_)) {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), drain).await;
}

/// Counts a new connection (as open until the guard drops). A TLS connection turns Nagle's
/// algorithm off at once; a plain one before its second write ([`crate::transport::Nagle`]).
fn opened(stream: &TcpStream, tls: bool, ctx: &ServeContext) -> ActiveGuard {
    let shared = &ctx.shared;
    shared.stats.connections_accepted.inc();
    shared.stats.connections_active.inc();
    if tls {
        let _ = stream.set_nodelay(true);
    }
    ActiveGuard(shared.clone())
}

/// Serves a connection on a cleartext listener from `peer` (the client); `prefix` holds what was
/// read of it already (after a PROXY protocol header), or nothing. An `async move` block rather
/// than an `async fn`, which would keep every argument twice in the connection's task (as passed,
/// and moved into its local).
#[allow(clippy::manual_async_fn)] // as `read_until`: arguments kept once
pub(crate) fn serve_connection(
    stream: TcpStream,
    (peer, local): (SocketAddr, SocketAddr),
    config: Arc<Listener>,
    ctx: ServeContext,
    admitted: Admitted,
    prefix: BytesMut,
) -> impl std::future::Future<Output = ()> {
    async move {
        // Held (by the block, once) until the connection ends.
        let _admitted = &admitted;
        let (prefix, h2) = match config.protocol {
            ListenerProtocol::Http1 => (prefix, false),
            // The first bytes, after what `prefix` holds, within `header_read_timeout`.
            protocol => match sniffed(read_until(&stream, due(&config), prefix, Opening::of).await) {
                Some((prefix, Opening::H2)) => (prefix, true),
                Some((prefix, Opening::Http1)) if protocol == ListenerProtocol::Auto => (prefix, false),
                Some(_) => return Box::pin(refuse_gracefully(stream)).await,
                None => return,
            },
        };
        let info = conn_info(peer, local, false, None, &config);
        // Each protocol's connection state is boxed, so a connection's task is only as large as
        // the protocol it speaks needs (an idle HTTP/1.1 connection must stay small).
        if h2 {
            Box::pin(serve_h2(Transport::tcp(stream), prefix.freeze(), info, config, ctx)).await;
        } else {
            Box::pin(crate::h1::serve(Transport::tcp(stream), prefix, info, config, ctx)).await;
        }
    }
}

/// When the opening bytes must have arrived: `header_read_timeout` from now.
pub(crate) fn due(config: &Listener) -> u64 {
    gatehouse_clock::now_ms().saturating_add(gatehouse_clock::millis(config.header_read_timeout.0))
}

/// Serves a connection on a TLS listener: handshake within the listener's handshake timeout,
/// then HTTP/2 when ALPN chose it (or the listener speaks nothing else), HTTP/1.1 otherwise.
pub(crate) async fn serve_tls(
    stream: TcpStream,
    (peer, local): (SocketAddr, SocketAddr),
    config: Arc<Listener>,
    tls: Arc<TlsAcceptor>,
    ctx: ServeContext,
    _admitted: Admitted,
) {
    let timeout = config.tls.as_ref().map_or(config.header_read_timeout.0, |t| t.handshake_timeout.0);
    let established = match tokio::time::timeout(timeout, Box::pin(tls.accept(stream))).await {
        Ok(Ok(est)) => est,
        Ok(Err(_)) => return,
        Err(_) => {
            tls.certs().stats.failed(gatehouse_tls::Failure::Aborted);
            return;
        }
    };
    let (transport, info, h2) = after_handshake(established, peer, local, &config);
    if h2 {
        Box::pin(serve_h2(transport, Bytes::new(), info, config, ctx)).await;
    } else {
        Box::pin(crate::h1::serve(transport, BytesMut::new(), info, config, ctx)).await;
    }
}

/// The transport of an established TLS connection, its details for the request path, and whether
/// it speaks HTTP/2. Made by a function, as [`conn_info`]: what a connection's task holds in the
/// locals of its `async fn` stays in its state while the connection lasts (the handshake's result
/// is over a kilobyte).
fn after_handshake(
    established: gatehouse_tls::Established,
    peer: SocketAddr,
    local: SocketAddr,
    config: &Listener,
) -> (Transport, Arc<ConnInfo>, bool) {
    let client_cert = established.client_cert.map(|(site, subject)| ClientCert { site, subject: subject.into() });
    let info = conn_info(peer, local, true, client_cert, config);
    let h2 = established.h2 || config.protocol == ListenerProtocol::H2c;
    (Transport::Tls(Box::new(established.conn)), info, h2)
}

/// The listener's settings with `alt_svc: auto` made the value it stands for: with `http3`,
/// `h3=":PORT"; ma=86400` for the port the listener is bound to, else `off`.
fn advertised(config: Arc<Listener>, port: u16) -> Arc<Listener> {
    if config.alt_svc != AltSvc::Auto {
        return config;
    }
    let mut resolved = (*config).clone();
    resolved.alt_svc = if config.http3 { AltSvc::Value(format!("h3=\":{port}\"; ma=86400")) } else { AltSvc::Off };
    Arc::new(resolved)
}

/// A connection's details for the request path.
fn conn_info(
    peer: SocketAddr,
    local: SocketAddr,
    tls: bool,
    client_cert: Option<ClientCert>,
    config: &Listener,
) -> Arc<ConnInfo> {
    let mut info = ConnInfo::new(peer, local, tls);
    info.body_timeout = config.body_read_timeout.0;
    info.client_cert = client_cert;
    if let AltSvc::Value(v) = &config.alt_svc {
        info.alt_svc = http::HeaderValue::from_str(v).ok();
    }
    Arc::new(info)
}

async fn serve_h2(stream: Transport, prefix: Bytes, info: Arc<ConnInfo>, config: Arc<Listener>, ctx: ServeContext) {
    let shared = ctx.shared.clone();
    let state = Arc::new(ConnState::new());
    let io =
        TokioIo::new(ConnIo::new(stream, prefix, state.clone(), config.keepalive_timeout.0, config.send_timeout.0));
    let conn_state = state.clone();
    let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
        let guard = BusyGuard::new(state.clone());
        let shared = shared.clone();
        let info = info.clone();
        async move {
            if req.method() == http::Method::CONNECT && is_websocket(&req) {
                return Ok(ClockScoped(Box::pin(websocket(shared, req, info, guard))).await);
            }
            // Boxed: hyper spawns this future as the stream's task, and a task's future is moved
            // (copied) several times as it is spawned and finished; the request path's state is
            // kilobytes, a box is a pointer.
            let resp = ClockScoped(Box::pin(gatehouse_proxy::handle(shared, req, info))).await;
            Ok::<_, Infallible>(resp.map(|inner| TrackedBody::new(inner, guard)))
        }
    });
    let mut drain = ctx.drain.clone();
    let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        .max_concurrent_streams(config.http2_max_concurrent_streams)
        .keep_alive_interval(Some(config.http2_ping_interval.0).filter(|d| !d.is_zero()))
        .keep_alive_timeout(config.http2_ping_timeout.0)
        .max_header_list_size(u32::try_from(config.max_header_bytes.0).unwrap_or(u32::MAX))
        .max_send_buf_size(H2_SEND_BUFFER)
        // RFC 8441: WebSockets over this connection's streams.
        .enable_connect_protocol()
        .serve_connection(io, service);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = drained(&mut drain) => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
    if let Some(offence) = conn_state.offence() {
        ctx.shared.stats.h2_offender(offence);
    }
    if conn_state.send_timed_out.load(std::sync::atomic::Ordering::Relaxed) {
        ctx.shared.stats.send_timeouts.inc();
    }
}

/// Whether an HTTP/2 CONNECT is RFC 8441's extended CONNECT for a WebSocket.
fn is_websocket<B>(req: &http::Request<B>) -> bool {
    req.extensions().get::<hyper::ext::Protocol>().is_some_and(|p| p.as_str().eq_ignore_ascii_case("websocket"))
}

/// A WebSocket over an HTTP/2 stream (RFC 8441): forwarded as the HTTP/1.1 upgrade it stands
/// for; when the endpoint switches, the client gets `200` and the stream is spliced with the
/// endpoint's connection in a task of its own, which keeps the connection busy while it lasts.
async fn websocket(
    shared: Arc<Shared>,
    mut req: http::Request<hyper::body::Incoming>,
    info: Arc<ConnInfo>,
    guard: BusyGuard,
) -> http::Response<TrackedBody> {
    let client = hyper::upgrade::on(&mut req);
    let key = gatehouse_proxy::websocket::to_upgrade(&mut req);
    let resp = gatehouse_proxy::handle(shared, req, info).await;
    if resp.status() != http::StatusCode::SWITCHING_PROTOCOLS {
        // A refusal, or an endpoint that did not switch: the client sees it as it is.
        return resp.map(|inner| TrackedBody::new(inner, guard));
    }
    let (mut parts, mut body) = resp.into_parts();
    let upstream = body.take_upgrade();
    let (upstream, early) = match upstream {
        Some(up) if gatehouse_proxy::websocket::accepts(&parts.headers, &key) => up,
        _ => {
            let refused =
                ProxyError::BadUpstreamAnswer("a WebSocket handshake answer that does not accept the key sent");
            return refused.into_response().map(|inner| TrackedBody::new(inner, guard));
        }
    };
    gatehouse_proxy::websocket::to_connect_answer(&mut parts);
    // The answer's (empty) body is dropped once hyper has sent the head; the tunnel's guard
    // stays.
    let answer_guard = BusyGuard::new(guard.0.clone());
    tokio::spawn(async move {
        let _busy = guard;
        match client.await {
            Ok(client) => tunnel_h2(TokioIo::new(client), upstream, early).await,
            Err(e) => tracing::debug!(error = %e, "the client's stream ended before the WebSocket began"),
        }
    });
    // The body is empty: hyper sends the head and makes the stream the client's side.
    http::Response::from_parts(parts, TrackedBody::new(ResponseBody::empty(), answer_guard))
}

/// Splices a WebSocket's HTTP/2 stream with the endpoint's connection until either side ends.
async fn tunnel_h2<C, U>(mut client: C, mut upstream: U, early: Bytes)
where
    C: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    U: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::AsyncWriteExt;
    if !early.is_empty() && client.write_all(&early).await.is_err() {
        return;
    }
    if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
        tracing::debug!(error = %e, "WebSocket over HTTP/2 ended");
    }
}

/// Resolves once `rx` says the process drains.
pub async fn drained(rx: &mut watch::Receiver<bool>) {
    // The guard `wait_for` returns is not Send; drop it before the select arm runs.
    let _ = rx.wait_for(|d| *d).await.map(|_| ());
}

/// The response body with the connection's busy mark, released when the body is done, and its
/// part in the connection's `send_timeout` (`StallMark`).
struct TrackedBody {
    inner: ResponseBody,
    guard: BusyGuard,
    stall: StallMark,
    /// What the body gave after the data gathered into the last frame (trailers, an error), for
    /// the next poll.
    held: Option<Box<Polled>>,
}

type Polled = Result<Frame<Bytes>, Box<dyn std::error::Error + Send + Sync>>;

/// The most data gathered into one frame for the client (see [`TrackedBody::gather`]).
const GATHER_UP_TO: usize = 32 * 1024;

/// Data of at least this size goes to the client as it comes: a write of its own costs less than
/// copying it into a larger piece.
const GATHER_BELOW: usize = 8 * 1024;

impl TrackedBody {
    fn new(inner: ResponseBody, guard: BusyGuard) -> Self {
        let mut stall = StallMark::default();
        if !inner.is_end_stream() {
            // The head goes to the client now; the body waits until hyper asks for it.
            stall.handed(&guard.0);
        }
        TrackedBody { inner, guard, stall, held: None }
    }

    /// `first` and the data the body has ready after it, as one frame. hyper sends a stream's
    /// next data only once the connection has written the last, so data read from the upstream
    /// in one go (an HTTP/2 upstream's frames, a gRPC stream's messages) would otherwise go to
    /// the client one frame per write. Only what is ready is taken: nothing waits. Used for
    /// pieces under [`GATHER_BELOW`] only.
    fn gather(&mut self, first: Bytes, cx: &mut Context<'_>) -> Bytes {
        let mut gathered: Option<BytesMut> = None;
        while gathered.as_ref().map_or(first.len(), |g| g.len()) < GATHER_UP_TO && !self.inner.is_end_stream() {
            match Pin::new(&mut self.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => gathered
                        .get_or_insert_with(|| {
                            let mut g = BytesMut::with_capacity(GATHER_UP_TO.max(first.len() + data.len()));
                            g.extend_from_slice(&first);
                            g
                        })
                        .extend_from_slice(&data),
                    Err(other) => {
                        self.held = Some(Box::new(Ok(other)));
                        break;
                    }
                },
                Poll::Ready(Some(Err(e))) => {
                    self.held = Some(Box::new(Err(e)));
                    break;
                }
                Poll::Ready(None) | Poll::Pending => break,
            }
        }
        gathered.map_or(first, BytesMut::freeze)
    }
}

impl Drop for TrackedBody {
    fn drop(&mut self) {
        self.stall.release(&self.guard.0);
    }
}

impl Body for TrackedBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        this.stall.asked(&this.guard.0);
        if let Some(held) = this.held.take() {
            return Poll::Ready(Some(*held));
        }
        let mut frame = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(f))) = frame {
            frame = Poll::Ready(Some(Ok(match f.into_data() {
                Ok(data) if data.len() < GATHER_BELOW && !this.inner.is_end_stream() => {
                    Frame::data(this.gather(data, cx))
                }
                Ok(data) => Frame::data(data),
                Err(other) => other,
            })));
        }
        if matches!(&frame, Poll::Ready(Some(Ok(f))) if f.is_data()) && !this.is_end_stream() {
            this.stall.handed(&this.guard.0);
        }
        frame
    }
    fn is_end_stream(&self) -> bool {
        self.held.is_none() && self.inner.is_end_stream()
    }
    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::{Opening, H2_PREFACE};

    #[test]
    fn the_first_bytes_choose_the_protocol() {
        assert_eq!(Opening::of(H2_PREFACE), Some(Opening::H2));
        assert_eq!(Opening::of(&[&H2_PREFACE[..], b"\0\0\0\x04"].concat()), Some(Opening::H2));
        for undecided in [&b"P"[..], b"PRI * HTTP/2.0\r\n", &H2_PREFACE[..23]] {
            assert_eq!(Opening::of(undecided), None, "{:?}", String::from_utf8_lossy(undecided));
        }
        for http1 in [&b"GET / HTTP/1.1\r\n"[..], b"PRI / HTTP/1.1\r\n", b"PRI * HTTP/1.1\r\n", b"PRI * HTTP/2.0\n"] {
            assert_eq!(Opening::of(http1), Some(Opening::Http1), "{:?}", String::from_utf8_lossy(http1));
        }
        for broken in [
            &b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n"[..],
            b"PRI * HTTP/2.0\r\nHost: a\r\n",
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\n",
        ] {
            assert_eq!(Opening::of(broken), Some(Opening::BadPreface), "{:?}", String::from_utf8_lossy(broken));
        }
    }
}
