//! Forward stage on HTTP/2, with h2 itself (no hyper client between): a connection's task reads
//! and writes its frames and PINGs a quiet endpoint; a request opens its stream and sends its body
//! from its own task (a unary call's HEADERS and DATA leave in one write), and hands a body still
//! being sent when the answer's head comes (a client- or bidirectional stream) to a task of its
//! own; the answer's body is read straight from its stream.

use crate::body::RequestBody;
use crate::error::UpstreamError;
use crate::io::UpstreamIo;
use bytes::Bytes;
use h2::client::{Connection, SendRequest};
use h2::{Reason, RecvStream, SendStream};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The windows and limits of hyper's HTTP/2 client, kept when it was replaced: a stream may have
/// 2 MiB in flight from the endpoint, the connection 5 MiB.
const STREAM_WINDOW: u32 = 2 * 1024 * 1024;
const CONN_WINDOW: u32 = 5 * 1024 * 1024;
const MAX_FRAME: u32 = 16 * 1024;
const MAX_SEND_BUFFER: usize = 1024 * 1024;
const MAX_HEADER_LIST: u32 = 16 * 1024;

/// How much of a request's body is queued on its stream before the endpoint's window has room
/// for it (a new stream has none until its HEADERS are written): HTTP/2's initial window, what
/// the endpoint accepts at once anyway. Past it, each part waits for room.
const UNWINDOWED: u64 = 65_535;

/// The streams an HTTP/2 connection carries now, how many its server allows, and whether it
/// still runs.
#[derive(Debug)]
pub(crate) struct H2Load {
    pub(crate) open: AtomicUsize,
    /// The server's limit, as the connection's task last saw it (after every turn).
    pub(crate) max: AtomicUsize,
    /// An answer came on the connection, so its server's SETTINGS (sent first) are in.
    pub(crate) known: AtomicBool,
    /// The connection takes no new streams: its task ended, or a request found it refusing them
    /// (the server sent GOAWAY).
    pub(crate) closed: AtomicBool,
    /// Whether its TLS handshake resumed a session; `None` for h2c.
    pub(crate) tls_resumed: Option<bool>,
}

/// How a connection PINGs its endpoint (`keepalive.ping_interval`, `ping_timeout`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Keepalive {
    pub(crate) interval: Duration,
    pub(crate) timeout: Duration,
}

/// Starts HTTP/2 on `io`: the connection's preface and SETTINGS, then its task. `max_streams`:
/// the limit to keep to until the server's SETTINGS say (the one its other connections have).
pub(crate) async fn handshake(
    io: UpstreamIo,
    max_streams: Option<usize>,
    keepalive: Option<Keepalive>,
) -> Result<(SendRequest<Bytes>, Arc<H2Load>), h2::Error> {
    let read_ms = Arc::new(AtomicU64::new(gatehouse_clock::now_ms()));
    let tls_resumed = io.tls_resumed();
    let io = H2Io { io, read_ms: read_ms.clone() };
    let mut builder = h2::client::Builder::new();
    builder
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONN_WINDOW)
        .max_frame_size(MAX_FRAME)
        .max_header_list_size(MAX_HEADER_LIST)
        .max_send_buffer_size(MAX_SEND_BUFFER)
        .enable_push(false);
    if let Some(max) = max_streams {
        // No more streams before the server's SETTINGS come: one over its limit would be
        // refused (REFUSED_STREAM) and fail its request.
        builder.initial_max_send_streams(max);
    }
    let (sender, conn) = builder.handshake::<_, Bytes>(io).await?;
    let load = Arc::new(H2Load {
        open: AtomicUsize::new(0),
        max: AtomicUsize::new(max_streams.unwrap_or_else(|| conn.max_concurrent_send_streams())),
        known: AtomicBool::new(false),
        closed: AtomicBool::new(false),
        tls_resumed,
    });
    tokio::spawn(Drive::new(conn, load.clone(), keepalive, read_ms));
    Ok((sender, load))
}

/// The connection under h2: the endpoint's socket or TLS, noting when it last read something
/// (for the keepalive PING).
struct H2Io {
    io: UpstreamIo,
    read_ms: Arc<AtomicU64>,
}

impl AsyncRead for H2Io {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.io).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.read_ms.store(gatehouse_clock::now_ms(), Relaxed);
        }
        polled
    }
}

