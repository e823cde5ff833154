//! WebSocket over HTTP/2 (RFC 8441): an extended CONNECT with `:protocol: websocket` is forwarded
//! as the HTTP/1.1 upgrade it stands for (RFC 6455), and the endpoint's `101` becomes the `200`
//! the HTTP/2 client waits for. The server that owns the client connection recognises the
//! request ([`to_upgrade`]) and splices the stream with the endpoint's connection afterwards; the
//! request path forwards it as a `GET` with `Connection: upgrade`.
//!
//! The endpoint's handshake is checked as a WebSocket client would check it: its
//! `Sec-WebSocket-Accept` must answer the key Gatehouse sent ([`accepts`]).

use data_encoding::BASE64;
use http::header::{self, HeaderMap, HeaderValue};
use http::Request;

/// RFC 6455's GUID, appended to the key to make the accept value.
const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// Makes an extended CONNECT for `websocket` the HTTP/1.1 upgrade it stands for (the method stays
/// `CONNECT` for the log; the request path sends it as `GET`): `Upgrade: websocket`,
/// `Connection: upgrade` and a fresh `Sec-WebSocket-Key`, which it returns. What the client sent
/// of `Sec-WebSocket-Version`, `-Protocol`, `-Extensions` and `Origin` goes along.
pub fn to_upgrade<B>(req: &mut Request<B>) -> HeaderValue {
    let mut nonce = [0u8; 16];
    // A nonce, not a secret: if the system's generator fails, the clock's bits will do.
    if aws_lc_rs::rand::fill(&mut nonce).is_err() {
        nonce[..8].copy_from_slice(&gatehouse_clock::now_ms().to_le_bytes());
    }
    let key = HeaderValue::try_from(BASE64.encode(&nonce))
        .unwrap_or_else(|_| HeaderValue::from_static("AAAAAAAAAAAAAAAAAAAAAA=="));
    let h = req.headers_mut();
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    h.insert(header::SEC_WEBSOCKET_KEY, key.clone());
    h.entry(header::SEC_WEBSOCKET_VERSION).or_insert(HeaderValue::from_static("13"));
    key
}

/// Whether the endpoint's `101` completes the handshake that sent `key`.
pub fn accepts(headers: &HeaderMap, key: &HeaderValue) -> bool {
    let mut ctx = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY);
    ctx.update(key.as_bytes());
    ctx.update(GUID);
    let expected = BASE64.encode(ctx.finish().as_ref());
    let mut accepts = headers.get_all(header::SEC_WEBSOCKET_ACCEPT).iter();
    let upgraded = headers.get(header::UPGRADE).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"websocket"));
    match (accepts.next(), accepts.next()) {
        (Some(got), None) => upgraded && got.as_bytes() == expected.as_bytes(),
        _ => false,
    }
}

/// The endpoint's `101` head as the HTTP/2 client's `200`: the handshake's own fields go (the
/// client made none of them), the negotiated subprotocol and extensions stay.
pub fn to_connect_answer(parts: &mut http::response::Parts) {
    parts.status = http::StatusCode::OK;
    for name in [header::UPGRADE, header::CONNECTION, header::SEC_WEBSOCKET_ACCEPT, header::CONTENT_LENGTH] {
        parts.headers.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    #[test]
    fn the_rfc_6455_example_key_is_accepted_and_others_are_not() {
        // RFC 6455 section 1.3.
        let key = HeaderValue::from_static("dGhlIHNhbXBsZSBub25jZQ==");
        let mut h = HeaderMap::new();
        h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        h.insert(header::SEC_WEBSOCKET_ACCEPT, HeaderValue::from_static("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="));
        assert!(accepts(&h, &key));
        assert!(!accepts(&h, &HeaderValue::from_static("AAAAAAAAAAAAAAAAAAAAAA==")));
        let mut twice = h.clone();
        twice.append(header::SEC_WEBSOCKET_ACCEPT, HeaderValue::from_static("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="));
        assert!(!accepts(&twice, &key), "two accept values");
        h.insert(header::UPGRADE, HeaderValue::from_static("h2c"));
        assert!(!accepts(&h, &key), "an upgrade to something else");
    }

    #[test]
    fn an_extended_connect_becomes_an_upgrade_with_a_fresh_key() {
        let mut req = Request::builder()
            .method(Method::CONNECT)
            .uri("https://example.test/chat")
            .header("sec-websocket-version", "13")
            .header("sec-websocket-protocol", "chat, superchat")
            .body(())
            .expect("request");
        let key = to_upgrade(&mut req);
        assert_eq!(BASE64.decode(key.as_bytes()).map(|k| k.len()).ok(), Some(16));
        let h = req.headers();
        assert_eq!(h.get("upgrade").map(|v| v.as_bytes()), Some(&b"websocket"[..]));
        assert_eq!(h.get("connection").map(|v| v.as_bytes()), Some(&b"upgrade"[..]));
        assert_eq!(h.get("sec-websocket-protocol").map(|v| v.as_bytes()), Some(&b"chat, superchat"[..]));
        let mut other = Request::new(());
        assert_ne!(to_upgrade(&mut other), key, "a key per request");
        assert_eq!(other.headers().get("sec-websocket-version").map(|v| v.as_bytes()), Some(&b"13"[..]));
    }
}
