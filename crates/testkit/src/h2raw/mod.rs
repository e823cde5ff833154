//! Raw HTTP/2 frames over cleartext TCP (prior knowledge), for attacks a real HTTP/2 client library
//! refuses to send: resets right after each request, header blocks that never end, floods of
//! control frames, header blocks that reference one table entry thousands of times. Frames are
//! written exactly as built; every read is bounded by a deadline.
//!
//! Header blocks are built with [`Hpack`], a minimal encoder written by hand.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

mod hpack;

use hpack::decode_status;
pub use hpack::{static_index, Hpack};

/// The client connection preface (RFC 9113 section 3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Size of a frame header.
pub const FRAME_HEADER_LEN: usize = 9;
/// Largest frame payload accepted by a peer that announced no `SETTINGS_MAX_FRAME_SIZE`.
pub const DEFAULT_MAX_FRAME: usize = 16_384;

/// Frame types (RFC 9113 section 6).
pub mod kind {
    /// DATA.
    pub const DATA: u8 = 0x0;
    /// HEADERS.
    pub const HEADERS: u8 = 0x1;
    /// PRIORITY.
    pub const PRIORITY: u8 = 0x2;
    /// RST_STREAM.
    pub const RST_STREAM: u8 = 0x3;
    /// SETTINGS.
    pub const SETTINGS: u8 = 0x4;
    /// PING.
    pub const PING: u8 = 0x6;
    /// GOAWAY.
    pub const GOAWAY: u8 = 0x7;
    /// WINDOW_UPDATE.
    pub const WINDOW_UPDATE: u8 = 0x8;
    /// CONTINUATION.
    pub const CONTINUATION: u8 = 0x9;
}

/// Frame flags.
pub mod flag {
    /// END_STREAM (DATA, HEADERS).
    pub const END_STREAM: u8 = 0x1;
    /// ACK (SETTINGS, PING).
    pub const ACK: u8 = 0x1;
    /// END_HEADERS (HEADERS, CONTINUATION).
    pub const END_HEADERS: u8 = 0x4;
}

/// Error codes (RFC 9113 section 7).
pub mod code {
    /// NO_ERROR.
    pub const NO_ERROR: u32 = 0x0;
    /// PROTOCOL_ERROR.
    pub const PROTOCOL_ERROR: u32 = 0x1;
    /// CANCEL.
    pub const CANCEL: u32 = 0x8;
    /// COMPRESSION_ERROR.
    pub const COMPRESSION_ERROR: u32 = 0x9;
    /// REFUSED_STREAM.
    pub const REFUSED_STREAM: u32 = 0x7;
    /// ENHANCE_YOUR_CALM.
    pub const ENHANCE_YOUR_CALM: u32 = 0xb;
}

/// Setting identifiers.
pub mod setting {
    /// SETTINGS_HEADER_TABLE_SIZE.
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    /// SETTINGS_INITIAL_WINDOW_SIZE.
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    /// SETTINGS_MAX_HEADER_LIST_SIZE.
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}

/// One frame as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Type, see [`kind`].
    pub kind: u8,
    /// Flags, see [`flag`].
    pub flags: u8,
    /// Stream identifier.
    pub stream: u32,
    /// The payload.
    pub payload: Vec<u8>,
}

impl Frame {
    /// The error code of a RST_STREAM or GOAWAY frame.
    pub fn error_code(&self) -> Option<u32> {
        let at = match self.kind {
            kind::RST_STREAM => 0,
            kind::GOAWAY => 4,
            _ => return None,
        };
        Some(u32::from_be_bytes(self.payload.get(at..at + 4)?.try_into().ok()?))
    }

    /// The settings carried by a SETTINGS frame.
    pub fn settings(&self) -> Vec<(u16, u32)> {
        self.payload
            .chunks_exact(6)
            .map(|c| (u16::from_be_bytes([c[0], c[1]]), u32::from_be_bytes([c[2], c[3], c[4], c[5]])))
            .collect()
    }
}

/// A GOAWAY frame's content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoAway {
    /// Highest stream the server says it processed.
    pub last_stream_id: u32,
    /// Error code, see [`code`].
    pub code: u32,
    /// Debug data (text in practice).
    pub debug: String,
}

/// How reading frames ended when no frame came.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadEnd {
    /// The server closed the connection (EOF or reset).
    Closed,
    /// The deadline passed.
    TimedOut,
}

/// Removes the first frame from `buf`, if it holds a whole one.
fn take_frame(buf: &mut Vec<u8>) -> Option<Frame> {
    let len = u32::from_be_bytes([0, *buf.first()?, *buf.get(1)?, *buf.get(2)?]) as usize;
    if buf.len() < FRAME_HEADER_LEN + len {
        return None;
    }
    let head: Vec<u8> = buf.drain(..FRAME_HEADER_LEN).collect();
    let payload = buf.drain(..len).collect();
    let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    Some(Frame { kind: head[3], flags: head[4], stream, payload })
}

