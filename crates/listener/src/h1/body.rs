//! The body of a client's HTTP/1.1 request, read from the connection as the forward stage sends it
//! on. The read buffer is shared with the connection (one uncontended lock per poll), so bytes
//! past the body — a pipelined request — stay for the connection to parse next.

use crate::transport::Transport;
use bytes::{Bytes, BytesMut};
use gatehouse_http1::framing::{BodyError, Framing, Piece, Trailers};
use http_body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

/// What the connection and the current request's body share.
#[derive(Debug, Default)]
pub(crate) struct ReadState {
    pub rbuf: BytesMut,
    /// Framing of the current request's body; `Empty` between requests.
    pub framing: Framing,
    /// The trailer fields of the current request's chunked body, until it ends.
    pub trailers: Trailers,
}

impl Drop for ReadState {
    /// The connection is over: its read buffer goes back to the worker's pool, as it does while
    /// the connection is idle (a client that sends one request per connection would otherwise cost
    /// a new buffer, and its shared header, every time).
    fn drop(&mut self) {
        if self.rbuf.capacity() > 0 {
            super::pool::give_read(std::mem::take(&mut self.rbuf));
        }
    }
}

pub(crate) fn lock(state: &Mutex<ReadState>) -> MutexGuard<'_, ReadState> {
    state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A request body being read from the client.
#[derive(Debug)]
pub(crate) struct ClientBody {
    pub stream: Arc<Transport>,
    pub state: Arc<Mutex<ReadState>>,
}

/// The client's body could not be read whole.
#[derive(Debug)]
pub(crate) enum ClientBodyError {
    /// The body's framing broke (a bad chunk).
    Framing(BodyError),
    /// The client closed the connection before the end of the body.
    Closed,
    /// Reading from the client failed.
    Read(std::io::Error),
}

impl std::fmt::Display for ClientBodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("client body: ")?;
        match self {
            ClientBodyError::Framing(e) => e.fmt(f),
            ClientBodyError::Closed => f.write_str("connection closed"),
            ClientBodyError::Read(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ClientBodyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClientBodyError::Framing(e) => Some(e),
            ClientBodyError::Read(e) => Some(e),
            ClientBodyError::Closed => None,
        }
    }
}

impl Body for ClientBody {
    type Data = Bytes;
    type Error = ClientBodyError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let mut st = lock(&self.state);
        let st = &mut *st;
        loop {
            match st.framing.decode_piece(&mut st.rbuf) {
                Err(e) => return Poll::Ready(Some(Err(ClientBodyError::Framing(e)))),
                Ok(Some(Piece::Data(bytes))) => return Poll::Ready(Some(Ok(Frame::data(bytes)))),
                Ok(Some(Piece::Trailer(line))) => {
                    st.trailers.push(&line);
                    continue;
                }
                // The trailer fields, if any, end the body.
                Ok(None) if st.framing.finished() => {
                    return Poll::Ready(st.trailers.take().map(|t| Ok(Frame::trailers(t))))
                }
                Ok(None) => {}
            }
            match self.stream.poll_fill(&mut st.rbuf, cx) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Some(Err(ClientBodyError::Closed))),
                Poll::Ready(Ok(_)) => continue,
                Poll::Ready(Err(e)) => return Poll::Ready(Some(Err(ClientBodyError::Read(e)))),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        lock(&self.state).framing.finished()
    }

    fn size_hint(&self) -> SizeHint {
        match lock(&self.state).framing {
            Framing::Length(n) => SizeHint::with_exact(n),
            Framing::Empty => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}
