//! Accept stage, `proxy_protocol` listeners: who may connect (the trusted balancers, checked at
//! accept), and the header each of their connections opens with, read under
//! `header_read_timeout` without handing a byte of it to the next stage, nor taking one of what
//! follows from it.
//!
//! ```text
//! accept ─► peer trusted? ── no ─► close (refused: untrusted)
//!             │ yes
//!             ▼
//!           header ── bad, late, closed ─► close (refused: bad_header, timeout, closed)
//!             │ v1/v2 PROXY: the client is the header's source
//!             │ v2 LOCAL, v1 UNKNOWN: the client is the peer (the balancer itself)
//!             ▼
//!           max_connections_per_ip by the client's address ─► TLS handshake / sniff / HTTP
//! ```
//!
//! A plain listener reads the header greedily into a pooled buffer, and what arrived after it is
//! the prefix the sniff and the HTTP/1.x server go on with (no extra system call). A TLS listener
//! hands the socket itself to the handshake, so the header is peeked and only its own bytes are
//! taken off the socket.

use crate::first_bytes::{read_until, Undecided};
use crate::h1::pool;
use crate::per_ip::PerIpLimit;
use crate::proxy_header::{self, HeaderError, Parsed, ProxyHeader, MAX_HEADER};
use crate::serve::{due, serve_connection, serve_tls, Admitted, ServeContext};
use bytes::{Buf, BytesMut};
use gatehouse_clock::TaskDeadline;
use gatehouse_config::{IpNet, Listener, ProxyProtocol};
use gatehouse_telemetry::ProxyRefusal;
use gatehouse_tls::TlsAcceptor;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::task::Poll;
use tokio::io::ReadBuf;
use tokio::net::TcpStream;

/// The balancers a listener accepts connections from.
#[derive(Debug)]
pub(crate) struct Trusted(Box<[IpNet]>);

impl Trusted {
    pub(crate) fn new(config: &ProxyProtocol) -> Trusted {
        Trusted(config.networks().into())
    }

    /// Whether `peer` is one of them.
    pub(crate) fn admits(&self, peer: IpAddr) -> bool {
        self.0.iter().any(|net| net.contains(peer))
    }
}

/// Why a trusted peer's connection was closed before its header was whole.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The first bytes are not a header.
    BadHeader(HeaderError),
    /// No whole header by the deadline.
    Timeout,
    /// The peer ended the connection, or the socket failed, first.
    Closed,
}

impl Refused {
    /// The metric's reason.
    pub(crate) fn reason(&self) -> ProxyRefusal {
        match self {
            Refused::BadHeader(_) => ProxyRefusal::BadHeader,
            Refused::Timeout => ProxyRefusal::Timeout,
            Refused::Closed => ProxyRefusal::Closed,
        }
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::BadHeader(e) => e.fmt(f),
            Refused::Timeout => f.write_str("no whole PROXY protocol header within header_read_timeout"),
            Refused::Closed => f.write_str("closed before a whole PROXY protocol header"),
        }
    }
}

impl From<Undecided> for Refused {
    fn from(why: Undecided) -> Refused {
        match why {
            Undecided::Ended(_) | Undecided::Failed => Refused::Closed,
            Undecided::TimedOut => Refused::Timeout,
        }
    }
}

/// Serves a connection from a trusted balancer on a cleartext listener: the header, then the
/// connection as the listener serves any, from the client the header names, with what followed
/// the header.
pub(crate) async fn serve_proxied(
    stream: TcpStream,
    (peer, local): (SocketAddr, SocketAddr),
    config: Arc<Listener>,
    ctx: ServeContext,
    (mut admitted, per_ip): (Admitted, Option<Arc<PerIpLimit>>),
) {
    // The header must be whole within `header_read_timeout` of accept.
    let due = due(&config);
    let Some((client, prefix)) = admit(read_buffered(&stream, due).await, peer, &ctx, &mut admitted, per_ip) else {
        return;
    };
    serve_connection(stream, (client, local), config, ctx, admitted, prefix).await;
}

/// [`serve_proxied`] on a TLS listener: the handshake reads the socket after the header.
pub(crate) async fn serve_proxied_tls(
    stream: TcpStream,
    (peer, local): (SocketAddr, SocketAddr),
    config: Arc<Listener>,
    tls: Arc<TlsAcceptor>,
    ctx: ServeContext,
    (mut admitted, per_ip): (Admitted, Option<Arc<PerIpLimit>>),
) {
    let due = due(&config);
    let read = read_exact(&stream, due).await.map(|header| (header, BytesMut::new()));
    let Some((client, _)) = admit(read, peer, &ctx, &mut admitted, per_ip) else {
        return;
    };
    serve_tls(stream, (client, local), config, tls, ctx, admitted).await;
}

