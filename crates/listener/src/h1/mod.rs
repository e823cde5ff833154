//! Serve stage for HTTP/1.x clients, on the connection's own task.
//!
//! ```text
//! idle ──bytes──► head ──parsed──► forward stage ──response──► write ──keep-alive──► idle
//!  │ keepalive_timeout   │ header_read_timeout        │ 101: tunnel to the endpoint
//!  └─ drain: close       └─ malformed: 400/431/501/505, close
//!     within 1 s, after one more request at most
//! ```
//! On a cleartext `auto` listener, a first request line that names another protocol than HTTP is
//! closed without an answer: its client may be HTTP/2 with a broken preface.
//! The read buffer is released whenever the connection is idle, so an idle keep-alive connection
//! costs its task and socket, not buffers. Deadlines use one lazy timer per connection.

mod body;
pub(crate) mod pool;
mod write;

use crate::serve::ServeContext;
use crate::transport::Transport;
use body::{lock, ClientBody, ReadState};
use bytes::{Bytes, BytesMut};
use gatehouse_clock::{now_ms, TaskDeadline};
use gatehouse_config::{Listener, ListenerProtocol};
use gatehouse_http1::framing::Framing;
use gatehouse_proxy::error::ProxyError;
use gatehouse_proxy::ConnInfo;
use http::{Method, StatusCode, Version};
use std::future::{poll_fn, Future};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;
use write::{write_all, write_response, SendTimedOut, Written};

/// Read buffer growth while reading a request head: most heads fit in one step.
const HEAD_STEP: usize = pool::READ_CAPACITY;

enum Wake {
    Bytes,
    Closed,
    Expired,
    Draining,
}

/// How long an idle keep-alive connection may still send one request once draining starts (the
/// answer closes it). Closing it at once would cut off a client whose next request is already on
/// the wire, which it cannot tell from a failure; a busy client sends within this time, an idle
/// one is closed at its end.
const DRAIN_IDLE_MS: u64 = 1_000;

