//! Framing stage: from the first bytes of a connection, decide whether a whole ClientHello has arrived.
//!
//! ```text
//! socket bytes ─► record_need ─► More(n): read at least n more bytes, ask again
//!                             ├► NotTls: hand the connection to something else, or close it
//!                             ├► Err(_): TLS, but broken or too big: close (decode_error alert)
//!                             └► Complete(len): buf[..len] holds every record of the ClientHello
//!                                   └─► reassemble ─► one handshake message ─► parse
//! ```
//!
//! Both functions are stateless: they walk the records from the start of the buffer on every call.
//! [`MAX_RECORDS`] bounds that walk, so a client that trickles one-byte records costs little.

use std::borrow::Cow;

use crate::error::ParseError;

/// Bytes in a TLS record header: content type, legacy record version, length.
pub const RECORD_HEADER_LEN: usize = 5;

/// Largest payload a plaintext TLS record may carry (2^14, RFC 8446 §5.1).
pub const MAX_FRAGMENT_LEN: usize = 16_384;

/// Most records a ClientHello may be split over.
///
/// Real clients send one record (two or three once post-quantum key shares grow the hello); tools
/// that fragment hellos to slip past middleboxes use a few dozen. The bound keeps each
/// [`record_need`] call cheap however the client splits its bytes.
pub const MAX_RECORDS: usize = 256;

/// A sensible `max` for [`record_need`]: 64 KiB of records, four times the largest hello seen in practice.
pub const DEFAULT_MAX_HELLO_BYTES: usize = 64 * 1024;

const CONTENT_TYPE_HANDSHAKE: u8 = 22;
const HANDSHAKE_CLIENT_HELLO: u8 = 1;
const HANDSHAKE_HEADER_LEN: usize = 4;

/// What the bytes read so far say about the ClientHello.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// The ClientHello is not complete: at least this many more bytes (always ≥ 1) must be read.
    ///
    /// A lower bound, never an overestimate, so reading exactly this many bytes cannot block on
    /// bytes the client will never send.
    More(usize),
    /// The first `len` bytes are the records holding the whole ClientHello and nothing else.
    /// Bytes after them (early data, say) belong to whoever runs the handshake.
    Complete(usize),
    /// The connection does not start with a TLS handshake record carrying a ClientHello: plain
    /// HTTP, an SSLv2-compatible hello (first byte has its high bit set), a ServerHello, garbage.
    NotTls,
}

/// Tells whether `buf`, the bytes read so far from a new connection, holds a complete ClientHello.
///
/// `max` bounds the bytes of records (headers included) the ClientHello may occupy, which is also
/// the most the caller will ever need to buffer; use [`DEFAULT_MAX_HELLO_BYTES`] unless there is a
/// reason not to. The answer is given as early as the bytes allow: one byte is enough to tell
/// `GET ` from TLS, and a handshake header announcing a message over the limit fails at once.
///
/// # Errors
///
/// The bytes are TLS but cannot be a valid ClientHello flight: an empty or oversized record, a
/// record of another content type before the hello is complete, bytes after the hello in its last
/// record, more than [`MAX_RECORDS`] records, or more than `max` bytes of records
/// ([`ParseError::RecordLimit`]).
pub fn record_need(buf: &[u8], max: usize) -> Result<Need, ParseError> {
    let mut pos = 0;
    let mut records = 0;
    // Handshake bytes carried by the complete records walked so far.
    let mut have = 0;
    let mut header = MessageHeader::default();
    loop {
        let first = pos == 0;
        let rest = buf.get(pos..).unwrap_or_default();
        if !prefix_is_tls(rest, first)? {
            return Ok(Need::NotTls);
        }
        let Some((&[_, _, _, len_hi, len_lo], arrived)) = rest.split_first_chunk::<RECORD_HEADER_LEN>() else {
            let missing = RECORD_HEADER_LEN.saturating_sub(rest.len());
            return more(buf.len(), missing.saturating_add(header.remaining_after(have)), max);
        };
        let len = usize::from(u16::from_be_bytes([len_hi, len_lo]));
        if len == 0 {
            return Err(ParseError::EmptyRecord);
        }
        if len > MAX_FRAGMENT_LEN {
            return Err(ParseError::RecordOverflow { len });
        }
        records += 1;
        if records > MAX_RECORDS {
            return Err(ParseError::TooManyRecords);
        }
        let arrived = arrived.get(..len).unwrap_or(arrived);
        header.feed(arrived);
        if first && header.msg_type().is_some_and(|t| t != HANDSHAKE_CLIENT_HELLO) {
            return Ok(Need::NotTls);
        }
        let end = pos.saturating_add(RECORD_HEADER_LEN).saturating_add(len);
        if end > max {
            return Err(ParseError::RecordLimit { max });
        }
        let have_after = have.saturating_add(len);
        if let Some(total) = header.total() {
            if have_after > total {
                return Err(ParseError::DataAfterClientHello);
            }
        }
        let missing_here = len.saturating_sub(arrived.len());
        let remaining = header.remaining_after(have_after);
        if remaining == 0 && missing_here == 0 {
            return Ok(Need::Complete(end));
        }
        // Each later record costs a header before it can carry the rest of the message.
        let later = if remaining == 0 { 0 } else { RECORD_HEADER_LEN.saturating_add(remaining) };
        if end.saturating_add(later) > max {
            return Err(ParseError::RecordLimit { max });
        }
        if missing_here > 0 {
            return more(buf.len(), missing_here.saturating_add(later), max);
        }
        have = have_after;
        pos = end;
    }
}

