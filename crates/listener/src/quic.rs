//! HTTP/3: QUIC (quinn) on a listener's UDP sockets, HTTP/3 (h3) over it, each request through the
//! same request path as HTTP/1.1 and HTTP/2 ([`gatehouse_proxy::handle`]).
//!
//! ```text
//! UDP socket (one per worker) ─► quinn Endpoint ─► Incoming ─► limits ─► handshake (rustls, h3)
//!   ─► h3 Connection ─► request stream ─► Request<H3Body> ─► handle ─► send head, data, trailers
//! ```
//! Each worker runs its own endpoint on its own socket (`SO_REUSEPORT`), so a connection lives on
//! the worker whose socket the kernel gave its first packet, and every later packet from the same
//! client address and port reaches the same socket. A client whose address changes (NAT
//! rebinding, a phone changing networks) may land on another worker's socket: the connection ids
//! carry the index of the socket whose endpoint has the connection, so that socket's wrapper
//! hands the packet over (`quic_handover`), and the endpoint validates the new path and goes on
//! there (RFC 9000 §9).

use crate::quic_handover::{GenerationCids, QuicLink};
use crate::quic_hello::{HelloPeek, PeekSocket, Seen};
use crate::serve::{drained, AcceptorCell, ServeContext};
use bytes::{Buf, Bytes};
use gatehouse_clock::ClockScoped;
use gatehouse_config::{Listener, QuicRetry};
use gatehouse_proxy::{ClientCert, ConnInfo, ResponseBody};
use gatehouse_tls::client_auth::{subject_of, SitePolicy};
use gatehouse_tls::{TlsAcceptor, TlsStats};
use http::header;
use http_body::{Body, Frame};
use rustls::pki_types::CertificateDer;
use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::sync::{watch, Semaphore};

type H3Conn = h3::server::Connection<h3_quinn::Connection, Bytes>;
type SendHalf = h3::server::RequestStream<h3_quinn::SendStream<Bytes>, Bytes>;
type RecvHalf = h3::server::RequestStream<h3_quinn::RecvStream, Bytes>;

/// A listener's QUIC settings as quinn takes them: the default configuration, and one per site
/// that verifies client certificates (made when a client first names it).
struct QuicConfigs {
    listener: Arc<Listener>,
    tls: Arc<TlsAcceptor>,
    default: Arc<quinn::ServerConfig>,
    /// By site policy (its address: a reload makes new policies, and new `QuicConfigs`).
    by_site: Mutex<HashMap<usize, Arc<quinn::ServerConfig>>>,
}

impl QuicConfigs {
    fn new(listener: Arc<Listener>, tls: Arc<TlsAcceptor>) -> Option<Arc<QuicConfigs>> {
        let default = Arc::new(server_config(&listener, &tls, None)?);
        Some(Arc::new(QuicConfigs { listener, tls, default, by_site: Mutex::new(HashMap::new()) }))
    }

    /// The configuration for a client of `policy`'s site.
    fn for_site(&self, policy: &Arc<SitePolicy>) -> Option<Arc<quinn::ServerConfig>> {
        let key = Arc::as_ptr(policy) as usize;
        let mut by_site = self.by_site.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = by_site.get(&key) {
            return Some(c.clone());
        }
        let config = Arc::new(server_config(&self.listener, &self.tls, Some(policy))?);
        by_site.insert(key, config.clone());
        Some(config)
    }
}

/// The QUIC settings of a listener, as quinn takes them, for clients of `policy`'s site.
fn server_config(
    listener: &Listener,
    tls: &TlsAcceptor,
    policy: Option<&Arc<SitePolicy>>,
) -> Option<quinn::ServerConfig> {
    let rustls = match tls.quic_config(policy, listener.quic.early_data) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "cannot make the QUIC TLS settings");
            return None;
        }
    };
    let crypto = match quinn::crypto::rustls::QuicServerConfig::try_from(rustls) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "the TLS settings cannot serve QUIC");
            return None;
        }
    };
    let q = &listener.quic;
    let mut transport = quinn::TransportConfig::default();
    transport
        .max_concurrent_bidi_streams(q.max_streams.into())
        // The client's control stream and its two QPACK streams; no pushes, nothing else.
        .max_concurrent_uni_streams(3u32.into())
        .stream_receive_window(varint(q.stream_window.0))
        .receive_window(varint(q.connection_window.0))
        .max_idle_timeout(quinn::IdleTimeout::try_from(q.idle_timeout.0).ok())
        .enable_segmentation_offload(q.gso);
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(Arc::new(transport));
    Some(config)
}

