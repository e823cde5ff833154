//! The client connection as hyper sees it: bytes read while sniffing for the h2c preface are
//! replayed first, and two deadlines apply while no request is in progress — the request head must
//! arrive within `header_read_timeout` of its first byte (or of the connection's start), and an idle
//! keep-alive connection is closed after `keepalive_timeout`. A missed deadline reads as end of
//! stream, so hyper closes the connection.

use bytes::{Buf, Bytes};
use gatehouse_upstream::{now_ms, LazyDeadline};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// Request progress on one connection, shared by its IO and its service.
#[derive(Debug)]
pub(crate) struct ConnState {
    /// Requests between head received and response finished.
    pub busy: AtomicU32,
    /// Responses finished; a change starts a new idle period.
    pub completed: AtomicU64,
    /// When the last response finished (or the connection started), ms.
    pub idle_since_ms: AtomicU64,
}

impl ConnState {
    pub(crate) fn new() -> Self {
        ConnState { busy: AtomicU32::new(0), completed: AtomicU64::new(0), idle_since_ms: AtomicU64::new(now_ms()) }
    }
}

/// Marks a request in progress until dropped (with its response body).
#[derive(Debug)]
pub(crate) struct BusyGuard(pub std::sync::Arc<ConnState>);

impl BusyGuard {
    pub(crate) fn new(state: std::sync::Arc<ConnState>) -> Self {
        state.busy.fetch_add(1, Relaxed);
        BusyGuard(state)
    }
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.idle_since_ms.store(now_ms(), Relaxed);
        self.0.completed.fetch_add(1, Relaxed);
        self.0.busy.fetch_sub(1, Relaxed);
    }
}

/// A client TCP stream with replayed prefix and request-aware deadlines.
#[derive(Debug)]
pub(crate) struct ConnIo {
    inner: TcpStream,
    prefix: Bytes,
    state: std::sync::Arc<ConnState>,
    header_timeout_ms: u64,
    idle_timeout_ms: u64,
    /// HTTP/2 multiplexes control frames on idle connections, so only the idle deadline applies.
    h2: bool,
    seen_completed: u64,
    head_started_ms: Option<u64>,
    timer: LazyDeadline,
}

impl ConnIo {
    pub(crate) fn new(
        inner: TcpStream,
        prefix: Bytes,
        state: std::sync::Arc<ConnState>,
        header_timeout: Duration,
        idle_timeout: Duration,
        h2: bool,
    ) -> Self {
        let started = state.idle_since_ms.load(Relaxed);
        ConnIo {
            inner,
            prefix,
            state,
            header_timeout_ms: header_timeout.as_millis() as u64,
            idle_timeout_ms: idle_timeout.as_millis() as u64,
            h2,
            seen_completed: 0,
            // The first request head is due within the header timeout of the connection's start.
            head_started_ms: (!h2).then_some(started),
            timer: LazyDeadline::default(),
        }
    }

    fn new_idle_period(&mut self) {
        let completed = self.state.completed.load(Relaxed);
        if completed != self.seen_completed {
            self.seen_completed = completed;
            self.head_started_ms = None;
        }
    }

    fn deadline_ms(&mut self) -> Option<u64> {
        if self.state.busy.load(Relaxed) > 0 {
            return None;
        }
        self.new_idle_period();
        Some(match self.head_started_ms {
            Some(t) => t + self.header_timeout_ms,
            None => self.state.idle_since_ms.load(Relaxed) + self.idle_timeout_ms,
        })
    }

    fn on_bytes(&mut self) {
        if self.h2 || self.state.busy.load(Relaxed) > 0 {
            return;
        }
        self.new_idle_period();
        if self.head_started_ms.is_none() {
            self.head_started_ms = Some(now_ms());
        }
    }

    /// Whether the deadline in force has passed (arming the timer otherwise).
    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        match self.deadline_ms() {
            Some(deadline) => self.timer.expired(cx, deadline),
            None => false,
        }
    }
}

impl AsyncRead for ConnIo {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if !this.prefix.is_empty() {
            let n = this.prefix.len().min(buf.remaining());
            buf.put_slice(&this.prefix[..n]);
            this.prefix.advance(n);
            if this.prefix.is_empty() {
                this.prefix = Bytes::new();
            }
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.on_bytes();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                if this.expired(cx) {
                    // Reads as end of stream: hyper closes the connection.
                    Poll::Ready(Ok(()))
                } else {
                    Poll::Pending
                }
            }
        }
    }
}

impl AsyncWrite for ConnIo {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
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
