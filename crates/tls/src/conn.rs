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

/// [`SockIo`] for the last records of a connection: writes pass `MSG_MORE`, so the kernel holds a
/// last partial segment back for what follows, the FIN of the `shutdown` that comes next, and the
/// two leave in one segment (one packet, one acknowledgement) instead of two.
struct SockIoLast<'a>(&'a TcpStream);

impl Write for SockIoLast<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[io::IoSlice::new(buf)])
    }
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        try_send_last(self.0, bufs)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// One non-blocking write of a connection's last bytes, with `MSG_MORE`: the kernel holds a last
/// partial segment back for the FIN of the [`shut_write`] that must follow at once, and both
/// leave in one segment. `WouldBlock` clears the socket's write readiness, as `try_write` does.
pub fn try_send_last(tcp: &TcpStream, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
    let sock = socket2::SockRef::from(tcp);
    tcp.try_io(tokio::io::Interest::WRITABLE, || sock.send_vectored_with_flags(bufs, libc::MSG_MORE))
}

/// Ends the sending side of `tcp`: the FIN goes after what is queued (in its last segment, when
/// [`try_send_last`] wrote it).
pub fn shut_write(tcp: &TcpStream) {
    let _ = socket2::SockRef::from(tcp).shutdown(std::net::Shutdown::Write);
}

/// A TLS connection after its handshake.
#[derive(Debug)]
pub struct TlsConn {
    tcp: TcpStream,
    tls: Mutex<ServerConnection>,
    /// Set until the connection first waits for the client: the ACK of the client's last
    /// handshake flight may still be owed then (see [`TlsConn::poll_plain`]).
    ack_owed: AtomicBool,
    /// Set once the sending side is shut (close_notify and FIN sent).
    write_shut: AtomicBool,
    /// Set once rustls refused what the client sent (a fatal alert is queued or sent): the
    /// connection is over, and rustls must not be fed again (it would send a second alert).
    failed: AtomicBool,
}

fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// Runs the server side of a plain handshake with `config` (no certificate index, no session
/// prefetch): for management listeners such as the admin API.
pub async fn handshake(tcp: TcpStream, config: std::sync::Arc<rustls::ServerConfig>) -> io::Result<TlsConn> {
    let conn = ServerConnection::new(config).map_err(tls_error)?;
    complete(tcp, conn).await.map_err(|e| match e {
        Incomplete::Io(e) => e,
        Incomplete::Tls(e) => tls_error(e),
    })
}

/// Why a handshake did not complete.
#[derive(Debug)]
pub enum Incomplete {
    /// The socket failed, or the client closed it.
    Io(io::Error),
    /// rustls refused what the client sent (the alert it queued was sent, best effort).
    Tls(rustls::Error),
}

/// Drives the handshake of `conn` over `tcp` to its end.
///
/// TLS 1.3: once the client's Finished is in, what rustls still holds is the session ticket. It
/// stays queued and leaves with the first bytes the server sends (a client that sends its first
/// request with its Finished gets it in one segment with the response), or when the connection
/// first waits for the client ([`TlsConn`] sends what is queued before it waits to read).
pub async fn complete(tcp: TcpStream, mut conn: ServerConnection) -> Result<TlsConn, Incomplete> {
    // Whether the client's last bytes wait for an acknowledgement: none sent since they came.
    let mut ack_owed = true;
    loop {
        if !conn.is_handshaking() && conn.protocol_version() == Some(rustls::ProtocolVersion::TLSv1_3) {
            break;
        }
        while conn.wants_write() {
            match conn.write_tls(&mut SockIo(&tcp)) {
                Ok(n) => ack_owed &= n == 0,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => tcp.writable().await.map_err(Incomplete::Io)?,
                Err(e) => return Err(Incomplete::Io(e)),
            }
        }
        if !conn.is_handshaking() {
            break;
        }
        tcp.readable().await.map_err(Incomplete::Io)?;
        match conn.read_tls(&mut SockIo(&tcp)) {
            Ok(0) => return Err(Incomplete::Io(io::ErrorKind::UnexpectedEof.into())),
            Ok(_) => ack_owed = true,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(Incomplete::Io(e)),
        }
        if let Err(e) = conn.process_new_packets() {
            // Send the alert rustls queued, then give up.
            let _ = conn.write_tls(&mut SockIo(&tcp));
            return Err(Incomplete::Tls(e));
        }
    }
    Ok(TlsConn::new(tcp, conn, ack_owed))
}

