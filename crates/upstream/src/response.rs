//! The response body as read from the endpoint: HTTP/1.1 bodies are decoded straight from the
//! connection's buffer (length, chunked or until close); HTTP/2 bodies from their stream. A body read
//! whole gives its connection back to the pool; a broken or abandoned one closes it. A gap longer
//! than the read timeout between two reads fails the body.

use crate::h1::{BodyError, Framing, Piece};
use crate::h2_client::H2Body;
use crate::pool::{Conn, Lease};
use bytes::Bytes;
use gatehouse_http1::RawHead;
use http_body::{Body, Frame, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Sleep;

/// The endpoint's response body.
#[derive(Debug)]
pub struct UpstreamBody {
    lease: Option<Lease>,
    /// The head's lines, when they are passed on unparsed (HTTP/1.1 only).
    raw: Option<RawHead>,
    kind: Kind,
    read_timeout: Duration,
    timer: Option<Pin<Box<Sleep>>>,
}

#[derive(Debug)]
enum Kind {
    H1 { framing: Framing, reusable: bool },
    H2(H2Body),
    Done,
}

/// Why a response body could not be read whole.
#[derive(Debug)]
#[non_exhaustive]
pub enum UpstreamBodyError {
    /// The body's framing broke (a bad chunk).
    Framing(BodyError),
    /// The endpoint closed the connection before the end of a delimited body.
    Closed,
    /// Reading from the endpoint failed.
    Read(std::io::Error),
    /// Nothing arrived within the read timeout.
    Timeout,
    /// The HTTP/2 stream failed.
    H2(h2::Error),
}

impl std::fmt::Display for UpstreamBodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("upstream body: ")?;
        match self {
            UpstreamBodyError::Framing(e) => e.fmt(f),
            UpstreamBodyError::Closed => f.write_str("connection closed before the end of the body"),
            UpstreamBodyError::Read(e) => e.fmt(f),
            UpstreamBodyError::Timeout => f.write_str("read timed out"),
            UpstreamBodyError::H2(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for UpstreamBodyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            UpstreamBodyError::Framing(e) => Some(e),
            UpstreamBodyError::Read(e) => Some(e),
            UpstreamBodyError::H2(e) => Some(e),
            _ => None,
        }
    }
}

impl UpstreamBody {
    pub(crate) fn h1(
        lease: Lease,
        framing: Framing,
        reusable: bool,
        read_timeout: Duration,
        switching: bool,
        raw: Option<RawHead>,
    ) -> Self {
        let mut body =
            UpstreamBody { lease: Some(lease), raw, kind: Kind::H1 { framing, reusable }, read_timeout, timer: None };
        // A 101's connection is about to become a tunnel (see `take_upgrade`): never pool it.
        if framing.finished() && !switching {
            body.finish(reusable);
        }
        body
    }

    pub(crate) fn h2(body: H2Body, lease: Lease, read_timeout: Duration) -> Self {
        UpstreamBody { lease: Some(lease), raw: None, kind: Kind::H2(body), read_timeout, timer: None }
    }

    /// The head's lines when they are passed on unparsed (see [`RawHead`]): edits of the
    /// response's headers apply to them as well as to its map.
    pub fn raw_head_mut(&mut self) -> Option<&mut RawHead> {
        self.raw.as_mut()
    }

    /// Takes the head's unparsed lines, to write them or to move them into the map.
    pub fn take_raw_head(&mut self) -> Option<RawHead> {
        self.raw.take()
    }

    /// For a `101 Switching Protocols` answer: the raw connection and the bytes already read past
    /// the head. The connection is no longer pooled.
    pub fn take_upgrade(&mut self) -> Option<(crate::io::UpstreamIo, Bytes)> {
        match self.lease.as_mut()?.conn.take()? {
            Conn::H1(conn) => {
                self.lease = None;
                self.kind = Kind::Done;
                Some((*conn).into_upgraded())
            }
            Conn::H2(..) => None,
        }
    }

