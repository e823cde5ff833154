//! A server TLS connection over a TCP socket, usable through `&self` so the HTTP/1.1 server can
//! read a request body and write a response on one connection from different places, as it does
//! with a plain socket. Reads and writes go straight to the socket with `try_read`/`try_write`;
//! rustls' state sits behind one uncontended lock taken per poll.

use bytes::BytesMut;
use rustls::ServerConnection;
use std::io::{self, BufRead, Read, Write};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// `std::io` over a non-blocking tokio socket: `WouldBlock` clears the socket's readiness.
pub(crate) struct SockIo<'a>(pub &'a TcpStream);

impl Read for SockIo<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.try_read(buf)
    }
}

impl Write for SockIo<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.0.try_write_vectored(bufs)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A TLS connection after its handshake.
#[derive(Debug)]
pub struct TlsConn {
    tcp: TcpStream,
    tls: Mutex<ServerConnection>,
    /// Set until the connection first waits for the client: the ACK of the client's last
    /// handshake flight may still be owed then (see [`TlsConn::poll_plain`]).
    ack_owed: AtomicBool,
}

fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// Runs the server side of a plain handshake with `config` (no certificate index, no session
/// prefetch): for management listeners such as the admin API.
pub async fn handshake(tcp: TcpStream, config: std::sync::Arc<rustls::ServerConfig>) -> io::Result<TlsConn> {
    let mut conn = ServerConnection::new(config).map_err(tls_error)?;
    loop {
        while conn.wants_write() {
            tcp.writable().await?;
            match conn.write_tls(&mut SockIo(&tcp)) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        if !conn.is_handshaking() {
            return Ok(TlsConn::new(tcp, conn));
        }
        tcp.readable().await?;
        match conn.read_tls(&mut SockIo(&tcp)) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(_) => {
                if let Err(e) = conn.process_new_packets() {
                    // Send the alert rustls queued, then give up.
                    let _ = conn.write_tls(&mut SockIo(&tcp));
                    return Err(tls_error(e));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

impl TlsConn {
    pub(crate) fn new(tcp: TcpStream, tls: ServerConnection) -> Self {
        TlsConn { tcp, tls: Mutex::new(tls), ack_owed: AtomicBool::new(true) }
    }

    fn lock(&self) -> MutexGuard<'_, ServerConnection> {
        self.tls.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The socket underneath.
    pub fn tcp(&self) -> &TcpStream {
        &self.tcp
    }

    /// The protocol chosen by ALPN.
    pub fn alpn(&self) -> Option<Vec<u8>> {
        self.lock().alpn_protocol().map(<[u8]>::to_vec)
    }

    /// Readiness of the socket for reading (plaintext may also be buffered already).
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = self.tcp.poll_read_ready(cx);
        if poll.is_pending() {
            self.ack_now_once();
        }
        poll
    }

    /// Whether the client sent anything not read yet: plaintext rustls holds, or bytes waiting in
    /// the socket (for a connection about to close: one such byte may be consumed).
    pub fn unread_pending(&self) -> bool {
        let buffered = {
            let mut tls = self.lock();
            let mut reader = tls.reader();
            matches!(reader.fill_buf(), Ok(data) if !data.is_empty())
        };
        buffered || socket_unread(&self.tcp)
    }

    /// Calls `take` with plaintext as soon as some is available; `Ok(0)` at the end of the
    /// stream (close_notify, or the peer closing after it).
    fn poll_plain(&self, cx: &mut Context<'_>, take: impl FnOnce(&[u8]) -> usize) -> Poll<io::Result<usize>> {
        let mut tls = self.lock();
        loop {
            {
                let mut reader = tls.reader();
                match reader.fill_buf() {
                    Ok([]) => return Poll::Ready(Ok(0)),
                    Ok(data) => {
                        let n = take(data);
                        reader.consume(n);
                        return Poll::Ready(Ok(n));
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Poll::Ready(Err(e)),
                }
            }
            // What is queued goes out before waiting for the client, best effort: alerts and key
            // updates that earlier records asked for, and a TLS 1.3 session ticket the handshake
            // left queued for the first write.
            let _ = Self::push(&self.tcp, &mut tls);
            if self.tcp.poll_read_ready(cx)?.is_pending() {
                self.ack_now_once();
                return Poll::Pending;
            }
            match tls.read_tls(&mut SockIo(&self.tcp)) {
                Ok(_) => {
                    if let Err(e) = tls.process_new_packets() {
                        let _ = Self::push(&self.tcp, &mut tls);
                        return Poll::Ready(Err(tls_error(e)));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// The first time the connection waits for the client, acknowledges at once what it has
    /// received (`TCP_QUICKACK`) instead of after the kernel's delayed-ACK timer (40 ms here).
    ///
    /// When the client's last handshake flight ends the handshake (its Finished in TLS 1.3 when
    /// no session ticket is sent, and in a resumed TLS 1.2 handshake), the server has nothing to
    /// send until the request arrives, so the ACK of that flight waits for the timer. A client
    /// that writes the request separately with Nagle's algorithm on (`ab` does) holds the request
    /// until that ACK: every new connection lost 40 ms. A client that sends its request with the
    /// Finished never gets here with an ACK owed; for it the call finds none pending and sends
    /// nothing. One system call per connection at most.
    fn ack_now_once(&self) {
        if self.ack_owed.swap(false, Relaxed) {
            let _ = socket2::SockRef::from(&self.tcp).set_quickack(true);
        }
    }

    /// Appends available plaintext to `buf`; `Ok(0)` at the end of the stream.
    pub fn poll_fill(&self, buf: &mut BytesMut, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        self.poll_plain(cx, |data| {
            buf.extend_from_slice(data);
            data.len()
        })
    }

    /// Writes queued TLS records until the socket would block.
    fn push(tcp: &TcpStream, tls: &mut ServerConnection) -> io::Result<()> {
        while tls.wants_write() {
            tls.write_tls(&mut SockIo(tcp))?;
        }
        Ok(())
    }

    /// Sends every queued TLS record.
    fn poll_push(&self, cx: &mut Context<'_>, tls: &mut ServerConnection) -> Poll<io::Result<()>> {
        loop {
            match Self::push(&self.tcp, tls) {
                Ok(()) => return Poll::Ready(Ok(())),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => ready!(self.tcp.poll_write_ready(cx))?,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// Encrypts some of `data` into TLS records held until [`TlsConn::poll_flush_plain`] (or
    /// until rustls' buffer of unsent records, 64 KiB, is full: then they are sent first). Small
    /// writes between flushes thus share system calls.
    pub fn poll_write_plain(&self, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_write_with(cx, data.is_empty(), |tls| tls.writer().write(data))
    }

    /// [`TlsConn::poll_write_plain`] for several slices, sealed as one run of records rather than
    /// a record per slice (an HTTP/2 frame header and its payload share one).
    pub fn poll_write_plain_vectored(&self, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let empty = bufs.iter().all(|b| b.is_empty());
        self.poll_write_with(cx, empty, |tls| tls.writer().write_vectored(bufs))
    }

    fn poll_write_with(
        &self,
        cx: &mut Context<'_>,
        empty: bool,
        mut write: impl FnMut(&mut ServerConnection) -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        let mut tls = self.lock();
        loop {
            let n = write(&mut tls)?;
            if n > 0 || empty {
                return Poll::Ready(Ok(n));
            }
            // rustls' buffer is full: send what it holds, then try again.
            match Self::push(&self.tcp, &mut tls) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => ready!(self.tcp.poll_write_ready(cx))?,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// Sends everything written so far.
    pub fn poll_flush_plain(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut tls = self.lock();
        self.poll_push(cx, &mut tls)
    }

    /// Writes all of `data` and sends it.
    pub async fn write_all(&self, data: &[u8]) -> io::Result<()> {
        self.write_all_then(data, false).await
    }

    /// Writes all of `data`, then close_notify, and sends them together: the last bytes of a
    /// connection that closes after them cost one system call and one segment, not two.
    pub async fn write_all_and_close_notify(&self, data: &[u8]) -> io::Result<()> {
        self.write_all_then(data, true).await
    }

    async fn write_all_then(&self, mut data: &[u8], close_notify: bool) -> io::Result<()> {
        while !data.is_empty() {
            let n = std::future::poll_fn(|cx| self.poll_write_plain(cx, data)).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            data = &data[n..];
        }
        if close_notify {
            self.lock().send_close_notify();
        }
        std::future::poll_fn(|cx| self.poll_flush_plain(cx)).await
    }

    /// Sends close_notify, then closes the sending side of the socket.
    pub fn poll_close(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut tls = self.lock();
        tls.send_close_notify();
        ready!(self.poll_push(cx, &mut tls))?;
        let _ = socket2::SockRef::from(&self.tcp).shutdown(std::net::Shutdown::Write);
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for TlsConn {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_plain(cx, |data| {
            let n = data.len().min(buf.remaining());
            buf.put_slice(&data[..n]);
            n
        }))?;
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for TlsConn {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_write_plain(cx, buf)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_plain_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        true
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush_plain(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_close(cx)
    }
}

/// Whether bytes wait in `tcp`'s receive queue, read straight from the socket whatever the reactor
/// last saw (one byte is consumed if so: for a connection about to close). The end of the stream
/// or an error count as nothing waiting.
pub fn socket_unread(tcp: &TcpStream) -> bool {
    use std::io::Read;
    let sock = socket2::SockRef::from(tcp);
    matches!((&*sock).read(&mut [0u8; 1]), Ok(n) if n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::{provider, split_pem};
    use crate::issue::{self_signed, Algorithm};
    use rustls::pki_types::ServerName;
    use rustls::{ClientConfig, RootCertStore, ServerConfig};
    use std::sync::Arc;

    /// Whether the socket acknowledges at once (`TCP_QUICKACK` reads back as set) rather than
    /// in the delayed, "interactive" mode the kernel enters once a server answers what it reads.
    fn quickack(tcp: &TcpStream) -> bool {
        socket2::SockRef::from(tcp).quickack().expect("TCP_QUICKACK")
    }

    /// A TLS 1.3 handshake without a session ticket ends with the client's Finished, and the
    /// server has nothing to send until the request comes. Its first wait for the request must
    /// leave the socket acknowledging at once, so a client holding its request back under Nagle's
    /// algorithm until that Finished is acknowledged gets it now, not after the delayed-ACK timer.
    #[tokio::test]
    async fn the_first_wait_for_a_request_leaves_the_ack_immediate() {
        let pem = self_signed(&["localhost"], Algorithm::EcdsaP256, 2).expect("certificate");
        let (chain, key) = split_pem(pem.as_bytes()).expect("bundle");
        let mut server = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .expect("TLS 1.3")
            .with_no_client_auth()
            .with_single_cert(chain.clone(), key)
            .expect("server config");
        server.send_tls13_tickets = 0;
        let mut roots = RootCertStore::empty();
        roots.add(chain[0].clone()).expect("root");
        let client = ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .expect("TLS 1.3")
            .with_root_certificates(roots)
            .with_no_client_auth();

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        // A blocking client on its own thread: it completes the handshake, sends nothing, and
        // keeps the connection open until the server side has looked.
        let client = std::thread::spawn(move || {
            let mut sock = std::net::TcpStream::connect(addr).expect("connect");
            let name = ServerName::try_from("localhost").expect("name");
            let mut conn = rustls::ClientConnection::new(Arc::new(client), name).expect("client");
            while conn.is_handshaking() {
                conn.complete_io(&mut sock).expect("handshake");
            }
            let _ = done_rx.recv();
        });
        let (tcp, _) = listener.accept().await.expect("accept");
        let conn = handshake(tcp, Arc::new(server)).await.expect("server handshake");

        let mut buf = BytesMut::new();
        let mut cx = Context::from_waker(std::task::Waker::noop());
        // No request yet: the read waits, and that first wait sets the mode.
        let mut polls = 0;
        while conn.poll_fill(&mut buf, &mut cx).is_ready() {
            polls += 1;
            assert!(polls < 100 && buf.is_empty(), "the client sent nothing, yet a read was ready");
        }
        assert!(quickack(conn.tcp()), "the connection waits for its request with its ACK delayed");
        assert!(!conn.ack_owed.load(Relaxed), "the once-per-connection flag is spent");
        done_tx.send(()).expect("client waiting");
        client.join().expect("client thread");
    }
}
