//! An HTTP/2 client connection as hyper sees it: the preface bytes read while sniffing are replayed
//! first, and while no stream is in progress the connection is closed after `keepalive_timeout`
//! (a missed deadline reads as end of stream, so hyper closes the connection).

use crate::transport::Transport;
use bytes::{Buf, Bytes};
use gatehouse_upstream::{now_ms, LazyDeadline};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Stream progress on one connection, shared by its IO and its service.
#[derive(Debug)]
pub(crate) struct ConnState {
    /// Requests between head received and response finished.
    pub busy: AtomicU32,
    /// When the last response finished (or the connection started), ms.
    pub idle_since_ms: AtomicU64,
}

impl ConnState {
    pub(crate) fn new() -> Self {
        ConnState { busy: AtomicU32::new(0), idle_since_ms: AtomicU64::new(now_ms()) }
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
        self.0.busy.fetch_sub(1, Relaxed);
    }
}

/// A client TCP stream with the replayed preface and the idle deadline.
#[derive(Debug)]
pub(crate) struct ConnIo {
    inner: Transport,
    prefix: Bytes,
    state: std::sync::Arc<ConnState>,
    idle_timeout_ms: u64,
    timer: LazyDeadline,
}

impl ConnIo {
    pub(crate) fn new(
        inner: Transport,
        prefix: Bytes,
        state: std::sync::Arc<ConnState>,
        idle_timeout: Duration,
    ) -> Self {
        ConnIo {
            inner,
            prefix,
            state,
            idle_timeout_ms: idle_timeout.as_millis() as u64,
            timer: LazyDeadline::default(),
        }
    }

    /// Whether the idle deadline has passed (arming the timer otherwise); none while busy.
    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        if self.state.busy.load(Relaxed) > 0 {
            return false;
        }
        let deadline = self.state.idle_since_ms.load(Relaxed) + self.idle_timeout_ms;
        self.timer.expired(cx, deadline)
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
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            // Reads as end of stream: hyper closes the connection.
            Poll::Pending if this.expired(cx) => Poll::Ready(Ok(())),
            other => other,
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