impl TlsConn {
    /// `ack_owed`: the handshake ended with bytes from the client that nothing sent since has
    /// acknowledged (see [`TlsConn::ack_now_once`]).
    fn new(tcp: TcpStream, tls: ServerConnection, ack_owed: bool) -> Self {
        TlsConn {
            tcp,
            tls: Mutex::new(tls),
            ack_owed: AtomicBool::new(ack_owed),
            write_shut: AtomicBool::new(false),
            failed: AtomicBool::new(false),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, ServerConnection> {
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
        if self.failed.load(Relaxed) {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, "the TLS connection failed")));
        }
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
            if self.tcp.poll_read_ready(cx)?.is_pending() {
                // What is queued goes out before waiting for the client, best effort: alerts and
                // key updates that earlier records asked for, and a TLS 1.3 session ticket the
                // handshake left queued. Not sooner: a ticket waiting while the request is read
                // and answered leaves with the response, one segment instead of two.
                let mut sent = 0;
                let _ = Self::push_via(&mut tls, &mut SockIo(&self.tcp), &mut sent);
                if sent > 0 {
                    // The segment that carried them acknowledged what was read: no ACK is owed.
                    self.ack_owed.store(false, Relaxed);
                } else {
                    self.ack_now_once();
                }
                return Poll::Pending;
            }
            match tls.read_tls(&mut SockIo(&self.tcp)) {
                Ok(_) => {
                    if let Err(e) = tls.process_new_packets() {
                        self.failed.store(true, Relaxed);
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
    /// nothing. One system call per connection at most, and none when the server sent last (a
    /// full TLS 1.2 handshake ends with the server's Finished) or sends before it waits (a
    /// TLS 1.3 session ticket): a segment with data carries the ACK. Setting the mode needlessly
    /// is not free: it also makes the kernel acknowledge the request at once, a segment of its
    /// own, instead of with the response.
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
        Self::push_via(tls, &mut SockIo(tcp), &mut 0)
    }

    /// Writes queued TLS records to `out` until it would block, adding the bytes taken to `sent`.
    fn push_via(tls: &mut ServerConnection, out: &mut dyn Write, sent: &mut usize) -> io::Result<()> {
        while tls.wants_write() {
            *sent += tls.write_tls(out)?;
        }
        Ok(())
    }

    /// Sends every queued TLS record; `last`: they are the connection's last, the FIN follows
    /// (see [`SockIoLast`]).
    fn poll_push(&self, cx: &mut Context<'_>, tls: &mut ServerConnection, last: bool) -> Poll<io::Result<()>> {
        loop {
            let pushed =
                if last { Self::push_via(tls, &mut SockIoLast(&self.tcp), &mut 0) } else { Self::push(&self.tcp, tls) };
            match pushed {
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
        self.poll_push(cx, &mut tls, false)
    }

    /// Writes all of `data` and sends it.
    pub async fn write_all(&self, data: &[u8]) -> io::Result<()> {
        self.write_all_then(data, false).await
    }

    /// Writes all of `data`, then close_notify, and ends the sending side: the last bytes of a
    /// connection that closes after them, the alert and the FIN cost one write and one segment,
    /// not three.
    pub async fn write_all_and_close(&self, data: &[u8]) -> io::Result<()> {
        self.write_all_then(data, true).await
    }

    async fn write_all_then(&self, mut data: &[u8], close: bool) -> io::Result<()> {
        while !data.is_empty() {
            let n = std::future::poll_fn(|cx| self.poll_write_plain(cx, data)).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            data = &data[n..];
        }
        if close {
            std::future::poll_fn(|cx| self.poll_close(cx)).await
        } else {
            std::future::poll_fn(|cx| self.poll_flush_plain(cx)).await
        }
    }

    /// Sends close_notify with whatever is queued, then closes the sending side of the socket;
    /// the FIN rides in the last segment. Done once: later calls are ready at once.
    pub fn poll_close(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.write_shut.load(Relaxed) {
            return Poll::Ready(Ok(()));
        }
        let mut tls = self.lock();
        tls.send_close_notify();
        // On failure the socket is not shut here: dropping it closes it either way.
        ready!(self.poll_push(cx, &mut tls, true))?;
        shut_write(&self.tcp);
        self.write_shut.store(true, Relaxed);
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
    use rustls::{ClientConfig, RootCertStore, ServerConfig, SupportedProtocolVersion};
    use std::sync::Arc;

    /// Whether the socket acknowledges at once (`TCP_QUICKACK` reads back as set) rather than
    /// in the delayed, "interactive" mode the kernel enters once a server answers what it reads.
    fn quickack(tcp: &TcpStream) -> bool {
        socket2::SockRef::from(tcp).quickack().expect("TCP_QUICKACK")
    }

    /// Server and client configurations for `localhost`, one protocol version, and the server
    /// sending `tickets` TLS 1.3 session tickets.
    fn configs(version: &'static SupportedProtocolVersion, tickets: usize) -> (ServerConfig, ClientConfig) {
        let pem = self_signed(&["localhost"], Algorithm::EcdsaP256, 2).expect("certificate");
        let (chain, key) = split_pem(pem.as_bytes()).expect("bundle");
        let mut server = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[version])
            .expect("version")
            .with_no_client_auth()
            .with_single_cert(chain.clone(), key)
            .expect("server config");
        server.send_tls13_tickets = tickets;
        let mut roots = RootCertStore::empty();
        roots.add(chain[0].clone()).expect("root");
        let client = ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[version])
            .expect("version")
            .with_root_certificates(roots)
            .with_no_client_auth();
        (server, client)
    }

    /// One step of a blocking client's handshake: write what is queued, or read and process.
    fn handshake_step(conn: &mut rustls::ClientConnection, sock: &mut std::net::TcpStream) {
        if conn.wants_write() {
            conn.write_tls(sock).expect("write");
        } else {
            conn.read_tls(sock).expect("read");
            conn.process_new_packets().expect("handshake");
        }
    }

    /// When a client sends its request.
    enum Request {
        /// In the same write as its last handshake flight.
        WithFinished,
        /// In a write of its own once the handshake is over.
        After,
        /// In a write of its own once the first channel says so; it says so on the second.
        OnSignal(std::sync::mpsc::Receiver<()>, std::sync::mpsc::Sender<()>),
    }

    /// A blocking client on its own thread: it completes the handshake, writes `request` (see
    /// [`Request`]), reads what comes until `done` is signalled, and returns it.
    fn client(
        addr: std::net::SocketAddr,
        config: ClientConfig,
        request: &'static [u8],
        when: Request,
        done: std::sync::mpsc::Receiver<()>,
    ) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut sock = std::net::TcpStream::connect(addr).expect("connect");
            sock.set_nodelay(true).expect("TCP_NODELAY");
            let name = ServerName::try_from("localhost").expect("name");
            let mut conn = rustls::ClientConnection::new(Arc::new(config), name).expect("client");
            let flush = |conn: &mut rustls::ClientConnection, sock: &mut std::net::TcpStream| {
                while conn.wants_write() {
                    conn.write_tls(sock).expect("write");
                }
            };
            while conn.is_handshaking() {
                handshake_step(&mut conn, &mut sock);
                if !matches!(when, Request::WithFinished) {
                    flush(&mut conn, &mut sock);
                }
            }
            if let Request::OnSignal(go, sent) = &when {
                let _ = go.recv();
                conn.writer().write_all(request).expect("request");
                flush(&mut conn, &mut sock);
                let _ = sent.send(());
            } else {
                conn.writer().write_all(request).expect("request");
                flush(&mut conn, &mut sock);
            }
            let _ = done.recv();
            sock.set_nonblocking(true).expect("non-blocking");
            let _ = conn.read_tls(&mut sock);
            let _ = conn.process_new_packets();
            let mut got = Vec::new();
            let _ = conn.reader().read_to_end(&mut got);
            got
        })
    }

