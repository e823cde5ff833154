//! Connect stage: a [`Lease`] is one request's hold on an endpoint — an in-flight slot and a
//! connection, reused from this worker's idle pool when one is ready, opened otherwise. A lease
//! given back with [`Lease::release`] returns its connection to the pool; dropped, it closes it.

use crate::body::RequestBody;
use crate::endpoint::EndpointState;
use crate::error::UpstreamError;
use crate::h1::H1Conn;
use crate::h2_client::{self, H2Body, H2Load, Keepalive, Pump, Pumped};
use crate::io::{connect, Counted, UpstreamIo};
use crate::proxy_header::Origin;
use crate::response::UpstreamBody;
use crate::{Protocol, Settings};
use bytes::Bytes;
use h2::client::SendRequest;
use std::future::Future as _;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// An idle HTTP/1.1 connection in a worker's pool.
#[derive(Debug)]
pub(crate) struct Idle {
    conn: Box<H1Conn>,
    since: Instant,
    /// The client connection whose PROXY header opened it, for an upstream that sends one.
    origin: Option<Box<Origin>>,
}

impl Idle {
    pub(crate) fn fresh(&mut self, idle_timeout: Duration) -> bool {
        gatehouse_clock::now().saturating_duration_since(self.since) < idle_timeout && self.conn.idle_usable()
    }
}

#[derive(Debug)]
pub(crate) enum Conn {
    /// Boxed: a lease travels with the response body, and moving it must stay cheap.
    H1(Box<H1Conn>),
    /// Boxed too: a stream's place beside the sender would make every lease bigger.
    H2(Box<(SendRequest<Bytes>, Stream)>),
}

/// Most HTTP/2 connections a worker keeps to one endpoint: a new one is opened when each is at
/// the stream limit its server set (`SETTINGS_MAX_CONCURRENT_STREAMS`), up to this many; past
/// them, streams wait for room on the least busy (HTTP/2's own queue).
pub(crate) const MAX_H2_CONNS: usize = 8;

/// One of a worker's HTTP/2 connections to an endpoint.
#[derive(Debug)]
pub(crate) struct H2Conn {
    sender: SendRequest<Bytes>,
    load: Arc<H2Load>,
}

/// A worker's HTTP/2 connections to an endpoint, and news of one being opened.
#[derive(Debug, Default)]
pub(crate) struct H2Slot {
    conns: std::sync::Mutex<H2Conns>,
    /// Told when an opening ends, well or not: requests waiting for it look again.
    opened: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct H2Conns {
    list: Vec<H2Conn>,
    /// A request is opening another connection.
    opening: bool,
}

/// What a request on HTTP/2 does ([`Lease::pick_h2`]).
enum Pick<'a> {
    Stream(SendRequest<Bytes>, Stream),
    Wait,
    /// Open a connection; the guard (when there is a slot to mark) ends the opening when dropped.
    Open(Option<OpeningGuard<'a>>),
}

/// Marks a worker's connection to an endpoint as being opened; dropped (opened, failed, or the
/// request gone), it lets the requests waiting for it look again.
struct OpeningGuard<'a>(&'a H2Slot);

impl Drop for OpeningGuard<'_> {
    fn drop(&mut self) {
        if let Ok(mut conns) = self.0.conns.lock() {
            conns.opening = false;
        }
        self.0.opened.notify_waiters();
    }
}

/// A request's stream on an HTTP/2 connection, counted until the lease is dropped.
#[derive(Debug)]
pub(crate) struct Stream(Arc<H2Load>);

impl Stream {
    fn take(load: &Arc<H2Load>) -> Stream {
        load.open.fetch_add(1, Relaxed);
        Stream(load.clone())
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Relaxed);
    }
}

/// One request's hold on an endpoint: an in-flight slot and a connection. It travels with the
/// response body and gives the connection back to the pool when the body has been read whole.
#[derive(Debug)]
pub struct Lease {
    ep: Arc<EndpointState>,
    pub(crate) conn: Option<Conn>,
    max_idle: usize,
    /// Whether the connection came from the idle pool.
    pub reused: bool,
    /// The client connection a PROXY header named, when the upstream sends one (boxed: a lease
    /// lives in every request's future, which must stay small).
    origin: Option<Box<Origin>>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.ep.inflight.fetch_sub(1, Relaxed);
    }
}

