//! Header maps for parsed heads. Every proxied HTTP/1.1 exchange parses two heads (the client's
//! request, the endpoint's response) into maps, so both the maps and the names in them are made
//! cheaply here: a per-worker pool of maps (one given back once its head is written is cleared in
//! place and serves the next head on this worker without the allocator; bounded, a worker keeps a
//! few dozen small maps at most and frees one grown large), and a fast path for common names.

use http::header::{self, HeaderName, InvalidHeaderName};
use http::HeaderMap;
use std::cell::RefCell;

/// Maps kept per worker.
const KEEP: usize = 32;
/// Maps with room for more headers than this are freed rather than kept.
const LARGEST_KEPT: usize = 96;

thread_local! {
    static MAPS: RefCell<Vec<HeaderMap>> = const { RefCell::new(Vec::new()) };
}

/// An empty map with room for `headers` entries.
pub fn take(headers: usize) -> HeaderMap {
    match MAPS.with(|m| m.borrow_mut().pop()) {
        Some(mut map) => {
            if map.capacity() < headers {
                map.reserve(headers - map.capacity());
            }
            map
        }
        None => HeaderMap::with_capacity(headers),
    }
}

/// Gives a map back once its head is written.
pub fn give(mut map: HeaderMap) {
    if map.capacity() > LARGEST_KEPT {
        return;
    }
    map.clear();
    MAPS.with(|m| {
        let mut m = m.borrow_mut();
        if m.len() < KEEP {
            m.push(map);
        }
    });
}

static KEEP_ALIVE: HeaderName = HeaderName::from_static("keep-alive");
static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
static X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
static X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");
static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
/// The API gateway's app-key header.
static X_APP_KEY: HeaderName = HeaderName::from_static("x-app-key");

/// A name of the fast path as [`same_name`] compares it: the lowercase name read as little-endian
/// words (one word padded with zeros for a name shorter than eight bytes; otherwise words at 0, 8,
/// ..., the last one ending at the name's last byte), each with the case bit (0x20) set where the
/// name has a letter.
pub(crate) struct Words {
    count: usize,
    words: [(u64, u64); 3],
}

/// The [`Words`] of `name`, at compile time: lowercase letters and `-`, 24 bytes at most.
pub(crate) const fn words(name: &str) -> Words {
    let b = name.as_bytes();
    let len = b.len();
    assert!(len > 0 && len <= 24);
    let count = if len <= 8 { 1 } else { len.div_ceil(8) };
    let mut words = [(0u64, 0u64); 3];
    let mut k = 0;
    while k < count {
        let at = if len <= 8 || 8 * k < len - 8 { 8 * k } else { len - 8 };
        let (mut word, mut case) = (0u64, 0u64);
        let mut i = 0;
        while i < 8 && at + i < len {
            let c = b[at + i];
            assert!(c.is_ascii_lowercase() || c == b'-');
            word |= (c as u64) << (8 * i);
            if c.is_ascii_lowercase() {
                case |= 0x20 << (8 * i);
            }
            i += 1;
        }
        words[k] = (word, case);
        k += 1;
    }
    Words { count, words }
}

impl Words {
    /// The words in use.
    pub(crate) const fn as_slice(&self) -> &[(u64, u64)] {
        self.words.split_at(self.count).0
    }
}

/// The fast path's table: `(length, first letter) name => header name`. The first two are the
/// match's keys (checked against the name at compile time); [`words`] makes the rest of the
/// comparison at compile time too.
macro_rules! known_names {
    ($(($len:literal, $first:literal) $name:literal => $value:expr,)*) => {
        /// The name of a header as parsed from a head: names common in requests and responses are
        /// matched here, case-insensitively, without the general parser's lowercasing copy and
        /// table search (or, for the custom ones, its allocation); any other goes through
        /// [`HeaderName::from_bytes`].
        pub fn header_name(bytes: &[u8]) -> Result<HeaderName, InvalidHeaderName> {
            let first = bytes.first().map_or(0, |b| b | 0x20);
            Ok(match (bytes.len(), first) {
                $(($len, $first) if same_name(bytes, const { &words($name) }.as_slice()) => $value,)*
                _ => return HeaderName::from_bytes(bytes),
            })
        }

        $(const _: () = assert!($name.len() == $len && $name.as_bytes()[0] == $first);)*

        /// Every name of the fast path.
        #[cfg(test)]
        const KNOWN: &[&str] = &[$($name),*];
    };
}