    async fn listen() -> (tokio::net::TcpListener, std::net::SocketAddr) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        (listener, addr)
    }

    /// Polls a read once more than it takes to find it waiting, with nothing to read.
    fn wait_once(conn: &TlsConn) {
        let mut buf = BytesMut::new();
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut polls = 0;
        while conn.poll_fill(&mut buf, &mut cx).is_ready() {
            polls += 1;
            assert!(polls < 100 && buf.is_empty(), "the client sent nothing, yet a read was ready");
        }
    }

    /// The first wait for a request acknowledges at once exactly when an ACK is owed.
    ///
    /// A TLS 1.3 handshake without a session ticket ends with the client's Finished, and the
    /// server has nothing to send until the request comes: its first wait must leave the socket
    /// acknowledging at once, so a client holding its request back under Nagle's algorithm until
    /// that Finished is acknowledged gets it now, not after the delayed-ACK timer.
    ///
    /// When the server sends before it waits (a TLS 1.3 session ticket), or sent last in the
    /// handshake (a full TLS 1.2 handshake ends with its Finished), that segment acknowledged the
    /// client's flight: the wait leaves the delayed ACK alone, so the request will be
    /// acknowledged with the response rather than in a segment of its own.
    #[tokio::test]
    async fn the_first_wait_acknowledges_at_once_only_when_an_ack_is_owed() {
        for (version, tickets, owed) in [
            (&rustls::version::TLS13, 0, true),
            (&rustls::version::TLS13, 1, false),
            (&rustls::version::TLS12, 0, false),
        ] {
            let (server, client_config) = configs(version, tickets);
            let (listener, addr) = listen().await;
            // The client completes the handshake and sends nothing until the server has looked.
            let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
            let client = client(addr, client_config, b"", Request::After, done_rx);
            let (tcp, _) = listener.accept().await.expect("accept");
            let conn = handshake(tcp, Arc::new(server)).await.expect("server handshake");
            wait_once(&conn);
            let case = format!("{version:?} with {tickets} ticket(s)");
            assert!(!conn.lock().wants_write(), "{case}: something is left queued as it waits");
            assert_eq!(quickack(conn.tcp()), owed, "{case}: ACK owed {owed}, yet the mode differs");
            assert!(!conn.ack_owed.load(Relaxed), "{case}: the once-per-connection flag is not spent");
            done_tx.send(()).expect("client waiting");
            client.join().expect("client thread");
        }
    }

    /// A client's TLS 1.3 session ticket leaves with the response, not on its own before the
    /// request is read: whether the request came with the client's Finished or in a segment of
    /// its own that arrived before the server read on.
    #[tokio::test]
    async fn the_ticket_waits_for_the_response() {
        for with_finished in [true, false] {
            let (server, client_config) = configs(&rustls::version::TLS13, 1);
            let (listener, addr) = listen().await;
            let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
            let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
            let (sent_tx, sent_rx) = std::sync::mpsc::channel::<()>();
            let when = if with_finished { Request::WithFinished } else { Request::OnSignal(go_rx, sent_tx) };
            let client = client(addr, client_config, b"request", when, done_rx);
            let (tcp, _) = listener.accept().await.expect("accept");
            let conn = handshake(tcp, Arc::new(server)).await.expect("server handshake");
            if !with_finished {
                // The handshake is over on the server; the request is now sent, and is in.
                go_tx.send(()).expect("client waiting");
                sent_rx.recv().expect("request sent");
            }
            let mut buf = BytesMut::new();
            while buf.len() < 7 {
                std::future::poll_fn(|cx| conn.poll_fill(&mut buf, cx)).await.expect("read");
            }
            assert_eq!(&buf[..], b"request");
            assert!(conn.lock().wants_write(), "with its Finished: {with_finished}: the ticket went out alone");
            conn.write_all(b"response").await.expect("write");
            assert!(!conn.lock().wants_write());
            done_tx.send(()).expect("client waiting");
            assert_eq!(client.join().expect("client thread"), b"response");
        }
    }

    /// A record rustls refuses ends the connection: every later read fails at once, and rustls
    /// is not fed again (it would queue a second fatal alert; a debug build asserts against it).
    #[tokio::test]
    async fn after_a_refused_record_every_read_fails() {
        use std::io::Write as _;
        let (server, client_config) = configs(&rustls::version::TLS13, 0);
        let (listener, addr) = listen().await;
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let client = std::thread::spawn(move || {
            let mut sock = std::net::TcpStream::connect(addr).expect("connect");
            let name = ServerName::try_from("localhost").expect("name");
            let mut conn = rustls::ClientConnection::new(Arc::new(client_config), name).expect("client");
            while conn.is_handshaking() {
                handshake_step(&mut conn, &mut sock);
            }
            while conn.wants_write() {
                conn.write_tls(&mut sock).expect("write");
            }
            // An application-data record that does not decrypt, twice.
            let bad =
                [0x17, 0x03, 0x03, 0x00, 0x14, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20];
            sock.write_all(&bad).expect("bad record");
            sock.write_all(&bad).expect("bad record");
            let _ = done_rx.recv();
        });
        let (tcp, _) = listener.accept().await.expect("accept");
        let conn = handshake(tcp, Arc::new(server)).await.expect("server handshake");
        let mut buf = BytesMut::new();
        let first = std::future::poll_fn(|cx| conn.poll_fill(&mut buf, cx)).await;
        assert!(first.is_err(), "the bad record is refused: {first:?}");
        for _ in 0..3 {
            let read = std::future::poll_fn(|cx| conn.poll_fill(&mut buf, cx));
            let again = tokio::time::timeout(std::time::Duration::from_secs(5), read).await;
            assert!(matches!(again, Ok(Err(_))), "a failed connection stays failed, at once: {again:?}");
        }
        done_tx.send(()).expect("client waiting");
        client.join().expect("client thread");
    }
}