    /// Ends the body: a reusable, fully read HTTP/1.1 connection goes back to the pool.
    fn finish(&mut self, reusable: bool) {
        if let Some(lease) = self.lease.take() {
            let clean = matches!(&lease.conn, Some(Conn::H1(c)) if c.rbuf.is_empty());
            if reusable && clean {
                lease.release();
            }
        }
        self.kind = Kind::Done;
        self.timer = None;
    }

    fn fail(&mut self, why: UpstreamBodyError) -> Poll<Option<Result<Frame<Bytes>, UpstreamBodyError>>> {
        self.lease = None;
        self.kind = Kind::Done;
        self.timer = None;
        Poll::Ready(Some(Err(why)))
    }

    /// Whether the read timeout has passed while waiting; arms the timer on first wait.
    fn timed_out(&mut self, cx: &mut Context<'_>) -> bool {
        let t = self.read_timeout;
        let timer = self.timer.get_or_insert_with(|| Box::pin(tokio::time::sleep(t)));
        timer.as_mut().poll(cx).is_ready()
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = UpstreamBodyError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        loop {
            let (framing, reusable) = match &mut this.kind {
                Kind::Done => return Poll::Ready(None),
                Kind::H2(body) => {
                    return match body.poll_frame(cx) {
                        Poll::Ready(Some(Ok(frame))) => {
                            this.timer = None;
                            Poll::Ready(Some(Ok(frame)))
                        }
                        Poll::Ready(Some(Err(e))) => this.fail(UpstreamBodyError::H2(e)),
                        Poll::Ready(None) => {
                            this.finish(true);
                            Poll::Ready(None)
                        }
                        Poll::Pending if this.timed_out(cx) => this.fail(UpstreamBodyError::Timeout),
                        Poll::Pending => Poll::Pending,
                    };
                }
                Kind::H1 { framing, reusable } => (framing, *reusable),
            };
            let Some(Some(Conn::H1(conn))) = this.lease.as_mut().map(|l| l.conn.as_mut()) else {
                return Poll::Ready(None);
            };
            match conn.decode_piece(framing) {
                Err(e) => return this.fail(UpstreamBodyError::Framing(e)),
                Ok(Some(Piece::Data(bytes))) => {
                    this.timer = None;
                    if framing.finished() {
                        this.finish(reusable);
                    }
                    return Poll::Ready(Some(Ok(Frame::data(bytes))));
                }
                Ok(Some(Piece::Trailer(line))) => {
                    conn.trailers.push(&line);
                    continue;
                }
                Ok(None) if framing.finished() => {
                    // A chunked body's trailer fields end it (as HTTP/2 trailers further on).
                    let fields = conn.trailers.take();
                    this.finish(reusable);
                    return Poll::Ready(fields.map(|t| Ok(Frame::trailers(t))));
                }
                Ok(None) => {}
            }
            let close_delimited = *framing == Framing::Close;
            match conn.poll_fill(cx) {
                Poll::Ready(Ok(0)) if close_delimited => {
                    this.finish(false);
                    return Poll::Ready(None);
                }
                Poll::Ready(Ok(0)) => return this.fail(UpstreamBodyError::Closed),
                Poll::Ready(Ok(_)) => continue,
                Poll::Ready(Err(e)) => return this.fail(UpstreamBodyError::Read(e)),
                Poll::Pending if this.timed_out(cx) => return this.fail(UpstreamBodyError::Timeout),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Done => true,
            Kind::H1 { framing, .. } => framing.finished(),
            Kind::H2(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Done => SizeHint::with_exact(0),
            Kind::H1 { framing: Framing::Length(n), .. } => SizeHint::with_exact(*n),
            Kind::H1 { framing: Framing::Empty, .. } => SizeHint::with_exact(0),
            Kind::H1 { .. } => SizeHint::default(),
            Kind::H2(body) => body.size_hint(),
        }
    }
}
