//! `gatehouse-h2-floor`: a reference forwarder on the h2 crate for `bench/grpc.sh` (target
//! `h2-floor`).
//!
//! It does what every proxy of that bench does per call and little more: takes a stream from an
//! h2c client connection, adds the same four forwarding headers (X-Forwarded-For, X-Real-IP,
//! X-Forwarded-Proto, and a fresh X-Request-Id made by Gatehouse's own generator, echoed in the
//! answer), opens a stream on one multiplexed h2c connection to the backend, and passes the
//! request's and the answer's DATA frames and trailers on as they come, with the back-pressure
//! Gatehouse applies (the next piece is taken once the stream has room; a request's first 64 KiB
//! without waiting) and Gatehouse's windows and send buffers. One thread, one task per
//! connection and per call, on the same tokio and vendored h2 as Gatehouse. No routing, limits,
//! deadlines, timeouts, metrics, logs, health or flood guards: not a proxy to run, but what the
//! HTTP/2 path costs on that library with the gateway's own work left out.

use bytes::Bytes;
use clap::Parser;
use h2::{client, server, RecvStream, SendStream};
use http::header::HeaderName;
use http::{HeaderValue, Request, Response};
use std::net::SocketAddr;
use tokio::net::{TcpListener, TcpStream};

#[derive(Parser)]
#[command(about = "The least an h2-based gRPC proxy does per call (a benchmark reference)")]
struct Args {
    /// Address to listen on (h2c, prior knowledge).
    #[arg(long)]
    listen: SocketAddr,
    /// The backend (h2c), reached over one connection.
    #[arg(long)]
    backend: SocketAddr,
    /// Streams allowed per client connection.
    #[arg(long, default_value_t = 256)]
    max_streams: u32,
}

/// The windows Gatehouse opens: to a client, hyper's server defaults (1 MiB a stream, 1 MiB the
/// connection); to an endpoint, its HTTP/2 client's (2 MiB a stream, 5 MiB the connection).
const CLIENT_STREAM_WINDOW: u32 = 1024 * 1024;
const CLIENT_CONN_WINDOW: u32 = 1024 * 1024;
const BACKEND_STREAM_WINDOW: u32 = 2 * 1024 * 1024;
const BACKEND_CONN_WINDOW: u32 = 5 * 1024 * 1024;
/// What a stream may hold unsent, as Gatehouse's listener (64 KiB) and upstream client (1 MiB).
const CLIENT_SEND_BUFFER: usize = 64 * 1024;
const BACKEND_SEND_BUFFER: usize = 1024 * 1024;
/// A request's first bytes go before the backend's window is known, as Gatehouse's pump sends them.
const UNWINDOWED: usize = 65_535;

const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
const X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Passes a stream's DATA frames on as they come (their room given back as they leave), the last
/// one with END_STREAM, then its trailers if it has them. The next piece is taken only once the
/// stream has room to send (`free` bytes may go before that), as hyper's server and Gatehouse's
/// upstream pump do.
async fn pipe(mut from: RecvStream, mut to: SendStream<Bytes>, free: usize) -> Result<(), h2::Error> {
    let mut queued = 0;
    while let Some(data) = from.data().await {
        let data = data?;
        let n = data.len();
        let end = from.is_end_stream();
        to.send_data(data, end)?;
        from.flow_control().release_capacity(n)?;
        if end {
            return Ok(());
        }
        queued += n;
        if queued >= free {
            to.reserve_capacity(1);
            while to.capacity() == 0 {
                match std::future::poll_fn(|cx| to.poll_capacity(cx)).await {
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(e),
                    // The stream no longer sends (reset or closed by the peer).
                    None => return Ok(()),
                }
            }
        }
    }
    match from.trailers().await? {
        Some(trailers) => to.send_trailers(trailers),
        None => to.send_data(Bytes::new(), true),
    }
}

/// One call: the request on a new stream to the backend, the answer back to the client.
async fn call(
    backend: client::SendRequest<Bytes>,
    req: Request<RecvStream>,
    mut respond: server::SendResponse<Bytes>,
    peer: HeaderValue,
) -> Result<(), h2::Error> {
    let (parts, body) = req.into_parts();
    let mut up = Request::from_parts(parts, ());
    // Gatehouse's own ids, at its cost: 32 hex digits, never indexed by HPACK.
    let id = gatehouse_proxy::request_id::generate();
    let headers = up.headers_mut();
    headers.insert(X_FORWARDED_FOR, peer.clone());
    headers.insert(X_REAL_IP, peer);
    headers.insert(X_FORWARDED_PROTO, HeaderValue::from_static("http"));
    headers.insert(X_REQUEST_ID, id.clone());
    let end = body.is_end_stream();
    let mut backend = backend.ready().await?;
    let (answer, send) = backend.send_request(up, end)?;
    let request = async move {
        if !end {
            pipe(body, send, UNWINDOWED).await?;
        }
        Ok::<_, h2::Error>(())
    };
    let response = async move {
        let (mut parts, body) = answer.await?.into_parts();
        parts.headers.insert(X_REQUEST_ID, id);
        let end = body.is_end_stream();
        let send = respond.send_response(Response::from_parts(parts, ()), end)?;
        if !end {
            pipe(body, send, 0).await?;
        }
        Ok::<_, h2::Error>(())
    };
    let (sent, answered) = tokio::join!(request, response);
    sent.and(answered)
}

async fn serve(tcp: TcpStream, peer: SocketAddr, backend: client::SendRequest<Bytes>, max_streams: u32) {
    let peer = match HeaderValue::from_str(&peer.ip().to_string()) {
        Ok(v) => v,
        Err(_) => return,
    };
    let mut conn = match server::Builder::new()
        .initial_window_size(CLIENT_STREAM_WINDOW)
        .initial_connection_window_size(CLIENT_CONN_WINDOW)
        .max_concurrent_streams(max_streams)
        .max_send_buffer_size(CLIENT_SEND_BUFFER)
        .handshake::<_, Bytes>(tcp)
        .await
    {
        Ok(conn) => conn,
        Err(_) => return,
    };
    while let Some(Ok((req, respond))) = conn.accept().await {
        let (backend, peer) = (backend.clone(), peer.clone());
        tokio::spawn(async move {
            if let Err(e) = call(backend, req, respond, peer).await {
                eprintln!("gatehouse-h2-floor: call failed: {e}");
            }
        });
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async move {
        let tcp = TcpStream::connect(args.backend).await?;
        tcp.set_nodelay(true)?;
        let (backend, conn) = client::Builder::new()
            .initial_window_size(BACKEND_STREAM_WINDOW)
            .initial_connection_window_size(BACKEND_CONN_WINDOW)
            .max_send_buffer_size(BACKEND_SEND_BUFFER)
            .handshake::<_, Bytes>(tcp)
            .await?;
        tokio::spawn(async move {
            // Every call goes over this one connection: without it, nothing is left to measure.
            match conn.await {
                Ok(()) => eprintln!("gatehouse-h2-floor: the backend closed its connection"),
                Err(e) => eprintln!("gatehouse-h2-floor: backend connection failed: {e}"),
            }
            std::process::exit(1);
        });
        let listener = TcpListener::bind(args.listen).await?;
        loop {
            let (tcp, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    eprintln!("gatehouse-h2-floor: accept: {e}");
                    continue;
                }
            };
            if tcp.set_nodelay(true).is_err() {
                continue;
            }
            tokio::spawn(serve(tcp, peer, backend.clone(), args.max_streams));
        }
    })
}
