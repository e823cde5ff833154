//! A client connection's byte stream: a plain socket or TLS over one. The HTTP/1.1 server uses it
//! through `&self` (the request body is read while the connection waits to write the response);
//! the HTTP/2 server and upgrade tunnels use it as `AsyncRead + AsyncWrite`.

use bytes::BytesMut;
use gatehouse_http1::framing::poll_fill_by;
use gatehouse_tls::conn::{shut_write, try_send_last};
use gatehouse_tls::TlsConn;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A client connection's stream.
#[derive(Debug)]
pub(crate) enum Transport {
    Tcp(TcpStream, Nagle),
    Tls(Box<TlsConn>),
}

/// When a plain socket turns Nagle's algorithm off (`TCP_NODELAY`): before its second write.
///
/// Nagle's algorithm holds back a small segment only while an earlier small one is unacknowledged,
/// so a connection's first write always leaves at once, whatever its size. A client that sends one
/// request per connection, answered in one write, thus never needs the option, and the system call
/// that sets it is saved; from the second write on the socket behaves as if it was set at accept
/// (as nginx sets it when a connection turns keep-alive). TLS connections set it at accept: a
/// handshake writes more than once.
#[derive(Debug, Default)]
pub(crate) struct Nagle(AtomicU8);

impl Nagle {
    const FRESH: u8 = 0;
    const WROTE_ONCE: u8 = 1;
    const OFF: u8 = 2;

    /// One attempt to write to `socket`: Nagle's algorithm is turned off first if one write was
    /// made already, and the attempt counts as a write when it took bytes.
    fn write(&self, socket: &TcpStream, attempt: impl FnOnce(&TcpStream) -> io::Result<usize>) -> io::Result<usize> {
        self.before(socket);
        let result = attempt(socket);
        self.after(&result);
        result
    }

    /// [`Nagle::write`] for a poll.
    fn poll_write(
        &self,
        socket: &mut TcpStream,
        attempt: impl FnOnce(Pin<&mut TcpStream>) -> Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        self.before(socket);
        let poll = attempt(Pin::new(socket));
        if let Poll::Ready(result) = &poll {
            self.after(result);
        }
        poll
    }

    fn before(&self, socket: &TcpStream) {
        if self.0.load(Relaxed) == Self::WROTE_ONCE {
            let _ = socket.set_nodelay(true);
            self.0.store(Self::OFF, Relaxed);
        }
    }

    fn after(&self, result: &io::Result<usize>) {
        if self.0.load(Relaxed) == Self::FRESH && matches!(result, Ok(n) if *n > 0) {
            self.0.store(Self::WROTE_ONCE, Relaxed);
        }
    }
}

impl Transport {
    /// A plain connection.
    pub(crate) fn tcp(socket: TcpStream) -> Self {
        Transport::Tcp(socket, Nagle::default())
    }

    /// Whether the socket has bytes (TLS may also hold decrypted bytes already).
    pub(crate) fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            Transport::Tcp(s, _) => s.poll_read_ready(cx),
            Transport::Tls(t) => t.poll_read_ready(cx),
        }
    }

    /// Appends what can be read to `buf` (growing a plain socket's buffer by `step` when full);
    /// `Ok(0)` at the end of the stream.
    pub(crate) fn poll_fill_by(
        &self,
        buf: &mut BytesMut,
        step: usize,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<usize>> {
        match self {
            Transport::Tcp(s, _) => poll_fill_by(s, buf, step, cx),
            Transport::Tls(t) => t.poll_fill(buf, cx),
        }
    }

    /// [`Transport::poll_fill_by`] with the usual step.
    pub(crate) fn poll_fill(&self, buf: &mut BytesMut, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        self.poll_fill_by(buf, gatehouse_http1::framing::READ_CHUNK, cx)
    }

    /// Writes all of `buf` to the client. With `closing` (the last bytes before the connection
    /// closes) the sending side is ended after them, and they leave in one segment with the FIN
    /// (TLS: and with close_notify) rather than one segment each.
    pub(crate) async fn write_all(&self, mut buf: &[u8], closing: bool) -> io::Result<()> {
        match self {
            Transport::Tcp(s, nagle) => {
                while !buf.is_empty() {
                    s.writable().await?;
                    match nagle.write(s, |s| try_send(s, buf, closing)) {
                        Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                        Ok(n) => buf = &buf[n..],
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                        Err(e) => return Err(e),
                    }
                }
                if closing {
                    shut_write(s);
                }
                Ok(())
            }
            Transport::Tls(t) if closing => t.write_all_and_close(buf).await,
            Transport::Tls(t) => t.write_all(buf).await,
        }
    }

    /// Writes what the socket takes now without waiting: 0 when it would block (and always over
    /// TLS, whose writes go through its own buffer). With `closing`, as [`Transport::write_all`]
    /// once all of `buf` is taken.
    pub(crate) fn write_now(&self, buf: &[u8], closing: bool) -> io::Result<usize> {
        match self {
            Transport::Tcp(s, nagle) => match nagle.write(s, |s| try_send(s, buf, closing)) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
                Ok(n) if closing && n == buf.len() => {
                    shut_write(s);
                    Ok(n)
                }
                written => written,
            },
            Transport::Tls(_) => Ok(0),
        }
    }

    /// Whether the client sent bytes not read yet (for a connection about to close: a byte waiting
    /// in the socket may be consumed).
    pub(crate) fn unread_pending(&self) -> bool {
        match self {
            Transport::Tcp(s, _) => gatehouse_tls::conn::socket_unread(s),
            Transport::Tls(t) => t.unread_pending(),
        }
    }

    /// Ends the sending side (close_notify first on TLS); the receiving side stays open.
    pub(crate) async fn shutdown_write(&self) {
        match self {
            Transport::Tcp(s, _) => shut_write(s),
            Transport::Tls(t) => {
                let _ = std::future::poll_fn(|cx| t.poll_close(cx)).await;
            }
        }
    }
}

