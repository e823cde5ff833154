//! Raw TCP: bytes exactly as written, for malformed requests, slow clients, connection-level
//! behaviour (keep-alive, close) and protocol upgrades. Every read is bounded by a deadline.

use crate::client::find;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long [`raw`] waits for the server to close.
const RAW_TIMEOUT: Duration = Duration::from_secs(5);

/// A response parsed from raw bytes.
#[derive(Clone, Debug)]
pub struct RawResponse {
    /// Status code.
    pub status: u16,
    /// The head as received, without the final empty line.
    pub head: String,
    /// Headers with lower-case names.
    pub headers: Vec<(String, String)>,
    /// The body (by `Content-Length`, chunked, or none for 1xx/204/304).
    pub body: Vec<u8>,
    /// A chunked body's trailer fields, names in lower case.
    pub trailers: Vec<(String, String)>,
}

impl RawResponse {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        crate::first_header(&self.headers, name)
    }
}

/// Header or trailer fields, names in lower case.
type Fields = Vec<(String, String)>;

/// What a read found besides data.
enum Read1 {
    Data,
    Closed,
    TimedOut,
}

/// A client TCP connection with a read buffer.
#[derive(Debug)]
pub struct RawConn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl RawConn {
    /// Connects to `addr`; panics on failure.
    pub fn connect(addr: SocketAddr) -> RawConn {
        let stream =
            TcpStream::connect_timeout(&addr, crate::IO_TIMEOUT).unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
        let _ = stream.set_nodelay(true);
        RawConn { stream, buf: Vec::new() }
    }

