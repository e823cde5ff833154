//! Connect stage: a [`Lease`] is one request's hold on an endpoint — an in-flight slot and a
//! connection, reused from this worker's idle pool when one is ready, opened otherwise. A lease
//! given back with [`Lease::release`] returns its connection to the pool; dropped, it closes it.

use crate::body::RequestBody;
use crate::endpoint::EndpointState;
use crate::error::UpstreamError;
use crate::h1::H1Conn;
use crate::response::UpstreamBody;
use crate::Settings;
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;

/// An idle HTTP/1.1 connection in a worker's pool.
#[derive(Debug)]
pub(crate) struct Idle {
    conn: Box<H1Conn>,
    since: Instant,
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
    /// if it has one: the usual case, with no future to build and await.
    pub fn pooled(ep: &Arc<EndpointState>, s: &Settings) -> Option<Lease> {
        if s.http2 {
            return None;
        }
        ep.inflight.fetch_add(1, Relaxed);
        let mut lease = Lease { ep: ep.clone(), conn: None, max_idle: s.max_idle, reused: true };
        lease.conn = Some(Conn::H1(lease.checkout(s.idle_timeout)?));
        Some(lease)
    }

    /// An in-flight slot on `ep` and a connection made for it: the shared HTTP/2 one, or a new
    /// HTTP/1.1 one when [`Lease::pooled`] found none idle.
    pub async fn open(ep: &Arc<EndpointState>, s: &Settings) -> Result<Lease, UpstreamError> {
        ep.inflight.fetch_add(1, Relaxed);
        let mut lease = Lease { ep: ep.clone(), conn: None, max_idle: s.max_idle, reused: false };
        lease.conn = Some(if s.http2 {
            Conn::H2(lease.h2_sender(s).await?)
        } else {
            Conn::H1(Box::new(H1Conn::new(connect(ep, s).await?)))
        });
        Ok(lease)
    }

    fn checkout(&self, idle_timeout: Duration) -> Option<Box<H1Conn>> {
        let mut pool = self.ep.my_pool().lock().ok()?;
        while let Some(mut idle) = pool.pop() {
            if idle.fresh(idle_timeout) {
                return Some(idle.conn);
            }
        }
        None
    }

    async fn h2_sender(&self, s: &Settings) -> Result<http2::SendRequest<RequestBody>, UpstreamError> {
        let slot = &self.ep.h2[gatehouse_clock::worker_index() % self.ep.h2.len()];
        if let Some(sender) = slot.lock().ok().and_then(|g| g.as_ref().filter(|s| !s.is_closed()).cloned()) {
            return Ok(sender);
        }
        let io = TokioIo::new(connect(&self.ep, s).await?);
        let (sender, conn) = http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .keep_alive_interval(Duration::from_secs(30))
            .handshake(io)
            .await
            .map_err(UpstreamError::Handshake)?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        if let Ok(mut g) = slot.lock() {
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
                    if let Err(e) = conn.write_request(&mut req, &self.ep.addr_text).await {
                        return Err(SendFailure::with(e, req));
                    }
                    match conn.read_head(head_request, read_timeout).await {
                        Err(e) => Err(SendFailure::with(e, req)),
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
        req: http::Request<RequestBody>,
        read_timeout: Duration,
    ) -> Result<http::Response<UpstreamBody>, SendFailure> {
        match tokio::time::timeout(read_timeout, sender.try_send_request(req)).await {
            Err(_) => Err(SendFailure::new(UpstreamError::Timeout)),
            Ok(Err(mut e)) => {
                let unsent = e.take_message();
                let source = e.into_error();
                let error = if caused_by::<crate::BodyTooLarge>(&source) {
                    UpstreamError::BodyTooLarge
                } else if caused_by::<crate::BodyTimeout>(&source) {
                    UpstreamError::ClientTimeout
                } else {
                    UpstreamError::H2 { source, sent: unsent.is_none() }
                };
                Err(SendFailure { request: unsent, error })
            }
            Ok(Ok(resp)) => {
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
                    pool.push(Idle { conn, since: gatehouse_clock::now() });
                }
            }
        }
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

async fn connect(ep: &EndpointState, s: &Settings) -> Result<TimedIo, UpstreamError> {
    let stream = match tokio::time::timeout(s.connect_timeout, TcpStream::connect(ep.addr)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            ep.stats.connect_errors.fetch_add(1, Relaxed);
            return Err(UpstreamError::Connect(e));
        }
        Err(_) => {
            ep.stats.connect_errors.fetch_add(1, Relaxed);
            return Err(UpstreamError::ConnectTimeout);
        }
    };
    ep.stats.connects.fetch_add(1, Relaxed);
    let _ = stream.set_nodelay(true);
    Ok(TimedIo { inner: stream, write_timeout: s.write_timeout, deadline: None })
}

/// A TCP stream whose writes fail after staying blocked longer than the write timeout. The timer
/// is only created when a write actually blocks.
#[derive(Debug)]
pub(crate) struct TimedIo {
    pub(crate) inner: TcpStream,
    write_timeout: Duration,
    deadline: Option<Pin<Box<Sleep>>>,
}

impl TimedIo {
    #[cfg(test)]
    pub(crate) fn for_tests(inner: TcpStream, write_timeout: Duration) -> Self {
        TimedIo { inner, write_timeout, deadline: None }
    }

    fn blocked(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let timeout = self.write_timeout;
        let deadline = self.deadline.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "upstream write timed out"))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for TimedIo {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for TimedIo {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write(cx, buf) {
            Poll::Pending => self.blocked(cx),
            ready => {
                self.deadline = None;
                ready
            }
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write_vectored(cx, bufs) {
            Poll::Pending => self.blocked(cx),
            ready => {
                self.deadline = None;
                ready
            }
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
