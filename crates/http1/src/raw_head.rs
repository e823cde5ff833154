//! Forward stage, the endpoint's response head on its way to an HTTP/1.1 client: passed on as the
//! endpoint wrote it, line by line, rather than parsed into a header map and encoded again (which
//! was about a seventh of a proxied request's user-space work).
//!
//! When the head is parsed, the lines the proxy must not forward (hop-by-hop headers, a length
//! beside chunked coding) are squeezed out of it in place, so the rest is one run of
//! `name: value\r\n` lines. A later edit (a rewrite's `remove` or `set`, the echoed request id)
//! marks lines to skip; what the proxy adds goes in the response's header map, written after these
//! lines. A client on HTTP/2 gets every line in the map instead ([`RawHead::into_map`]).

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue};

/// Most header lines a head passed on unparsed may have (one bit each); a head with more is
/// parsed into a map.
pub const MAX_LINES: usize = 64;

/// An endpoint's header lines, to be written to the client as they are.
#[derive(Debug)]
pub struct RawHead {
    /// `name: value\r\n` lines: no status line, no blank line.
    lines: Bytes,
    /// Lines an edit removed, by index.
    skipped: u64,
    /// A filter of the names present ([`name_bit`]): most edits name a header the endpoint did
    /// not send, and this answers them without reading the lines.
    names: u64,
    /// Whether a `Date` line is forwarded.
    date: bool,
    /// Whether a `Content-Length` line is forwarded.
    length: bool,
}

/// A bit per name for [`RawHead::names`], from its length and last letter, case-insensitively.
pub(crate) fn name_bit(name: &[u8]) -> u64 {
    let last = name.last().map_or(0, |b| b.to_ascii_lowercase());
    1 << ((name.len() as u64 * 7 + u64::from(last)) & 63)
}

impl RawHead {
    pub(crate) fn new(lines: Bytes, names: u64, date: bool, length: bool) -> Self {
        RawHead { lines, skipped: 0, names, date, length }
    }

    /// Whether the endpoint's head forwards a `Date`.
    pub fn has_date(&self) -> bool {
        self.date
    }

    /// Whether the endpoint's head forwards a `Content-Length`.
    pub fn has_content_length(&self) -> bool {
        self.length
    }

    /// Stops every line named `name` from being forwarded; whether there was one.
    pub fn remove(&mut self, name: &HeaderName) -> bool {
        let name = name.as_str().as_bytes();
        if self.names & name_bit(name) == 0 {
            return false;
        }
        let mut found = false;
        for (i, line) in lines(&self.lines).enumerate() {
            if split(line).is_some_and(|(n, _)| n.eq_ignore_ascii_case(name)) {
                self.skipped |= 1 << i;
                found = true;
            }
        }
        if found {
            if name == b"date" {
                self.date = false;
            } else if name == b"content-length" {
                self.length = false;
            }
        }
        found
    }

    /// Stops every line named one of `names` from being forwarded: the lines read once, and only
    /// when the name filter says one of them may be there.
    pub fn remove_all(&mut self, names: &[&HeaderName]) {
        // The names that may be here, as bytes, once (at most eight; a longer list is read in
        // parts).
        if names.len() > 8 {
            names.chunks(8).for_each(|part| self.remove_all(part));
            return;
        }
        let mut wanted: [&[u8]; 8] = [&[]; 8];
        let mut n = 0;
        for name in names {
            let name = name.as_str().as_bytes();
            if self.names & name_bit(name) != 0 {
                wanted[n] = name;
                n += 1;
            }
        }
        if n == 0 {
            return;
        }
        let wanted = &wanted[..n];
        // A line is `name:` and its value (the parser allows no space before the colon): each
        // name is compared where it would end, without splitting the line.
        for (i, line) in lines(&self.lines).enumerate() {
            let Some(&name) =
                wanted.iter().find(|w| line.get(w.len()) == Some(&b':') && line[..w.len()].eq_ignore_ascii_case(w))
            else {
                continue;
            };
            self.skipped |= 1 << i;
            if name == b"date" {
                self.date = false;
            } else if name == b"content-length" {
                self.length = false;
            }
        }
    }

    /// Appends the lines still to be forwarded to `w`.
    pub fn write(&self, w: &mut Vec<u8>) {
        if self.skipped == 0 {
            w.extend_from_slice(&self.lines);
            return;
        }
        for (i, line) in lines(&self.lines).enumerate() {
            if self.skipped & (1 << i) == 0 {
                w.extend_from_slice(line);
            }
        }
    }

