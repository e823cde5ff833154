//! An HTTP/2 client connection as hyper sees it: the preface bytes read while sniffing are replayed
//! first, and while no stream is in progress the connection is closed after `keepalive_timeout`
//! (a missed deadline reads as end of stream, so hyper closes the connection).
//!
//! While streams are in progress, `send_timeout` applies to the client's reading, as nginx's does
//! to HTTP/2: a response body that has data for the client but has not been asked for more (the
//! client's flow-control window is shut, or it stopped reading the socket and the stream's send
//! buffer is full) marks the connection stalled; when no stream has handed the client anything for
//! `send_timeout` while one is stalled, the connection is closed, and with it the upstream
//! connections its streams held. A stream that waits for its upstream is not stalled.
//!
//! The frame headers going both ways are followed (never the payloads): the client's, to stop the
//! floods [`FloodGuard`] detects; the server's, to know where a frame ends, so that a GOAWAY of our
//! own can be put between two of hyper's frames, and to see which GOAWAYs the HTTP/2 library sent
//! to calm a client down.
//!
//! ```text
//! serving ──flood──► finish hyper's frame ─► GOAWAY ENHANCE_YOUR_CALM ─► flush ─► shutdown ─► error
//!                    (each step gives up after CLOSE_WITHIN; then hyper drops the connection)
//! ```

use crate::h2_flood::{calm_goaway, goaway_offence, FloodGuard, FrameCursor, DATA, FRAME_HEADER_LEN};
use crate::transport::Transport;
use bytes::{Buf, Bytes};
use gatehouse_clock::{now_ms, TaskDeadline};
use gatehouse_telemetry::H2Offence;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How long an offender's connection may take to get its GOAWAY out before it is dropped.
const CLOSE_WITHIN_MS: u64 = 1000;
/// [`ConnState::offence`] when there is none.
const NO_OFFENCE: u8 = u8::MAX;

/// Stream progress on one connection, shared by its IO and its service.
#[derive(Debug)]
pub(crate) struct ConnState {
    /// Requests between head received and response finished.
    pub busy: AtomicU32,
    /// When the last response finished (or the connection started), ms.
    pub idle_since_ms: AtomicU64,
    /// Response bodies that handed hyper data and have not been asked for more since.
    stalled: AtomicU32,
    /// When a response body last handed hyper data or was asked for more, or a stream started, ms.
    progress_ms: AtomicU64,
    /// Set when the connection was closed for `send_timeout`.
    pub send_timed_out: AtomicBool,
    /// Why the client was sent GOAWAY ENHANCE_YOUR_CALM (an [`H2Offence`] index), if it was.
    offence: AtomicU8,
}

impl ConnState {
    pub(crate) fn new() -> Self {
        ConnState {
            busy: AtomicU32::new(0),
            idle_since_ms: AtomicU64::new(now_ms()),
            stalled: AtomicU32::new(0),
            progress_ms: AtomicU64::new(0),
            send_timed_out: AtomicBool::new(false),
            offence: AtomicU8::new(NO_OFFENCE),
        }
    }

    /// Why the client was told to calm down, if it was.
    pub(crate) fn offence(&self) -> Option<H2Offence> {
        H2Offence::ALL.get(usize::from(self.offence.load(Relaxed))).copied()
    }

    /// Records the first offence only.
    fn offended(&self, offence: H2Offence) {
        let _ = self.offence.compare_exchange(NO_OFFENCE, offence as u8, Relaxed, Relaxed);
    }
}

/// Where closing an offender's connection is.
#[derive(Debug)]
enum Closing {
    /// Writing our GOAWAY once hyper's frame in progress is finished; `sent` bytes of it are out.
    GoAway {
        frame: [u8; FRAME_HEADER_LEN + 8],
        sent: usize,
    },
    Flush,
    Shutdown,
    /// Nothing more is read or written.
    Done,
}

/// Marks a request in progress until dropped (with its response body).
#[derive(Debug)]
pub(crate) struct BusyGuard(pub std::sync::Arc<ConnState>);

impl BusyGuard {
    pub(crate) fn new(state: std::sync::Arc<ConnState>) -> Self {
        state.progress_ms.store(now_ms(), Relaxed);
        state.busy.fetch_add(1, Relaxed);
        BusyGuard(state)
    }
}

