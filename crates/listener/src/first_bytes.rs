//! Serve stage, a new connection's first bytes: read until they say what comes next (the HTTP/2
//! preface or HTTP/1.x; a PROXY protocol header), into a read buffer from the worker's pool that
//! the next stage goes on with.

use crate::h1::pool;
use bytes::BytesMut;
use gatehouse_clock::TaskDeadline;
use std::task::Poll;
use tokio::net::TcpStream;

/// Why [`read_until`] stopped without a decision.
#[derive(Debug)]
pub(crate) enum Undecided {
    /// The client ended its side first; what it sent is in the buffer.
    Ended(BytesMut),
    /// Nothing decisive by the deadline.
    TimedOut,
    /// The socket failed.
    Failed,
}

/// Reads into `buf` (a pooled buffer when it has no capacity) until `decide` returns something
/// for the bytes so far, or the clock passes `due` (milliseconds of `gatehouse_clock::now_ms`).
/// Bytes already in `buf` are judged before anything is read.
///
/// The first read goes straight to the socket: a client sends right after connecting, so its
/// bytes are usually there already, and the reactor does not know that yet for a new socket (this
/// saves one trip through it per connection, as nginx's deferred accept does). While it waits, a
/// connection that has sent nothing holds no buffer (as an idle HTTP/1.1 one). The deadline's
/// timer is armed only when a wait is needed. (An `async move` block, which keeps its arguments
/// once in a connection's task, where an `async fn` keeps them twice.)
#[allow(clippy::manual_async_fn)] // an `async fn` would keep its arguments twice in its state
pub(crate) fn read_until<'a, T: 'a>(
    stream: &'a TcpStream,
    due: u64,
    mut buf: BytesMut,
    mut decide: impl FnMut(&[u8]) -> Option<T> + 'a,
) -> impl std::future::Future<Output = Result<(BytesMut, T), Undecided>> + 'a {
    async move {
        let mut deadline = TaskDeadline::default();
        if buf.capacity() == 0 {
            buf = pool::take_read();
        }
        let mut got = if buf.is_empty() { read_now(stream, &mut buf) } else { Ok(buf.len()) };
        loop {
            match got {
                Ok(0) => return Err(Undecided::Ended(buf)),
                Ok(_) => {
                    if let Some(decided) = decide(&buf) {
                        return Ok((buf, decided));
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => return Err(Undecided::Failed),
            }
            if buf.is_empty() {
                pool::give_read(std::mem::take(&mut buf));
            }
            let readable = std::future::poll_fn(|cx| match stream.poll_read_ready(cx) {
                Poll::Ready(Ok(())) => Poll::Ready(Ok(())),
                Poll::Ready(Err(_)) => Poll::Ready(Err(Undecided::Failed)),
                Poll::Pending if deadline.expired(cx, due) => Poll::Ready(Err(Undecided::TimedOut)),
                Poll::Pending => Poll::Pending,
            });
            readable.await?;
            if buf.capacity() == 0 {
                buf = pool::take_read();
            }
            got = stream.try_read_buf(&mut buf);
        }
    }
}

/// One read from the socket into the spare room of `buf`, whatever the reactor last saw.
fn read_now(stream: &TcpStream, buf: &mut BytesMut) -> std::io::Result<usize> {
    use std::io::Read;
    let start = buf.len();
    buf.resize(buf.capacity().max(start + 1), 0);
    let sock = socket2::SockRef::from(stream);
    let got = (&*sock).read(&mut buf[start..]);
    buf.truncate(start + got.as_ref().map_or(0, |n| *n));
    got
}