fn varint(n: u64) -> quinn::VarInt {
    quinn::VarInt::from_u64(n).unwrap_or(quinn::VarInt::MAX)
}

/// Serves HTTP/3 on `socket` until the task is aborted, the process drains, or the listener no
/// longer has `http3`: accepts QUIC connections up to the listener's `max_connections` for this
/// worker. A reload that changes the listener's settings sends them on `settings`: the endpoint,
/// and every connection on it, stays; new connections get the new settings.
pub async fn quic_loop(
    socket: UdpSocket,
    index: usize,
    links: Arc<[Arc<QuicLink>]>,
    mut settings: watch::Receiver<Arc<Listener>>,
    tls: AcceptorCell,
    ctx: ServeContext,
) {
    let mut config = settings.borrow_and_update().clone();
    let mut configs = match QuicConfigs::new(config.clone(), tls.load_full()) {
        Some(c) => c,
        None => return,
    };
    let runtime = quinn::TokioRuntime;
    let endpoint = quinn::Runtime::wrap_udp_socket(&runtime, socket).and_then(|socket| {
        let peek = HelloPeek::new(configs.default.crypto.clone());
        peek.enable(configs.tls.quic_needs_name(config.quic.early_data));
        // What the kernel offers: packets per system call, each way (GSO and GRO, where the
        // kernel has them; quinn-udp finds out).
        tracing::debug!(
            gso_segments = socket.max_transmit_segments(),
            gro_segments = socket.max_receive_segments(),
            "QUIC on the worker's UDP socket"
        );
        let socket = PeekSocket::new(socket, peek.clone(), links, index, configs.tls.certs().stats.clone());
        // Connection ids carry this process's generation and this socket's index, so a
        // successor tells its packets from ours, and a sibling socket the ones of our
        // connections whose client moved (`quic_handover`).
        let mut endpoint_config = quinn::EndpointConfig::default();
        endpoint_config.cid_generator(move || Box::new(GenerationCids::new(index)));
        let endpoint = quinn::Endpoint::new_with_abstract_socket(
            endpoint_config,
            Some((*configs.default).clone()),
            socket,
            Arc::new(runtime),
        )?;
        Ok((endpoint, peek))
    });
    let (endpoint, peek) = match endpoint {
        Ok(e) => e,
        Err(e) => {
            tracing::error!(error = %e, "cannot serve QUIC on the listener's UDP socket");
            return;
        }
    };
    let local = endpoint.local_addr().unwrap_or(config.bind);
    let limit = Arc::new(Semaphore::new(config.max_connections));
    let handshaking = Arc::new(AtomicUsize::new(0));
    let mut drain = ctx.drain.clone();
    // New settings (on reload) apply to new connections.
    let renew = |configs: &mut Arc<QuicConfigs>, config: &Arc<Listener>, acceptor: Arc<TlsAcceptor>| {
        if let Some(new) = QuicConfigs::new(config.clone(), acceptor) {
            peek.enable(new.tls.quic_needs_name(config.quic.early_data));
            endpoint.set_server_config(Some((*new.default).clone()));
            *configs = new;
        }
    };
    loop {
        let incoming = tokio::select! {
            incoming = endpoint.accept() => incoming,
            _ = drained(&mut drain) => break,
            changed = settings.changed() => {
                let new = settings.borrow_and_update().clone();
                if changed.is_err() || !new.http3 {
                    break;
                }
                let (old_max, new_max) = (config.max_connections, new.max_connections);
                if new_max > old_max {
                    limit.add_permits(new_max - old_max);
                } else {
                    limit.forget_permits(old_max - new_max);
                }
                config = new;
                let acceptor = configs.tls.clone();
                renew(&mut configs, &config, acceptor);
                continue;
            }
        };
        let Some(incoming) = incoming else { break };
        // Certificates or resumption changed on reload: new handshakes use the new settings.
        let now = tls.load_full();
        if !Arc::ptr_eq(&now, &configs.tls) {
            renew(&mut configs, &config, now);
        }
        let stats = configs.tls.certs().stats.clone();
        let incoming = if !incoming.remote_address_validated()
            && incoming.may_retry()
            && must_retry(&config, &limit, &handshaking)
        {
            // One more round trip for the client, none of our state: only a client that
            // receives at its address comes back, with the token.
            match incoming.retry() {
                Ok(()) => {
                    stats.quic.retries.inc();
                    continue;
                }
                Err(e) => e.into_incoming(),
            }
        } else {
            incoming
        };
        let Ok(permit) = limit.clone().try_acquire_owned() else {
            // Full: refused at once (CONNECTION_REFUSED), the client may try TCP.
            stats.quic.refused.inc();
            incoming.refuse();
            continue;
        };
        let (configs, peek, ctx) = (configs.clone(), peek.clone(), ctx.clone());
        let started = Handshaking::start(&handshaking);
        tokio::spawn(ClockScoped(Box::pin(async move {
            let _permit = permit;
            serve_connection(incoming, local, configs, peek, ctx, stats, started).await;
        })));
    }
    // Draining (or HTTP/3 turned off): no new connection; those open finish their requests
    // (each watches the drain).
    endpoint.set_server_config(None);
    endpoint.wait_idle().await;
}