/// The client a header names (the peer itself for `LOCAL` and `UNKNOWN`) and what followed the
/// header, once it has its place under `max_connections_per_ip`; `None` (counted) when the
/// header failed or the client is over its limit.
fn admit(
    read: Result<(ProxyHeader, BytesMut), Refused>,
    peer: SocketAddr,
    ctx: &ServeContext,
    admitted: &mut Admitted,
    per_ip: Option<Arc<PerIpLimit>>,
) -> Option<(SocketAddr, BytesMut)> {
    let stats = &ctx.shared.stats;
    let (header, prefix) = match read {
        Ok(read) => read,
        Err(why) => {
            stats.proxy_protocol_refused(why.reason());
            tracing::debug!(%peer, reason = %why, "PROXY protocol: connection refused");
            return None;
        }
    };
    stats.proxy_protocol_header(header.version.number());
    let client = header.addresses.map_or(peer, |a| a.source);
    if let Some(table) = per_ip {
        match table.admit(client.ip()) {
            Ok(guard) => admitted._per_ip = guard,
            Err(_) => {
                stats.connections_over_ip_limit.inc();
                return None;
            }
        }
    }
    Some((client, prefix))
}

/// What the bytes so far come to, for [`read_until`]: `None` while more are needed.
fn decide(bytes: &[u8]) -> Option<Result<ProxyHeader, HeaderError>> {
    match proxy_header::parse(bytes) {
        Ok(Parsed::Incomplete) => None,
        Ok(Parsed::Complete(header)) => Some(Ok(header)),
        Err(e) => Some(Err(e)),
    }
}

/// Reads the header into a pooled buffer, by `due` (milliseconds of `gatehouse_clock::now_ms`).
/// The buffer comes back holding what arrived after the header.
pub(crate) async fn read_buffered(stream: &TcpStream, due: u64) -> Result<(ProxyHeader, BytesMut), Refused> {
    let (mut buf, header) = read_until(stream, due, BytesMut::new(), decide).await?;
    let header = header.map_err(Refused::BadHeader)?;
    buf.advance(header.len);
    Ok((header, buf))
}

/// Takes the header off the socket and nothing after it, by `due`: each round peeks at what has
/// arrived and takes what of it is header (all of it while the header is not whole), so the
/// socket's readiness is only cleared, and waited for, once everything there has been taken.
pub(crate) async fn read_exact(stream: &TcpStream, due: u64) -> Result<ProxyHeader, Refused> {
    let mut buf = pool::take_read();
    let result = read_exact_into(stream, due, &mut buf).await;
    pool::give_read(buf);
    result
}