    /// Puts the lines still to be forwarded into `map`, after what it holds (for a client the
    /// head cannot be passed to as it is: HTTP/2).
    pub fn into_map(self, map: &mut HeaderMap) {
        for (i, line) in lines(&self.lines).enumerate() {
            if self.skipped & (1 << i) != 0 {
                continue;
            }
            let Some((name, value)) = split(line) else { continue };
            let start = value.as_ptr() as usize - self.lines.as_ptr() as usize;
            // The parser has checked both already; a line that fails here is dropped.
            let (Ok(name), Ok(value)) = (
                crate::header_maps::header_name(name),
                HeaderValue::from_maybe_shared(self.lines.slice(start..start + value.len())),
            ) else {
                continue;
            };
            map.append(name, value);
        }
    }

    /// The value of the first line named `name`, for tests.
    #[cfg(test)]
    pub(crate) fn get(&self, name: &str) -> Option<&[u8]> {
        lines(&self.lines)
            .enumerate()
            .filter(|(i, _)| self.skipped & (1 << i) == 0)
            .filter_map(|(_, l)| split(l))
            .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v)
    }
}

/// The lines of `block`, each with its CRLF.
fn lines(block: &[u8]) -> Lines<'_> {
    Lines(block)
}

/// The lines of a block, each with its `\n`, found by `memchr` (a vector compare per 16 or 32
/// bytes, where a byte-by-byte split spent about four instructions a byte).
struct Lines<'a>(&'a [u8]);

impl<'a> Iterator for Lines<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.0.is_empty() {
            return None;
        }
        let end = memchr::memchr(b'\n', self.0).map_or(self.0.len(), |i| i + 1);
        let (line, rest) = self.0.split_at(end);
        self.0 = rest;
        Some(line)
    }
}

/// A `name: value\r\n` line's name and value, the value without surrounding whitespace.
fn split(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let colon = line.iter().position(|&b| b == b':')?;
    let value = line[colon + 1..].trim_ascii();
    Some((&line[..colon], value))
}

/// What a response header means to the proxy while the head is parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Connection,
    TransferEncoding,
    ContentLength,
    Date,
    /// Another hop-by-hop header (or `Expect`, as for requests): never forwarded.
    HopByHop,
    /// Anything else: forwarded as it is.
    EndToEnd,
}

