//! Validate stage: the one normalized form of a request path, decided once at the edge and then
//! used by routing, services, app keys, ACLs, rate-limit keys, the access log and the backend, so
//! that every guard judges the path the backend will act on.
//!
//! What [`normalize`] does to a path (the query is never given to it), in this order:
//!
//! 1. Percent-escapes: an escape that is not `%` and two hex digits, or `%00`, is refused. An
//!    escaped unreserved character (RFC 3986 §2.3: letters, digits, `-`, `.`, `_`, `~`) is
//!    decoded (§6.2.2.2: `%61` is `a`, `%2e` is `.`); any other escape is kept with its hex in
//!    upper case (§6.2.2.1), and `%25` is never decoded, so decoding never makes a new escape.
//!    Escaped bytes of 0x80 and above must form UTF-8 (overlong forms such as `%C0%AE` are not).
//! 2. `%2F`, `%5C` and `\` are refused, kept, or made `/`, by [`EscapedSlashes`].
//! 3. Repeated slashes are merged (when [`Rules::merge_slashes`]).
//! 4. Dot segments are removed (RFC 3986 §5.2.4, after step 1, so `%2e%2e` is `..`); a `..`
//!    above the root is refused instead of being dropped, and so is a dot segment carrying a
//!    path parameter (`..;x`, which Tomcat-style servers read as `..`).
//!
//! The result is idempotent: normalizing it again gives it back unchanged.

#![forbid(unsafe_code)]

use std::borrow::Cow;
use std::fmt;

/// How a path is normalized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rules {
    /// Merge runs of `/` into one (nginx's `merge_slashes`, on by default).
    pub merge_slashes: bool,
    /// What happens to `%2F`, `%5C` and `\`.
    pub escaped_slashes: EscapedSlashes,
}

impl Default for Rules {
    fn default() -> Self {
        Rules { merge_slashes: true, escaped_slashes: EscapedSlashes::Reject }
    }
}

/// What happens to an escaped slash or backslash (`%2F`, `%5C`) and to a bare backslash: the
/// forms some backends read as a separator and others as data (Envoy's
/// `path_with_escaped_slashes_action`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EscapedSlashes {
    /// Refuse the request (400).
    #[default]
    Reject,
    /// Keep them as they are (escapes in upper case): for backends that read them as data. A
    /// backend that decodes them into separators then acts on a path no guard judged.
    Keep,
    /// Make each a `/` before dot segments are removed: for backends that read them as
    /// separators.
    Decode,
}

/// Why a path was refused (400); the request is never forwarded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rejected {
    /// A `%` not followed by two hex digits.
    InvalidEscape,
    /// `%00`.
    EncodedNul,
    /// `%2F` or `%5C` under [`EscapedSlashes::Reject`].
    EscapedSlash,
    /// `\` under [`EscapedSlashes::Reject`].
    Backslash,
    /// Escaped bytes that are not UTF-8 (an overlong form, a lone continuation byte).
    InvalidUtf8,
    /// A `..` that would climb above the root.
    AboveRoot,
    /// A dot segment with a path parameter (`.;x`, `..;x`).
    DotSegmentParameter,
}

impl Rejected {
    /// A short reason for the log.
    pub fn reason(self) -> &'static str {
        match self {
            Rejected::InvalidEscape => "invalid percent-escape in path",
            Rejected::EncodedNul => "%00 in path",
            Rejected::EscapedSlash => "escaped slash in path",
            Rejected::Backslash => "backslash in path",
            Rejected::InvalidUtf8 => "escaped bytes in path are not UTF-8",
            Rejected::AboveRoot => "path climbs above the root",
            Rejected::DotSegmentParameter => "dot segment with a parameter in path",
        }
    }
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}

impl std::error::Error for Rejected {}

/// The normalized form of `path` (a request target's path, without its query): borrowed when
/// the path is already normalized, which one scan of its bytes finds for most paths.
///
/// A path that does not start with `/` (`*` of `OPTIONS *`) is returned as it is.
#[inline]
pub fn normalize(path: &str, rules: Rules) -> Result<Cow<'_, str>, Rejected> {
    if !path.starts_with('/') || already_normal(path.as_bytes(), rules.merge_slashes) {
        return Ok(Cow::Borrowed(path));
    }
    rebuild(path, rules)
}

