//! Wire stage: RESP2 framing. Commands go out as arrays of bulk strings; replies come back through
//! an incremental [`Parser`] that takes whatever bytes have arrived, and that rejects sizes above
//! its [`Limits`] before allocating for them.
//!
//! ```text
//! +OK\r\n            simple string      -ERR msg\r\n     error reply
//! :42\r\n            integer            $3\r\nfoo\r\n   bulk string ($-1: nil)
//! *2\r\n<v><v>       array (*-1: nil), elements are any of the above, nested
//! ```

use crate::error::{Error, Result};
use crate::value::Value;
use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Longest status, error or header line accepted: a line without CRLF beyond this is garbage.
const MAX_LINE: usize = 64 * 1024;

/// Bulk strings up to this size are copied out of the read buffer rather than sharing it, so a
/// small value kept by the caller does not pin a large buffer.
const COPY_BELOW: usize = 4 * 1024;

/// Most memory reserved ahead for a bulk string that has not arrived yet.
const MAX_RESERVE_AHEAD: usize = 1024 * 1024;

/// Sizes a reply may declare. They bound what a broken or hostile server can make the client
/// allocate: every allocation is either within these limits or proportional to bytes received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest bulk string, in bytes (Redis's own limit is 512 MiB).
    pub max_bulk_len: usize,
    /// Most elements in one array.
    pub max_array_len: usize,
    /// Deepest nesting of arrays; also keeps dropping a reply from recursing too deep.
    pub max_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_bulk_len: 512 * 1024 * 1024, max_array_len: 1024 * 1024, max_depth: 64 }
    }
}

/// Appends `args` to `buf` as one RESP2 command (an array of bulk strings).
pub fn encode_command<A: AsRef<[u8]>>(buf: &mut BytesMut, args: &[A]) {
    let payload: usize = args.iter().map(|a| a.as_ref().len() + 16).sum();
    buf.reserve(payload + 16);
    put_header(buf, b'*', args.len());
    for arg in args {
        let arg = arg.as_ref();
        put_header(buf, b'$', arg.len());
        buf.put_slice(arg);
        buf.put_slice(b"\r\n");
    }
}

fn put_header(buf: &mut BytesMut, kind: u8, len: usize) {
    buf.put_u8(kind);
    buf.put_slice(Decimal::from(len as u64).as_ref());
    buf.put_slice(b"\r\n");
}

/// A number formatted in decimal on the stack, for command arguments.
pub(crate) struct Decimal {
    digits: [u8; 20],
    start: usize,
}

impl From<u64> for Decimal {
    fn from(mut n: u64) -> Self {
        let mut digits = [0u8; 20];
        let mut start = digits.len();
        loop {
            start -= 1;
            digits[start] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        Decimal { digits, start }
    }
}

impl AsRef<[u8]> for Decimal {
    fn as_ref(&self) -> &[u8] {
        &self.digits[self.start..]
    }
}

/// An array whose elements are still arriving.
#[derive(Debug)]
struct PartialArray {
    items: Vec<Value>,
    remaining: usize,
    /// The first error reply nested inside: the whole reply becomes that error.
    error: Option<Error>,
}

/// One element read off the wire: either complete (a value, or an error reply as
/// [`Error::Server`]), or the start of an array.
enum Item {
    Done(Result<Value>),
    ArrayStart(usize),
}

/// Incremental RESP2 reply parser. It keeps the arrays it has started between calls, so each
/// byte is looked at about once however the reply is split across reads.
#[derive(Debug, Default)]
pub struct Parser {
    limits: Limits,
    stack: Vec<PartialArray>,
}

impl Parser {
    /// A parser enforcing `limits`.
    pub fn new(limits: Limits) -> Self {
        Parser { limits, stack: Vec::new() }
    }

    /// Takes the next complete reply off the front of `buf`.
    ///
    /// - `Ok(Some(value))`: a reply, consumed from `buf`.
    /// - `Ok(None)`: more bytes are needed; what could be consumed has been, and the rest stays in
    ///   `buf` for the next call.
    /// - `Err(Error::Server(_))`: an error reply (top level, or nested in an array), consumed; the
    ///   stream is still in sync.
    /// - any other error: the stream is broken (bad syntax, a size over the limits); the
    ///   connection must be closed and this parser dropped.
    pub fn parse(&mut self, buf: &mut BytesMut) -> Result<Option<Value>> {
        loop {
            let Some(item) = self.next_item(buf)? else { return Ok(None) };
            let mut done = match item {
                Item::Done(v) => v,
                Item::ArrayStart(len) => {
                    if self.stack.len() >= self.limits.max_depth {
                        return Err(Error::Protocol(format!("arrays nested deeper than {}", self.limits.max_depth)));
                    }
                    // Capacity follows the bytes that actually arrive, not the declared length.
                    let items = Vec::with_capacity(len.min(1024));
                    self.stack.push(PartialArray { items, remaining: len, error: None });
                    continue;
                }
            };
            // Hand the finished value to the enclosing arrays, closing those it completes.
            loop {
                let Some(top) = self.stack.last_mut() else {
                    return done.map(Some);
                };
                match done {
                    Ok(v) if top.error.is_none() => top.items.push(v),
                    Ok(_) => {}
                    Err(e) => {
                        top.error.get_or_insert(e);
                        top.items = Vec::new();
                    }
                }
                top.remaining -= 1;
                if top.remaining > 0 {
                    break;
                }
                let Some(full) = self.stack.pop() else { break };
                done = match full.error {
                    Some(e) => Err(e),
                    None => Ok(Value::Array(full.items)),
                };
            }
        }
    }