/// A response body's part in [`ConnState`]'s stall tracking: [`Self::asked`] when hyper asks the
/// body for data, [`Self::handed`] with what the body answered.
#[derive(Debug, Default)]
pub(crate) struct StallMark {
    stalled: bool,
}

impl StallMark {
    /// hyper asks for more: the client took what it was handed (or has room for it).
    pub(crate) fn asked(&mut self, state: &ConnState) {
        if std::mem::take(&mut self.stalled) {
            state.stalled.fetch_sub(1, Relaxed);
        }
        state.progress_ms.store(now_ms(), Relaxed);
    }

    /// The body handed hyper its response head or data, and more is to come: until hyper asks
    /// for it, the client holds this stream up (hyper asks as soon as the client has room).
    pub(crate) fn handed(&mut self, state: &ConnState) {
        state.progress_ms.store(now_ms(), Relaxed);
        if !self.stalled {
            self.stalled = true;
            state.stalled.fetch_add(1, Relaxed);
        }
    }

    /// The body is dropped.
    pub(crate) fn release(&mut self, state: &ConnState) {
        if std::mem::take(&mut self.stalled) {
            state.stalled.fetch_sub(1, Relaxed);
        }
    }
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.idle_since_ms.store(now_ms(), Relaxed);
        self.0.busy.fetch_sub(1, Relaxed);
    }
}

/// A client TCP stream with the replayed preface, the idle deadline and the flood guard.
#[derive(Debug)]
pub(crate) struct ConnIo {
    inner: Transport,
    prefix: Bytes,
    state: std::sync::Arc<ConnState>,
    idle_timeout_ms: u64,
    send_timeout_ms: u64,
    timer: TaskDeadline,
    guard: FloodGuard,
    /// Where hyper's output is.
    written: FrameCursor,
    /// Set once the client is an offender, with the time it was found to be.
    closing: Option<(Closing, u64)>,
}

impl ConnIo {
    pub(crate) fn new(
        inner: Transport,
        prefix: Bytes,
        state: std::sync::Arc<ConnState>,
        idle_timeout: Duration,
        send_timeout: Duration,
    ) -> Self {
        // The guard sees the replayed bytes too: the preface, and any frames read with it.
        let mut guard = FloodGuard::new(now_ms(), 0);
        let early = guard.observe(&prefix, now_ms);
        let mut io = ConnIo {
            inner,
            prefix,
            state,
            idle_timeout_ms: idle_timeout.as_millis() as u64,
            send_timeout_ms: send_timeout.as_millis() as u64,
            timer: TaskDeadline::default(),
            guard,
            written: FrameCursor::default(),
            closing: None,
        };
        if let Some(offence) = early {
            io.prefix = Bytes::new();
            io.offender(offence);
        }
        io
    }

    /// Starts closing the connection of a client found to commit `offence`.
    fn offender(&mut self, offence: H2Offence) {
        tracing::debug!(offence = offence.label(), "HTTP/2 client flooding; sending GOAWAY");
        self.state.offended(offence);
        let frame = calm_goaway(self.guard.last_stream());
        self.closing = Some((Closing::GoAway { frame, sent: 0 }, now_ms()));
    }