/// A request that failed on its connection: why, and the request back when it can be had.
#[derive(Debug)]
pub struct SendFailure {
    /// The request: as it was given, when it was certainly not sent; as it was sent, when it had
    /// no body (HTTP/1.1), so that an idempotent one may go elsewhere with no copy kept in case.
    /// Whether it may go again at all is the error's [`UpstreamError::retry`].
    pub request: Option<http::Request<RequestBody>>,
    /// What went wrong.
    pub error: UpstreamError,
}

impl SendFailure {
    /// A failure whose request cannot be had back.
    fn new(error: UpstreamError) -> Self {
        SendFailure { request: None, error }
    }

    /// A failure with the request back: unsent, or sent and without a body.
    fn with(error: UpstreamError, req: http::Request<RequestBody>) -> Self {
        let back = matches!(error.retry(), crate::Retry::Unsent) || req.body().is_empty();
        SendFailure { request: back.then_some(req), error }
    }
}

impl Lease {
    /// Whether the connection's TLS handshake resumed a session; `None` for plain text.
    pub fn tls_resumed(&self) -> Option<bool> {
        match &self.conn {
            Some(Conn::H1(c)) => c.io.tls_resumed(),
            Some(Conn::H2(h2)) => h2.1 .0.tls_resumed,
            None => None,
        }
    }

    /// An in-flight slot on `ep` and an idle HTTP/1.1 connection to it from this worker's pool,
    /// if it has one: the usual case, with no future to build and await. `switching`: the request
    /// asks to switch protocols, which only HTTP/1.1 can carry. `origin`: the client connection
    /// it came on, which a connection that opened with a PROXY header must match.
    pub fn pooled(ep: &Arc<EndpointState>, s: &Settings, switching: bool, origin: Origin) -> Option<Lease> {
        if s.protocol == Protocol::Http2 || (s.protocol == Protocol::Auto && !switching && ep.speaks_h2()) {
            return None;
        }
        ep.inflight.fetch_add(1, Relaxed);
        let mut lease = Lease { ep: ep.clone(), conn: None, max_idle: s.max_idle, reused: true, origin: None };
        let (conn, tag) = lease.checkout(s.idle_timeout, s.send_proxy_protocol.map(|_| origin))?;
        lease.conn = Some(Conn::H1(conn));
        // The connection's own tag comes with it: nothing to allocate on reuse.
        lease.origin = tag;
        Some(lease)
    }

    /// An in-flight slot on `ep` and a connection made for it: the shared HTTP/2 one, or a new
    /// one when [`Lease::pooled`] found none idle. Under `protocol: auto` the endpoint's ALPN
    /// choice on the new connection decides which, and is remembered.
    pub async fn open(
        ep: &Arc<EndpointState>,
        s: &Settings,
        switching: bool,
        origin: Origin,
    ) -> Result<Lease, UpstreamError> {
        ep.inflight.fetch_add(1, Relaxed);
        let origin = s.send_proxy_protocol.map(|_| Box::new(origin));
        let mut lease = Lease { ep: ep.clone(), conn: None, max_idle: s.max_idle, reused: false, origin };
        let conn = match s.protocol {
            Protocol::Http1 => None,
            Protocol::Auto if switching => None,
            Protocol::Http2 => Some(lease.h2_stream(s, false).await?),
            Protocol::Auto => Some(lease.h2_stream(s, true).await?),
        };
        lease.conn = Some(match conn {
            Some(conn) => conn,
            None => Conn::H1(Box::new(H1Conn::new(
                connect(ep, s, switching, Counted::Yes, lease.origin.as_deref().copied()).await?,
            ))),
        });
        Ok(lease)
    }