/// One non-blocking write; `last` (the FIN follows at once): see [`try_send_last`].
fn try_send(s: &TcpStream, buf: &[u8], last: bool) -> io::Result<usize> {
    if last {
        try_send_last(s, &[io::IoSlice::new(buf)])
    } else {
        s.try_write(buf)
    }
}

impl AsyncRead for Transport {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Tcp(s, _) => Pin::new(s).poll_read(cx, buf),
            Transport::Tls(t) => Pin::new(&mut **t).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Transport {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Tcp(s, nagle) => nagle.poll_write(s, |s| s.poll_write(cx, buf)),
            Transport::Tls(t) => Pin::new(&mut **t).poll_write(cx, buf),
        }
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Tcp(s, nagle) => nagle.poll_write(s, |s| s.poll_write_vectored(cx, bufs)),
            Transport::Tls(t) => Pin::new(&mut **t).poll_write_vectored(cx, bufs),
        }
    }
    fn is_write_vectored(&self) -> bool {
        match self {
            Transport::Tcp(s, _) => s.is_write_vectored(),
            Transport::Tls(t) => t.is_write_vectored(),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Tcp(s, _) => Pin::new(s).poll_flush(cx),
            Transport::Tls(t) => Pin::new(&mut **t).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Tcp(s, _) => Pin::new(s).poll_shutdown(cx),
            Transport::Tls(t) => Pin::new(&mut **t).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// A connected pair on loopback: the client's end, and the server's as a plain transport.
    fn pair() -> (std::net::TcpStream, Transport) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let client = std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        server.set_nonblocking(true).expect("non-blocking");
        (client, Transport::tcp(TcpStream::from_std(server).expect("register")))
    }

    async fn writable(t: &Transport) {
        match t {
            Transport::Tcp(s, _) => s.writable().await.expect("writable"),
            Transport::Tls(_) => unreachable!(),
        }
    }

    fn nodelay(t: &Transport) -> bool {
        match t {
            Transport::Tcp(s, _) => s.nodelay().expect("TCP_NODELAY"),
            Transport::Tls(_) => unreachable!(),
        }
    }

    #[test]
    fn nagle_is_turned_off_before_the_second_write_and_not_before() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async {
            let (mut client, server) = pair();
            writable(&server).await;
            assert!(!nodelay(&server), "a new socket starts with Nagle's algorithm on");
            assert_eq!(server.write_now(b"", false).expect("write"), 0);
            assert!(!nodelay(&server), "nothing taken is no write");
            assert_eq!(server.write_now(b"one ", false).expect("write"), 4);
            assert!(!nodelay(&server), "one write alone never needs TCP_NODELAY");
            server.write_all(b"two ", false).await.expect("write");
            assert!(nodelay(&server), "set before the second write");
            let mut io = server;
            tokio::io::AsyncWriteExt::write_all(&mut io, b"three").await.expect("write");
            assert!(nodelay(&io));
            let mut got = [0u8; 13];
            client.read_exact(&mut got).expect("read");
            assert_eq!(&got, b"one two three");
        });
    }

    #[test]
    fn the_async_write_path_counts_writes_too() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async {
            let (mut client, mut server) = pair();
            tokio::io::AsyncWriteExt::write_all(&mut server, b"a").await.expect("write");
            assert!(!nodelay(&server));
            let bufs = [io::IoSlice::new(b"b"), io::IoSlice::new(b"c")];
            let n =
                std::future::poll_fn(|cx| Pin::new(&mut server).poll_write_vectored(cx, &bufs)).await.expect("write");
            assert_eq!(n, 2);
            assert!(nodelay(&server));
            let mut got = [0u8; 3];
            client.read_exact(&mut got).expect("read");
            assert_eq!(&got, b"abc");
        });
    }

    /// Segments the socket has sent so far (`tcpi_segs_out` of `TCP_INFO`).
    fn segments_sent(s: &TcpStream) -> u32 {
        use std::os::fd::AsRawFd;
        // SAFETY: the descriptor is live for the call; `info` is a zeroed `tcp_info` (plain
        // integers, valid when zero) and `len` its exact size, which the kernel writes at most.
        // No safe binding reads TCP_INFO (socket2 and rustix do not).
        #[allow(unsafe_code)]
        let (rc, info) = unsafe {
            let mut info: libc::tcp_info = std::mem::zeroed();
            let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
            let rc = libc::getsockopt(
                s.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_INFO,
                std::ptr::from_mut(&mut info).cast::<libc::c_void>(),
                &mut len,
            );
            (rc, info)
        };
        assert_eq!(rc, 0, "TCP_INFO: {}", io::Error::last_os_error());
        info.tcpi_segs_out
    }

    fn socket(t: &Transport) -> &TcpStream {
        match t {
            Transport::Tcp(s, _) => s,
            Transport::Tls(t) => t.tcp(),
        }
    }

    /// The last bytes of a connection and its FIN leave in one segment, from the waiting write
    /// and from the immediate one alike; the client reads them, then the end.
    #[test]
    fn the_last_write_and_the_fin_share_a_segment() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async {
            for waiting in [false, true] {
                let (mut client, server) = pair();
                writable(&server).await;
                let before = segments_sent(socket(&server));
                if waiting {
                    server.write_all(b"the last bytes", true).await.expect("write");
                } else {
                    assert_eq!(server.write_now(b"the last bytes", true).expect("write"), 14);
                }
                assert_eq!(segments_sent(socket(&server)) - before, 1, "data and FIN apart (waiting: {waiting})");
                let mut got = Vec::new();
                client.read_to_end(&mut got).expect("read to the end");
                assert_eq!(got, b"the last bytes");
            }
        });
    }

    /// Over TLS the response, close_notify and the FIN share one segment too.
    #[test]
    fn tls_ends_with_one_segment() {
        use gatehouse_tls::bundle::{provider, split_pem};
        use gatehouse_tls::issue::{self_signed, Algorithm};
        use rustls::pki_types::ServerName;
        use std::sync::Arc;
        let pem = self_signed(&["localhost"], Algorithm::EcdsaP256, 2).expect("certificate");
        let (chain, key) = split_pem(pem.as_bytes()).expect("bundle");
        let server_config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(chain.clone(), key)
            .expect("server config");
        let mut roots = rustls::RootCertStore::empty();
        roots.add(chain[0].clone()).expect("root");
        let client_config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let addr = listener.local_addr().expect("address");
            // The client keeps its socket until the count is taken: its own FIN would add the
            // server's acknowledgement to the count.
            let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
            let client = std::thread::spawn(move || {
                let mut sock = std::net::TcpStream::connect(addr).expect("connect");
                let name = ServerName::try_from("localhost").expect("name");
                let mut conn = rustls::ClientConnection::new(Arc::new(client_config), name).expect("client");
                let mut stream = rustls::Stream::new(&mut conn, &mut sock);
                let mut got = Vec::new();
                stream.read_to_end(&mut got).expect("read to close_notify");
                let _ = done_rx.recv();
                got
            });
            let (tcp, _) = listener.accept().await.expect("accept");
            // As the listener sets it for TLS: no segment waits for Nagle's algorithm.
            tcp.set_nodelay(true).expect("TCP_NODELAY");
            let conn = gatehouse_tls::conn::handshake(tcp, Arc::new(server_config)).await.expect("handshake");
            let server = Transport::Tls(Box::new(conn));
            let before = segments_sent(socket(&server));
            server.write_all(b"the response", true).await.expect("write");
            assert_eq!(segments_sent(socket(&server)) - before, 1, "records and FIN apart");
            done_tx.send(()).expect("client waiting");
            assert_eq!(client.join().expect("client"), b"the response");
        });
    }
}
