//! Connect stage: a [`Lease`] is one request's hold on an endpoint — an in-flight slot and a
//! connection, reused from this worker's idle pool when one is ready, opened otherwise. A lease
//! given back with [`Lease::release`] returns its connection to the pool; dropped, it closes it.

use crate::body::RequestBody;
use crate::endpoint::EndpointState;
use crate::error::UpstreamError;
use crate::h1::H1Conn;
use crate::io::{connect, Counted, UpstreamIo};
use crate::proxy_header::Origin;
use crate::response::UpstreamBody;
use crate::{Protocol, Settings};
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
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
    H2(http2::SendRequest<RequestBody>),
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
        let h2 = match s.protocol {
            Protocol::Http1 => false,
            Protocol::Http2 => true,
            Protocol::Auto if switching => false,
            Protocol::Auto => {
                if let Some(sender) = lease.live_h2() {
                    lease.conn = Some(Conn::H2(sender));
                    return Ok(lease);
                }
                let io = connect(ep, s, false, Counted::Yes, lease.origin.as_deref().copied()).await?;
                let h2 = io.alpn_h2();
                ep.set_speaks_h2(h2);
                lease.conn = Some(if h2 {
                    Conn::H2(lease.h2_handshake(io, s).await?)
                } else {
                    Conn::H1(Box::new(H1Conn::new(io)))
                });
                return Ok(lease);
            }
        };
        lease.conn = Some(if h2 {
            match lease.live_h2() {
                Some(sender) => Conn::H2(sender),
                None => Conn::H2(
                    lease
                        .h2_handshake(connect(ep, s, false, Counted::Yes, lease.origin.as_deref().copied()).await?, s)
                        .await?,
                ),
            }
        } else {
            Conn::H1(Box::new(H1Conn::new(
                connect(ep, s, switching, Counted::Yes, lease.origin.as_deref().copied()).await?,
            )))
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

    fn h2_slot(&self) -> &std::sync::Mutex<Option<http2::SendRequest<RequestBody>>> {
        &self.ep.h2[gatehouse_clock::worker_index() % self.ep.h2.len()]
    }

    /// This worker's HTTP/2 connection to the endpoint, when it has one still open.
    fn live_h2(&self) -> Option<http2::SendRequest<RequestBody>> {
        self.h2_slot().lock().ok().and_then(|g| g.as_ref().filter(|s| !s.is_closed()).cloned())
    }

    /// Starts HTTP/2 on a new connection and makes it this worker's for the endpoint.
    async fn h2_handshake(
        &self,
        io: UpstreamIo,
        s: &Settings,
    ) -> Result<http2::SendRequest<RequestBody>, UpstreamError> {
        let (sender, conn) = http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .keep_alive_interval(s.ping_interval)
            .keep_alive_timeout(s.ping_timeout)
            .handshake(TokioIo::new(io))
            .await
            .map_err(UpstreamError::Handshake)?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        if let Ok(mut g) = self.h2_slot().lock() {
            *g = Some(sender.clone());
        }
        Ok(sender)
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
                Some(Conn::H2(sender)) => Box::pin(self.send_h2(sender, req, read_timeout)).await,
                None => Err(SendFailure::with(UpstreamError::NoConnection, req)),
            }
        }
    }

    async fn send_h2(
        mut self,
        mut sender: http2::SendRequest<RequestBody>,
        mut req: http::Request<RequestBody>,
        read_timeout: Duration,
    ) -> Result<http::Response<UpstreamBody>, SendFailure> {
        h2_form(&mut req, &self.ep.authority, self.ep.tls.is_some());
        // hyper sends the body from a task of its own and reports a body's failure only as the
        // stream's reset: the body says why it failed here.
        let watch = (!req.body().is_empty()).then(|| req.body_mut().watch());
        let faulted = |f: crate::body::Fault| watch.as_deref().and_then(crate::body::Watch::fault) == Some(f);
        // The wait for the answer's head counts from the request's last part: a client that
        // streams its body for longer than `read_timeout` (a gRPC upload) is not cut off.
        let sent_ms = gatehouse_clock::now_ms();
        let read_ms = u64::try_from(read_timeout.as_millis()).unwrap_or(u64::MAX);
        let mut send = std::pin::pin!(sender.try_send_request(req));
        let answered = loop {
            let from = watch.as_deref().map_or(sent_ms, |w| w.last_ms().max(sent_ms));
            let left = from.saturating_add(read_ms).saturating_sub(gatehouse_clock::now_ms());
            if left == 0 {
                break None;
            }
            if let Ok(answer) = tokio::time::timeout(Duration::from_millis(left), send.as_mut()).await {
                break Some(answer);
            }
        };
        match answered {
            None => Err(SendFailure::new(UpstreamError::Timeout)),
            Some(Err(mut e)) => {
                let unsent = e.take_message();
                let source = e.into_error();
                let error = if caused_by::<crate::BodyTooLarge>(&source) || faulted(crate::body::Fault::TooLarge) {
                    UpstreamError::BodyTooLarge
                } else if caused_by::<crate::BodyTimeout>(&source) || faulted(crate::body::Fault::Timeout) {
                    UpstreamError::ClientTimeout
                } else {
                    UpstreamError::H2 { source, sent: unsent.is_none() }
                };
                Err(SendFailure { request: unsent, error })
            }
            Some(Ok(resp)) => {
                self.conn = Some(Conn::H2(sender));
                Ok(resp.map(|incoming| UpstreamBody::h2(incoming, self, read_timeout)))
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

/// Whether `E` is among the causes of `error`.
fn caused_by<E: std::error::Error + 'static>(error: &hyper::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if e.is::<E>() {
            return true;
        }
        source = e.source();
    }
    false
}
