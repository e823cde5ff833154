//! W3C Trace Context (level 1): `traceparent` read strictly, so a malformed one is never
//! continued (the request starts a trace of its own and the upstream gets the gateway's), and
//! `tracestate` passed on with a valid parent only.

use http::header::{HeaderMap, HeaderValue};

/// Longest `tracestate` passed on (the specification's 32 entries of up to 256 bytes are
/// allowed to be cut; 512 bytes is what it asks implementations to keep at least).
const MAX_TRACESTATE: usize = 512;

/// What a valid `traceparent` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parent {
    /// Trace id, not zero.
    pub trace_id: u128,
    /// The caller's span id, not zero.
    pub span_id: u64,
    /// The sampled flag.
    pub sampled: bool,
    /// The `tracestate` that came with it.
    pub tracestate: Option<HeaderValue>,
}

/// Takes the client's trace context off `headers`: the parent when there is exactly one valid
/// `traceparent`; `traceparent` and `tracestate` are removed either way.
pub(crate) fn take(headers: &mut HeaderMap) -> Option<Parent> {
    if !headers.contains_key(&crate::TRACEPARENT) {
        headers.remove(&crate::TRACESTATE);
        return None;
    }
    // A second traceparent makes the context ambiguous: none is continued.
    let mut values = headers.get_all(&crate::TRACEPARENT).iter();
    let parent = match (values.next(), values.next()) {
        (Some(v), None) => parse_traceparent(v.as_bytes()),
        _ => None,
    };
    let state = parent.and(tracestate(headers));
    headers.remove(&crate::TRACEPARENT);
    headers.remove(&crate::TRACESTATE);
    parent.map(|(trace_id, span_id, sampled)| Parent { trace_id, span_id, sampled, tracestate: state })
}

/// The `tracestate` values joined with commas, when short enough and printable.
fn tracestate(headers: &HeaderMap) -> Option<HeaderValue> {
    let mut joined = Vec::new();
    for v in headers.get_all(&crate::TRACESTATE) {
        let b = v.as_bytes();
        if b.iter().any(|&c| !(0x20..0x7f).contains(&c)) {
            return None;
        }
        if !joined.is_empty() {
            joined.push(b',');
        }
        joined.extend_from_slice(b);
    }
    if joined.is_empty() || joined.len() > MAX_TRACESTATE {
        return None;
    }
    HeaderValue::from_bytes(&joined).ok()
}

/// Reads a `traceparent`: `version-traceid-parentid-flags`, lowercase hex, version `00` exactly
/// 55 bytes (a later version may add fields after a `-`; `ff` is invalid), ids not all zero.
pub fn parse_traceparent(v: &[u8]) -> Option<(u128, u64, bool)> {
    if v.len() < 55 {
        return None;
    }
    let version = hex(&v[0..2])?;
    match version {
        0 if v.len() != 55 => return None,
        0xff => return None,
        _ if v.len() > 55 && v[55] != b'-' => return None,
        _ => {}
    }
    if v[2] != b'-' || v[35] != b'-' || v[52] != b'-' {
        return None;
    }
    let trace_id = hex(&v[3..35])?;
    // 16 digits: the value fits in 64 bits.
    let span_id = hex(&v[36..52])? as u64;
    let flags = hex(&v[53..55])?;
    if trace_id == 0 || span_id == 0 {
        return None;
    }
    Some((trace_id, span_id, flags & 1 == 1))
}

fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// The number lowercase hex digits `s` write (at most 32 of them).
fn hex(s: &[u8]) -> Option<u128> {
    s.iter().try_fold(0u128, |acc, &c| Some((acc << 4) | u128::from(nibble(c)?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_and_invalid_traceparents() {
        let ok = b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        assert_eq!(parse_traceparent(ok), Some((0x0af7651916cd43dd8448eb211c80319c, 0xb7ad6b7169203331, true)));
        let later = b"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00-what-comes-next";
        assert_eq!(parse_traceparent(later).map(|p| p.2), Some(false));
        for bad in [
            &b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-"[..],
            b"00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            b"00-00000000000000000000000000000000-b7ad6b7169203331-01",
            b"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            b"ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0",
            b"00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            b"01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01x",
            b"",
        ] {
            assert_eq!(parse_traceparent(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn two_traceparents_continue_nothing_and_both_headers_go() {
        let mut h = HeaderMap::new();
        h.append("traceparent", HeaderValue::from_static("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
        h.append("traceparent", HeaderValue::from_static("00-1af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
        h.append("tracestate", HeaderValue::from_static("a=1"));
        assert_eq!(take(&mut h), None);
        assert!(h.is_empty(), "{h:?}");
    }

    #[test]
    fn tracestate_comes_with_a_valid_parent_only() {
        let mut h = HeaderMap::new();
        h.append("traceparent", HeaderValue::from_static("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
        h.append("tracestate", HeaderValue::from_static("a=1"));
        h.append("tracestate", HeaderValue::from_static("b=2"));
        let p = take(&mut h).expect("a parent");
        assert_eq!(p.tracestate.as_ref().map(|v| v.as_bytes()), Some(&b"a=1,b=2"[..]));
        let mut h = HeaderMap::new();
        h.append("traceparent", HeaderValue::from_static("garbage"));
        h.append("tracestate", HeaderValue::from_static("a=1"));
        assert_eq!(take(&mut h), None);
        assert!(h.is_empty());
    }
}