impl AsyncWrite for H2Io {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// A connection's task: h2's connection future, the server's stream limit published after every
/// turn, and the keepalive PING.
struct Drive {
    conn: Connection<H2Io, Bytes>,
    load: Arc<H2Load>,
    ping: Option<Ping>,
}

/// The keepalive PING of a connection: sent when the endpoint has said nothing for the interval
/// while streams are open; unanswered within the timeout, it closes the connection.
struct Ping {
    keepalive: Keepalive,
    pong: h2::PingPong,
    read_ms: Arc<AtomicU64>,
    /// When the PING in flight went, if one is.
    sent_ms: Option<u64>,
    /// Armed while streams are open (a connection with none is not PINGed).
    timer: gatehouse_clock::LazyDeadline,
}

impl Drive {
    fn new(
        mut conn: Connection<H2Io, Bytes>,
        load: Arc<H2Load>,
        keepalive: Option<Keepalive>,
        read_ms: Arc<AtomicU64>,
    ) -> Self {
        let ping = match (keepalive, conn.ping_pong()) {
            (Some(keepalive), Some(pong)) => {
                Some(Ping { keepalive, pong, read_ms, sent_ms: None, timer: gatehouse_clock::LazyDeadline::default() })
            }
            _ => None,
        };
        Drive { conn, load, ping }
    }
}

impl Future for Drive {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.conn).poll(cx);
        this.load.max.store(this.conn.max_concurrent_send_streams(), Relaxed);
        let polled = match polled {
            Poll::Pending => match this.ping.as_mut().map(|p| p.poll(cx, this.load.open.load(Relaxed) > 0)) {
                Some(Err(())) => {
                    tracing::debug!("HTTP/2 upstream did not answer a PING in time; closing");
                    Poll::Ready(Ok(()))
                }
                _ => Poll::Pending,
            },
            ready => ready,
        };
        match polled {
            Poll::Pending => Poll::Pending,
            Poll::Ready(result) => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "HTTP/2 upstream connection ended");
                }
                this.load.closed.store(true, Relaxed);
                Poll::Ready(())
            }
        }
    }
}

impl Ping {
    /// Sends a PING when due, reads its answer; `Err` when the answer is late.
    fn poll(&mut self, cx: &mut Context<'_>, busy: bool) -> Result<(), ()> {
        loop {
            if let Some(sent_ms) = self.sent_ms {
                match self.pong.poll_pong(cx) {
                    Poll::Ready(Ok(_)) => self.sent_ms = None,
                    Poll::Ready(Err(_)) => return Err(()),
                    Poll::Pending => {
                        let late = sent_ms.saturating_add(gatehouse_clock::millis(self.keepalive.timeout));
                        return if self.timer.expired(cx, late) { Err(()) } else { Ok(()) };
                    }
                }
            }
            if !busy {
                // Looked at again when a stream opens (h2 runs the connection's task then).
                return Ok(());
            }
            let due = self.read_ms.load(Relaxed).saturating_add(gatehouse_clock::millis(self.keepalive.interval));
            if !self.timer.expired(cx, due) {
                return Ok(());
            }
            if self.pong.send_ping(h2::Ping::opaque()).is_err() {
                return Err(());
            }
            self.sent_ms = Some(gatehouse_clock::now_ms());
        }
    }
}

/// What sending a request's body came to.
pub(crate) enum Pumped {
    /// All of it went (or the endpoint stopped taking it: it reset the stream, which the answer
    /// reports).
    Done,
    /// The client's body failed: the stream was reset.
    Failed(UpstreamError),
}

/// A request's body being sent on its stream: each part as it comes from the client, once the
/// stream's window has room (the first [`UNWINDOWED`] bytes without waiting), trailers at the end.
pub(crate) struct Pump {
    body: RequestBody,
    send: SendStream<Bytes>,
    queued: u64,
}

impl Pump {
    pub(crate) fn new(body: RequestBody, send: SendStream<Bytes>) -> Pump {
        Pump { body, send, queued: 0 }
    }

    /// When the body's last part came from the client.
    pub(crate) fn last_ms(&self) -> u64 {
        self.body.last_ms()
    }

