//! Serve stage: accept with a per-worker connection limit (and, on `proxy_protocol` listeners,
//! only from trusted balancers, whose header names the client), pick HTTP/1.1 or HTTP/2 (prior
//! knowledge, or ALPN after the TLS handshake) from the first bytes or refuse a broken HTTP/2
//! preface, hand the connection to its protocol's server (`h1`, `h2`), and drain on shutdown.

use crate::first_bytes::{read_until, Undecided};
use crate::h2::serve_h2;
use crate::per_ip::{PerIpGuard, PerIpLimit};
use crate::proxy_protocol::{serve_proxied, serve_proxied_tls, Trusted};
use crate::transport::Transport;
use bytes::{Bytes, BytesMut};
use gatehouse_clock::ClockScoped;
use gatehouse_config::{AltSvc, Listener, ListenerProtocol};
use gatehouse_proxy::{ClientCert, ConnInfo, Shared};
use gatehouse_tls::TlsAcceptor;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The preface's first line: a connection that sends it means HTTP/2, whatever follows.
const H2_PREFACE_LINE: usize = b"PRI * HTTP/2.0\r\n".len();

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
    if tls {
        info.hsts = gatehouse_proxy::hsts_of(config.hsts.as_ref());
    }
    Arc::new(info)
}

/// Resolves once `rx` says the process drains.
pub async fn drained(rx: &mut watch::Receiver<bool>) {
    // The guard `wait_for` returns is not Send; drop it before the select arm runs.
    let _ = rx.wait_for(|d| *d).await.map(|_| ());
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
