//! HTTP/2 connections (h2c, and TLS with ALPN `h2`): hyper's server on the connection, each
//! request through the request path with the connection's busy mark on its answer, and WebSockets
//! over HTTP/2 (RFC 8441) spliced with the endpoint's HTTP/1.1 upgrade.

use crate::io::{BusyGuard, ConnIo, ConnState, StallMark};
use crate::serve::{drained, ServeContext};
use crate::transport::Transport;
use bytes::{Bytes, BytesMut};
use gatehouse_clock::ClockScoped;
use gatehouse_config::Listener;
use gatehouse_proxy::error::ProxyError;
use gatehouse_proxy::{ConnInfo, ResponseBody, Shared};
use http_body::{Body, Frame, SizeHint};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Response bytes an HTTP/2 stream may hold before its client takes them: with every stream open,
/// a client that stops reading pins at most `http2_max_concurrent_streams` times this (16 MiB at
/// the default 256; hyper's own default, 400 KiB, would be 100 MiB).
const H2_SEND_BUFFER: usize = 64 << 10;

pub(crate) async fn serve_h2(
    stream: Transport,
    prefix: Bytes,
    info: Arc<ConnInfo>,
    config: Arc<Listener>,
    ctx: ServeContext,
) {
    let shared = ctx.shared.clone();
    let state = Arc::new(ConnState::new());
    let io =
        TokioIo::new(ConnIo::new(stream, prefix, state.clone(), config.keepalive_timeout.0, config.send_timeout.0));
    let conn_state = state.clone();
    let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
        let guard = BusyGuard::new(state.clone());
        let shared = shared.clone();
        let info = info.clone();
        async move {
            if req.method() == http::Method::CONNECT && is_websocket(&req) {
                return Ok(ClockScoped(Box::pin(websocket(shared, req, info, guard))).await);
            }
            // Boxed: hyper spawns this future as the stream's task, and a task's future is moved
            // (copied) several times as it is spawned and finished; the request path's state is
            // kilobytes, a box is a pointer.
            let resp = ClockScoped(Box::pin(gatehouse_proxy::handle(shared, req, info))).await;
            Ok::<_, Infallible>(resp.map(|inner| TrackedBody::new(inner, guard)))
        }
    });
    let mut drain = ctx.drain.clone();
    let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        .max_concurrent_streams(config.http2_max_concurrent_streams)
        .keep_alive_interval(Some(config.http2_ping_interval.0).filter(|d| !d.is_zero()))
        .keep_alive_timeout(config.http2_ping_timeout.0)
        .max_header_list_size(u32::try_from(config.max_header_bytes.0).unwrap_or(u32::MAX))
        .max_send_buf_size(H2_SEND_BUFFER)
        // RFC 8441: WebSockets over this connection's streams.
        .enable_connect_protocol()
        .serve_connection(io, service);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = drained(&mut drain) => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
    if let Some(offence) = conn_state.offence() {
        ctx.shared.stats.h2_offender(offence);
    }
    if conn_state.send_timed_out.load(std::sync::atomic::Ordering::Relaxed) {
        ctx.shared.stats.send_timeouts.inc();
    }
}

/// Whether an HTTP/2 CONNECT is RFC 8441's extended CONNECT for a WebSocket.
fn is_websocket<B>(req: &http::Request<B>) -> bool {
    req.extensions().get::<hyper::ext::Protocol>().is_some_and(|p| p.as_str().eq_ignore_ascii_case("websocket"))
}

/// A WebSocket over an HTTP/2 stream (RFC 8441): forwarded as the HTTP/1.1 upgrade it stands
/// for; when the endpoint switches, the client gets `200` and the stream is spliced with the
/// endpoint's connection in a task of its own, which keeps the connection busy while it lasts.
async fn websocket(
    shared: Arc<Shared>,
    mut req: http::Request<hyper::body::Incoming>,
    info: Arc<ConnInfo>,
    guard: BusyGuard,
) -> http::Response<TrackedBody> {
    let client = hyper::upgrade::on(&mut req);
    let key = gatehouse_proxy::websocket::to_upgrade(&mut req);
    let resp = gatehouse_proxy::handle(shared, req, info).await;
    if resp.status() != http::StatusCode::SWITCHING_PROTOCOLS {
        // A refusal, or an endpoint that did not switch: the client sees it as it is.
        return resp.map(|inner| TrackedBody::new(inner, guard));
    }
    let (mut parts, mut body) = resp.into_parts();
    let upstream = body.take_upgrade();
    let (upstream, early) = match upstream {
        Some(up) if gatehouse_proxy::websocket::accepts(&parts.headers, &key) => up,
        _ => {
            let refused =
                ProxyError::BadUpstreamAnswer("a WebSocket handshake answer that does not accept the key sent");
            return refused.into_response().map(|inner| TrackedBody::new(inner, guard));
        }
    };
    gatehouse_proxy::websocket::to_connect_answer(&mut parts);
    // The answer's (empty) body is dropped once hyper has sent the head; the tunnel's guard
    // stays.
    let answer_guard = BusyGuard::new(guard.0.clone());
    tokio::spawn(async move {
        let _busy = guard;
        match client.await {
            Ok(client) => tunnel_h2(TokioIo::new(client), upstream, early).await,
            Err(e) => tracing::debug!(error = %e, "the client's stream ended before the WebSocket began"),
        }
    });
    // The body is empty: hyper sends the head and makes the stream the client's side.
    http::Response::from_parts(parts, TrackedBody::new(ResponseBody::empty(), answer_guard))
}