/// The slow path: the path decoded and its segments rebuilt.
#[inline(never)]
fn rebuild(path: &str, rules: Rules) -> Result<Cow<'_, str>, Rejected> {
    let decoded = decode(path, rules.escaped_slashes)?;
    let out = remove_dot_segments(&decoded, rules.merge_slashes)?;
    Ok(if out == path { Cow::Borrowed(path) } else { Cow::Owned(out) })
}

/// Bytes the byte-at-a-time scan must look at: `%`, `\\` and `/` (what follows a `/` decides).
static NOTABLE: [bool; 256] = {
    let mut t = [false; 256];
    t[b'%' as usize] = true;
    t[b'\\' as usize] = true;
    t[b'/' as usize] = true;
    t
};

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `w` that equals `b`. Every such byte is marked; a byte above a
/// marked one may be marked too (the borrow of the subtraction), which only sends a word to the
/// exact scan.
#[inline(always)]
fn bytes_equal(w: u64, b: u8) -> u64 {
    let x = w ^ (ONES * u64::from(b));
    x.wrapping_sub(ONES) & !x & HIGH
}

/// The eight bytes from `at` as a little-endian word (the caller keeps `at + 8` in bounds).
#[inline(always)]
fn word(bytes: &[u8], at: usize) -> u64 {
    match bytes.get(at..at + 8) {
        Some(&[a, b, c, d, e, f, g, h]) => u64::from_le_bytes([a, b, c, d, e, f, g, h]),
        _ => 0,
    }
}

/// Whether a word (and the word one byte on) may hold `%`, `\\`, `//` or `/.` (`.` and `/`
/// differ in their lowest bit only, so one test finds both after a `/`; a `//` kept when
/// slashes are not merged goes to the exact scan).
#[inline(always)]
fn suspect(w: u64, next: u64) -> bool {
    bytes_equal(w, b'%') | bytes_equal(w, b'\\') | (bytes_equal(w, b'/') & bytes_equal(next | ONES, b'/')) != 0
}

/// The fast path: no escape, no backslash, no repeated slash (when merging), no dot segment.
/// Eight bytes at a time, each word beside the word one byte on (a `/` and the byte after it);
/// a suspect word, rare, sends the path to the exact [`scan`].
#[inline]
fn already_normal(bytes: &[u8], merge_slashes: bool) -> bool {
    let len = bytes.len();
    if len < 8 {
        return scan(bytes, merge_slashes);
    }
    let mut i = 0;
    while i + 8 < len {
        if suspect(word(bytes, i), word(bytes, i + 1)) {
            return scan(bytes, merge_slashes);
        }
        i += 8;
    }
    // The last eight bytes (some seen already); the last one has nothing after it.
    let w = word(bytes, len - 8);
    !suspect(w, w >> 8) || scan(bytes, merge_slashes)
}

/// [`already_normal`] a byte at a time: one table lookup a byte; only a `/` leads to more.
fn scan(bytes: &[u8], merge_slashes: bool) -> bool {
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        i += 1;
        if !NOTABLE[usize::from(b)] {
            continue;
        }
        if b != b'/' {
            return false;
        }
        match bytes.get(i) {
            Some(b'/') if merge_slashes => return false,
            Some(b'.') if is_dot_segment(&bytes[i..]) => return false,
            _ => {}
        }
    }
    true
}