/// Handshakes at once on one worker above which new clients prove their address first
/// (`quic.retry: auto`): a flood of Initial packets from spoofed addresses then costs a Retry
/// packet each, no handshake and no state.
const RETRY_ABOVE_HANDSHAKES: usize = 64;

/// Whether a client whose address is not validated yet is sent a Retry first.
fn must_retry(config: &Listener, limit: &Semaphore, handshaking: &AtomicUsize) -> bool {
    match config.quic.retry {
        QuicRetry::Always => true,
        QuicRetry::Never => false,
        QuicRetry::Auto => {
            handshaking.load(Relaxed) >= RETRY_ABOVE_HANDSHAKES
                || limit.available_permits() < config.max_connections.div_ceil(10)
        }
    }
}

/// A handshake under way on this worker, counted until dropped.
struct Handshaking(Arc<AtomicUsize>);

impl Handshaking {
    fn start(count: &Arc<AtomicUsize>) -> Handshaking {
        count.fetch_add(1, Relaxed);
        Handshaking(count.clone())
    }
}

impl Drop for Handshaking {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

async fn serve_connection(
    incoming: quinn::Incoming,
    local: SocketAddr,
    configs: Arc<QuicConfigs>,
    peek: Arc<HelloPeek>,
    ctx: ServeContext,
    stats: Arc<TlsStats>,
    handshaking: Handshaking,
) {
    let config = configs.listener.clone();
    let timeout = config.tls.as_ref().map_or(config.header_read_timeout.0, |t| t.handshake_timeout.0);
    let deadline = tokio::time::Instant::now() + timeout;
    // Whether the client may send 0-RTT data: unknown unless its ClientHello was read.
    let mut offers_early = true;
    let (handshake, policy) = if peek.enabled() {
        // The client's name first: its certificate loaded, its site's configuration chosen.
        let seen = peek.wait(incoming.remote_address(), incoming.orig_dst_cid(), deadline).await;
        let policy = match seen {
            Some(Seen::Hello(hello)) => {
                offers_early = hello.early_data;
                // A ticket counts only where it is single-use (0-RTT on).
                let psk = hello.psk.filter(|_| config.quic.early_data);
                let prepare = configs.tls.quic_prepare(hello.server_name.as_deref(), psk);
                tokio::time::timeout_at(deadline, prepare).await.ok().flatten()
            }
            _ => None,
        };
        match policy.as_ref().and_then(|p| configs.for_site(p)) {
            Some(site) => (incoming.accept_with(site), policy),
            None => (incoming.accept(), None),
        }
    } else {
        (incoming.accept(), None)
    };
    let connecting = match handshake {
        Ok(connecting) => connecting,
        Err(e) => return handshake_failed(&stats, &e),
    };
    // With 0-RTT on (never for a site verifying client certificates), requests are taken while
    // the handshake completes; `pending` resolves when it has.
    let zero_rtt = config.quic.early_data && policy.is_none() && offers_early;
    let connecting = if zero_rtt { connecting.into_0rtt() } else { Err(connecting) };
    let (conn, mut pending, mut handshaking) = match connecting {
        Ok((conn, accepted)) => (conn, Some(accepted), Some(handshaking)),
        Err(connecting) => {
            let finished = tokio::time::timeout_at(deadline, connecting).await;
            drop(handshaking);
            match finished {
                Ok(Ok(conn)) => {
                    stats.quic.handshakes.inc();
                    (conn, None, None)
                }
                Ok(Err(e)) => return handshake_failed(&stats, &e),
                Err(_) => return handshake_failed(&stats, &quinn::ConnectionError::TimedOut),
            }
        }
    };
    let shared = ctx.shared.clone();
    shared.stats.connections_accepted.inc();
    shared.stats.connections_active.inc();
    let active = Active { shared: shared.clone(), stats: stats.clone(), conn: conn.clone() };
    stats.quic.connections.fetch_add(1, Relaxed);
    let mut info = ConnInfo::new(conn.remote_address(), local, true);
    info.body_timeout = config.body_read_timeout.0;
    info.client_cert = policy.and_then(|p| client_cert(&conn, &p));
    let info = Arc::new(info);
    let max_header = config.max_header_bytes.0;
    // No reserved ("grease") frames: aioquic (1.2) never ends a response whose last frame is
    // one, so its clients would wait for the end of every answer.
    let mut h3: H3Conn = match h3::server::builder()
        .max_field_section_size(max_header)
        .send_grease(false)
        .build(h3_quinn::Connection::new(conn))
        .await
    {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!(error = %e, "HTTP/3 connection setup failed");
            return;
        }
    };
    let mut drain = ctx.drain.clone();
    let mut draining = false;
    // Whether a request came in 0-RTT data (quinn does not say whether a server accepted any).
    let mut early_seen = false;
    loop {
        let accepted = tokio::select! {
            // The completion is looked at first: a request that came with the client's Finished
            // (in the same datagram) is not early. One taken before it was seen is (as quinn's
            // `RecvStream::is_0rtt` judges). A 0-RTT request seen only after the completion goes
            // unmarked; it came from a client that completed the handshake with a ticket used
            // once, so it is not a replay (a replayed ClientHello completes nothing).
            biased;
            completed = completion(&mut pending, deadline) => {
                pending = None;
                handshaking = None;
                if !completed {
                    handshake_failed(&stats, &quinn::ConnectionError::TimedOut);
                    break;
                }
                if let Some(e) = active.conn.close_reason() {
                    handshake_failed(&stats, &e);
                    break;
                }
                stats.quic.handshakes.inc();
                if early_seen {
                    stats.quic.zero_rtt.inc();
                }
                continue;
            }
            accepted = h3.accept() => accepted,
            _ = drained(&mut drain), if !draining => {
                // GOAWAY: requests already sent are served, no new one is taken.
                draining = true;
                let _ = h3.shutdown(0).await;
                continue;
            }
        };
        match accepted {
            Ok(Some(resolver)) => {
                stats.quic.requests.inc();
                let early = pending.is_some();
                early_seen |= early;
                let (shared, info) = (shared.clone(), info.clone());
                tokio::spawn(ClockScoped(Box::pin(async move {
                    match resolver.resolve_request().await {
                        Ok((req, stream)) => serve_request(shared, info, req, stream, early).await,
                        Err(e) => tracing::debug!(error = %e, "HTTP/3 request refused"),
                    }
                })));
            }
            Ok(None) => break,
            Err(e) => {
                tracing::debug!(error = %e, "HTTP/3 connection ended");
                break;
            }
        }
    }
    drop((handshaking, active));
}