/// Splices a WebSocket's HTTP/2 stream with the endpoint's connection until either side ends.
async fn tunnel_h2<C, U>(mut client: C, mut upstream: U, early: Bytes)
where
    C: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    U: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::AsyncWriteExt;
    if !early.is_empty() && client.write_all(&early).await.is_err() {
        return;
    }
    if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
        tracing::debug!(error = %e, "WebSocket over HTTP/2 ended");
    }
}

/// The response body with the connection's busy mark, released when the body is done, and its
/// part in the connection's `send_timeout` (`StallMark`).
struct TrackedBody {
    inner: ResponseBody,
    guard: BusyGuard,
    stall: StallMark,
    /// What the body gave after the data gathered into the last frame (trailers, an error), for
    /// the next poll.
    held: Option<Box<Polled>>,
}

type Polled = Result<Frame<Bytes>, Box<dyn std::error::Error + Send + Sync>>;

/// The most data gathered into one frame for the client (see [`TrackedBody::gather`]).
const GATHER_UP_TO: usize = 32 * 1024;

/// Data of at least this size goes to the client as it comes: a write of its own costs less than
/// copying it into a larger piece.
const GATHER_BELOW: usize = 8 * 1024;

impl TrackedBody {
    fn new(inner: ResponseBody, guard: BusyGuard) -> Self {
        let mut stall = StallMark::default();
        if !inner.is_end_stream() {
            // The head goes to the client now; the body waits until hyper asks for it.
            stall.handed(&guard.0);
        }
        TrackedBody { inner, guard, stall, held: None }
    }

    /// `first` and the data the body has ready after it, as one frame. hyper sends a stream's
    /// next data only once the connection has written the last, so data read from the upstream
    /// in one go (an HTTP/2 upstream's frames, a gRPC stream's messages) would otherwise go to
    /// the client one frame per write. Only what is ready is taken: nothing waits. Used for
    /// pieces under [`GATHER_BELOW`] only.
    fn gather(&mut self, first: Bytes, cx: &mut Context<'_>) -> Bytes {
        let mut gathered: Option<BytesMut> = None;
        while gathered.as_ref().map_or(first.len(), |g| g.len()) < GATHER_UP_TO && !self.inner.is_end_stream() {
            match Pin::new(&mut self.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => gathered
                        .get_or_insert_with(|| {
                            let mut g = BytesMut::with_capacity(GATHER_UP_TO.max(first.len() + data.len()));
                            g.extend_from_slice(&first);
                            g
                        })
                        .extend_from_slice(&data),
                    Err(other) => {
                        self.held = Some(Box::new(Ok(other)));
                        break;
                    }
                },
                Poll::Ready(Some(Err(e))) => {
                    self.held = Some(Box::new(Err(e)));
                    break;
                }
                Poll::Ready(None) | Poll::Pending => break,
            }
        }
        gathered.map_or(first, BytesMut::freeze)
    }
}

impl Drop for TrackedBody {
    fn drop(&mut self) {
        self.stall.release(&self.guard.0);
    }
}

impl Body for TrackedBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        this.stall.asked(&this.guard.0);
        if let Some(held) = this.held.take() {
            return Poll::Ready(Some(*held));
        }
        let mut frame = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(f))) = frame {
            frame = Poll::Ready(Some(Ok(match f.into_data() {
                Ok(data) if data.len() < GATHER_BELOW && !this.inner.is_end_stream() => {
                    Frame::data(this.gather(data, cx))
                }
                Ok(data) => Frame::data(data),
                Err(other) => other,
            })));
        }
        if matches!(&frame, Poll::Ready(Some(Ok(f))) if f.is_data()) && !this.is_end_stream() {
            this.stall.handed(&this.guard.0);
        }
        frame
    }
    fn is_end_stream(&self) -> bool {
        self.held.is_none() && self.inner.is_end_stream()
    }
    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
