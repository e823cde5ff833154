//! Writing responses to the client: the head is encoded into one buffer, small bodies ride in the
//! same write, larger ones follow directly; chunked coding when the length is unknown (HTTP/1.1),
//! end of connection otherwise (HTTP/1.0).

use crate::transport::Transport;
use bytes::Bytes;
use gatehouse_proxy::ResponseBody;
use http::header;
use http::{Response, StatusCode};
use http_body::Body;
use std::cell::RefCell;
use std::io::{self, Write as _};
use std::pin::Pin;
use std::time::{Duration, SystemTime};

/// Body bytes copied into the head's buffer to share its write.
const COALESCE: usize = 16 * 1024;

thread_local! {
    /// The `Date` value, formatted once per second per worker.
    static DATE: RefCell<(u64, String)> = const { RefCell::new((0, String::new())) };
}

fn push_date(w: &mut Vec<u8>) {
    let now = SystemTime::now();
    let secs = now.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    DATE.with(|d| {
        let mut d = d.borrow_mut();
        if d.0 != secs || d.1.is_empty() {
            *d = (secs, gatehouse_telemetry::http_date(now));
        }
        w.extend_from_slice(b"date: ");
        w.extend_from_slice(d.1.as_bytes());
        w.extend_from_slice(b"\r\n");
    });
}

/// Writes all of `buf`, failing when the client takes longer than `timeout` to take it (a client
/// that stops reading, as nginx's `send_timeout`: a slow reader that keeps reading is never cut).
pub(crate) async fn write_all(stream: &Transport, buf: &[u8], timeout: Duration) -> io::Result<()> {
    write_all_then(stream, buf, false, timeout).await
}

/// [`write_all`], and when `closing` (the response's last bytes on a connection that closes after
/// it) close_notify goes with them over TLS.
async fn write_all_then(stream: &Transport, buf: &[u8], closing: bool, timeout: Duration) -> io::Result<()> {
    // Most writes fit in the socket's buffer at once, and need no timer.
    let now = stream.write_now(buf, closing)?;
    if now == buf.len() {
        return Ok(());
    }
    // Boxed: the timer and the wait are state only a blocked write needs, so the futures that
    // write responses stay small (and cheap to allocate) for the rest.
    match Box::pin(tokio::time::timeout(timeout, stream.write_all(&buf[now..], closing))).await {
        Ok(written) => written,
        Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, SendTimedOut)),
    }
}

/// The error of a write the client did not take within `send_timeout`.
#[derive(Debug)]
pub(crate) struct SendTimedOut;

impl std::fmt::Display for SendTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the client took nothing for send_timeout")
    }
}

impl std::error::Error for SendTimedOut {}

impl SendTimedOut {
    /// Whether `e` is this error (not, say, a response body's own failure).
    pub(crate) fn is(e: &io::Error) -> bool {
        e.get_ref().is_some_and(|inner| inner.is::<SendTimedOut>())
    }
}

/// How the written response ended.
pub(crate) enum Written {
    /// The connection may serve another request (if the request side agrees).
    KeepAlive,
    /// The connection must close (close-delimited body, or `Connection: close`).
    Close,
    /// 101: the response body holds the endpoint's connection for the tunnel.
    Switched(Box<ResponseBody>),
}

/// How a response's head was written, and so how its body goes.
struct Head {
    /// No body is sent (HEAD, 1xx, 204, 304).
    no_body: bool,
    /// The body goes chunked.
    chunked: bool,
    /// A 101: the connection becomes the tunnel.
    switching: bool,
    /// The connection stays open after the response.
    keep_alive: bool,
}

/// Encodes the head of a response into `w`: the status line, the endpoint's own lines as it wrote
/// them, what the proxy added, `date`, the framing (`content-length` or chunked) and the
/// connection's fate. A `connection: close` in the map (error answers) ends keep-alive.
#[inline(always)] // one caller, on every response
fn encode_head(
    parts: http::response::Parts,
    body: &mut ResponseBody,
    head_request: bool,
    http10: bool,
    mut keep_alive: bool,
    w: &mut Vec<u8>,
) -> Head {
    let status = parts.status;
    let no_body = head_request
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    w.clear();
    w.extend_from_slice(b"HTTP/1.1 ");
    w.extend_from_slice(status.as_str().as_bytes());
    w.push(b' ');
    w.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    w.extend_from_slice(b"\r\n");
    // The endpoint's own lines, as it wrote them, then what the proxy added.
    let raw = body.take_raw_head();
    let (mut has_date, mut has_length) = (false, false);
    if let Some(raw) = &raw {
        raw.write(w);
        has_date = raw.has_date();
        has_length = raw.has_content_length();
    }
    // Written: the lines no longer hold the endpoint connection's read buffer.
    drop(raw);
    for (name, value) in &parts.headers {
        // Not written: the server decides (below), and only heeds a `close` (error answers).
        if name == header::CONNECTION {
            keep_alive &= !says_close(value);
            continue;
        }
        has_date |= name == header::DATE;
        has_length |= name == header::CONTENT_LENGTH;
        w.extend_from_slice(name.as_str().as_bytes());
        w.extend_from_slice(b": ");
        w.extend_from_slice(value.as_bytes());
        w.extend_from_slice(b"\r\n");
    }
    if !has_date {
        push_date(w);
    }
    let mut chunked = false;
    let switching = status == StatusCode::SWITCHING_PROTOCOLS;
    if !no_body && !has_length {
        match body.size_hint().exact() {
            Some(n) => {
                let _ = write!(w, "content-length: {n}\r\n");
            }
            None if !http10 => {
                chunked = true;
                w.extend_from_slice(b"transfer-encoding: chunked\r\n");
            }
            None => keep_alive = false,
        }
    }
    // The head is encoded: its map serves the next head on this worker.
    gatehouse_http1::header_maps::give(parts.headers);
    if switching {
        w.extend_from_slice(b"connection: upgrade\r\n");
    } else if !keep_alive {
        w.extend_from_slice(b"connection: close\r\n");
    } else if http10 {
        w.extend_from_slice(b"connection: keep-alive\r\n");
    }
    w.extend_from_slice(b"\r\n");
    Head { no_body, chunked, switching, keep_alive }
}

