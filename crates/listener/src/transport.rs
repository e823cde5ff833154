//! A client connection's byte stream: a plain socket or TLS over one. The HTTP/1.1 server uses it
//! through `&self` (the request body is read while the connection waits to write the response);
//! the HTTP/2 server and upgrade tunnels use it as `AsyncRead + AsyncWrite`.

use bytes::BytesMut;
use gatehouse_tls::TlsConn;
use gatehouse_upstream::framing::poll_fill_by;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A client connection's stream.
#[derive(Debug)]
pub(crate) enum Transport {
    Tcp(TcpStream),
    Tls(Box<TlsConn>),
}

impl Transport {
    /// Whether the socket has bytes (TLS may also hold decrypted bytes already).
    pub(crate) fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            Transport::Tcp(s) => s.poll_read_ready(cx),
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
            Transport::Tcp(s) => poll_fill_by(s, buf, step, cx),
            Transport::Tls(t) => t.poll_fill(buf, cx),
        }
    }

    /// [`Transport::poll_fill_by`] with the usual step.
    pub(crate) fn poll_fill(&self, buf: &mut BytesMut, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        self.poll_fill_by(buf, gatehouse_upstream::framing::READ_CHUNK, cx)
    }

    /// Writes all of `buf` to the client.
    pub(crate) async fn write_all(&self, mut buf: &[u8]) -> io::Result<()> {
        match self {
            Transport::Tcp(s) => {
                while !buf.is_empty() {
                    s.writable().await?;
                    match s.try_write(buf) {
                        Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                        Ok(n) => buf = &buf[n..],
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                        Err(e) => return Err(e),
                    }
                }
                Ok(())
            }
            Transport::Tls(t) => t.write_all(buf).await,
        }
    }

    /// Writes what the socket takes now without waiting: 0 when it would block (and always over
    /// TLS, whose writes go through its own buffer).
    pub(crate) fn write_now(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Transport::Tcp(s) => match s.try_write(buf) {
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
            Transport::Tcp(s) => gatehouse_tls::conn::socket_unread(s),
            Transport::Tls(t) => t.unread_pending(),
        }
    }

    /// Ends the sending side (close_notify first on TLS); the receiving side stays open.
    pub(crate) async fn shutdown_write(&self) {
        match self {
            Transport::Tcp(s) => {
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
            Transport::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Transport::Tls(t) => Pin::new(&mut **t).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Transport {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Transport::Tls(t) => Pin::new(&mut **t).poll_write(cx, buf),
        }
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Transport::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Transport::Tls(t) => Pin::new(&mut **t).poll_write_vectored(cx, bufs),
        }
    }
    fn is_write_vectored(&self) -> bool {
        match self {
            Transport::Tcp(s) => s.is_write_vectored(),
            Transport::Tls(t) => t.is_write_vectored(),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Tcp(s) => Pin::new(s).poll_flush(cx),
            Transport::Tls(t) => Pin::new(&mut **t).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Transport::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Transport::Tls(t) => Pin::new(&mut **t).poll_shutdown(cx),
        }
    }
}
