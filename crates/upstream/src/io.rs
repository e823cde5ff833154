//! Connect stage, the connection itself: a TCP connect to the endpoint, then, for a TLS upstream,
//! the handshake (within the same connect timeout, as nginx's `proxy_connect_timeout` covers
//! both), counted as full or resumed. [`UpstreamIo`] is what the HTTP/1.1 and HTTP/2 clients read
//! and write: the socket itself, or TLS over it. Under either, writes that stay blocked longer
//! than the write timeout fail ([`TimedIo`]).

use crate::endpoint::EndpointState;
use crate::error::UpstreamError;
use crate::proxy_header::Origin;
use crate::tls::TlsFailure;
use crate::Settings;
use bytes::BytesMut;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;
use tokio_rustls::client::TlsStream;

/// Whether a connection is counted in the endpoint's metrics (requests' connections are; health
/// checks' are not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Counted {
    Yes,
    No,
}

/// Opens a connection to `ep`: TCP, the PROXY header when the upstream sends one (naming `origin`,
/// or none for a health check), then TLS when the upstream has it. `h1_only` offers only
/// `http/1.1` by ALPN (a protocol switch under `protocol: auto`).
pub(crate) async fn connect(
    ep: &EndpointState,
    s: &Settings,
    h1_only: bool,
    counted: Counted,
    origin: Option<Origin>,
) -> Result<UpstreamIo, UpstreamError> {
    let started = Instant::now();
    let count = |c: &std::sync::atomic::AtomicU64| {
        if counted == Counted::Yes {
            c.fetch_add(1, Relaxed);
        }
    };
    let mut stream = match tokio::time::timeout(s.connect_timeout, TcpStream::connect(ep.addr)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            count(&ep.stats.connect_errors);
            return Err(UpstreamError::Connect(e));
        }
        Err(_) => {
            count(&ep.stats.connect_errors);
            return Err(UpstreamError::ConnectTimeout);
        }
    };
    count(&ep.stats.connects);
    let _ = stream.set_nodelay(true);
    if let Some(version) = s.send_proxy_protocol {
        let header = crate::proxy_header::header(version, origin);
        let left = s.connect_timeout.saturating_sub(started.elapsed());
        match tokio::time::timeout(left, tokio::io::AsyncWriteExt::write_all(&mut stream, &header)).await {
            Ok(Ok(())) => {}
            Ok(Err(source)) => return Err(UpstreamError::Write { source, sent: false }),
            Err(_) => return Err(UpstreamError::ConnectTimeout),
        }
    }
    let io = TimedIo { inner: stream, write_timeout: s.write_timeout, deadline: None };
    let Some(tls) = &ep.tls else {
        return Ok(UpstreamIo::Plain(io));
    };
    let connector = match (&tls.h1, h1_only) {
        (Some(h1), true) => h1,
        _ => &tls.connector,
    };
    let handshake_started = Instant::now();
    let left = s.connect_timeout.saturating_sub(started.elapsed());
    let failure = match tokio::time::timeout(left, connector.connect(tls.server_name.clone(), io)).await {
        Ok(Ok(stream)) => {
            if counted == Counted::Yes {
                let resumed = stream.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
                let stats = &ep.tls_stats;
                if resumed { &stats.resumed } else { &stats.full }.fetch_add(1, Relaxed);
                stats.handshake_micros.fetch_add(handshake_started.elapsed().as_micros() as u64, Relaxed);
            }
            return Ok(UpstreamIo::Tls(Box::new(stream)));
        }
        Ok(Err(source)) => (TlsFailure::of(&source).unwrap_or(TlsFailure::Io), source),
        Err(_) => {
            (TlsFailure::Io, io::Error::new(io::ErrorKind::TimedOut, "handshake not done within the connect timeout"))
        }
    };
    if counted == Counted::Yes {
        ep.stats.connect_errors.fetch_add(1, Relaxed);
        ep.tls_stats.failed(failure.0);
    }
    Err(UpstreamError::Tls { server_name: tls.name_text.clone(), failure: failure.0, source: failure.1, sent: false })
}