    /// An idle connection of this worker's pool, and the client connection its PROXY header
    /// named. `origin`: for an upstream that sends the header, the client connection it must have
    /// named.
    fn checkout(&self, idle_timeout: Duration, origin: Option<Origin>) -> Option<(Box<H1Conn>, Option<Box<Origin>>)> {
        let mut pool = self.ep.my_pool().lock().ok()?;
        if let Some(want) = origin {
            // Only a connection opened for this client connection: its header named it.
            while let Some(i) = pool.iter().rposition(|idle| idle.origin.as_deref() == Some(&want)) {
                let mut idle = pool.swap_remove(i);
                if idle.fresh(idle_timeout) {
                    return Some((idle.conn, idle.origin));
                }
            }
            return None;
        }
        while let Some(mut idle) = pool.pop() {
            if idle.fresh(idle_timeout) {
                return Some((idle.conn, None));
            }
        }
        None
    }

    fn h2_slot(&self) -> &H2Slot {
        &self.ep.h2[gatehouse_clock::worker_index() % self.ep.h2.len()]
    }

    /// What a request on HTTP/2 does: take a stream on one of this worker's open connections to
    /// the endpoint (the first with room under its server's limit; at [`MAX_H2_CONNS`], the
    /// least busy, where it waits for room), wait for the connection another request is opening,
    /// or open one (the caller must hold the returned guard while it does).
    fn pick_h2(&self) -> Pick<'_> {
        let slot = self.h2_slot();
        let Ok(mut guard) = slot.conns.lock() else { return Pick::Open(None) };
        let conns = &mut *guard;
        let i = loop {
            conns.list.retain(|c| !c.load.closed.load(Relaxed));
            let list = &mut conns.list;
            let room = list.iter().position(|c| c.load.open.load(Relaxed) < c.load.max.load(Relaxed));
            let i = match room {
                Some(i) => i,
                None if conns.opening => return Pick::Wait,
                None if list.len() < MAX_H2_CONNS => {
                    conns.opening = true;
                    return Pick::Open(Some(OpeningGuard(slot)));
                }
                None => match (0..list.len()).min_by_key(|&i| list[i].load.open.load(Relaxed)) {
                    Some(i) => i,
                    None => return Pick::Open(None),
                },
            };
            // A connection whose server sent GOAWAY runs on for its open streams but takes no
            // new one: it is left, and the request looks again.
            match list[i].sender.poll_ready(&mut Context::from_waker(std::task::Waker::noop())) {
                Poll::Ready(Err(_)) => list[i].load.closed.store(true, Relaxed),
                _ => break i,
            }
        };
        let list = &mut conns.list;
        let stream = Stream::take(&list[i].load);
        let sender = list[i].sender.clone();
        // Busy no more: a connection opened for a peak goes once it carries nothing and the first
        // is at most half full (it closes when its last stream ends).
        if i == 0 && list.len() > 1 {
            let first = &list[0].load;
            let last = list.len() - 1;
            if list[last].load.open.load(Relaxed) == 0 && first.open.load(Relaxed) * 2 <= first.max.load(Relaxed) {
                list.pop();
            }
        }
        Pick::Stream(sender, stream)
    }

    /// A stream on this worker's HTTP/2 connections to the endpoint ([`Lease::pick_h2`]), opening
    /// one when they are all at their limit. Under `protocol: auto` the connection opened may
    /// turn out to be HTTP/1.1 (ALPN), which is returned as it is.
    async fn h2_stream(&self, s: &Settings, auto: bool) -> Result<Conn, UpstreamError> {
        loop {
            let guard = match self.pick_h2() {
                Pick::Stream(sender, stream) => return Ok(Conn::H2(Box::new((sender, stream)))),
                Pick::Wait => {
                    let slot = self.h2_slot();
                    let mut opened = std::pin::pin!(slot.opened.notified());
                    // Registered before looking again, so an opening that ends meanwhile is
                    // not missed.
                    opened.as_mut().enable();
                    if slot.conns.lock().is_ok_and(|c| c.opening) {
                        opened.await;
                    }
                    continue;
                }
                Pick::Open(guard) => guard,
            };
            let io = connect(&self.ep, s, false, Counted::Yes, self.origin.as_deref().copied()).await?;
            if auto {
                let h2 = io.alpn_h2();
                self.ep.set_speaks_h2(h2);
                if !h2 {
                    return Ok(Conn::H1(Box::new(H1Conn::new(io))));
                }
            }
            let (sender, stream) = self.h2_handshake(io, s).await?;
            drop(guard);
            return Ok(Conn::H2(Box::new((sender, stream))));
        }
    }

    /// Starts HTTP/2 on a new connection, adds it to this worker's for the endpoint, and takes a
    /// stream on it.
    async fn h2_handshake(&self, io: UpstreamIo, s: &Settings) -> Result<(SendRequest<Bytes>, Stream), UpstreamError> {
        // Until this server's SETTINGS are read on it, the limit its other connections have.
        let known = self
            .h2_slot()
            .conns
            .lock()
            .ok()
            .and_then(|c| c.list.iter().find(|c| c.load.known.load(Relaxed)).map(|c| c.load.max.load(Relaxed)));
        let keepalive = s.ping_interval.map(|interval| Keepalive { interval, timeout: s.ping_timeout });
        let (sender, load) = h2_client::handshake(io, known, keepalive).await.map_err(UpstreamError::Handshake)?;
        let stream = Stream::take(&load);
        if let Ok(mut conns) = self.h2_slot().conns.lock() {
            conns.list.retain(|c| !c.load.closed.load(Relaxed));
            if conns.list.len() < MAX_H2_CONNS {
                conns.list.push(H2Conn { sender: sender.clone(), load });
            }
        }
        Ok((sender, stream))
    }

    /// The endpoint this lease holds.
    pub fn endpoint(&self) -> &Arc<EndpointState> {
        &self.ep
    }

    /// Sends the request and reads the response head (within `read_timeout`); the body follows
    /// through the returned [`UpstreamBody`], which keeps the lease.
    #[allow(clippy::manual_async_fn)] // an `async fn` would keep the request twice in its state
    pub fn send(
        mut self,
        mut req: http::Request<RequestBody>,
        read_timeout: Duration,
    ) -> impl std::future::Future<Output = Result<http::Response<UpstreamBody>, SendFailure>> + Send {
        async move {
            self.ep.stats.requests.fetch_add(1, Relaxed);
            match self.conn.take() {
                Some(Conn::H1(mut conn)) => {
                    let head_request = req.method() == http::Method::HEAD;
                    if let Err(e) = conn.write_request(&mut req, &self.ep.authority).await {
                        return Err(SendFailure::with(self.ep.tls_fault(e), req));
                    }
                    match conn.read_head(head_request, read_timeout).await {
                        Err(e) => Err(SendFailure::with(self.ep.tls_fault(e), req)),
                        Ok(head) => {
                            // The request head was written: its map serves the next head.
                            gatehouse_http1::header_maps::give(std::mem::take(req.headers_mut()));
                            drop(req);
                            self.conn = Some(Conn::H1(conn));
                            let switching = head.response.status() == http::StatusCode::SWITCHING_PROTOCOLS;
                            let body =
                                UpstreamBody::h1(self, head.framing, head.reusable, read_timeout, switching, head.raw);
                            Ok(head.response.map(|()| body))
                        }
                    }
                }
                // Boxed: its state would otherwise size every request's future, HTTP/1.1 ones too.
                Some(Conn::H2(h2)) => {
                    let (sender, stream) = *h2;
                    Box::pin(self.send_h2(sender, stream, req, read_timeout)).await
                }
                None => Err(SendFailure::with(UpstreamError::NoConnection, req)),
            }
        }
    }

    async fn send_h2(
        mut self,
        mut sender: SendRequest<Bytes>,
        stream: Stream,
        mut req: http::Request<RequestBody>,
        read_timeout: Duration,
    ) -> Result<http::Response<UpstreamBody>, SendFailure> {
        h2_form(&mut req, &self.ep.authority, self.ep.tls.is_some());
        // A connection that takes no new streams (broken, or the server sent GOAWAY) is left for
        // a new one from now on, and the request comes back as it was.
        if let Poll::Ready(Err(e)) = sender.poll_ready(&mut Context::from_waker(std::task::Waker::noop())) {
            stream.0.closed.store(true, Relaxed);
            return Err(SendFailure::with(UpstreamError::H2 { source: e, sent: false }, req));
        }
        let (parts, body) = req.into_parts();
        let end = body.is_empty();
        let (mut answer, send) = match sender.send_request(http::Request::from_parts(parts, ()), end) {
            Ok(opened) => opened,
            Err(e) => {
                stream.0.closed.store(true, Relaxed);
                return Err(SendFailure::new(UpstreamError::H2 { source: e, sent: false }));
            }
        };
        // The body goes from this task while the answer is awaited: a unary call's HEADERS and
        // DATA are queued together and leave in one write.
        let mut pump = (!end).then(|| Pump::new(body, send));
        // The wait for the answer's head counts from the request's last part: a client that
        // streams its body for longer than `read_timeout` (a gRPC upload) is not cut off.
        let mut from = gatehouse_clock::now_ms();
        let read_ms = gatehouse_clock::millis(read_timeout);
        let mut deadline = gatehouse_clock::LazyDeadline::default();
        let answered = std::future::poll_fn(|cx| {
            if let Some(p) = pump.as_mut() {
                let polled = p.poll(cx);
                from = from.max(p.last_ms());
                match polled {
                    Poll::Ready(Pumped::Done) => pump = None,
                    Poll::Ready(Pumped::Failed(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => {}
                }
            }
            if let Poll::Ready(answer) = std::pin::Pin::new(&mut answer).poll(cx) {
                return Poll::Ready(answer.map_err(|e| {
                    if e.is_go_away() {
                        // The server said GOAWAY: this connection takes no more streams.
                        stream.0.closed.store(true, Relaxed);
                    }
                    UpstreamError::H2 { source: e, sent: true }
                }));
            }
            if deadline.expired(cx, from.saturating_add(read_ms)) {
                return Poll::Ready(Err(UpstreamError::Timeout));
            }
            Poll::Pending
        })
        .await;
        match answered {
            Err(e) => Err(SendFailure::new(e)),
            Ok(resp) => {
                if !stream.0.known.load(Relaxed) {
                    // The server's SETTINGS came before its answer: the limit read now is its.
                    stream.0.known.store(true, Relaxed);
                }
                self.conn = Some(Conn::H2(Box::new((sender, stream))));
                let length = resp
                    .headers()
                    .get(http::header::CONTENT_LENGTH)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse().ok());
                Ok(resp.map(|recv| {
                    let body = H2Body::new(recv, length, pump.map(Pump::spawn));
                    UpstreamBody::h2(body, self, read_timeout)
                }))
            }
        }
    }

    /// Gives an HTTP/1.1 connection back to this worker's pool (the body was read whole).
    pub(crate) fn release(mut self) {
        if let Some(Conn::H1(conn)) = self.conn.take() {
            if let Ok(mut pool) = self.ep.my_pool().lock() {
                if pool.len() < self.max_idle {
                    pool.push(Idle { conn, since: gatehouse_clock::now(), origin: self.origin.take() });
                }
            }
        }
    }
}

/// The request as HTTP/2 carries it: the authority and scheme in the target instead of `Host`, and
/// none of the connection-specific headers HTTP/2 forbids (RFC 9113 §8.2.2).
pub(crate) fn h2_form(req: &mut http::Request<RequestBody>, endpoint: &str, tls: bool) {
    use http::header;
    *req.version_mut() = http::Version::HTTP_2;
    let headers = req.headers_mut();
    let authority = headers.remove(header::HOST);
    let authority = authority.as_ref().and_then(|v| v.to_str().ok()).unwrap_or(endpoint);
    let pq = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let scheme = if tls { "https" } else { "http" };
    if let Ok(uri) = http::Uri::builder().scheme(scheme).authority(authority).path_and_query(pq).build() {
        *req.uri_mut() = uri;
    }
    let headers = req.headers_mut();
    for name in [header::CONNECTION, header::TRANSFER_ENCODING, header::UPGRADE] {
        headers.remove(name);
    }
    headers.remove("keep-alive");
    headers.remove("proxy-connection");
    if headers.get(header::TE).is_some_and(|te| !te.as_bytes().eq_ignore_ascii_case(b"trailers")) {
        headers.remove(header::TE);
    }
}
