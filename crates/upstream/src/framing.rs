//! HTTP/1.1 message bodies as bytes arrive: the framing state machine (length, chunked, until close)
//! and the readiness-aware socket read, shared by the upstream client and the client-side server.

use bytes::{Buf, Bytes, BytesMut};
use std::io;
use std::task::{Context, Poll};
use tokio::net::TcpStream;

/// Longest chunk-size line (size, extensions) accepted.
const MAX_CHUNK_LINE: usize = 4096;
/// Read buffer growth step.
pub const READ_CHUNK: usize = 16 * 1024;

/// How the response body is delimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Framing {
    /// No body.
    #[default]
    Empty,
    /// Exactly this many bytes are left.
    Length(u64),
    /// Chunked transfer coding, at this position.
    Chunked(Chunk),
    /// Until the endpoint closes the connection.
    Close,
}

/// Position in a chunked body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunk {
    /// Expecting a chunk-size line.
    Size,
    /// Inside a chunk, this many bytes left.
    Data(u64),
    /// Expecting the CRLF after a chunk.
    DataEnd,
    /// Reading (and dropping) trailer lines.
    Trailers,
}

impl Framing {
    /// Whether the whole body has been read.
    pub fn finished(self) -> bool {
        matches!(self, Framing::Empty | Framing::Length(0))
    }
}

/// Reads more bytes from `stream` into `buf`; `Ok(0)` at end of stream. Readiness is asked
/// first, so a socket the event loop knows to be empty costs no system call.
pub fn poll_fill(stream: &TcpStream, buf: &mut BytesMut, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
    poll_fill_by(stream, buf, READ_CHUNK, cx)
}

/// [`poll_fill`], growing the buffer by `step` bytes when it is full.
pub fn poll_fill_by(
    stream: &TcpStream,
    buf: &mut BytesMut,
    step: usize,
    cx: &mut Context<'_>,
) -> Poll<io::Result<usize>> {
    loop {
        match stream.poll_read_ready(cx) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        }
        buf.reserve(step);
        let spare = buf.capacity() - buf.len();
        let dst = &mut *buf;
        let mut got = None;
        // As tokio's own reads do on epoll: a read that did not fill the buffer drained the
        // socket, so readiness is cleared (by answering WouldBlock to `try_io`) and the next
        // read waits for the event loop instead of failing with EAGAIN.
        let result = stream.try_io(tokio::io::Interest::READABLE, || {
            let n = stream.try_read_buf(dst)?;
            got = Some(n);
            if n > 0 && n < spare {
                Err(io::ErrorKind::WouldBlock.into())
            } else {
                Ok(())
            }
        });
        match (got, result) {
            (Some(n), _) => return Poll::Ready(Ok(n)),
            // Readiness was stale and is now cleared: wait for the next event.
            (None, Err(e)) if e.kind() == io::ErrorKind::WouldBlock => continue,
            (None, Err(e)) => return Poll::Ready(Err(e)),
            (None, Ok(())) => continue,
        }
    }
}

/// The next piece of body per `framing` from `buf`, or `None` when more bytes are needed.
/// Advances `framing`; a finished body leaves any following bytes (a pipelined message) in `buf`.
pub fn decode_body(buf: &mut BytesMut, framing: &mut Framing) -> Result<Option<Bytes>, String> {
    loop {
        match framing {
            Framing::Empty | Framing::Length(0) => return Ok(None),
            Framing::Length(left) => {
                if buf.is_empty() {
                    return Ok(None);
                }
                let take = (*left).min(buf.len() as u64) as usize;
                *left -= take as u64;
                return Ok(Some(buf.split_to(take).freeze()));
            }
            Framing::Close => {
                return Ok((!buf.is_empty()).then(|| buf.split().freeze()));
            }
            Framing::Chunked(state) => match *state {
                Chunk::Size => {
                    let Some(line) = take_line(buf)? else { return Ok(None) };
                    let size = chunk_size(&line).ok_or("invalid chunk size")?;
                    *state = if size == 0 { Chunk::Trailers } else { Chunk::Data(size) };
                }
                Chunk::Data(left) => {
                    if buf.is_empty() {
                        return Ok(None);
                    }
                    let take = left.min(buf.len() as u64) as usize;
                    *state = if left == take as u64 { Chunk::DataEnd } else { Chunk::Data(left - take as u64) };
                    return Ok(Some(buf.split_to(take).freeze()));
                }
                Chunk::DataEnd => {
                    if buf.len() < 2 {
                        return Ok(None);
                    }
                    if &buf[..2] != b"\r\n" {
                        return Err("missing CRLF after chunk".into());
                    }
                    buf.advance(2);
                    *state = Chunk::Size;
                }
                Chunk::Trailers => {
                    let Some(line) = take_line(buf)? else { return Ok(None) };
                    if line.is_empty() {
                        *framing = Framing::Length(0);
                    }
                }
            },
        }
    }
}

