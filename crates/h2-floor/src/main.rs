//! `gatehouse-h2-floor`: the floor of an HTTP/2 proxy built on the h2 crate, as a reference for
//! `bench/grpc.sh` (target `h2-floor`).
//!
//! It does what every proxy of that bench does per call and nothing more: takes a stream from an
//! h2c client connection, adds the same four forwarding headers (X-Forwarded-For, X-Real-IP,
//! X-Forwarded-Proto, a fresh X-Request-Id, echoed in the answer), opens a stream on one
//! multiplexed h2c connection to the backend, and passes the request's and the answer's DATA
//! frames and trailers on as they come. One thread, one task per connection and per call, on the
//! same tokio and (vendored) h2 as Gatehouse. No routing, limits, timeouts, metrics, logs, health
//! or back-pressure beyond HTTP/2's windows: it is not a proxy to run, it is what Gatehouse's own
//! HTTP/2 path costs at the least while it is built on h2 — the bench's measure of how much of
//! a proxy's CPU per call the library leaves to the rest.

use bytes::Bytes;
use clap::Parser;
use h2::{client, server, RecvStream, SendStream};
use http::{HeaderValue, Request, Response};
use std::cell::Cell;
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

thread_local!(static NEXT_ID: Cell<u64> = const { Cell::new(0) });

/// A fresh request id per call, 32 hex digits like Gatehouse's (a constant one would be indexed by
/// HPACK after its first use and cost less than any real proxy's).
fn request_id() -> HeaderValue {
    let n = NEXT_ID.with(|c| {
        let n = c.get().wrapping_add(1);
        c.set(n);
        n
    });
    let id = format!("{:016x}{:016x}", n.wrapping_mul(0x9e37_79b9_7f4a_7c15), n);
    HeaderValue::from_str(&id).unwrap_or(HeaderValue::from_static("0"))
}

/// Passes a stream's DATA frames on as they come (their room given back as they leave), then its
/// trailers or its end.
async fn pipe(mut from: RecvStream, mut to: SendStream<Bytes>) -> Result<(), h2::Error> {
    while let Some(data) = from.data().await {
        let data = data?;
        let n = data.len();
        to.send_data(data, false)?;
        from.flow_control().release_capacity(n)?;
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
    let id = request_id();
    let headers = up.headers_mut();
    headers.insert("x-forwarded-for", peer.clone());
    headers.insert("x-real-ip", peer);
    headers.insert("x-forwarded-proto", HeaderValue::from_static("http"));
    headers.insert("x-request-id", id.clone());
    let end = body.is_end_stream();
    let mut backend = backend.ready().await?;
    let (answer, send) = backend.send_request(up, end)?;
    let request = async move {
        if !end {
            pipe(body, send).await?;
        }
        Ok::<_, h2::Error>(())
    };
    let response = async move {
        let (mut parts, body) = answer.await?.into_parts();
        parts.headers.insert("x-request-id", id);
        let end = body.is_end_stream();
        let send = respond.send_response(Response::from_parts(parts, ()), end)?;
        if !end {
            pipe(body, send).await?;
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
        .handshake::<_, Bytes>(tcp)
        .await
    {
        Ok(conn) => conn,
        Err(_) => return,
    };
    while let Some(Ok((req, respond))) = conn.accept().await {
        let (backend, peer) = (backend.clone(), peer.clone());
        tokio::spawn(async move {
            let _ = call(backend, req, respond, peer).await;
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
            .handshake::<_, Bytes>(tcp)
            .await?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                eprintln!("gatehouse-h2-floor: backend connection ended: {e}");
                std::process::exit(1);
            }
        });
        let listener = TcpListener::bind(args.listen).await?;
        loop {
            let (tcp, peer) = listener.accept().await?;
            tcp.set_nodelay(true)?;
            tokio::spawn(serve(tcp, peer, backend.clone(), args.max_streams));
        }
    })
}