/// Serves HTTP/1.x on `stream`; `prefix` is what was read while sniffing for HTTP/2 (a buffer from
/// the worker's pool, or none).
pub(crate) async fn serve(
    stream: Transport,
    prefix: BytesMut,
    info: Arc<ConnInfo>,
    config: Arc<Listener>,
    ctx: ServeContext,
) {
    let stream = Arc::new(stream);
    let state =
        Arc::new(Mutex::new(ReadState { rbuf: prefix, framing: Framing::default(), trailers: Default::default() }));
    let limits = Limits::of(&config);
    let sniffed = sniffed(&config, &info);
    let mut deadline = TaskDeadline::default();
    // The drain signal, waited for while idle. Its wait is polled at the first idle wait, and again
    // only once the signal has changed: in between, its registration stands and wakes the task. A
    // wait made and dropped per request would take the signal's lock twice a request and unlink
    // its entry from two other connections' (cold state on a busy worker).
    let mut drain_rx = ctx.drain.clone();
    let mut drain_wait = std::pin::pin!(drain_rx.changed());
    let mut drain_polled = false;
    let mut served = 0u64;
    let mut idle_since = now_ms();
    // Once draining, the time an idle connection is closed.
    let mut drain_close: Option<u64> = None;
    // The first head is due within the header timeout of the connection's start.
    let mut head_started = Some(idle_since);
    loop {
        // What a request's head yields is taken apart in blocks and helpers that end before the
        // next `.await`: a local that was borrowed keeps its place in the connection's state for
        // as long as it is in scope, awaits included, and an idle connection would carry it.
        let head = loop {
            match next_head(&state, &mut head_started, limits.max_head, served == 0 && sniffed) {
                Ok(Some(head)) => break head,
                Ok(None) => {}
                // Boxed, as the rare steps below: their state would size every connection's.
                Err(Refusal::Answer(status)) => {
                    return Box::pin(refuse(&stream, status, &ctx, limits.send_timeout)).await
                }
                Err(Refusal::Close) => return Box::pin(close(&stream)).await,
            }
            let due = match head_started {
                Some(t) => t + limits.header_ms,
                None => (idle_since + limits.idle_ms).min(drain_close.unwrap_or(u64::MAX)),
            };
            let read = poll_fn(|cx| poll_head_bytes(cx, &stream, &state, &mut deadline, due));
            let idle = head_started.is_none() && drain_close.is_none();
            // Ready once, when the signal is sent (or its sender is gone): the connection is then
            // never idle again.
            let drained = poll_fn(|cx| {
                if drain_polled && !ctx.drain.has_changed().unwrap_or(true) {
                    return Poll::Pending;
                }
                drain_polled = true;
                drain_wait.as_mut().poll(cx)
            });
            let wake = tokio::select! {
                biased;
                wake = read => wake,
                _ = drained, if idle => Wake::Draining,
            };
            match wake {
                Wake::Bytes => {}
                Wake::Draining => drain_close = Some(now_ms() + DRAIN_IDLE_MS),
                Wake::Closed | Wake::Expired => return,
            }
        };
        head_started = None;
        served += 1;
        let gatehouse_http1::RequestHead { request, framing, mut keep_alive, expect_continue } = head;
        if limits.max_requests > 0 && served >= limits.max_requests {
            keep_alive = false;
        }
        let (parts, head_request, http10) = split(request);
        if expect_continue
            && !framing.finished()
            && Box::pin(write_all(&stream, b"HTTP/1.1 100 Continue\r\n\r\n", limits.send_timeout)).await.is_err()
        {
            return;
        }
        lock(&state).framing = framing;
        let body = ClientBody { stream: stream.clone(), state: state.clone() };
        // Boxed, so the connection's task is small while idle: the request path's state exists only
        // while a request is in progress.
        let handler = gatehouse_proxy::handle(ctx.shared.clone(), http::Request::from_parts(parts, body), info.clone());
        let resp = Box::pin(handler).await;
        let discard = match unread_body(&state, *ctx.drain.borrow()) {
            Unread::None => false,
            Unread::Discard => true,
            Unread::Close => {
                keep_alive = false;
                false
            }
        };
        let mut wbuf = pool::take_write();
        let written =
            Box::pin(write_response(&stream, resp, head_request, http10, keep_alive, &mut wbuf, limits.send_timeout))
                .await;
        // Idle or closing, the connection keeps no write buffer.
        pool::give_write(wbuf);
        match written {
            Ok(Written::KeepAlive) if discard => {
                if !discard_body(&stream, &state).await {
                    return close(&stream).await;
                }
            }
            Ok(Written::KeepAlive) => {}
            Ok(Written::Close) => return finish(&stream, &state).await,
            Err(e) => {
                if SendTimedOut::is(&e) {
                    ctx.shared.stats.send_timeouts.inc();
                }
                return close(&stream).await;
            }
            Ok(Written::Switched(mut body)) => {
                let leftover = lock(&state).rbuf.split().freeze();
                if let Some((upstream, early)) = body.take_upgrade() {
                    drop(body);
                    // Boxed: only upgraded connections need its state.
                    Box::pin(tunnel(stream, leftover, upstream, early)).await;
                }
                return;
            }
        }
        idle_since = now_ms();
    }
}

/// The listener's limits on one connection, in the units the loop uses.
struct Limits {
    header_ms: u64,
    idle_ms: u64,
    max_head: usize,
    send_timeout: Duration,
    max_requests: u64,
}

impl Limits {
    fn of(config: &Listener) -> Self {
        Limits {
            header_ms: config.header_read_timeout.0.as_millis() as u64,
            idle_ms: config.keepalive_timeout.0.as_millis() as u64,
            max_head: usize::try_from(config.max_header_bytes.0).unwrap_or(usize::MAX),
            send_timeout: config.send_timeout.0,
            max_requests: config.max_requests_per_connection,
        }
    }
}

