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

/// The name of a header as parsed from a head: names common in requests and responses are matched
/// here, case-insensitively, without the general parser's lowercasing copy and table search (or,
/// for the custom ones, its allocation); any other goes through [`HeaderName::from_bytes`].
pub fn header_name(bytes: &[u8]) -> Result<HeaderName, InvalidHeaderName> {
    let first = bytes.first().map_or(0, |b| b | 0x20);
    Ok(match (bytes.len(), first) {
        (2, b't') if same_name(bytes, &[(0x0000000000006574, 0x0000000000002020)]) => header::TE, // te
        (3, b'a') if same_name(bytes, &[(0x0000000000656761, 0x0000000000202020)]) => header::AGE, // age
        (3, b'v') if same_name(bytes, &[(0x0000000000616976, 0x0000000000202020)]) => header::VIA, // via
        (4, b'd') if same_name(bytes, &[(0x0000000065746164, 0x0000000020202020)]) => header::DATE, // date
        (4, b'e') if same_name(bytes, &[(0x0000000067617465, 0x0000000020202020)]) => header::ETAG, // etag
        (4, b'h') if same_name(bytes, &[(0x0000000074736f68, 0x0000000020202020)]) => header::HOST, // host
        (4, b'l') if same_name(bytes, &[(0x000000006b6e696c, 0x0000000020202020)]) => header::LINK, // link
        (4, b'v') if same_name(bytes, &[(0x0000000079726176, 0x0000000020202020)]) => header::VARY, // vary
        (5, b'a') if same_name(bytes, &[(0x000000776f6c6c61, 0x0000002020202020)]) => header::ALLOW, // allow
        (5, b'r') if same_name(bytes, &[(0x00000065676e6172, 0x0000002020202020)]) => header::RANGE, // range
        (6, b'a') if same_name(bytes, &[(0x0000747065636361, 0x0000202020202020)]) => header::ACCEPT, // accept
        (6, b'c') if same_name(bytes, &[(0x000065696b6f6f63, 0x0000202020202020)]) => header::COOKIE, // cookie
        (6, b'e') if same_name(bytes, &[(0x0000746365707865, 0x0000202020202020)]) => header::EXPECT, // expect
        (6, b'o') if same_name(bytes, &[(0x00006e696769726f, 0x0000202020202020)]) => header::ORIGIN, // origin
        (6, b'p') if same_name(bytes, &[(0x0000616d67617270, 0x0000202020202020)]) => header::PRAGMA, // pragma
        (6, b's') if same_name(bytes, &[(0x0000726576726573, 0x0000202020202020)]) => header::SERVER, // server
        (7, b'e') if same_name(bytes, &[(0x0073657269707865, 0x0020202020202020)]) => header::EXPIRES, // expires
        (7, b'r') if same_name(bytes, &[(0x0072657265666572, 0x0020202020202020)]) => header::REFERER, // referer
        (7, b't') if same_name(bytes, &[(0x0072656c69617274, 0x0020202020202020)]) => header::TRAILER, // trailer
        (7, b'u') if same_name(bytes, &[(0x0065646172677075, 0x0020202020202020)]) => header::UPGRADE, // upgrade
        (7, b'w') if same_name(bytes, &[(0x00676e696e726177, 0x0020202020202020)]) => header::WARNING, // warning
        (8, b'i') if same_name(bytes, &[(0x65676e61722d6669, 0x2020202020002020)]) => header::IF_RANGE, // if-range
        (8, b'l') if same_name(bytes, &[(0x6e6f697461636f6c, 0x2020202020202020)]) => header::LOCATION, // location
        (9, b'x')
            if same_name(
                bytes,
                &[(0x692d6c6165722d78, 0x2000202020200020), (0x70692d6c6165722d, 0x2020002020202000)],
            ) =>
        {
            X_REAL_IP.clone()
        } // x-real-ip
        (10, b'c')
            if same_name(
                bytes,
                &[(0x697463656e6e6f63, 0x2020202020202020), (0x6e6f697463656e6e, 0x2020202020202020)],
            ) =>
        {
            header::CONNECTION
        } // connection
        (10, b'k')
            if same_name(
                bytes,
                &[(0x696c612d7065656b, 0x2020200020202020), (0x6576696c612d7065, 0x2020202020002020)],
            ) =>
        {
            KEEP_ALIVE.clone()
        } // keep-alive
        (10, b's')
            if same_name(
                bytes,
                &[(0x6b6f6f632d746573, 0x2020202000202020), (0x65696b6f6f632d74, 0x2020202020200020)],
            ) =>
        {
            header::SET_COOKIE
        } // set-cookie
        (10, b'u')
            if same_name(
                bytes,
                &[(0x6567612d72657375, 0x2020200020202020), (0x746e6567612d7265, 0x2020202020002020)],
            ) =>
        {
            header::USER_AGENT
        } // user-agent
        (12, b'c')
            if same_name(
                bytes,
                &[(0x2d746e65746e6f63, 0x0020202020202020), (0x657079742d746e65, 0x2020202000202020)],
            ) =>
        {
            header::CONTENT_TYPE
        } // content-type
        (12, b'x')
            if same_name(
                bytes,
                &[(0x7365757165722d78, 0x2020202020200020), (0x64692d7473657571, 0x2020002020202020)],
            ) =>
        {
            X_REQUEST_ID.clone()
        } // x-request-id
        (13, b'a')
            if same_name(
                bytes,
                &[(0x722d747065636361, 0x2000202020202020), (0x7365676e61722d74, 0x2020202020200020)],
            ) =>
        {
            header::ACCEPT_RANGES
        } // accept-ranges
        (13, b'a')
            if same_name(
                bytes,
                &[(0x7a69726f68747561, 0x2020202020202020), (0x6e6f6974617a6972, 0x2020202020202020)],
            ) =>
        {
            header::AUTHORIZATION
        } // authorization
        (13, b'c')
            if same_name(
                bytes,
                &[(0x6f632d6568636163, 0x2020002020202020), (0x6c6f72746e6f632d, 0x2020202020202000)],
            ) =>
        {
            header::CACHE_CONTROL
        } // cache-control
        (13, b'i')
            if same_name(
                bytes,
                &[(0x2d656e6f6e2d6669, 0x0020202020002020), (0x686374616d2d656e, 0x2020202020002020)],
            ) =>
        {
            header::IF_NONE_MATCH
        } // if-none-match
        (13, b'l')
            if same_name(
                bytes,
                &[(0x646f6d2d7473616c, 0x2020200020202020), (0x6465696669646f6d, 0x2020202020202020)],
            ) =>
        {
            header::LAST_MODIFIED
        } // last-modified
        (14, b'a')
            if same_name(
                bytes,
                &[(0x632d747065636361, 0x2000202020202020), (0x746573726168632d, 0x2020202020202000)],
            ) =>
        {
            header::ACCEPT_CHARSET
        } // accept-charset
        (14, b'c')
            if same_name(
                bytes,
                &[(0x2d746e65746e6f63, 0x0020202020202020), (0x6874676e656c2d74, 0x2020202020200020)],
            ) =>
        {
            header::CONTENT_LENGTH
        } // content-length
        (15, b'a')
            if same_name(
                bytes,
                &[(0x652d747065636361, 0x2000202020202020), (0x676e69646f636e65, 0x2020202020202020)],
            ) =>
        {
            header::ACCEPT_ENCODING
        } // accept-encoding
        (15, b'a')
            if same_name(
                bytes,
                &[(0x6c2d747065636361, 0x2000202020202020), (0x65676175676e616c, 0x2020202020202020)],
            ) =>
        {
            header::ACCEPT_LANGUAGE
        } // accept-language
        (15, b'x')
            if same_name(
                bytes,
                &[(0x726177726f662d78, 0x2020202020200020), (0x726f662d64656472, 0x2020200020202020)],
            ) =>
        {
            X_FORWARDED_FOR.clone()
        } // x-forwarded-for
        (16, b'c')
            if same_name(
                bytes,
                &[(0x2d746e65746e6f63, 0x0020202020202020), (0x676e69646f636e65, 0x2020202020202020)],
            ) =>
        {
            header::CONTENT_ENCODING
        } // content-encoding
        (16, b'c')
            if same_name(
                bytes,
                &[(0x2d746e65746e6f63, 0x0020202020202020), (0x65676175676e616c, 0x2020202020202020)],
            ) =>
        {
            header::CONTENT_LANGUAGE
        } // content-language
        (16, b'c')
            if same_name(
                bytes,
                &[(0x2d746e65746e6f63, 0x0020202020202020), (0x6e6f697461636f6c, 0x2020202020202020)],
            ) =>
        {
            header::CONTENT_LOCATION
        } // content-location
        (17, b'i')
            if same_name(
                bytes,
                &[
                    (0x6669646f6d2d6669, 0x2020202020002020),
                    (0x636e69732d646569, 0x2020202000202020),
                    (0x65636e69732d6465, 0x2020202020002020),
                ],
            ) =>
        {
            header::IF_MODIFIED_SINCE
        } // if-modified-since
        (17, b't')
            if same_name(
                bytes,
                &[
                    (0x726566736e617274, 0x2020202020202020),
                    (0x6e69646f636e652d, 0x2020202020202000),
                    (0x676e69646f636e65, 0x2020202020202020),
                ],
            ) =>
        {
            header::TRANSFER_ENCODING
        } // transfer-encoding
        (17, b'x')
            if same_name(
                bytes,
                &[
                    (0x726177726f662d78, 0x2020202020200020),
                    (0x746f72702d646564, 0x2020202000202020),
                    (0x6f746f72702d6465, 0x2020202020002020),
                ],
            ) =>
        {
            X_FORWARDED_PROTO.clone()
        } // x-forwarded-proto
        _ => return HeaderName::from_bytes(bytes),
    })
}

