//! Connect stage: a [`Lease`] is one request's hold on an endpoint — an in-flight slot and a
//! connection, reused from this worker's idle pool when one is ready, opened otherwise. A lease
//! given back with [`Lease::release`] returns its connection to the pool; dropped, it closes it.

use crate::body::RequestBody;
use crate::endpoint::EndpointState;
use crate::Settings;
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
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
    sender: http1::SendRequest<RequestBody>,
    since: Instant,
}

impl Idle {
    pub(crate) fn fresh(&self, idle_timeout: Duration) -> bool {
        !self.sender.is_closed() && self.since.elapsed() < idle_timeout
    }
}

#[derive(Debug)]
enum Conn {
    H1(http1::SendRequest<RequestBody>),
    H2(http2::SendRequest<RequestBody>),
}

/// Why no connection could be had.
#[derive(Debug)]
pub enum ConnectError {
    /// The TCP connect did not finish within the connect timeout.
    Timeout,
    /// The TCP connect or the HTTP handshake failed.
    Io(io::Error),
    /// The HTTP handshake failed.
    Handshake(hyper::Error),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::Timeout => f.write_str("connect timed out"),
            ConnectError::Io(e) => write!(f, "connect failed: {e}"),
            ConnectError::Handshake(e) => write!(f, "handshake failed: {e}"),
        }
    }
}

/// One request's hold on an endpoint.
#[derive(Debug)]
pub struct Lease {
    ep: Arc<EndpointState>,
    conn: Option<Conn>,
    max_idle: usize,
    /// Whether the connection came from the idle pool.
    pub reused: bool,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.ep.inflight.fetch_sub(1, Relaxed);
    }
}

impl Lease {
    /// Takes an in-flight slot on `ep` and a ready connection to it.
    pub async fn acquire(ep: &Arc<EndpointState>, s: &Settings) -> Result<Lease, ConnectError> {
        ep.inflight.fetch_add(1, Relaxed);
        let mut lease = Lease { ep: ep.clone(), conn: None, max_idle: s.max_idle, reused: false };
        if s.http2 {
            lease.conn = Some(Conn::H2(lease.h2_sender(s).await?));
            return Ok(lease);
        }
        if let Some(sender) = lease.checkout(s.idle_timeout) {
            lease.reused = true;
            lease.conn = Some(Conn::H1(sender));
            return Ok(lease);
        }
        let io = connect(ep, s).await?;
        let (sender, conn) = http1::Builder::new().handshake(io).await.map_err(ConnectError::Handshake)?;
        tokio::spawn(async move {
            // Errors here are seen by the request that owns the connection.
            let _ = conn.with_upgrades().await;
        });
        lease.conn = Some(Conn::H1(sender));
        Ok(lease)
    }

    fn checkout(&self, idle_timeout: Duration) -> Option<http1::SendRequest<RequestBody>> {
        let mut pool = self.ep.my_pool().lock().ok()?;
        while let Some(idle) = pool.pop() {
            if idle.fresh(idle_timeout) && idle.sender.is_ready() {
                return Some(idle.sender);
            }
        }
        None
    }

    async fn h2_sender(&self, s: &Settings) -> Result<http2::SendRequest<RequestBody>, ConnectError> {
        let slot = &self.ep.h2[crate::util::worker_index() % self.ep.h2.len()];
        if let Some(sender) = slot.lock().ok().and_then(|g| g.as_ref().filter(|s| !s.is_closed()).cloned()) {
            return Ok(sender);
        }
        let io = connect(&self.ep, s).await?;
        let (sender, conn) = http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .keep_alive_interval(Duration::from_secs(30))
            .handshake(io)
            .await
            .map_err(ConnectError::Handshake)?;
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

    /// Sends the request; on failure gives the request back when it was certainly not sent (so it
    /// may be retried as it is).
    pub async fn send(&mut self, req: http::Request<RequestBody>) -> Result<http::Response<Incoming>, SendFailure> {
        self.ep.stats.requests.fetch_add(1, Relaxed);
        let result = match self.conn.as_mut() {
            Some(Conn::H1(s)) => s.try_send_request(req).await,
            Some(Conn::H2(s)) => s.try_send_request(req).await,
            None => {
                return Err(SendFailure { unsent: Some(req), reason: "no connection".into(), body_too_large: false })
            }
        };
        result.map_err(|mut e| {
            let unsent = e.take_message();
            let error = e.into_error();
            let body_too_large = caused_by_body_limit(&error);
            SendFailure { unsent, reason: error.to_string(), body_too_large }
        })
    }

    /// Gives the connection back to this worker's pool; call once the response body has ended.
    pub fn release(mut self) {
        if let Some(Conn::H1(sender)) = self.conn.take() {
            if sender.is_closed() {
                return;
            }
            if let Ok(mut pool) = self.ep.my_pool().lock() {
                if pool.len() < self.max_idle {
                    pool.push(Idle { sender, since: Instant::now() });
                }
            }
        }
    }
}

/// A request that failed on its connection.
#[derive(Debug)]
pub struct SendFailure {
    /// The request, when it was certainly not sent.
    pub unsent: Option<http::Request<RequestBody>>,
    /// What went wrong, for the log.
    pub reason: String,
    /// The client's body went over the route's limit while being sent.
    pub body_too_large: bool,
}

fn caused_by_body_limit(error: &hyper::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if e.is::<crate::BodyTooLarge>() {
            return true;
        }
        source = e.source();
    }
    false
}

async fn connect(ep: &EndpointState, s: &Settings) -> Result<TokioIo<TimedIo>, ConnectError> {
    let stream = match tokio::time::timeout(s.connect_timeout, TcpStream::connect(ep.addr)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            ep.stats.connect_errors.fetch_add(1, Relaxed);
            return Err(ConnectError::Io(e));
        }
        Err(_) => {
            ep.stats.connect_errors.fetch_add(1, Relaxed);
            return Err(ConnectError::Timeout);
        }
    };
    ep.stats.connects.fetch_add(1, Relaxed);
    let _ = stream.set_nodelay(true);
    Ok(TokioIo::new(TimedIo { inner: stream, write_timeout: s.write_timeout, deadline: None }))
}

/// A TCP stream whose writes fail after staying blocked longer than the write timeout. The timer
/// is only created when a write actually blocks.
#[derive(Debug)]
pub(crate) struct TimedIo {
    inner: TcpStream,
    write_timeout: Duration,
    deadline: Option<Pin<Box<Sleep>>>,
}

impl TimedIo {
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
