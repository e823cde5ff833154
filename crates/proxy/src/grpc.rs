//! gRPC's side of the request path: which requests are gRPC calls, and the status codes the
//! gateway answers them with when it answers by itself (a trailers-only response: HTTP 200,
//! `grpc-status` and `grpc-message` in the one HEADERS frame), after gRPC's "HTTP to gRPC status
//! code mapping" as Envoy applies it to its own replies, with the causes the gateway knows told
//! apart (a rate limit is RESOURCE_EXHAUSTED, a timeout DEADLINE_EXCEEDED).

use crate::body::ResponseBody;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Response, StatusCode};

/// A gRPC status code (the `grpc-status` value), as the gateway uses them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Code {
    /// 2: an answer gRPC has no better code for.
    Unknown = 2,
    /// 4: the call's time, or the upstream's, ran out.
    DeadlineExceeded = 4,
    /// 7: the caller is known and may not make this call.
    PermissionDenied = 7,
    /// 8: a rate limit, or a message larger than allowed.
    ResourceExhausted = 8,
    /// 12: no route for the method.
    Unimplemented = 12,
    /// 13: a malformed request.
    Internal = 13,
    /// 14: no endpoint could take the call now; the client may try again.
    Unavailable = 14,
    /// 16: no valid credentials.
    Unauthenticated = 16,
}

impl Code {
    /// The code for an HTTP status with no more known about its cause (gRPC's table).
    pub fn of_http(status: StatusCode) -> Code {
        match status.as_u16() {
            400 => Code::Internal,
            401 => Code::Unauthenticated,
            403 => Code::PermissionDenied,
            404 => Code::Unimplemented,
            429 | 502 | 503 | 504 => Code::Unavailable,
            _ => Code::Unknown,
        }
    }
}

/// Whether `headers` are a gRPC call's: `content-type` is `application/grpc`, alone or followed
/// by `+` (a message format, `+proto`, `+json`) or `;` (parameters).
pub(crate) fn is_call(headers: &HeaderMap) -> bool {
    headers.get(header::CONTENT_TYPE).is_some_and(|v| {
        let v = v.as_bytes();
        v.len() >= 16
            && v[..16].eq_ignore_ascii_case(b"application/grpc")
            && matches!(v.get(16), None | Some(b'+' | b';'))
    })
}

/// A trailers-only answer: HTTP 200 with `code` and `message` and no body; `headers` (a
/// challenge, a wait) go along.
pub(crate) fn answer(code: Code, message: &str, headers: HeaderMap) -> Response<ResponseBody> {
    let mut resp = Response::new(ResponseBody::empty());
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    *h = headers;
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    put_status(h, code, message);
    resp
}

/// Trailers that end a call the gateway cut off with `code`.
pub(crate) fn status_trailers(code: Code, message: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    put_status(&mut h, code, message);
    h
}

fn put_status(h: &mut HeaderMap, code: Code, message: &str) {
    h.insert("grpc-status", HeaderValue::from(u16::from(code as u8)));
    if let Ok(v) = HeaderValue::try_from(percent_encode(message)) {
        h.insert("grpc-message", v);
    }
}

/// The `grpc-status` in `headers` (trailers, or a trailers-only answer's head), if it is one.
pub(crate) fn status_of(headers: &HeaderMap) -> Option<u8> {
    std::str::from_utf8(headers.get("grpc-status")?.as_bytes()).ok()?.parse().ok()
}

/// A call's `grpc-timeout`: one to eight digits and a unit (`H`, `M`, `S`, `m`, `u`, `n`), as
/// gRPC's HTTP/2 protocol says; `None` when absent or not so.
pub(crate) fn timeout(headers: &HeaderMap) -> Option<std::time::Duration> {
    use std::time::Duration;
    let v = headers.get("grpc-timeout")?.as_bytes();
    let (&unit, digits) = v.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits.iter().fold(0u64, |n, &d| n * 10 + u64::from(d - b'0'));
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// `grpc-message`'s encoding: bytes outside printable ASCII, and `%`, as `%XX`.
fn percent_encode(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for b in message.bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_type(value: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static(value));
        h
    }

    #[test]
    fn grpc_calls_are_known_by_their_content_type() {
        for (value, call) in [
            ("application/grpc", true),
            ("application/grpc+proto", true),
            ("Application/GRPC+json", true),
            ("application/grpc; charset=utf-8", true),
            ("application/grpc-web", false),
            ("application/grpcx", false),
            ("application/json", false),
            ("application/grp", false),
        ] {
            assert_eq!(is_call(&with_type(value)), call, "{value}");
        }
        assert!(!is_call(&HeaderMap::new()));
    }

    #[test]
    fn grpc_timeouts_are_read_as_grpc_writes_them() {
        use std::time::Duration;
        let of = |v: &'static str| {
            let mut h = HeaderMap::new();
            h.insert("grpc-timeout", HeaderValue::from_static(v));
            timeout(&h)
        };
        assert_eq!(of("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(of("2M"), Some(Duration::from_secs(120)));
        assert_eq!(of("30S"), Some(Duration::from_secs(30)));
        assert_eq!(of("99999999m"), Some(Duration::from_millis(99_999_999)));
        assert_eq!(of("250u"), Some(Duration::from_micros(250)));
        assert_eq!(of("7n"), Some(Duration::from_nanos(7)));
        for bad in ["", "S", "100", "123456789m", "1x", "-1S", "1.5S", " 1S"] {
            assert_eq!(of(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_trailers_only_answer_has_status_message_and_no_body() {
        use http_body::Body;
        let resp = answer(Code::Unavailable, "no healthy endpoint: 100% down\n", HeaderMap::new());
        assert_eq!(resp.status(), StatusCode::OK);
        let h = resp.headers();
        assert_eq!(h.get("grpc-status").map(|v| v.as_bytes()), Some(&b"14"[..]));
        assert_eq!(h.get("grpc-message").map(|v| v.as_bytes()), Some(&b"no healthy endpoint: 100%25 down%0A"[..]));
        assert_eq!(h.get(header::CONTENT_TYPE).map(|v| v.as_bytes()), Some(&b"application/grpc"[..]));
        assert!(resp.body().is_end_stream());
    }
}