/// Whether `bytes` spells a name given as `words`, in any letter case. Each word is eight bytes of
/// the lowercase name, little-endian (a name of more than eight bytes is read in words at 0, 8, ...
/// with the last one ending at its last byte; a shorter one in one word padded with zeros), with
/// the mask of its letters: the case bit is set only where the name has a letter, so a letter
/// matches in either case and any other byte must match exactly.
#[inline]
fn same_name(bytes: &[u8], words: &[(u64, u64)]) -> bool {
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

    /// Every name of the fast path.
    const KNOWN: [&str; 46] = [
        "te",
        "age",
        "via",
        "date",
        "etag",
        "host",
        "link",
        "vary",
        "allow",
        "range",
        "accept",
        "cookie",
        "expect",
        "origin",
        "pragma",
        "server",
        "expires",
        "referer",
        "trailer",
        "upgrade",
        "warning",
        "if-range",
        "location",
        "x-real-ip",
        "connection",
        "keep-alive",
        "set-cookie",
        "user-agent",
        "content-type",
        "x-request-id",
        "accept-ranges",
        "authorization",
        "cache-control",
        "if-none-match",
        "last-modified",
        "accept-charset",
        "content-length",
        "accept-encoding",
        "accept-language",
        "x-forwarded-for",
        "content-encoding",
        "content-language",
        "content-location",
        "if-modified-since",
        "transfer-encoding",
        "x-forwarded-proto",
    ];

    #[test]
    fn every_known_name_in_any_case_and_every_one_byte_change_of_it_parse_as_the_general_parser_says() {
        for name in KNOWN {
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