/// Whether the segment at the start of `rest` is `.` or `..`, alone or with a parameter.
fn is_dot_segment(rest: &[u8]) -> bool {
    let end = rest.iter().position(|&b| b == b'/').unwrap_or(rest.len());
    let seg = &rest[..end];
    let name = seg.split(|&b| b == b';').next().unwrap_or(seg);
    name == b"." || name == b".."
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// Step 1 and 2: escapes decoded or kept, slashes and backslashes by the rule.
fn decode(path: &str, slashes: EscapedSlashes) -> Result<String, Rejected> {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let bytes = path.as_bytes();
    let mut out = String::with_capacity(path.len());
    // Escaped bytes of 0x80 and above in a row, checked as UTF-8 when the run ends.
    let mut run: Vec<u8> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b != b'%' {
            check_run(&mut run)?;
            match b {
                b'\\' => match slashes {
                    EscapedSlashes::Reject => return Err(Rejected::Backslash),
                    EscapedSlashes::Keep => out.push('\\'),
                    EscapedSlashes::Decode => out.push('/'),
                },
                _ => {
                    // A whole character, so a multi-byte one is copied as one.
                    let len = utf8_len(b);
                    out.push_str(path.get(i..i + len).ok_or(Rejected::InvalidUtf8)?);
                    i += len;
                    continue;
                }
            }
            i += 1;
            continue;
        }
        let (Some(hi), Some(lo)) = (bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex))
        else {
            return Err(Rejected::InvalidEscape);
        };
        let v = hi << 4 | lo;
        i += 3;
        if v >= 0x80 {
            run.push(v);
        } else {
            check_run(&mut run)?;
        }
        match v {
            0 => return Err(Rejected::EncodedNul),
            b'/' | b'\\' => match slashes {
                EscapedSlashes::Reject => return Err(Rejected::EscapedSlash),
                EscapedSlashes::Decode => {
                    out.push('/');
                    continue;
                }
                EscapedSlashes::Keep => {}
            },
            v if unreserved(v) => {
                out.push(char::from(v));
                continue;
            }
            _ => {}
        }
        out.push('%');
        out.push(char::from(HEX[usize::from(v >> 4)]));
        out.push(char::from(HEX[usize::from(v & 0xf)]));
    }
    check_run(&mut run)?;
    Ok(out)
}

/// The length of the UTF-8 character that starts with `b` (1 for a byte that starts none, which
/// a `&str` never has at a character boundary).
fn utf8_len(b: u8) -> usize {
    match b {
        0xf0..=0xff => 4,
        0xe0..=0xef => 3,
        0xc0..=0xdf => 2,
        _ => 1,
    }
}

fn check_run(run: &mut Vec<u8>) -> Result<(), Rejected> {
    if run.is_empty() {
        return Ok(());
    }
    let ok = std::str::from_utf8(run).is_ok();
    run.clear();
    if ok {
        Ok(())
    } else {
        Err(Rejected::InvalidUtf8)
    }
}

/// Steps 3 and 4 on a decoded path that starts with `/`.
fn remove_dot_segments(path: &str, merge_slashes: bool) -> Result<String, Rejected> {
    let mut out = String::with_capacity(path.len());
    out.push('/');
    let mut segments = path[1..].split('/').peekable();
    // `out` ends with `/` before each segment is added.
    while let Some(seg) = segments.next() {
        let last = segments.peek().is_none();
        match seg {
            "" if merge_slashes => {}
            "." => {}
            ".." => {
                if out.len() == 1 {
                    return Err(Rejected::AboveRoot);
                }
                let parent = out[..out.len() - 1].rfind('/').map_or(0, |i| i + 1);
                out.truncate(parent.max(1));
            }
            s if s.starts_with(".;") || s.starts_with("..;") => return Err(Rejected::DotSegmentParameter),
            s => {
                out.push_str(s);
                if !last {
                    out.push('/');
                }
            }
        }
    }
    Ok(out)
}

/// Decodes the `%XX` escapes of a URL component (RFC 3986 §2.1), as in the user name and password
/// of a `redis://` URL and the admin API's paths and queries; `None` when a `%` does not start two
/// hex digits or the result is not UTF-8. Every escape is decoded: this reads a component's value,
/// unlike [`normalize`], which keeps a request path's reserved escapes as they are.
pub fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = |j: usize| bytes.get(j).and_then(|&c| char::from(c).to_digit(16));
            out.push(u8::try_from(hex(i + 1)? * 16 + hex(i + 2)?).ok()?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests;
