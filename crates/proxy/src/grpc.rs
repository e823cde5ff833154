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
    h.insert("grpc-status", HeaderValue::from(u16::from(code as u8)));
    if let Ok(v) = HeaderValue::try_from(percent_encode(message)) {
        h.insert("grpc-message", v);
    }
    resp
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