/// The whole frames in `bytes` (a server's output as some other client received it), in order.
pub fn decode_frames(bytes: &[u8]) -> Vec<Frame> {
    let mut buf = bytes.to_vec();
    std::iter::from_fn(|| take_frame(&mut buf)).collect()
}

/// Appends one frame to `out`. The length is not checked against any limit, on purpose.
pub fn encode_frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = payload.len() as u32;
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(payload);
}

/// Appends a RST_STREAM frame to `out`.
pub fn encode_rst(out: &mut Vec<u8>, stream: u32, code: u32) {
    encode_frame(out, kind::RST_STREAM, 0, stream, &code.to_be_bytes());
}

/// Appends a SETTINGS frame (not an ACK) carrying `settings` to `out`.
pub fn encode_settings(out: &mut Vec<u8>, settings: &[(u16, u32)]) {
    let mut payload = Vec::with_capacity(settings.len() * 6);
    for (id, value) in settings {
        payload.extend_from_slice(&id.to_be_bytes());
        payload.extend_from_slice(&value.to_be_bytes());
    }
    encode_frame(out, kind::SETTINGS, 0, 0, &payload);
}

/// A cleartext HTTP/2 connection driven frame by frame.
#[derive(Debug)]
pub struct H2Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl H2Conn {
    /// Connects to `addr` and sends the preface and an empty SETTINGS frame; panics on failure.
    pub fn connect(addr: SocketAddr) -> H2Conn {
        H2Conn::connect_with(addr, &[])
    }

    /// The server's side of a connection a client opened: reads the client's preface within
    /// `timeout` and sends an empty SETTINGS frame (the client's SETTINGS is the first frame
    /// read after).
    pub fn accept(stream: TcpStream, timeout: Duration) -> Result<H2Conn, ReadEnd> {
        let _ = stream.set_nodelay(true);
        let _ = stream.set_write_timeout(Some(crate::IO_TIMEOUT));
        let _ = stream.set_read_timeout(Some(timeout));
        let mut conn = H2Conn { stream, buf: Vec::new() };
        let mut preface = [0u8; PREFACE.len()];
        conn.stream.read_exact(&mut preface).map_err(|_| ReadEnd::Closed)?;
        if &preface != PREFACE {
            return Err(ReadEnd::Closed);
        }
        conn.settings(&[]).map_err(|_| ReadEnd::Closed)?;
        Ok(conn)
    }

    /// Connects and sends the preface and a SETTINGS frame carrying `settings`.
    pub fn connect_with(addr: SocketAddr, settings: &[(u16, u32)]) -> H2Conn {
        let stream =
            TcpStream::connect_timeout(&addr, crate::IO_TIMEOUT).unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
        let _ = stream.set_nodelay(true);
        let _ = stream.set_write_timeout(Some(crate::IO_TIMEOUT));
        let mut conn = H2Conn { stream, buf: Vec::new() };
        let mut hello = PREFACE.to_vec();
        encode_settings(&mut hello, settings);
        conn.send(&hello).expect("send the preface");
        conn
    }

    /// Reads until the server's SETTINGS frame (not an ACK) and acknowledges it, so the limits it
    /// announced are in force; returns them.
    pub fn handshake(&mut self, timeout: Duration) -> Result<Vec<(u16, u32)>, ReadEnd> {
        let frame = self.read_until(timeout, |f| f.kind == kind::SETTINGS && f.flags & flag::ACK == 0, |_| {})?;
        self.frame(kind::SETTINGS, flag::ACK, 0, &[]).map_err(|_| ReadEnd::Closed)?;
        Ok(frame.settings())
    }

    /// Another handle on the same socket for writing from a second thread while this one reads.
    pub fn writer(&self) -> H2Writer {
        H2Writer { stream: self.stream.try_clone().expect("clone the socket") }
    }

    /// Writes `bytes` (any number of encoded frames) as they are.
    pub fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Writes one frame.
    pub fn frame(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) -> std::io::Result<()> {
        let mut out = Vec::with_capacity(FRAME_HEADER_LEN + payload.len());
        encode_frame(&mut out, kind, flags, stream, payload);
        self.send(&out)
    }

    /// Writes a HEADERS frame for `stream` carrying `block`.
    pub fn headers(&mut self, stream: u32, block: &[u8], end_stream: bool, end_headers: bool) -> std::io::Result<()> {
        let flags = if end_stream { flag::END_STREAM } else { 0 } | if end_headers { flag::END_HEADERS } else { 0 };
        self.frame(kind::HEADERS, flags, stream, block)
    }

    /// Writes a CONTINUATION frame.
    pub fn continuation(&mut self, stream: u32, block: &[u8], end_headers: bool) -> std::io::Result<()> {
        self.frame(kind::CONTINUATION, if end_headers { flag::END_HEADERS } else { 0 }, stream, block)
    }

    /// Writes a DATA frame.
    pub fn data(&mut self, stream: u32, data: &[u8], end_stream: bool) -> std::io::Result<()> {
        self.frame(kind::DATA, if end_stream { flag::END_STREAM } else { 0 }, stream, data)
    }