/// Resolves when a 0-RTT connection's handshake completes or fails (`true`), or at `deadline`
/// (`false`); never without one.
async fn completion(pending: &mut Option<quinn::ZeroRttAccepted>, deadline: tokio::time::Instant) -> bool {
    match pending {
        // It says whether 0-RTT was accepted on a client only.
        Some(accepted) => tokio::time::timeout_at(deadline, accepted).await.is_ok(),
        None => std::future::pending().await,
    }
}

fn handshake_failed(stats: &TlsStats, e: &quinn::ConnectionError) {
    stats.quic.failed.inc();
    tracing::debug!(error = %e, "QUIC handshake failed");
}

/// The client certificate `conn` presented, verified under `policy`.
fn client_cert(conn: &quinn::Connection, policy: &SitePolicy) -> Option<ClientCert> {
    let chain = conn.peer_identity()?.downcast::<Vec<CertificateDer<'static>>>().ok()?;
    let subject = subject_of(chain.first()?.as_ref()).unwrap_or_default();
    Some(ClientCert { site: policy.site.clone(), subject: subject.into() })
}

/// Counts a QUIC connection as open until dropped, then its lost packets.
struct Active {
    shared: Arc<gatehouse_proxy::Shared>,
    stats: Arc<TlsStats>,
    conn: quinn::Connection,
}