    /// Reads one element header (and a bulk string's payload) if all of it is in `buf`.
    fn next_item(&self, buf: &mut BytesMut) -> Result<Option<Item>> {
        let Some(eol) = find_crlf(buf)? else { return Ok(None) };
        let line = &buf[1..eol];
        let item = match buf[0] {
            b'+' => Item::Done(Ok(Value::Simple(String::from_utf8_lossy(line).into_owned()))),
            b'-' => Item::Done(Err(Error::Server(String::from_utf8_lossy(line).into_owned()))),
            b':' => Item::Done(Ok(Value::Int(parse_int(line)?))),
            b'$' => match parse_len(line, self.limits.max_bulk_len, "bulk string")? {
                None => Item::Done(Ok(Value::Nil)),
                Some(len) => {
                    let start = eol + 2;
                    let end = start + len;
                    if buf.len() < end + 2 {
                        buf.reserve((end + 2 - buf.len()).min(MAX_RESERVE_AHEAD));
                        return Ok(None);
                    }
                    if &buf[end..end + 2] != b"\r\n" {
                        return Err(Error::Protocol("bulk string not terminated by CRLF".into()));
                    }
                    buf.advance(start);
                    let data =
                        if len < COPY_BELOW { Bytes::copy_from_slice(&buf[..len]) } else { buf.split_to(len).freeze() };
                    buf.advance(if len < COPY_BELOW { len + 2 } else { 2 });
                    return Ok(Some(Item::Done(Ok(Value::Bulk(data)))));
                }
            },
            b'*' => match parse_len(line, self.limits.max_array_len, "array")? {
                None => Item::Done(Ok(Value::Nil)),
                Some(0) => Item::Done(Ok(Value::Array(Vec::new()))),
                Some(len) => Item::ArrayStart(len),
            },
            other => return Err(Error::Protocol(format!("unexpected reply type byte 0x{other:02x}"))),
        };
        buf.advance(eol + 2);
        Ok(Some(item))
    }
}

/// Position of the first CRLF in `buf`, if it is there yet.
fn find_crlf(buf: &[u8]) -> Result<Option<usize>> {
    let window = &buf[..buf.len().min(MAX_LINE + 2)];
    match window.windows(2).position(|w| w == b"\r\n") {
        Some(0) => Err(Error::Protocol("empty line".into())),
        Some(pos) => Ok(Some(pos)),
        None if buf.len() > MAX_LINE + 1 => Err(Error::Protocol(format!("line longer than {MAX_LINE} bytes"))),
        None => Ok(None),
    }
}

/// A signed decimal integer, strictly: no sign other than a leading `-`, no spaces, no overflow.
fn parse_int(line: &[u8]) -> Result<i64> {
    let bad = || Error::Protocol(format!("invalid integer {:?}", String::from_utf8_lossy(line)));
    let (negative, digits) = match line.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, line),
    };
    if digits.is_empty() {
        return Err(bad());
    }
    let mut n: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return Err(bad());
        }
        let d = i64::from(d - b'0');
        n = n
            .checked_mul(10)
            .and_then(|n| if negative { n.checked_sub(d) } else { n.checked_add(d) })
            .ok_or_else(bad)?;
    }
    Ok(n)
}

/// A declared length: `None` for -1 (nil), an error above `max` or below -1.
fn parse_len(line: &[u8], max: usize, what: &str) -> Result<Option<usize>> {
    let n = parse_int(line)?;
    if n == -1 {
        return Ok(None);
    }
    match usize::try_from(n) {
        Ok(len) if len <= max => Ok(Some(len)),
        Ok(_) => Err(Error::Protocol(format!("{what} of length {n} exceeds the limit of {max}"))),
        Err(_) => Err(Error::Protocol(format!("invalid {what} length {n}"))),
    }
}