/// Encodes and writes `resp`. `head_request` suppresses the body; `http10` rules out chunked; each
/// write must be taken by the client within `send_timeout`.
pub(crate) async fn write_response(
    stream: &Transport,
    resp: Response<ResponseBody>,
    head_request: bool,
    http10: bool,
    keep_alive: bool,
    w: &mut Vec<u8>,
    send_timeout: Duration,
) -> io::Result<Written> {
    let (parts, mut body) = resp.into_parts();
    let Head { no_body, chunked, switching, keep_alive } =
        encode_head(parts, &mut body, head_request, http10, keep_alive, w);
    if switching {
        write_all(stream, w, send_timeout).await?;
        return Ok(Written::Switched(Box::new(body)));
    }
    if no_body {
        write_all_then(stream, w, !keep_alive, send_timeout).await?;
        return Ok(if keep_alive { Written::KeepAlive } else { Written::Close });
    }
    let mut pending = !w.is_empty();
    // Boxed: a header map would grow this future by its size for every response.
    let mut trailers: Option<Box<http::HeaderMap>> = None;
    loop {
        let frame = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await;
        let data: Bytes = match frame {
            None => break,
            Some(Err(e)) => return Err(io::Error::other(e)),
            Some(Ok(frame)) => match frame.into_data() {
                Ok(d) if !d.is_empty() => d,
                Ok(_) => continue,
                // Sent after the last chunk; a response with a length has no place for them.
                Err(frame) => {
                    trailers = frame.into_trailers().ok().map(Box::new);
                    continue;
                }
            },
        };
        if chunked {
            let _ = write!(w, "{:x}\r\n", data.len());
        }
        if w.len() + data.len() <= COALESCE {
            w.extend_from_slice(&data);
            if chunked {
                w.extend_from_slice(b"\r\n");
            }
            pending = true;
            // More frames may be ready at once; the buffer is written before waiting for them.
            if !body.is_end_stream() {
                write_all(stream, w, send_timeout).await?;
                w.clear();
                pending = false;
            }
        } else {
            write_all(stream, w, send_timeout).await?;
            w.clear();
            write_all(stream, &data, send_timeout).await?;
            if chunked {
                w.extend_from_slice(b"\r\n");
                pending = true;
            } else {
                pending = false;
            }
        }
    }
    if chunked {
        gatehouse_http1::framing::encode_last_chunk(w, trailers.as_deref());
        pending = true;
    }
    if pending && !w.is_empty() {
        write_all_then(stream, w, !keep_alive, send_timeout).await?;
    }
    Ok(if keep_alive { Written::KeepAlive } else { Written::Close })
}

/// The bytes of one of the gateway's own answers, head and body, as a connection that ends with
/// it sends them: refusals of heads that cannot be read, before any request exists for
/// [`write_response`] to answer. (A second caller would keep `write_response`, the answer of every
/// request, from being inlined into the connection's loop.)
pub(crate) fn encode_whole(resp: &Response<ResponseBody>) -> Vec<u8> {
    let body = resp.body().full_bytes().unwrap_or_default();
    let status = resp.status();
    let mut w = Vec::with_capacity(160 + body.len());
    let _ = write!(w, "HTTP/1.1 {} {}\r\n", status.as_str(), status.canonical_reason().unwrap_or(""));
    for (name, value) in resp.headers() {
        w.extend_from_slice(name.as_str().as_bytes());
        w.extend_from_slice(b": ");
        w.extend_from_slice(value.as_bytes());
        w.extend_from_slice(b"\r\n");
    }
    let _ = write!(w, "content-length: {}\r\n\r\n", body.len());
    w.extend_from_slice(body);
    w
}

fn says_close(value: &http::HeaderValue) -> bool {
    value.as_bytes().split(|&b| b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"))
}