    /// Writes a WINDOW_UPDATE frame.
    pub fn window_update(&mut self, stream: u32, increment: u32) -> std::io::Result<()> {
        self.frame(kind::WINDOW_UPDATE, 0, stream, &increment.to_be_bytes())
    }

    /// Writes a RST_STREAM frame.
    pub fn rst_stream(&mut self, stream: u32, code: u32) -> std::io::Result<()> {
        self.frame(kind::RST_STREAM, 0, stream, &code.to_be_bytes())
    }

    /// Writes a SETTINGS frame (not an ACK).
    pub fn settings(&mut self, settings: &[(u16, u32)]) -> std::io::Result<()> {
        let mut out = Vec::new();
        encode_settings(&mut out, settings);
        self.send(&out)
    }

    /// Writes a PING frame.
    pub fn ping(&mut self, data: [u8; 8], ack: bool) -> std::io::Result<()> {
        self.frame(kind::PING, if ack { flag::ACK } else { 0 }, 0, &data)
    }

    /// Reads the next frame, waiting at most until `deadline`.
    pub fn read_frame_by(&mut self, deadline: Instant) -> Result<Frame, ReadEnd> {
        loop {
            if let Some(frame) = take_frame(&mut self.buf) {
                return Ok(frame);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(ReadEnd::TimedOut);
            }
            let _ = self.stream.set_read_timeout(Some((deadline - now).max(Duration::from_millis(1))));
            let mut chunk = [0u8; 16 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(ReadEnd::Closed),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(ReadEnd::TimedOut)
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Err(ReadEnd::Closed),
            }
        }
    }

    /// Reads the next frame, waiting at most `timeout`.
    pub fn read_frame(&mut self, timeout: Duration) -> Result<Frame, ReadEnd> {
        self.read_frame_by(Instant::now() + timeout)
    }

    /// Reads frames until one satisfies `pred`, the connection closes or `timeout` passes; frames
    /// before it are passed to `seen`.
    pub fn read_until(
        &mut self,
        timeout: Duration,
        mut pred: impl FnMut(&Frame) -> bool,
        mut seen: impl FnMut(&Frame),
    ) -> Result<Frame, ReadEnd> {
        let deadline = Instant::now() + timeout;
        loop {
            let frame = self.read_frame_by(deadline)?;
            if pred(&frame) {
                return Ok(frame);
            }
            seen(&frame);
        }
    }

    /// Reads until a GOAWAY frame comes (other frames are discarded); `Err` if the connection closed
    /// or `timeout` passed first.
    pub fn read_goaway(&mut self, timeout: Duration) -> Result<GoAway, ReadEnd> {
        let frame = self.read_until(timeout, |f| f.kind == kind::GOAWAY, |_| {})?;
        let p = &frame.payload;
        let word = |at: usize| p.get(at..at + 4).map_or(0, |b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
        Ok(GoAway {
            last_stream_id: word(0) & 0x7fff_ffff,
            code: word(4),
            debug: String::from_utf8_lossy(p.get(8..).unwrap_or_default()).into_owned(),
        })
    }

    /// Reads the response to `stream`: its status (from a `:status` the server sent as a static
    /// table index or a literal) and the number of body bytes, acknowledging nothing. Frames of
    /// other streams are discarded. `Err` with the reset code if the stream was reset.
    pub fn read_response(&mut self, stream: u32, timeout: Duration) -> Result<(u16, usize), String> {
        let deadline = Instant::now() + timeout;
        let mut status = None;
        let mut body = 0;
        loop {
            let f = self.read_frame_by(deadline).map_err(|e| format!("{e:?} before the response on {stream}"))?;
            match f.kind {
                kind::GOAWAY => return Err(format!("GOAWAY code {:?}", f.error_code())),
                _ if f.stream != stream => continue,
                kind::RST_STREAM => return Err(format!("stream reset with code {:?}", f.error_code())),
                kind::HEADERS if status.is_none() => status = decode_status(&f.payload),
                kind::DATA => body += f.payload.len(),
                _ => {}
            }
            if f.flags & flag::END_STREAM != 0 && matches!(f.kind, kind::HEADERS | kind::DATA) {
                return status.map(|s| (s, body)).ok_or_else(|| format!("no :status on stream {stream}"));
            }
        }
    }
}

/// The write half of an [`H2Conn`], for a second thread.
#[derive(Debug)]
pub struct H2Writer {
    stream: TcpStream,
}

impl H2Writer {
    /// Writes `bytes` as they are.
    pub fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_their_header() {
        let mut out = Vec::new();
        encode_rst(&mut out, 3, code::CANCEL);
        assert_eq!(out, [0, 0, 4, kind::RST_STREAM, 0, 0, 0, 0, 3, 0, 0, 0, 8]);
        encode_frame(&mut out, kind::PING, flag::ACK, 0, b"12345678");
        let frames = decode_frames(&out[..out.len() - 1]);
        assert_eq!(frames.len(), 1, "a frame cut short is not returned");
        assert_eq!(frames[0].error_code(), Some(code::CANCEL));
        assert_eq!(decode_frames(&out)[1].payload, b"12345678");
    }
}