/// The size of a chunk-size line: 1 to 16 hex digits, then only optional whitespace before any
/// `;` extension, and no control bytes. A sign (which `from_str_radix` takes), leading whitespace
/// or a CR inside an extension are refused rather than read one way here and another way by the
/// server or client across from us.
fn chunk_size(line: &[u8]) -> Option<u64> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    let after = line[digits..].iter().find(|&&b| b != b' ' && b != b'\t');
    let controls = line.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f);
    if digits == 0 || digits > 16 || after.is_some_and(|&b| b != b';') || controls {
        return None;
    }
    line[..digits].iter().try_fold(0u64, |n, &b| Some(n << 4 | u64::from((b as char).to_digit(16)?)))
}

/// The next line of a chunked body without its CRLF. Only CRLF ends a line here: a bare LF, which
/// some parsers accept and others skip over, is an error.
fn take_line(buf: &mut BytesMut) -> Result<Option<Bytes>, String> {
    match buf.iter().position(|&b| b == b'\n') {
        Some(i) if i == 0 || buf[i - 1] != b'\r' => Err("chunked line ended by a bare LF".into()),
        Some(i) => {
            let mut line = buf.split_to(i + 1).freeze();
            line.truncate(i - 1);
            Ok(Some(line))
        }
        None if buf.len() > MAX_CHUNK_LINE => Err("chunk line too long".into()),
        None => Ok(None),
    }
}

/// Whether a message allows its connection to be reused: HTTP/1.1 unless `Connection: close`,
/// HTTP/1.0 only with `Connection: keep-alive`.
pub fn keep_alive(headers: &http::HeaderMap, http10: bool) -> bool {
    let mut keep = !http10;
    for v in headers.get_all(http::header::CONNECTION) {
        for token in v.as_bytes().split(|&b| b == b',').map(|t| t.trim_ascii()) {
            if token.eq_ignore_ascii_case(b"close") {
                return false;
            }
            if token.eq_ignore_ascii_case(b"keep-alive") {
                keep = true;
            }
        }
    }
    keep
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(bytes: &[u8]) -> Result<Vec<u8>, String> {
        let mut buf = BytesMut::from(bytes);
        let mut framing = Framing::Chunked(Chunk::Size);
        let mut body = Vec::new();
        while let Some(piece) = decode_body(&mut buf, &mut framing)? {
            body.extend_from_slice(&piece);
        }
        assert!(framing.finished(), "{bytes:?}: incomplete");
        Ok(body)
    }

    #[test]
    fn chunked_bodies_decode_with_extensions_and_trailers() {
        assert_eq!(decode_all(b"5;ext=1\r\nhello\r\n1 ; a=\"b\"\r\n!\r\n0\r\nX-T: 1\r\n\r\n"), Ok(b"hello!".to_vec()));
        assert_eq!(decode_all(b"A\r\n0123456789\r\n0\r\n\r\n"), Ok(b"0123456789".to_vec()));
    }

    #[test]
    fn ambiguous_chunk_lines_are_errors() {
        for bad in [
            &b"+5\r\nhello\r\n0\r\n\r\n"[..],
            b"-5\r\nhello\r\n0\r\n\r\n",
            b"  5\r\nhello\r\n0\r\n\r\n",
            b"0x5\r\nhello\r\n0\r\n\r\n",
            b"zz\r\nhello\r\n0\r\n\r\n",
            b"\r\nhello\r\n0\r\n\r\n",
            b"ffffffffffffffffff\r\nhello\r\n0\r\n\r\n",
            b"5\nhello\r\n0\r\n\r\n",
            b"5;ext\nhello\r\n0\r\n\r\n",
            b"5;a\rb\r\nhello\r\n0\r\n\r\n",
            b"5\r\nhello\r\n0\r\n\n",
        ] {
            assert!(decode_all(bad).is_err(), "{:?} was accepted", String::from_utf8_lossy(bad));
        }
    }
}