/// The next request head in the read buffer: `Ok(None)` while more bytes are needed, how to
/// refuse the request otherwise; `opening` when it is the first head of a connection whose
/// protocol was sniffed. An empty buffer (an idle connection) goes back to the worker's pool; the
/// first byte of a head starts its header timeout.
fn next_head(
    state: &Mutex<ReadState>,
    head_started: &mut Option<u64>,
    max_head: usize,
    opening: bool,
) -> Result<Option<gatehouse_http1::RequestHead>, Refusal> {
    let mut st = lock(state);
    if !st.rbuf.is_empty() {
        head_started.get_or_insert_with(now_ms);
        return gatehouse_http1::parse_request_head(&mut st.rbuf, max_head)
            .map_err(|status| refusal(status, opening, &st.rbuf));
    }
    if st.rbuf.capacity() > 0 {
        pool::give_read(std::mem::take(&mut st.rbuf));
    }
    Ok(None)
}

/// Reads what the client sent towards a head, taking a buffer from the worker's pool only once
/// the socket is readable; `due` is when waiting ends.
fn poll_head_bytes(
    cx: &mut std::task::Context<'_>,
    stream: &Transport,
    state: &Mutex<ReadState>,
    deadline: &mut TaskDeadline,
    due: u64,
) -> Poll<Wake> {
    let mut st = lock(state);
    if st.rbuf.capacity() == 0 && stream.poll_read_ready(cx).is_ready() {
        st.rbuf = pool::take_read();
    }
    match stream.poll_fill_by(&mut st.rbuf, HEAD_STEP, cx) {
        Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => Poll::Ready(Wake::Closed),
        Poll::Ready(Ok(_)) => Poll::Ready(Wake::Bytes),
        Poll::Pending => {
            // Readiness can be stale (it clears only when a read would block): a buffer taken
            // for nothing goes back, so an idle connection holds none.
            if st.rbuf.is_empty() && st.rbuf.capacity() > 0 {
                pool::give_read(std::mem::take(&mut st.rbuf));
            }
            if deadline.expired(cx, due) {
                Poll::Ready(Wake::Expired)
            } else {
                Poll::Pending
            }
        }
    }
}

/// What becomes of a request body the answer left unread.
enum Unread {
    /// Nothing was left.
    None,
    /// Small: read and dropped after answering, as nginx discards it, so the connection stays
    /// in step and open (a refusal: 401, 403, 413, 429 ...).
    Discard,
    /// Large, unbounded, or the node is draining: the connection closes after the answer.
    Close,
}

fn unread_body(state: &Mutex<ReadState>, draining: bool) -> Unread {
    if draining {
        return Unread::Close;
    }
    match lock(state).framing {
        f if f.finished() => Unread::None,
        Framing::Length(n) if n <= MAX_DISCARD => Unread::Discard,
        _ => Unread::Close,
    }
}

/// The request's parts, and whether it is a HEAD request and an HTTP/1.0 one.
fn split(request: http::Request<()>) -> (http::request::Parts, bool, bool) {
    let (parts, ()) = request.into_parts();
    let (head_request, http10) = (parts.method == Method::HEAD, parts.version == Version::HTTP_10);
    (parts, head_request, http10)
}

/// Largest unread request body read and dropped to keep a connection open after a refusal.
const MAX_DISCARD: u64 = 64 << 10;
/// How long the rest of such a body may take to arrive.
const DISCARD_TIME: Duration = Duration::from_secs(2);