known_names! {
    (2, b't') "te" => header::TE,
    (3, b'a') "age" => header::AGE,
    (3, b'v') "via" => header::VIA,
    (4, b'd') "date" => header::DATE,
    (4, b'e') "etag" => header::ETAG,
    (4, b'h') "host" => header::HOST,
    (4, b'l') "link" => header::LINK,
    (4, b'v') "vary" => header::VARY,
    (5, b'a') "allow" => header::ALLOW,
    (5, b'r') "range" => header::RANGE,
    (6, b'a') "accept" => header::ACCEPT,
    (6, b'c') "cookie" => header::COOKIE,
    (6, b'e') "expect" => header::EXPECT,
    (6, b'o') "origin" => header::ORIGIN,
    (6, b'p') "pragma" => header::PRAGMA,
    (6, b's') "server" => header::SERVER,
    (7, b'e') "expires" => header::EXPIRES,
    (7, b'r') "referer" => header::REFERER,
    (7, b't') "trailer" => header::TRAILER,
    (7, b'u') "upgrade" => header::UPGRADE,
    (7, b'w') "warning" => header::WARNING,
    (8, b'i') "if-range" => header::IF_RANGE,
    (8, b'l') "location" => header::LOCATION,
    (9, b'x') "x-app-key" => X_APP_KEY.clone(),
    (9, b'x') "x-real-ip" => X_REAL_IP.clone(),
    (10, b'c') "connection" => header::CONNECTION,
    (10, b'k') "keep-alive" => KEEP_ALIVE.clone(),
    (10, b's') "set-cookie" => header::SET_COOKIE,
    (10, b'u') "user-agent" => header::USER_AGENT,
    (12, b'c') "content-type" => header::CONTENT_TYPE,
    (12, b'x') "x-request-id" => X_REQUEST_ID.clone(),
    (13, b'a') "accept-ranges" => header::ACCEPT_RANGES,
    (13, b'a') "authorization" => header::AUTHORIZATION,
    (13, b'c') "cache-control" => header::CACHE_CONTROL,
    (13, b'i') "if-none-match" => header::IF_NONE_MATCH,
    (13, b'l') "last-modified" => header::LAST_MODIFIED,
    (14, b'a') "accept-charset" => header::ACCEPT_CHARSET,
    (14, b'c') "content-length" => header::CONTENT_LENGTH,
    (15, b'a') "accept-encoding" => header::ACCEPT_ENCODING,
    (15, b'a') "accept-language" => header::ACCEPT_LANGUAGE,
    (15, b'x') "x-forwarded-for" => X_FORWARDED_FOR.clone(),
    (16, b'c') "content-encoding" => header::CONTENT_ENCODING,
    (16, b'c') "content-language" => header::CONTENT_LANGUAGE,
    (16, b'c') "content-location" => header::CONTENT_LOCATION,
    (17, b'i') "if-modified-since" => header::IF_MODIFIED_SINCE,
    (17, b't') "transfer-encoding" => header::TRANSFER_ENCODING,
    (17, b'x') "x-forwarded-proto" => X_FORWARDED_PROTO.clone(),
}

/// Whether `bytes` spells the name given as `words` (its [`Words`]), in any letter case: the case
/// bit is set only where the name has a letter, so a letter matches in either case and any other
/// byte must match exactly.
#[inline]
pub(crate) fn same_name(bytes: &[u8], words: &[(u64, u64)]) -> bool {
    let len = bytes.len();
    if len < 8 {
        let w = bytes.iter().rev().fold(0u64, |w, &b| (w << 8) | u64::from(b));
        return words.first().is_some_and(|&(name, case)| w | case == name);
    }
    words.iter().enumerate().all(|(i, &(name, case))| {
        let at = (i * 8).min(len - 8);
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[at..at + 8]);
        u64::from_le_bytes(w) | case == name
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::{HeaderValue, HOST};

    #[test]
    fn every_known_name_in_any_case_and_every_one_byte_change_of_it_parse_as_the_general_parser_says() {
        for &name in KNOWN {
            let upper = name.to_ascii_uppercase();
            for spelling in [name.to_string(), upper.clone()] {
                let fast = header_name(spelling.as_bytes()).expect("valid");
                assert_eq!(fast.as_str(), name, "{spelling}");
            }
            for at in 0..name.len() {
                for byte in 0..=255u8 {
                    let mut changed = upper.clone().into_bytes();
                    changed[at] = byte;
                    let fast = header_name(&changed).ok();
                    let general = HeaderName::from_bytes(&changed).ok();
                    assert_eq!(fast, general, "{name} with byte {at} = {byte:#x}");
                }
            }
        }
    }

    #[test]
    fn known_names_come_out_as_the_general_parser_makes_them() {
        for name in [
            "Host",
            "TE",
            "te",
            "Content-Length",
            "CONTENT-TYPE",
            "x-forwarded-for",
            "X-Request-Id",
            "keep-alive",
            "Transfer-Encoding",
            "x-forwarded-proto",
            "Accept-Ranges",
            "If-Modified-Since",
            "X-Real-IP",
        ] {
            let fast = header_name(name.as_bytes()).expect("valid");
            let general = HeaderName::from_bytes(name.as_bytes()).expect("valid");
            assert_eq!(fast, general, "{name}");
            assert_eq!(fast.as_str(), name.to_ascii_lowercase());
        }
        for other in
            ["x-custom", "Hostx", "ho st", "", "content-lengt\u{0}", "content\rlength", "Content_Length", "HOS\u{14}"]
        {
            assert_eq!(header_name(other.as_bytes()).ok(), HeaderName::from_bytes(other.as_bytes()).ok(), "{other}");
        }
    }

    #[test]
    fn a_map_given_back_comes_back_empty_with_its_room() {
        let mut map = take(12);
        map.insert(HOST, HeaderValue::from_static("a"));
        let room = map.capacity();
        give(map);
        let again = take(4);
        assert!(again.is_empty());
        assert_eq!(again.capacity(), room);
        let bigger = take(200);
        assert!(bigger.capacity() >= 200);
        give(bigger); // too large to keep
        assert!(take(1).capacity() < 200);
    }
}
