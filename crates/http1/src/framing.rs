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
    /// Reading trailer lines.
    Trailers,
}

/// A piece of a body as [`Framing::decode_piece`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Body bytes.
    Data(Bytes),
    /// One line of a chunked body's trailer section, its CRLF gone (see [`Trailers::push`]).
    Trailer(Bytes),
}

/// The trailer fields of a chunked body, kept as they come and bounded: at most
/// [`Trailers::MAX_BYTES`] of names and values; fields beyond that, fields that must not be
/// trailers (framing, routing, connection fields) and lines that are not fields are dropped.
/// One pointer until a field comes: it sits in every HTTP/1.1 body's state.
#[derive(Debug, Default)]
pub struct Trailers(Option<Box<(http::HeaderMap, usize)>>);

impl Trailers {
    /// The most bytes of names and values kept.
    pub const MAX_BYTES: usize = 16 * 1024;

    /// Keeps the field of one trailer line.
    pub fn push(&mut self, line: &[u8]) {
        let Some((name, value)) = trailer_field(line) else { return };
        let size = name.as_str().len() + value.len();
        let (map, bytes) = &mut **self.0.get_or_insert_with(Default::default);
        if *bytes + size <= Self::MAX_BYTES {
            *bytes += size;
            map.append(name, value);
        }
    }

    /// The fields kept, if any; the collection starts over.
    pub fn take(&mut self) -> Option<http::HeaderMap> {
        self.0.take().map(|kept| kept.0).filter(|map| !map.is_empty())
    }
}

/// Writes the end of a chunked body to `out`: the last chunk, the trailer fields, the empty line.
pub fn encode_last_chunk(out: &mut Vec<u8>, trailers: Option<&http::HeaderMap>) {
    out.extend_from_slice(b"0\r\n");
    for (name, value) in trailers.into_iter().flatten() {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// The field of a trailer line (`name: value`, optional whitespace around the value), unless it
/// is not one (no colon, an invalid name or value, an obsolete line folding) or names a field
/// that must not be a trailer: those that frame or route the message or belong to the
/// connection (RFC 9110 §6.5.1).
pub fn trailer_field(line: &[u8]) -> Option<(http::HeaderName, http::HeaderValue)> {
    if line.first().is_some_and(|&b| b == b' ' || b == b'\t') {
        return None;
    }
    let colon = line.iter().position(|&b| b == b':')?;
    let name = http::HeaderName::from_bytes(&line[..colon]).ok()?;
    let value = line[colon + 1..].trim_ascii();
    let value = http::HeaderValue::from_bytes(value).ok()?;
    const NEVER: [&str; 12] = [
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "transfer-encoding",
        "upgrade",
        "trailer",
        "content-length",
        "host",
        "expect",
        "content-encoding",
        "content-type",
    ];
    (!NEVER.contains(&name.as_str())).then_some((name, value))
}

/// Why a body cannot be read on: its chunked framing is broken, and the connection with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BodyError {
    /// A chunk-size line that is not 1 to 16 hex digits before any `;` extension.
    ChunkSize,
    /// A chunk not followed by CRLF.
    MissingCrlf,
    /// A chunk-size or trailer line longer than the longest accepted.
    LineTooLong,
    /// A line ended by LF alone.
    BareLf,
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BodyError::ChunkSize => "invalid chunk size",
            BodyError::MissingCrlf => "missing CRLF after chunk",
            BodyError::LineTooLong => "chunk line too long",
            BodyError::BareLf => "chunked line ended by a bare LF",
        })
    }
}

impl std::error::Error for BodyError {}

impl Framing {
    /// Whether the whole body has been read.
    pub fn finished(self) -> bool {
        matches!(self, Framing::Empty | Framing::Length(0))
    }

    /// The next piece of body from `buf`, or `None` when more bytes are needed. Advances the
    /// framing; a finished body leaves any following bytes (a pipelined message) in `buf`. Trailer
    /// lines are read and dropped ([`Framing::decode_piece`] returns them).
    #[inline]
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>, BodyError> {
        loop {
            match self.decode_piece(buf)? {
                Some(Piece::Data(bytes)) => return Ok(Some(bytes)),
                Some(Piece::Trailer(_)) => {}
                None => return Ok(None),
            }
        }
    }