impl Drop for Active {
    fn drop(&mut self) {
        self.shared.stats.connections_active.dec();
        self.stats.quic.connections.fetch_sub(1, Relaxed);
        self.stats.quic.packets_lost.add(self.conn.stats().path.lost_packets);
    }
}

async fn serve_request(
    shared: Arc<gatehouse_proxy::Shared>,
    info: Arc<ConnInfo>,
    req: http::Request<()>,
    stream: h3::server::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>,
    early: bool,
) {
    let (mut send, recv) = stream.split();
    let mut req = req;
    if req.method() == http::Method::CONNECT {
        // No extended CONNECT (RFC 9220) yet, and no tunnels.
        return refuse(&shared, &mut send, http::StatusCode::NOT_IMPLEMENTED).await;
    }
    if early {
        // 0-RTT data can be replayed: only a safe method is served from it, and the backend is
        // told (RFC 8470), so it can answer 425 itself. The client sends anything else again
        // once the handshake is complete.
        if !matches!(*req.method(), http::Method::GET | http::Method::HEAD | http::Method::OPTIONS) {
            let resp = gatehouse_proxy::error::simple(http::StatusCode::TOO_EARLY, false);
            if let Err(e) = send_response(&mut send, resp).await {
                tracing::debug!(error = %e, "HTTP/3 answer not sent whole");
            }
            return;
        }
        req.headers_mut().insert(EARLY_DATA, http::HeaderValue::from_static("1"));
    }
    // A body must be as long as its content-length says (RFC 9114 §4.1.2): toward an HTTP/1.1
    // endpoint the excess would be read as a request of its own. Connection-specific headers
    // make a request malformed too (§4.2).
    let length = declared_length(req.headers()).ok().filter(|_| !connection_specific(req.headers()));
    let Some(length) = length else {
        return refuse(&shared, &mut send, http::StatusCode::BAD_REQUEST).await;
    };
    // The request path bounds the wait for each part of the body (`body_read_timeout`).
    let req = req.map(|()| H3Body::new(recv, length));
    let resp = gatehouse_proxy::handle(shared, req, info).await;
    if let Err(e) = send_response(&mut send, resp).await {
        tracing::debug!(error = %e, "HTTP/3 response not sent whole");
    }
}

/// Answers a request that is not forwarded with a short error (as the other protocols do) and
/// ends the stream; counted with the bad requests.
async fn refuse(shared: &gatehouse_proxy::Shared, send: &mut SendHalf, status: http::StatusCode) {
    shared.stats.bad_requests.inc();
    if let Err(e) = send_response(send, gatehouse_proxy::error::simple(status, false)).await {
        tracing::debug!(error = %e, "HTTP/3 refusal not sent whole");
    }
}

/// The request's `content-length`: none, or one value (repeated values must agree); `Err` for
/// anything else.
fn declared_length(headers: &http::HeaderMap) -> Result<Option<u64>, ()> {
    let mut length = None;
    for v in headers.get_all(header::CONTENT_LENGTH) {
        let n = std::str::from_utf8(v.as_bytes())
            .ok()
            .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|t| t.parse::<u64>().ok())
            .ok_or(())?;
        if length.replace(n).is_some_and(|old| old != n) {
            return Err(());
        }
    }
    Ok(length)
}

/// Whether a request carries a header HTTP/3 forbids (RFC 9114 §4.2): a connection-specific
/// one, or `te` other than `trailers`. Such a request is malformed.
fn connection_specific(headers: &http::HeaderMap) -> bool {
    CONNECTION_SPECIFIC.iter().any(|name| headers.contains_key(name))
        || headers.get_all(header::TE).iter().any(|v| !v.as_bytes().eq_ignore_ascii_case(b"trailers"))
}

/// A body longer or shorter than its `content-length`.
#[derive(Debug)]
struct LengthMismatch;

impl std::fmt::Display for LengthMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("request body length differs from its content-length")
    }
}

impl std::error::Error for LengthMismatch {}

/// Set on a request forwarded from 0-RTT data (RFC 8470 §5.1).
const EARLY_DATA: header::HeaderName = header::HeaderName::from_static("early-data");