    /// Follows `n` bytes of hyper's output in `bufs`: DATA frames pay for control frames, and a
    /// GOAWAY the library sent to calm the client down is noted.
    fn wrote(&mut self, bufs: &[io::IoSlice<'_>], mut n: usize) {
        let ConnIo { state, written, guard, .. } = self;
        for buf in bufs {
            if n == 0 {
                break;
            }
            let part = &buf[..n.min(buf.len())];
            n -= part.len();
            written.feed(part, |head, payload| {
                if head.kind == DATA && head.len > 0 {
                    guard.earn();
                } else if let Some(offence) = goaway_offence(head, payload) {
                    state.offended(offence);
                }
            });
        }
    }

    /// Drives the closing of an offender's connection: `Ready` once nothing more is to be written
    /// (or the time for it ran out).
    fn poll_close(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some((step, since)) = &mut self.closing else {
            return Poll::Ready(());
        };
        loop {
            if !matches!(step, Closing::Done) && self.timer.expired(cx, *since + CLOSE_WITHIN_MS) {
                *step = Closing::Done;
            }
            let inner = Pin::new(&mut self.inner);
            match step {
                // hyper's frame in progress is finished by its own writes first.
                Closing::GoAway { .. } if !self.written.at_boundary() => return Poll::Pending,
                Closing::GoAway { frame, sent } => match inner.poll_write(cx, &frame[*sent..]) {
                    Poll::Ready(Ok(n)) if n > 0 => {
                        *sent += n;
                        if *sent == frame.len() {
                            *step = Closing::Flush;
                        }
                    }
                    Poll::Ready(_) => *step = Closing::Done,
                    Poll::Pending => return Poll::Pending,
                },
                Closing::Flush => match inner.poll_flush(cx) {
                    Poll::Ready(Ok(())) => *step = Closing::Shutdown,
                    Poll::Ready(Err(_)) => *step = Closing::Done,
                    Poll::Pending => return Poll::Pending,
                },
                Closing::Shutdown => match inner.poll_shutdown(cx) {
                    Poll::Ready(_) => *step = Closing::Done,
                    Poll::Pending => return Poll::Pending,
                },
                Closing::Done => return Poll::Ready(()),
            }
        }
    }

    /// Which deadline has passed, if one has (arming the timer otherwise): the idle deadline while
    /// no stream is in progress, else `send_timeout` since the last progress while a stream is
    /// stalled on the client.
    fn expired(&mut self, cx: &mut Context<'_>) -> Option<Expired> {
        if self.state.busy.load(Relaxed) == 0 {
            let deadline = self.state.idle_since_ms.load(Relaxed) + self.idle_timeout_ms;
            return self.timer.expired(cx, deadline).then_some(Expired::Idle);
        }
        loop {
            let since = self.state.progress_ms.load(Relaxed);
            if !self.timer.expired(cx, since + self.send_timeout_ms) {
                return None;
            }
            if self.state.stalled.load(Relaxed) > 0 {
                return Some(Expired::Send);
            }
            // The streams wait for their upstreams, not for the client: look again one period on
            // (a stall that starts meanwhile moves the progress mark itself).
            let _ = self.state.progress_ms.compare_exchange(since, now_ms(), Relaxed, Relaxed);
        }
    }
}

/// A deadline [`ConnIo`] found passed.
#[derive(Debug, PartialEq)]
enum Expired {
    /// No stream in progress for `keepalive_timeout`.
    Idle,
    /// A stream stalled on the client and nothing taken for `send_timeout`.
    Send,
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
        if this.closing.is_some() {
            ready!(this.poll_close(cx));
            return Poll::Ready(Err(io::ErrorKind::ConnectionAborted.into()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Pending => match this.expired(cx) {
                None => Poll::Pending,
                // Reads as end of stream: hyper closes the connection.
                Some(Expired::Idle) => Poll::Ready(Ok(())),
                Some(Expired::Send) => {
                    tracing::debug!("HTTP/2 client took nothing for send_timeout with a stream stalled; closing");
                    this.state.send_timed_out.store(true, Relaxed);
                    Poll::Ready(Err(io::ErrorKind::TimedOut.into()))
                }
            },
            Poll::Ready(Ok(())) => {
                if let Some(offence) = this.guard.observe(&buf.filled()[before..], now_ms) {
                    // Nothing more from an offender reaches hyper.
                    buf.set_filled(before);
                    this.offender(offence);
                    ready!(this.poll_close(cx));
                    return Poll::Ready(Err(io::ErrorKind::ConnectionAborted.into()));
                }
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

impl AsyncWrite for ConnIo {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[io::IoSlice::new(buf)])
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.closing.is_some() {
            // Only the rest of hyper's frame in progress goes out, then our GOAWAY.
            let left = this.written.left_in_part();
            if left == 0 {
                ready!(this.poll_close(cx));
                return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
            }
            let Some(buf) = bufs.iter().find(|b| !b.is_empty()) else {
                return Poll::Ready(Ok(0));
            };
            let part = &buf[..left.min(buf.len())];
            let n = ready!(Pin::new(&mut this.inner).poll_write(cx, part))?;
            this.wrote(&[io::IoSlice::new(part)], n);
            if this.written.at_boundary() {
                // The read side is waiting for this: let it send the GOAWAY.
                cx.waker().wake_by_ref();
            }
            return Poll::Ready(Ok(n));
        }
        let n = ready!(Pin::new(&mut this.inner).poll_write_vectored(cx, bufs))?;
        this.wrote(bufs, n);
        Poll::Ready(Ok(n))
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