    /// Connects to `addr` from source address `from` (any of 127.0.0.0/8 on loopback, so a test
    /// can be several clients); panics on failure.
    pub fn connect_from(addr: SocketAddr, from: std::net::IpAddr) -> RawConn {
        let connect = || -> std::io::Result<TcpStream> {
            let s = socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::STREAM, None)?;
            s.bind(&SocketAddr::new(from, 0).into())?;
            s.connect_timeout(&addr.into(), crate::IO_TIMEOUT)?;
            Ok(s.into())
        };
        let stream = connect().unwrap_or_else(|e| panic!("connect to {addr} from {from}: {e}"));
        let _ = stream.set_nodelay(true);
        RawConn { stream, buf: Vec::new() }
    }

    /// Writes all of `bytes`; panics on failure.
    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write to the raw connection");
        let _ = self.stream.flush();
    }

    /// Writes `bytes`, reporting a failure instead of panicking (the server may have closed).
    pub fn try_send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    fn read_some(&mut self, deadline: Instant) -> Read1 {
        let now = Instant::now();
        if now >= deadline {
            return Read1::TimedOut;
        }
        let _ = self.stream.set_read_timeout(Some((deadline - now).max(Duration::from_millis(1))));
        let mut chunk = [0u8; 16 * 1024];
        match self.stream.read(&mut chunk) {
            Ok(0) => Read1::Closed,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Read1::Data
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Read1::TimedOut,
            Err(e) if e.kind() == ErrorKind::Interrupted => Read1::Data,
            Err(_) => Read1::Closed,
        }
    }

    /// Reads until the server closes the connection (EOF or reset) or `timeout` passes. Returns what
    /// was read (including anything buffered) and whether the connection was closed.
    pub fn read_to_close(&mut self, timeout: Duration) -> (String, bool) {
        let deadline = Instant::now() + timeout;
        let closed = loop {
            match self.read_some(deadline) {
                Read1::Data => continue,
                Read1::Closed => break true,
                Read1::TimedOut => break false,
            }
        };
        let text = String::from_utf8_lossy(&self.buf).into_owned();
        self.buf.clear();
        (text, closed)
    }

    /// Waits for the server to close the connection, discarding data; returns how long it took, or
    /// `None` if it was still open after `timeout`.
    pub fn wait_closed(&mut self, timeout: Duration) -> Option<Duration> {
        let start = Instant::now();
        let deadline = start + timeout;
        loop {
            match self.read_some(deadline) {
                Read1::Data => self.buf.clear(),
                Read1::Closed => return Some(start.elapsed()),
                Read1::TimedOut => return None,
            }
        }
    }

    /// Reads exactly `n` bytes (from the buffer first).
    pub fn read_exact(&mut self, n: usize, timeout: Duration) -> Result<Vec<u8>, String> {
        let deadline = Instant::now() + timeout;
        while self.buf.len() < n {
            match self.read_some(deadline) {
                Read1::Data => {}
                Read1::Closed => return Err(format!("closed after {} of {n} bytes", self.buf.len())),
                Read1::TimedOut => return Err(format!("timed out after {} of {n} bytes", self.buf.len())),
            }
        }
        Ok(self.buf.drain(..n).collect())
    }

    /// Reads one response head and its body. Bytes after it stay buffered for the next read.
    pub fn read_response(&mut self, timeout: Duration) -> Result<RawResponse, String> {
        let deadline = Instant::now() + timeout;
        let end = loop {
            if let Some(end) = find(&self.buf, b"\r\n\r\n") {
                break end;
            }
            match self.read_some(deadline) {
                Read1::Data => {}
                Read1::Closed => return Err(self.incomplete("closed before a whole response head")),
                Read1::TimedOut => return Err(self.incomplete("timed out before a whole response head")),
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
        self.buf.drain(..end + 4);
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|s| s.parse::<u16>().ok())
            .ok_or_else(|| format!("no status line in {head:?}"))?;
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let mut resp = RawResponse { status, head, headers, body: Vec::new(), trailers: Vec::new() };
        if (100..200).contains(&status) || status == 204 || status == 304 {
            return Ok(resp);
        }
        if resp.header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
            (resp.body, resp.trailers) = self.read_chunked(deadline)?;
        } else if let Some(len) = resp.header("content-length").and_then(|v| v.parse::<usize>().ok()) {
            let left = deadline.saturating_duration_since(Instant::now());
            resp.body = self.read_exact(len, left)?;
        } else {
            // Delimited by close.
            let left = deadline.saturating_duration_since(Instant::now());
            let (text, _) = self.read_to_close(left);
            resp.body = text.into_bytes();
        }
        Ok(resp)
    }

    fn read_line(&mut self, deadline: Instant) -> Result<String, String> {
        loop {
            if let Some(end) = find(&self.buf, b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[..end]).into_owned();
                self.buf.drain(..end + 2);
                return Ok(line);
            }
            match self.read_some(deadline) {
                Read1::Data => {}
                _ => return Err("chunked body ended early".into()),
            }
        }
    }

    fn read_chunked(&mut self, deadline: Instant) -> Result<(Vec<u8>, Fields), String> {
        let mut body = Vec::new();
        // A chunk per iteration; the count is bounded by the deadline inside each read.
        loop {
            let size_line = self.read_line(deadline)?;
            let size = usize::from_str_radix(size_line.split(';').next().unwrap_or("").trim(), 16)
                .map_err(|_| format!("bad chunk size {size_line:?}"))?;
            if size == 0 {
                // Trailers until the empty line.
                let mut trailers = Vec::new();
                loop {
                    let line = self.read_line(deadline)?;
                    if line.is_empty() {
                        return Ok((body, trailers));
                    }
                    if let Some((k, v)) = line.split_once(':') {
                        trailers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
                    }
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            body.extend(self.read_exact(size + 2, left)?.into_iter().take(size));
        }
    }

    fn incomplete(&self, what: &str) -> String {
        format!("{what}; got {:?}", String::from_utf8_lossy(&self.buf))
    }
}

/// Writes `bytes` to a fresh connection and returns everything read until the server closes it or
/// 5 s pass.
pub fn raw(addr: SocketAddr, bytes: &[u8]) -> String {
    let mut c = RawConn::connect(addr);
    c.send(bytes);
    c.read_to_close(RAW_TIMEOUT).0
}

/// Whether a TCP connection to `addr` is refused right now.
pub fn connect_refused(addr: SocketAddr) -> bool {
    matches!(
        TcpStream::connect_timeout(&addr, Duration::from_secs(2)),
        Err(e) if e.kind() == ErrorKind::ConnectionRefused
    )
}