/// Headers HTTP/3 forbids (RFC 9114, 4.2): connection-specific ones.
const CONNECTION_SPECIFIC: [header::HeaderName; 5] = [
    header::CONNECTION,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::HeaderName::from_static("keep-alive"),
    header::HeaderName::from_static("proxy-connection"),
];

async fn send_response(send: &mut SendHalf, resp: http::Response<ResponseBody>) -> Result<(), h3::error::StreamError> {
    let (mut parts, mut body) = resp.into_parts();
    if let Some(raw) = body.take_raw_head() {
        raw.into_map(&mut parts.headers);
    }
    for name in &CONNECTION_SPECIFIC {
        parts.headers.remove(name);
    }
    parts.version = http::Version::HTTP_3;
    send.send_response(http::Response::from_parts(parts, ())).await?;
    loop {
        match std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => {
                    if !data.is_empty() {
                        send.send_data(data).await?;
                    }
                }
                Err(frame) => {
                    if let Ok(trailers) = frame.into_trailers() {
                        send.send_trailers(trailers).await?;
                    }
                }
            },
            Some(Err(e)) => {
                // The endpoint's answer broke off: so does the client's, not cleanly.
                tracing::debug!(error = %e, "response body failed; resetting the HTTP/3 stream");
                send.stop_stream(h3::error::Code::H3_INTERNAL_ERROR);
                return Ok(());
            }
            None => break,
        }
    }
    send.finish().await
}

/// A request body read from an HTTP/3 stream: data frames, then trailers.
struct H3Body {
    recv: Option<RecvHalf>,
    trailers: bool,
    /// Bytes still due by the request's `content-length`, when it has one.
    due: Option<u64>,
    /// What a first look found before the request path asked.
    first: Option<Polled>,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One poll of a request body.
type Polled = Poll<Option<Result<Frame<Bytes>, BoxError>>>;

impl H3Body {
    /// The body of a request stream. A request without a body (a GET) usually ends with its
    /// HEADERS frame, in the same packet: one look now tells, so the request is forwarded with
    /// no body rather than as a chunked one of length zero, as over HTTP/2.
    fn new(recv: RecvHalf, length: Option<u64>) -> H3Body {
        let mut body = H3Body { recv: Some(recv), trailers: false, due: length, first: None };
        let mut cx = Context::from_waker(std::task::Waker::noop());
        match body.poll_next(&mut cx) {
            Poll::Pending => {}
            Poll::Ready(None) => body.recv = None,
            ready => body.first = Some(ready),
        }
        body
    }

    fn poll_next(&mut self, cx: &mut Context<'_>) -> Polled {
        let Some(recv) = self.recv.as_mut() else { return Poll::Ready(None) };
        if !self.trailers {
            match recv.poll_recv_data(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(Some(mut data))) => {
                    let bytes = data.copy_to_bytes(data.remaining());
                    if let Some(due) = self.due.as_mut() {
                        match due.checked_sub(bytes.len() as u64) {
                            Some(left) => *due = left,
                            None => return self.malformed(),
                        }
                    }
                    return Poll::Ready(Some(Ok(Frame::data(bytes))));
                }
                Poll::Ready(Ok(None)) => {
                    if self.due.is_some_and(|due| due > 0) {
                        return self.malformed();
                    }
                    self.trailers = true;
                }
                Poll::Ready(Err(e)) => {
                    self.recv = None;
                    return Poll::Ready(Some(Err(Box::new(e))));
                }
            }
        }
        let Some(recv) = self.recv.as_mut() else { return Poll::Ready(None) };
        let next = match recv.poll_recv_trailers(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Ok(Some(trailers))) => Some(Ok(Frame::trailers(trailers))),
            Poll::Ready(Ok(None)) => None,
            Poll::Ready(Err(e)) => Some(Err(Box::new(e) as BoxError)),
        };
        self.recv = None;
        Poll::Ready(next)
    }
}

impl H3Body {
    /// The body does not match its `content-length`: the stream is stopped and the request fails
    /// (its endpoint connection is not reused).
    fn malformed(&mut self) -> Polled {
        if let Some(mut recv) = self.recv.take() {
            recv.stop_sending(h3::error::Code::H3_MESSAGE_ERROR);
        }
        Poll::Ready(Some(Err(Box::new(LengthMismatch))))
    }
}

impl Body for H3Body {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Polled {
        if let Some(first) = self.first.take() {
            return first;
        }
        self.poll_next(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.recv.is_none() && self.first.is_none()
    }
}
