//! Target `proxy_header`: the first bytes of a connection on a `proxy_protocol` listener, as
//! many as have arrived. The header must read the same however much of the stream is there: a
//! prefix is never refused when a longer one is accepted, a header once whole never changes with
//! what follows it (that belongs to TLS or HTTP), and a refusal stays a refusal. An accepted
//! header is exactly its own bytes: a v1 line of at most 107 bytes starting `PROXY ` and ending
//! `\r\n`, or a v2 header of 16 bytes plus the length it announces, never over `MAX_HEADER`; and
//! no stream is left waiting for more than `MAX_HEADER` bytes.
//!
//! The input: the bytes as a balancer (or anyone) sent them.

use gatehouse_listener::proxy_header::{parse, Parsed, ProxyHeader, Version, MAX_HEADER};

/// Longest input checked at every length (the checks are quadratic in it).
const MAX_INPUT: usize = 8192;

/// Parses every prefix of the input and checks that the answers agree.
pub fn check(data: &[u8]) {
    let data = &data[..data.len().min(MAX_INPUT)];
    // What a shorter prefix settled on: a refusal, or a whole header.
    let mut settled: Option<Option<ProxyHeader>> = None;
    for end in 0..=data.len() {
        let bytes = &data[..end];
        let answer = parse(bytes);
        match (&answer, settled) {
            (Ok(Parsed::Incomplete), None) => {
                assert!(end < MAX_HEADER, "still waiting after {end} bytes");
            }
            (Ok(Parsed::Incomplete), Some(before)) => panic!("{before:?}, then more needed at {end} bytes"),
            (Err(_), None) => settled = Some(None),
            (Err(_), Some(None)) => {}
            (Err(e), Some(Some(h))) => panic!("{h:?}, then refused at {end} bytes: {e}"),
            (Ok(Parsed::Complete(h)), None) => {
                check_header(bytes, h);
                assert_eq!(h.len, end, "a header completed by a byte after it");
                settled = Some(Some(*h));
            }
            (Ok(Parsed::Complete(h)), Some(Some(before))) => {
                assert_eq!(*h, before, "what follows the header changed it");
            }
            (Ok(Parsed::Complete(h)), Some(None)) => panic!("refused, then {h:?} at {end} bytes"),
        }
    }
}

/// What an accepted header must be.
fn check_header(bytes: &[u8], h: &ProxyHeader) {
    assert!(h.len > 0 && h.len <= bytes.len() && h.len <= MAX_HEADER, "{h:?} of {} bytes", bytes.len());
    let own = &bytes[..h.len];
    match h.version {
        Version::V1 => {
            assert!(own.starts_with(b"PROXY ") && own.ends_with(b"\r\n"), "v1 line {own:?}");
            assert!(h.len <= 107, "v1 line of {} bytes", h.len);
            assert_eq!(own.iter().filter(|&&b| b == b'\n').count(), 1, "v1 line {own:?}");
        }
        Version::V2 => {
            assert!(own.starts_with(b"\r\n\r\n\0\r\nQUIT\n"), "v2 signature");
            assert_eq!(h.len, 16 + usize::from(u16::from_be_bytes([own[14], own[15]])), "v2 length");
            assert_eq!(own[12] >> 4, 2, "v2 version");
            if own[12] & 0x0f == 0 {
                assert_eq!(h.addresses, None, "LOCAL names no client");
            }
        }
    }
}