/// The role of a header by its name, in any letter case. Keyed on the length first, so most names
/// are settled by one compare.
pub(crate) fn role(name: &[u8]) -> Role {
    // The header-name fast path's compare, its words made at compile time.
    macro_rules! is {
        ($lower:literal) => {
            crate::header_maps::same_name(name, const { &crate::header_maps::words($lower) }.as_slice())
        };
    }
    match name.len() {
        10 if is!("connection") => Role::Connection,
        10 if is!("keep-alive") => Role::HopByHop,
        17 if is!("transfer-encoding") => Role::TransferEncoding,
        14 if is!("content-length") => Role::ContentLength,
        4 if is!("date") => Role::Date,
        16 if is!("proxy-connection") => Role::HopByHop,
        2 if is!("te") => Role::HopByHop,
        // `Trailer` is end to end (RFC 9110 §6.6.2): it announces the trailer fields that follow.
        7 if is!("upgrade") => Role::HopByHop,
        6 if is!("expect") => Role::HopByHop,
        _ => Role::EndToEnd,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header;

    /// Names and the roles [`role`] gives them.
    const KNOWN: [(&HeaderName, Role); 9] = [
        (&header::CONNECTION, Role::Connection),
        (&header::TRANSFER_ENCODING, Role::TransferEncoding),
        (&header::CONTENT_LENGTH, Role::ContentLength),
        (&header::DATE, Role::Date),
        (&header::TE, Role::HopByHop),
        (&header::TRAILER, Role::EndToEnd),
        (&header::UPGRADE, Role::HopByHop),
        (&header::SERVER, Role::EndToEnd),
        (&header::CONTENT_TYPE, Role::EndToEnd),
    ];

    fn head(lines: &'static [u8]) -> RawHead {
        let mut names = 0;
        let (mut date, mut length) = (false, false);
        for line in super::lines(lines) {
            let (n, _) = split(line).expect("a header line");
            names |= name_bit(n);
            date |= role(n) == Role::Date;
            length |= role(n) == Role::ContentLength;
        }
        RawHead::new(Bytes::from_static(lines), names, date, length)
    }

    #[test]
    fn roles_agree_with_a_case_insensitive_compare_on_every_one_byte_change() {
        let known = [("keep-alive", Role::HopByHop), ("expect", Role::HopByHop)];
        let names: Vec<(&str, Role)> = KNOWN.iter().map(|(n, r)| (n.as_str(), *r)).chain(known).collect();
        // Every one-byte change of every name, to every byte, gets the role of the name it spells
        // by `eq_ignore_ascii_case`, or none.
        for &(lower, r) in &names {
            for i in 0..lower.len() {
                for b in 0..=255u8 {
                    let mut name = lower.as_bytes().to_vec();
                    name[i] = b;
                    let spelled = names.iter().find(|(n, _)| name.eq_ignore_ascii_case(n.as_bytes()));
                    let expected = spelled.map_or(Role::EndToEnd, |&(_, r)| r);
                    assert_eq!(role(&name), expected, "{:?} vs {lower}", String::from_utf8_lossy(&name));
                }
            }
            assert_eq!(role(lower.to_ascii_uppercase().as_bytes()), r, "{lower}");
        }
    }

    #[test]
    fn roles_ignore_letter_case() {
        for (name, r) in KNOWN {
            assert_eq!(role(name.as_str().as_bytes()), r, "{name}");
            assert_eq!(role(name.as_str().to_ascii_uppercase().as_bytes()), r, "{name}");
        }
        assert_eq!(role(b"Keep-Alive"), Role::HopByHop);
        assert_eq!(role(b"Proxy-Connection"), Role::HopByHop);
        assert_eq!(role(b"X-Date"), Role::EndToEnd);
    }

    #[test]
    fn removed_lines_are_not_written_and_the_rest_are_as_sent() {
        let mut h = head(b"Server: nginx\r\nX-A: 1\r\nDate: Mon\r\nx-a:  2 \r\nContent-Length: 5\r\n");
        assert!(h.has_date() && h.has_content_length());
        assert!(!h.remove(&HeaderName::from_static("x-b")));
        assert!(h.remove(&HeaderName::from_static("x-a")));
        assert!(h.remove(&header::DATE));
        assert!(!h.has_date() && h.has_content_length());
        let mut w = Vec::new();
        h.write(&mut w);
        assert_eq!(w, b"Server: nginx\r\nContent-Length: 5\r\n");
        assert_eq!(h.get("content-length"), Some(&b"5"[..]));
    }

    #[test]
    fn lines_are_removed_by_any_of_their_names() {
        let mut h = head(b"Access-Control-Allow-Origin: *\r\nX-A: 1\r\nDate: Mon\r\naccess-control-max-age: 5\r\n");
        h.remove_all(&[&header::ACCESS_CONTROL_ALLOW_ORIGIN, &header::ACCESS_CONTROL_MAX_AGE, &header::DATE]);
        let mut w = Vec::new();
        h.write(&mut w);
        assert_eq!(w, b"X-A: 1\r\n");
        assert!(!h.has_date());
        // None of the names: nothing read, nothing removed.
        h.remove_all(&[&header::ACCESS_CONTROL_EXPOSE_HEADERS]);
        let mut again = Vec::new();
        h.write(&mut again);
        assert_eq!(again, w);
    }

    #[test]
    fn a_head_with_nothing_removed_is_written_whole() {
        let h = head(b"Server: nginx\r\nX-A: 1\r\n");
        let mut w = b"HTTP/1.1 200 OK\r\n".to_vec();
        h.write(&mut w);
        assert_eq!(w, b"HTTP/1.1 200 OK\r\nServer: nginx\r\nX-A: 1\r\n");
    }

    #[test]
    fn into_map_keeps_order_and_repeats_after_what_the_map_holds() {
        let mut h = head(b"X-A: 1\r\nServer: nginx\r\nX-A:\t2\t\r\nX-Gone: yes\r\n");
        h.remove(&HeaderName::from_static("x-gone"));
        let mut map = HeaderMap::new();
        map.insert("x-request-id", HeaderValue::from_static("ours"));
        h.into_map(&mut map);
        assert_eq!(map.get_all("x-a").iter().collect::<Vec<_>>(), ["1", "2"]);
        assert_eq!(map["server"], "nginx");
        assert_eq!(map["x-request-id"], "ours");
        assert!(!map.contains_key("x-gone"));
        assert_eq!(map.len(), 4);
    }

    #[test]
    fn the_name_filter_never_misses_a_name_present() {
        // Every name of the fast path, in any case, is found by `remove` when present.
        for (name, _) in KNOWN {
            let line = format!("{}: v\r\nX-Other: w\r\n", name.as_str().to_ascii_uppercase());
            let bytes: &'static [u8] = Box::leak(line.into_bytes().into_boxed_slice());
            let mut h = head(bytes);
            assert!(h.remove(name), "{name}");
            let mut w = Vec::new();
            h.write(&mut w);
            assert_eq!(w, b"X-Other: w\r\n");
        }
    }
}
