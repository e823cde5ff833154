//! A client connection's byte stream: a plain socket or TLS over one. The HTTP/1.1 server uses it
//! through `&self` (the request body is read while the connection waits to write the response);
//! the HTTP/2 server and upgrade tunnels use it as `AsyncRead + AsyncWrite`.

use bytes::BytesMut;
use gatehouse_tls::TlsConn;
use gatehouse_upstream::framing::poll_fill_by;
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
        self.poll_fill_by(buf, gatehouse_upstream::framing::READ_CHUNK, cx)
    }

    /// Writes all of `buf` to the client. With `close_notify` (the last bytes before the connection
    /// closes), TLS sends its close_notify in the same write; a plain socket's end is its close.
    pub(crate) async fn write_all(&self, mut buf: &[u8], close_notify: bool) -> io::Result<()> {
        match self {
            Transport::Tcp(s, nagle) => {
                while !buf.is_empty() {
                    s.writable().await?;
                    match nagle.write(s, |s| s.try_write(buf)) {
                        Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                        Ok(n) => buf = &buf[n..],
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                        Err(e) => return Err(e),
                    }
                }
                Ok(())
            }
            Transport::Tls(t) if close_notify => t.write_all_and_close_notify(buf).await,
            Transport::Tls(t) => t.write_all(buf).await,
        }
    }

    /// Writes what the socket takes now without waiting: 0 when it would block (and always over
    /// TLS, whose writes go through its own buffer).
    pub(crate) fn write_now(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Transport::Tcp(s, nagle) => match nagle.write(s, |s| s.try_write(buf)) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
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
            Transport::Tcp(s, _) => {
                let _ = socket2::SockRef::from(s).shutdown(std::net::Shutdown::Write);
            }
            Transport::Tls(t) => {
                let _ = std::future::poll_fn(|cx| t.poll_close(cx)).await;
            }
        }
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
            assert_eq!(server.write_now(b"").expect("write"), 0);
            assert!(!nodelay(&server), "nothing taken is no write");
            assert_eq!(server.write_now(b"one ").expect("write"), 4);
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
}