async fn read_exact_into(stream: &TcpStream, due: u64, buf: &mut BytesMut) -> Result<ProxyHeader, Refused> {
    let mut deadline = TaskDeadline::default();
    // The header's bytes taken off the socket so far, at the front of `buf`.
    let mut taken = 0;
    loop {
        // Room to peek at: the buffer's, more only for a v2 header longer than it (which is
        // never longer than MAX_HEADER: `parse` refuses that).
        let end = buf.capacity().max(taken + 512).min(MAX_HEADER).max(taken + 1);
        buf.resize(end, 0);
        let peeked = std::future::poll_fn(|cx| match stream.poll_peek(cx, &mut ReadBuf::new(&mut buf[taken..])) {
            Poll::Ready(Ok(0) | Err(_)) => Poll::Ready(Err(Refused::Closed)),
            Poll::Ready(Ok(n)) => Poll::Ready(Ok(n)),
            Poll::Pending if deadline.expired(cx, due) => Poll::Ready(Err(Refused::Timeout)),
            Poll::Pending => Poll::Pending,
        })
        .await?;
        let header = match proxy_header::parse(&buf[..taken + peeked]) {
            Ok(Parsed::Complete(header)) => Some(header),
            Ok(Parsed::Incomplete) => None,
            Err(e) => return Err(Refused::BadHeader(e)),
        };
        // What was taken before was not a whole header, so a header is longer (`parse` is
        // monotone; the bound only keeps the slice below from panicking if it were not).
        let want = header.map_or(taken + peeked, |h| h.len).max(taken);
        // The bytes were there a moment ago and only this task reads the socket: the read takes
        // them (a short read just means another round).
        match stream.try_read(&mut buf[taken..want]) {
            Ok(0) => return Err(Refused::Closed),
            Ok(n) => taken += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => return Err(Refused::Closed),
        }
        if let Some(header) = header.filter(|h| h.len == taken) {
            buf.truncate(taken);
            return Ok(header);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const V1: &[u8] = b"PROXY TCP4 192.0.2.7 198.51.100.1 51000 443\r\n";
    /// What the client sends after the header: must reach the next stage whole.
    const NEXT: &[u8] = b"\x16\x03\x01\x00\x05hello";

    fn run(test: impl std::future::Future<Output = ()>) {
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime").block_on(test);
    }

    /// A connected pair on loopback: the client's end (no Nagle, so each write is a segment) and
    /// the server's.
    async fn pair() -> (TcpStream, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("address")).await.expect("connect");
        client.set_nodelay(true).expect("TCP_NODELAY");
        let (server, _) = listener.accept().await.expect("accept");
        (client, server)
    }

    fn due_in(ms: u64) -> u64 {
        gatehouse_clock::now_ms() + ms
    }

    /// Writes `pieces` one after another, each once the reader has had its chance to read.
    async fn send_in_pieces(client: &mut TcpStream, pieces: &[&[u8]]) {
        for piece in pieces {
            client.write_all(piece).await.expect("write");
            client.flush().await.expect("flush");
            tokio::task::yield_now().await;
        }
    }

    #[test]
    fn the_exact_read_takes_the_header_and_leaves_what_follows_in_the_socket() {
        run(async {
            let (mut client, mut server) = pair().await;
            let sent = [V1, NEXT].concat();
            let (a, rest) = sent.split_at(9);
            let (b, c) = rest.split_at(30);
            let reader = async { read_exact(&server, due_in(5_000)).await };
            let pieces = [a, b, c];
            let (header, ()) = tokio::join!(reader, send_in_pieces(&mut client, &pieces));
            let header = header.expect("header");
            assert_eq!(header.len, V1.len());
            assert_eq!(header.addresses.map(|a| a.source.to_string()).as_deref(), Some("192.0.2.7:51000"));
            let mut next = vec![0u8; NEXT.len()];
            server.read_exact(&mut next).await.expect("the bytes after the header");
            assert_eq!(next, NEXT);
        });
    }

    #[test]
    fn the_buffered_read_hands_on_what_followed_the_header() {
        run(async {
            let (mut client, server) = pair().await;
            let sent = [V1, b"GET / HTTP/1.1\r\n"].concat();
            let (a, b) = sent.split_at(20);
            let reader = async { read_buffered(&server, due_in(5_000)).await };
            let pieces = [a, b];
            let (read, ()) = tokio::join!(reader, send_in_pieces(&mut client, &pieces));
            let (header, prefix) = read.expect("header");
            assert_eq!(header.version, crate::proxy_header::Version::V1);
            assert_eq!(&prefix[..], b"GET / HTTP/1.1\r\n");
        });
    }

    #[test]
    fn a_late_header_times_out_and_an_early_close_or_garbage_is_refused() {
        run(async {
            for exact in [false, true] {
                let read = |server: TcpStream, due| async move {
                    if exact {
                        read_exact(&server, due).await.map(|_| ())
                    } else {
                        read_buffered(&server, due).await.map(|_| ())
                    }
                };
                let (mut client, server) = pair().await;
                client.write_all(&V1[..10]).await.expect("write");
                assert!(matches!(read(server, due_in(50)).await, Err(Refused::Timeout)), "exact: {exact}");
                let (mut client, server) = pair().await;
                client.write_all(&V1[..10]).await.expect("write");
                client.shutdown().await.expect("shutdown");
                assert!(matches!(read(server, due_in(5_000)).await, Err(Refused::Closed)), "exact: {exact}");
                let (mut client, server) = pair().await;
                client.write_all(b"GET / HTTP/1.1\r\n\r\n").await.expect("write");
                assert!(matches!(read(server, due_in(5_000)).await, Err(Refused::BadHeader(_))), "exact: {exact}");
            }
        });
    }

    #[test]
    fn trust_is_by_network_and_ipv4_mapped_peers_count_as_ipv4() {
        let pp = ProxyProtocol { trusted: vec!["10.0.0.0/8".into(), "2001:db8::1".into()] };
        let trusted = Trusted::new(&pp);
        for (ip, ok) in [("10.1.2.3", true), ("::ffff:10.1.2.3", true), ("11.0.0.1", false), ("2001:db8::1", true)] {
            assert_eq!(trusted.admits(ip.parse().expect("ip")), ok, "{ip}");
        }
    }
}
