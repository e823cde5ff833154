//! How the HTTP/2 library the gateway runs on (h2, carried in `vendor/h2` with the patch of its
//! `PATCH.md`) writes and reads a connection: the answers of many streams go out together, a
//! client connection reads more than 8 KiB at a time, and a stream's DATA frames read together
//! are passed on as one piece. Both sides are hyper's, as in the gateway's listeners and upstream
//! pools (or h2's own server, to send frames as a gRPC server does), over an in-memory pipe that
//! counts the calls made on it.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};

/// What one end of the pipe saw.
#[derive(Default)]
struct Counts {
    /// Write calls that wrote something.
    writes: AtomicUsize,
    /// The most bytes one read returned.
    largest_read: AtomicUsize,
}

/// One end of the pipe, counting. It says it takes vectored writes, as a TCP socket does (h2
/// copies less into its buffer then), and writes one slice a call.
struct Counted {
    inner: DuplexStream,
    counts: Arc<Counts>,
}

impl AsyncRead for Counted {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let res = Pin::new(&mut self.inner).poll_read(cx, buf);
        self.counts.largest_read.fetch_max(buf.filled().len() - before, Relaxed);
        res
    }
}

impl AsyncWrite for Counted {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let res = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(res, Poll::Ready(Ok(n)) if n > 0) {
            self.counts.writes.fetch_add(1, Relaxed);
        }
        res
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let first = bufs.iter().find(|b| !b.is_empty()).map_or(&[][..], |b| &**b);
        self.poll_write(cx, first)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A pipe as large as everything the tests send, so no write waits for the reader.
fn pipe() -> (Counted, Arc<Counts>, Counted, Arc<Counts>) {
    let (a, b) = tokio::io::duplex(8 << 20);
    let (ca, cb) = (Arc::new(Counts::default()), Arc::new(Counts::default()));
    (Counted { inner: a, counts: ca.clone() }, ca, Counted { inner: b, counts: cb.clone() }, cb)
}

/// Serves answers of `size` bytes on `io`, as the gateway's HTTP/2 listener does.
fn serve(io: Counted, size: usize) {
    let body = Bytes::from(vec![b'a'; size]);
    tokio::spawn(async move {
        let service = service_fn(move |_req: http::Request<hyper::body::Incoming>| {
            let body = body.clone();
            async move { Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(body))) }
        });
        let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .serve_connection(TokioIo::new(io), service)
            .await;
    });
}

/// A client connection on `io`, as an upstream pool's.
async fn client(io: Counted) -> hyper::client::conn::http2::SendRequest<Full<Bytes>> {
    let (sender, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .handshake(TokioIo::new(io))
        .await
        .expect("HTTP/2 handshake");
    tokio::spawn(conn);
    sender
}

async fn get(mut sender: hyper::client::conn::http2::SendRequest<Full<Bytes>>) -> usize {
    let req = http::Request::get("http://test/").body(Full::new(Bytes::new())).expect("request");
    let resp = sender.send_request(req).await.expect("answer");
    resp.into_body().collect().await.expect("body").to_bytes().len()
}

/// `n` requests on as many streams at once, each answered with `size` bytes.
async fn get_at_once(sender: &hyper::client::conn::http2::SendRequest<Full<Bytes>>, n: usize, size: usize) {
    let calls: Vec<_> = (0..n).map(|_| tokio::spawn(get(sender.clone()))).collect();
    for call in calls {
        assert_eq!(call.await.expect("call"), size);
    }
}

#[tokio::test]
async fn the_answers_of_many_streams_go_out_in_few_writes() {
    const STREAMS: usize = 32;
    let (server_io, server, client_io, _) = pipe();
    serve(server_io, 1024);
    let sender = client(client_io).await;
    // The connection is up (SETTINGS exchanged) before the streams are counted.
    assert_eq!(get(sender.clone()).await, 1024);
    let before = server.writes.load(Relaxed);
    get_at_once(&sender, STREAMS, 1024).await;
    let writes = server.writes.load(Relaxed) - before;
    // Each answer is a HEADERS and a 1 KiB DATA frame. The published h2 writes out a DATA frame
    // of 256 bytes or more before it takes the next frame: at least one write per stream.
    assert!(writes <= STREAMS / 4, "{writes} writes for {STREAMS} answers of 1 KiB");
}

#[tokio::test]
async fn a_client_connection_reads_more_than_8_kib_at_a_time() {
    const STREAMS: usize = 64;
    let (server_io, _, client_io, seen) = pipe();
    serve(server_io, 1024);
    let sender = client(client_io).await;
    get_at_once(&sender, STREAMS, 1024).await;
    let largest = seen.largest_read.load(Relaxed);
    // 64 answers of 1 KiB frames were written at once. The published h2 reads into a buffer of
    // 8 KiB (it grows only for a frame larger than what is left).
    assert!(largest > 8 << 10, "the largest read was {largest} bytes");
}

#[tokio::test]
async fn a_streams_data_frames_read_together_come_as_one_piece() {
    const FRAMES: usize = 100;
    const SIZE: usize = 1024;
    let (server_io, _, client_io, _) = pipe();
    // A server that answers with FRAMES DATA frames of SIZE bytes, one per message as a gRPC
    // server sends a stream's messages, queued before the connection writes any of them, and
    // then trailers.
    tokio::spawn(async move {
        let mut conn = h2::server::handshake(server_io).await.expect("server handshake");
        if let Some(Ok((_req, mut respond))) = conn.accept().await {
            let mut send = respond.send_response(http::Response::new(()), false).expect("head");
            for i in 0..FRAMES {
                send.send_data(Bytes::from(vec![(i % 251) as u8; SIZE]), false).expect("data");
            }
            let mut trailers = http::HeaderMap::new();
            trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
            send.send_trailers(trailers).expect("trailers");
        }
        while let Some(Ok(_)) = conn.accept().await {}
    });
    let mut sender = client(client_io).await;
    let req = http::Request::get("http://test/").body(Full::new(Bytes::new())).expect("request");
    let mut body = sender.send_request(req).await.expect("answer").into_body();
    let (mut pieces, mut data, mut trailers) = (0, Vec::new(), None);
    while let Some(frame) = body.frame().await {
        let frame = frame.expect("frame");
        match frame.into_data() {
            Ok(piece) => {
                pieces += 1;
                data.extend_from_slice(&piece);
            }
            Err(frame) => trailers = frame.into_trailers().ok(),
        }
    }
    // Every byte, in order, and the trailers after them.
    let sent: Vec<u8> = (0..FRAMES).flat_map(|i| vec![(i % 251) as u8; SIZE]).collect();
    assert!(data == sent, "{} bytes received, {} sent, or not in order", data.len(), sent.len());
    assert_eq!(trailers.as_ref().and_then(|t| t.get("grpc-status")).map(|v| v.as_bytes()), Some(&b"0"[..]));
    // The published h2 passes on a piece per DATA frame: FRAMES of them. Merged, the 100 KiB come
    // in pieces of up to 16 KiB.
    assert!(pieces <= FRAMES / 8, "{pieces} pieces for {FRAMES} DATA frames of {SIZE} bytes");
}