/// Joins the payloads of the records at the start of `buf` into the ClientHello handshake message
/// (4-byte header included), ready for [`crate::parse`].
///
/// Borrows from `buf` when the hello sits in one record, as it does for nearly every client, and
/// copies into one `Vec` only when it is fragmented. Bytes after the hello's records are ignored.
///
/// # Errors
///
/// [`ParseError::Incomplete`] if the records stop before the hello does, and [`ParseError::NotTls`]
/// where [`record_need`] answers [`Need::NotTls`]; otherwise the errors of [`record_need`].
pub fn reassemble(buf: &[u8]) -> Result<Cow<'_, [u8]>, ParseError> {
    let len = match record_need(buf, usize::MAX)? {
        Need::Complete(len) => len,
        Need::More(_) => return Err(ParseError::Incomplete),
        Need::NotTls => return Err(ParseError::NotTls),
    };
    let records = buf.get(..len).ok_or(ParseError::Incomplete)?;
    let mut payloads = Payloads { rest: records };
    let Some(first) = payloads.next() else {
        return Err(ParseError::Incomplete);
    };
    if payloads.rest.is_empty() {
        return Ok(Cow::Borrowed(first));
    }
    let mut message = Vec::with_capacity(len);
    message.extend_from_slice(first);
    for payload in payloads {
        message.extend_from_slice(payload);
    }
    Ok(Cow::Owned(message))
}

/// Payloads of records already checked by [`record_need`].
struct Payloads<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Payloads<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let (&[_, _, _, len_hi, len_lo], after) = self.rest.split_first_chunk::<RECORD_HEADER_LEN>()?;
        let (payload, rest) = after.split_at_checked(usize::from(u16::from_be_bytes([len_hi, len_lo])))?;
        self.rest = rest;
        Some(payload)
    }
}

fn more(buffered: usize, missing: usize, max: usize) -> Result<Need, ParseError> {
    if buffered.saturating_add(missing) > max {
        Err(ParseError::RecordLimit { max })
    } else {
        Ok(Need::More(missing))
    }
}

/// Checks the content type and version of a record header, as much of it as has arrived.
///
/// The first record decides whether this is TLS at all; a later one that looks wrong is a broken
/// TLS client, not another protocol.
fn prefix_is_tls(prefix: &[u8], first: bool) -> Result<bool, ParseError> {
    let content_type = prefix.first().copied();
    let major = prefix.get(1).copied();
    let minor = prefix.get(2).copied();
    let version_ok = major.is_none_or(|m| m == 3) && minor.is_none_or(|m| m <= 4);
    if first {
        return Ok(content_type.is_none_or(|t| t == CONTENT_TYPE_HANDSHAKE) && version_ok);
    }
    if let Some(content_type) = content_type.filter(|&t| t != CONTENT_TYPE_HANDSHAKE) {
        return Err(ParseError::UnexpectedContentType { content_type });
    }
    if !version_ok {
        let version = u16::from_be_bytes([major.unwrap_or_default(), minor.unwrap_or_default()]);
        return Err(ParseError::BadRecordVersion { version });
    }
    Ok(true)
}

/// The 4-byte handshake header, which a pathological client may split across records.
#[derive(Debug, Default)]
struct MessageHeader {
    bytes: [u8; HANDSHAKE_HEADER_LEN],
    filled: usize,
}

impl MessageHeader {
    fn feed(&mut self, data: &[u8]) {
        for &byte in data {
            let Some(slot) = self.bytes.get_mut(self.filled) else {
                return;
            };
            *slot = byte;
            self.filled += 1;
        }
    }

    fn msg_type(&self) -> Option<u8> {
        (self.filled > 0).then_some(self.bytes[0])
    }

    /// Length of the whole message, header included, once the header is known.
    fn total(&self) -> Option<usize> {
        let [_, a, b, c] = self.bytes;
        let body = usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c);
        (self.filled == HANDSHAKE_HEADER_LEN).then_some(HANDSHAKE_HEADER_LEN + body)
    }

    /// Lower bound on the message bytes still to come after `have` bytes.
    fn remaining_after(&self, have: usize) -> usize {
        self.total().unwrap_or(HANDSHAKE_HEADER_LEN).saturating_sub(have)
    }
}