    pub(crate) fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Pumped> {
        use http_body::Body as _;
        loop {
            if self.queued >= UNWINDOWED {
                self.send.reserve_capacity(1);
                if self.send.capacity() == 0 {
                    match self.send.poll_capacity(cx) {
                        Poll::Ready(Some(Ok(0))) => continue,
                        Poll::Ready(Some(Ok(_))) => {}
                        // The stream no longer sends: reset, or closed by the endpoint.
                        Poll::Ready(Some(Err(_)) | None) => return Poll::Ready(Pumped::Done),
                        Poll::Pending => return self.reset_meanwhile(cx),
                    }
                }
            }
            let frame = match Pin::new(&mut self.body).poll_frame(cx) {
                Poll::Pending => return self.reset_meanwhile(cx),
                Poll::Ready(frame) => frame,
            };
            let sent = match frame {
                None => self.send.send_data(Bytes::new(), true).map(|()| true),
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        self.queued = self.queued.saturating_add(data.len() as u64);
                        let end = self.body.is_end_stream();
                        self.send.send_data(data, end).map(|()| end)
                    }
                    Err(frame) => match frame.into_trailers() {
                        Ok(trailers) => {
                            self.send.reserve_capacity(0);
                            self.send.send_trailers(trailers).map(|()| true)
                        }
                        Err(_) => Ok(false),
                    },
                },
                Some(Err(e)) => {
                    self.send.send_reset(Reason::CANCEL);
                    let error = if e.is::<crate::BodyTooLarge>() {
                        UpstreamError::BodyTooLarge
                    } else if e.is::<crate::BodyTimeout>() {
                        UpstreamError::ClientTimeout
                    } else {
                        UpstreamError::ClientBody(e)
                    };
                    return Poll::Ready(Pumped::Failed(error));
                }
            };
            match sent {
                Ok(false) => {}
                // Sent whole; or the stream is gone, which its answer tells.
                Ok(true) | Err(_) => return Poll::Ready(Pumped::Done),
            }
        }
    }

    /// Waiting on the client or the window: an endpoint that resets the stream meanwhile (it has
    /// answered, or refuses the rest) ends the sending.
    fn reset_meanwhile(&mut self, cx: &mut Context<'_>) -> Poll<Pumped> {
        match self.send.poll_reset(cx) {
            Poll::Ready(_) => Poll::Ready(Pumped::Done),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Sends the rest from a task of its own (the answer's head came first), which stops when
    /// the answer is dropped.
    pub(crate) fn spawn(mut self) -> PumpTask {
        let task = tokio::spawn(std::future::poll_fn(move |cx| match self.poll(cx) {
            Poll::Ready(Pumped::Failed(e)) => {
                tracing::debug!(error = %e, "request body to HTTP/2 upstream failed after the answer began");
                Poll::Ready(())
            }
            Poll::Ready(Pumped::Done) => Poll::Ready(()),
            Poll::Pending => Poll::Pending,
        }));
        PumpTask(task.abort_handle())
    }
}

/// The task sending the rest of a request's body; aborted (resetting the stream) when dropped.
#[derive(Debug)]
pub(crate) struct PumpTask(tokio::task::AbortHandle);

impl Drop for PumpTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// An answer's body as read from its stream: data (its room given back to the endpoint's window
/// as it is taken), then trailers. The frames of a stream that arrived in one read come as one
/// piece (the vendored h2 merges them, vendor/h2/PATCH.md).
#[derive(Debug)]
pub(crate) struct H2Body {
    recv: RecvStream,
    /// The data is all read: trailers, or the end, come next.
    data_done: bool,
    /// What `content-length` says is left, when it is given.
    remaining: Option<u64>,
    /// The request's body still being sent.
    _pump: Option<PumpTask>,
}

impl H2Body {
    pub(crate) fn new(recv: RecvStream, content_length: Option<u64>, pump: Option<PumpTask>) -> Self {
        H2Body { recv, data_done: false, remaining: content_length, _pump: pump }
    }

    pub(crate) fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, h2::Error>>> {
        if !self.data_done {
            match self.recv.poll_data(cx) {
                Poll::Ready(Some(Ok(data))) => {
                    let _ = self.recv.flow_control().release_capacity(data.len());
                    if let Some(left) = self.remaining.as_mut() {
                        *left = left.saturating_sub(data.len() as u64);
                    }
                    return Poll::Ready(Some(Ok(http_body::Frame::data(data))));
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => self.data_done = true,
                Poll::Pending => return Poll::Pending,
            }
        }
        match self.recv.poll_trailers(cx) {
            Poll::Ready(Ok(Some(trailers))) => Poll::Ready(Some(Ok(http_body::Frame::trailers(trailers)))),
            Poll::Ready(Ok(None)) => Poll::Ready(None),
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e))),
            Poll::Pending => Poll::Pending,
        }
    }

    pub(crate) fn is_end_stream(&self) -> bool {
        self.recv.is_end_stream()
    }

    pub(crate) fn size_hint(&self) -> http_body::SizeHint {
        match self.remaining {
            Some(n) => http_body::SizeHint::with_exact(n),
            None => http_body::SizeHint::default(),
        }
    }
}