    /// [`Framing::decode`], with each trailer line of a chunked body as a piece of its own.
    pub fn decode_piece(&mut self, buf: &mut BytesMut) -> Result<Option<Piece>, BodyError> {
        loop {
            match self {
                Framing::Empty | Framing::Length(0) => return Ok(None),
                Framing::Length(left) => {
                    if buf.is_empty() {
                        return Ok(None);
                    }
                    let take = (*left).min(buf.len() as u64) as usize;
                    *left -= take as u64;
                    return Ok(Some(Piece::Data(buf.split_to(take).freeze())));
                }
                Framing::Close => {
                    return Ok((!buf.is_empty()).then(|| Piece::Data(buf.split().freeze())));
                }
                Framing::Chunked(state) => match *state {
                    Chunk::Size => {
                        let Some(line) = take_line(buf)? else { return Ok(None) };
                        let size = chunk_size(&line).ok_or(BodyError::ChunkSize)?;
                        *state = if size == 0 { Chunk::Trailers } else { Chunk::Data(size) };
                    }
                    Chunk::Data(left) => {
                        if buf.is_empty() {
                            return Ok(None);
                        }
                        let take = left.min(buf.len() as u64) as usize;
                        *state = if left == take as u64 { Chunk::DataEnd } else { Chunk::Data(left - take as u64) };
                        return Ok(Some(Piece::Data(buf.split_to(take).freeze())));
                    }
                    Chunk::DataEnd => {
                        if buf.len() < 2 {
                            return Ok(None);
                        }
                        if &buf[..2] != b"\r\n" {
                            return Err(BodyError::MissingCrlf);
                        }
                        buf.advance(2);
                        *state = Chunk::Size;
                    }
                    Chunk::Trailers => {
                        let Some(line) = take_line(buf)? else { return Ok(None) };
                        if line.is_empty() {
                            *self = Framing::Length(0);
                        } else {
                            return Ok(Some(Piece::Trailer(line)));
                        }
                    }
                },
            }
        }
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
/// some parsers accept and others skip over, is an error. A line longer than `MAX_CHUNK_LINE` is an
/// error whether it arrives in one read or several (the `body_framing` fuzz target holds to that).
fn take_line(buf: &mut BytesMut) -> Result<Option<Bytes>, BodyError> {
    match buf.iter().position(|&b| b == b'\n') {
        Some(i) if i > MAX_CHUNK_LINE => Err(BodyError::LineTooLong),
        Some(i) if i == 0 || buf[i - 1] != b'\r' => Err(BodyError::BareLf),
        Some(i) => {
            let mut line = buf.split_to(i + 1).freeze();
            line.truncate(i - 1);
            Ok(Some(line))
        }
        None if buf.len() > MAX_CHUNK_LINE => Err(BodyError::LineTooLong),
        None => Ok(None),
    }
}

/// What the tokens of a message's `Connection` headers say, gathered while its head is parsed.
/// A head whose `Connection` holds only `close` and `keep-alive` needs the header for nothing
/// past this hop: the parsers then leave it out of the header map, so it costs no removal later.
#[derive(Debug, Default, Clone, Copy)]
pub struct ConnectionTokens {
    /// `close`: the connection ends after this message.
    pub close: bool,
    /// `keep-alive` (what an HTTP/1.0 peer must say to keep the connection).
    pub keep_alive: bool,
    /// Anything else: `upgrade`, or names of further hop-by-hop headers to remove.
    pub other: bool,
}

/// A message's `Connection` headers while its head is parsed into a header map. One value that
/// says only `close` or `keep-alive` is left out of the map, as it means nothing past this hop;
/// otherwise every value goes in (in order), for the forward stage to act on.
#[derive(Debug, Default)]
pub struct ConnectionHeader {
    tokens: ConnectionTokens,
    held: Held,
}

#[derive(Debug, Default)]
enum Held {
    #[default]
    None,
    One(http::HeaderValue),
    Inserted,
}

impl ConnectionHeader {
    /// Takes one `Connection` value met while filling `headers`.
    pub fn take(&mut self, value: http::HeaderValue, headers: &mut http::HeaderMap) {
        self.tokens.scan(value.as_bytes());
        self.held = match std::mem::take(&mut self.held) {
            Held::None => Held::One(value),
            earlier => {
                if let Held::One(first) = earlier {
                    headers.append(http::header::CONNECTION, first);
                }
                headers.append(http::header::CONNECTION, value);
                Held::Inserted
            }
        };
    }

    /// Puts a held value into `headers` when it says more than `close` or `keep-alive`; the tokens.
    pub fn finish(self, headers: &mut http::HeaderMap) -> ConnectionTokens {
        if let (Held::One(value), true) = (self.held, self.tokens.other) {
            headers.append(http::header::CONNECTION, value);
        }
        self.tokens
    }
}

impl ConnectionTokens {
    /// Adds the tokens of one `Connection` value.
    pub fn scan(&mut self, value: &[u8]) {
        // The usual values, whole.
        if value.eq_ignore_ascii_case(b"keep-alive") {
            self.keep_alive = true;
            return;
        }
        if value.eq_ignore_ascii_case(b"close") {
            self.close = true;
            return;
        }
        for token in value.split(|&b| b == b',').map(|t| t.trim_ascii()) {
            if token.is_empty() {
                continue;
            }
            if token.eq_ignore_ascii_case(b"close") {
                self.close = true;
            } else if token.eq_ignore_ascii_case(b"keep-alive") {
                self.keep_alive = true;
            } else {
                self.other = true;
            }
        }
    }

    /// Whether the connection may carry another message after this one: HTTP/1.1 unless
    /// `close`, HTTP/1.0 only with `keep-alive`.
    pub fn keep_alive(&self, http10: bool) -> bool {
        !self.close && (self.keep_alive || !http10)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_connection(values: &[&'static str]) -> (http::HeaderMap, ConnectionTokens) {
        let mut headers = http::HeaderMap::new();
        let mut connection = ConnectionHeader::default();
        for v in values {
            connection.take(http::HeaderValue::from_static(v), &mut headers);
        }
        let tokens = connection.finish(&mut headers);
        (headers, tokens)
    }

    #[test]
    fn a_connection_header_saying_only_close_or_keep_alive_stays_out_of_the_map() {
        let (h, t) = parse_connection(&["Keep-Alive"]);
        assert!(h.is_empty());
        assert!(t.keep_alive(true) && t.keep_alive(false));
        let (h, t) = parse_connection(&["close"]);
        assert!(h.is_empty());
        assert!(!t.keep_alive(false));
        let (_, t) = parse_connection(&[]);
        assert!(t.keep_alive(false) && !t.keep_alive(true));
    }

    #[test]
    fn a_connection_header_naming_more_goes_in_whole_and_in_order() {
        let (h, t) = parse_connection(&["Upgrade"]);
        assert_eq!(h.get_all(http::header::CONNECTION).iter().collect::<Vec<_>>(), ["Upgrade"]);
        assert!(t.other);
        let (h, _) = parse_connection(&["keep-alive", "x-secret"]);
        assert_eq!(h.get_all(http::header::CONNECTION).iter().collect::<Vec<_>>(), ["keep-alive", "x-secret"]);
        let (h, t) = parse_connection(&["keep-alive", "close", "x-a"]);
        assert_eq!(h.get_all(http::header::CONNECTION).iter().count(), 3);
        assert!(!t.keep_alive(false));
    }

    fn decode_all(bytes: &[u8]) -> Result<Vec<u8>, BodyError> {
        let mut buf = BytesMut::from(bytes);
        let mut framing = Framing::Chunked(Chunk::Size);
        let mut body = Vec::new();
        while let Some(piece) = framing.decode(&mut buf)? {
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
    fn trailer_lines_come_as_pieces_and_fields_that_must_not_be_trailers_are_dropped() {
        let body = b"5\r\nhello\r\n0\r\ngrpc-status: 0\r\nGrpc-Message:  fine  \r\nX-Multi: a\r\nx-multi: b\r\n\
                     Content-Length: 9\r\nTransfer-Encoding: chunked\r\nHost: evil\r\n folded\r\nno colon\r\n\r\nNEXT";
        let mut buf = BytesMut::from(&body[..]);
        let mut framing = Framing::Chunked(Chunk::Size);
        let (mut data, mut trailers) = (Vec::new(), Trailers::default());
        while let Some(piece) = framing.decode_piece(&mut buf).expect("valid") {
            match piece {
                Piece::Data(b) => data.extend_from_slice(&b),
                Piece::Trailer(line) => trailers.push(&line),
            }
        }
        assert!(framing.finished());
        assert_eq!((&data[..], &buf[..]), (&b"hello"[..], &b"NEXT"[..]));
        let map = trailers.take().expect("trailers");
        let fields: Vec<String> = map.iter().map(|(k, v)| format!("{k}={}", v.to_str().unwrap_or("?"))).collect();
        assert_eq!(fields, ["grpc-status=0", "grpc-message=fine", "x-multi=a", "x-multi=b"]);
        assert!(trailers.take().is_none(), "taken once");
        let mut many = Trailers::default();
        for i in 0..2000 {
            many.push(format!("x-field-{i}: {}", "v".repeat(20)).as_bytes());
        }
        let kept = many.take().expect("some kept");
        assert!(kept.len() < 2000 && kept.len() > 100, "{} kept", kept.len());
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
        assert_eq!(decode_all(b"5\nhello\r\n0\r\n\r\n"), Err(BodyError::BareLf));
        assert_eq!(decode_all(b"zz\r\nhello\r\n0\r\n\r\n"), Err(BodyError::ChunkSize));
        assert_eq!(decode_all(b"5\r\nhello!\r\n0\r\n\r\n"), Err(BodyError::MissingCrlf));
        let mut long = BytesMut::from(&[b'1'; MAX_CHUNK_LINE + 1][..]);
        let text = Framing::Chunked(Chunk::Size).decode(&mut long).map_err(|e| e.to_string());
        assert_eq!(text, Err("chunk line too long".to_string()), "the text the HTTP/1 loops report");
    }
}