/// Reads the rest of the current request's body and drops it; false when the client does not send
/// it in time or the connection fails.
async fn discard_body(stream: &Transport, state: &Mutex<ReadState>) -> bool {
    let read = poll_fn(|cx| {
        let mut st = lock(state);
        let st = &mut *st;
        loop {
            match st.framing.decode(&mut st.rbuf) {
                Err(_) => return Poll::Ready(false),
                Ok(Some(_)) => continue,
                Ok(None) if st.framing.finished() => return Poll::Ready(true),
                Ok(None) => {}
            }
            match stream.poll_fill(&mut st.rbuf, cx) {
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => return Poll::Ready(false),
                Poll::Ready(Ok(_)) => continue,
                Poll::Pending => return Poll::Pending,
            }
        }
    });
    tokio::time::timeout(DISCARD_TIME, read).await.unwrap_or(false)
}

/// How a request head that cannot be served is refused.
enum Refusal {
    /// With a short HTTP/1.1 error answer, then the connection is closed.
    Answer(StatusCode),
    /// By closing the connection without an answer.
    Close,
}

/// The refusal of a head refused with `status`; `opening` when it is the first of a connection
/// whose protocol was sniffed. Such an opening whose request line names another protocol than
/// HTTP gets no HTTP/1.x answer: its client speaks something else, maybe HTTP/2 with a broken
/// preface (h2spec's `INVALID CONNECTION PREFACE`), which RFC 9113 §3.4 makes a connection error.
fn refusal(status: StatusCode, opening: bool, head: &[u8]) -> Refusal {
    if opening && status == StatusCode::HTTP_VERSION_NOT_SUPPORTED && !gatehouse_http1::request::names_http(head) {
        Refusal::Close
    } else {
        Refusal::Answer(status)
    }
}

/// Whether the listener chose the connection's protocol from its first bytes (a cleartext `auto`
/// listener): it could then be an HTTP/2 client's.
fn sniffed(config: &Listener, info: &ConnInfo) -> bool {
    !info.tls && config.protocol == ListenerProtocol::Auto
}

/// Answers a request head that cannot be read with its error's response and closes the
/// connection.
async fn refuse(stream: &Transport, status: StatusCode, ctx: &ServeContext, send_timeout: Duration) {
    ctx.shared.stats.bad_requests.inc();
    let resp = ProxyError::HeadRefused(status).into_response();
    if write_all(stream, &write::encode_whole(&resp), send_timeout).await.is_ok() {
        close(stream).await;
    }
}

/// Closes the connection after a response that ends it. As nginx's lingering close: when the
/// request was read to its end and the client has sent nothing more, the socket is closed at once
/// (a FIN: with nothing unread the kernel has no reason to send a reset); otherwise [`close`].
async fn finish(stream: &Transport, state: &Mutex<ReadState>) {
    let clean = {
        let st = lock(state);
        st.rbuf.is_empty() && st.framing.finished()
    };
    if clean && !stream.unread_pending() {
        if let Transport::Tls(_) = stream {
            // close_notify, so the client can tell the end from a truncation.
            stream.shutdown_write().await;
        }
        return;
    }
    close(stream).await
}

/// Half-closes, then reads what the client already sent (bounded), so the client sees the end of
/// the response rather than a reset.
async fn close(stream: &Transport) {
    stream.shutdown_write().await;
    let mut sink = BytesMut::new();
    let drain = async {
        for _ in 0..16 {
            sink.clear();
            match poll_fn(|cx| stream.poll_fill(&mut sink, cx)).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), drain).await;
}

/// Splices the client connection with the endpoint's after a 101, until either side closes.
async fn tunnel<U>(client: Arc<Transport>, leftover: Bytes, mut upstream: U, early: Bytes)
where
    U: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let Ok(mut client) = Arc::try_unwrap(client) else {
        return;
    };
    use tokio::io::AsyncWriteExt;
    if !early.is_empty() && client.write_all(&early, false).await.is_err() {
        return;
    }
    if !leftover.is_empty() && upstream.write_all(&leftover).await.is_err() {
        return;
    }
    if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
        tracing::debug!(error = %e, "upgraded connection ended");
    }
}