/// A connection to an endpoint: the TCP socket, or TLS over it.
#[derive(Debug)]
pub enum UpstreamIo {
    /// Plain text.
    Plain(TimedIo),
    /// TLS (boxed: rustls' state is large, and plain connections should not carry its size).
    Tls(Box<TlsStream<TimedIo>>),
}

impl UpstreamIo {
    /// Whether the TLS handshake resumed a session; `None` for plain text.
    pub(crate) fn tls_resumed(&self) -> Option<bool> {
        match self {
            UpstreamIo::Plain(_) => None,
            UpstreamIo::Tls(t) => Some(t.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed)),
        }
    }

    /// Whether the endpoint chose HTTP/2 by ALPN.
    pub(crate) fn alpn_h2(&self) -> bool {
        match self {
            UpstreamIo::Plain(_) => false,
            UpstreamIo::Tls(t) => t.get_ref().1.alpn_protocol() == Some(b"h2"),
        }
    }

    /// Reads more bytes into `buf`; `Ok(0)` at end of stream. Plain sockets read straight into the
    /// buffer and clear their readiness when drained ([`gatehouse_http1::framing::poll_fill`]).
    pub(crate) fn poll_fill(&mut self, buf: &mut BytesMut, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        match self {
            UpstreamIo::Plain(io) => gatehouse_http1::framing::poll_fill(&io.inner, buf, cx),
            UpstreamIo::Tls(t) => {
                buf.reserve(gatehouse_http1::framing::READ_CHUNK);
                tokio_util::io::poll_read_buf(Pin::new(&mut **t), cx, buf)
            }
        }
    }

    /// Whether an idle connection can take a request: the endpoint has not closed it and sent
    /// nothing unasked. Uses the readiness the event loop already knows; no system call unless
    /// the socket looks readable. Over TLS, records that carry no data (a TLS 1.3 session ticket)
    /// are taken in and the connection stays usable.
    pub(crate) fn idle_usable(&mut self) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        let tcp = match self {
            UpstreamIo::Plain(io) => &io.inner,
            UpstreamIo::Tls(t) => &t.get_ref().0.inner,
        };
        match tcp.poll_read_ready(&mut cx) {
            Poll::Pending => true,
            Poll::Ready(Err(_)) => false,
            Poll::Ready(Ok(())) => {
                let mut probe = [0u8; 1];
                match self {
                    UpstreamIo::Plain(io) => {
                        matches!(io.inner.try_read(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
                    }
                    UpstreamIo::Tls(t) => {
                        let mut buf = ReadBuf::new(&mut probe);
                        matches!(Pin::new(&mut **t).poll_read(&mut cx, &mut buf), Poll::Pending)
                    }
                }
            }
        }
    }
}

impl AsyncRead for UpstreamIo {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpstreamIo::Plain(io) => Pin::new(io).poll_read(cx, buf),
            UpstreamIo::Tls(t) => Pin::new(&mut **t).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for UpstreamIo {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            UpstreamIo::Plain(io) => Pin::new(io).poll_write(cx, buf),
            UpstreamIo::Tls(t) => Pin::new(&mut **t).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            UpstreamIo::Plain(io) => Pin::new(io).poll_write_vectored(cx, bufs),
            UpstreamIo::Tls(t) => Pin::new(&mut **t).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            UpstreamIo::Plain(io) => io.is_write_vectored(),
            UpstreamIo::Tls(t) => t.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpstreamIo::Plain(io) => Pin::new(io).poll_flush(cx),
            UpstreamIo::Tls(t) => Pin::new(&mut **t).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpstreamIo::Plain(io) => Pin::new(io).poll_shutdown(cx),
            UpstreamIo::Tls(t) => Pin::new(&mut **t).poll_shutdown(cx),
        }
    }
}

/// A TCP stream whose writes fail after staying blocked longer than the write timeout. The timer
/// is only created when a write actually blocks.
#[derive(Debug)]
pub struct TimedIo {
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
