//! gRPC-Web, as browsers speak it (gRPC's PROTOCOL-WEB.md), translated to gRPC towards the
//! endpoint and back, as Envoy's `grpc_web` filter does:
//!
//! - a request whose `content-type` is `application/grpc-web`, `application/grpc-web+proto` (any
//!   `+format`), or their `-text` forms (base64) goes to the endpoint as `application/grpc`
//!   (with the same `+format`), with `te: trailers` and without `content-length`; a `-text` body
//!   is decoded from base64 as it streams (each message may be padded on its own);
//! - the answer goes back as `application/grpc-web[-text][+format]`: its messages as they come,
//!   and its trailers as a last frame in the body (flag byte `0x80`, four-byte big-endian length,
//!   `name:value\r\n` lines); a trailers-only answer keeps its status in the head. A text answer
//!   (when the client's `Accept` asks for `application/grpc-web-text`, or it sent text and
//!   accepts nothing more precise) is base64 encoded in runs of three bytes, so it is padded
//!   once, at its end.
//!
//! Requests are recognised on HTTP/1.1 as well as HTTP/2: browsers send gRPC-Web over either.

use bytes::{Bytes, BytesMut};
use data_encoding::BASE64;
use http::header::{self, HeaderMap, HeaderValue};
use http_body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::task::{Context, Poll};

const PREFIX: &[u8] = b"application/grpc-web";

/// A gRPC-Web call: how its body comes and how its answer goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Web {
    /// The request body is base64 (`-text`).
    pub text_in: bool,
    /// The answer is sent as base64 (`-text`).
    pub text_out: bool,
}

/// The gRPC-Web call `headers` make, if they make one: `content-type` is `application/grpc-web`
/// or `application/grpc-web-text`, alone or followed by `+format` or `;parameters`.
pub(crate) fn of(headers: &HeaderMap) -> Option<Web> {
    let rest = web_suffix(headers.get(header::CONTENT_TYPE)?.as_bytes())?;
    let text_in = rest.len() >= 5 && rest[..5].eq_ignore_ascii_case(b"-text");
    let after = if text_in { &rest[5..] } else { rest };
    if !matches!(after.first(), None | Some(b'+' | b';')) {
        return None;
    }
    let text_out = match headers.get(header::ACCEPT).and_then(|a| web_suffix(a.as_bytes())) {
        Some(accept) => accept.len() >= 5 && accept[..5].eq_ignore_ascii_case(b"-text"),
        None => text_in,
    };
    Some(Web { text_in, text_out })
}

/// What follows `application/grpc-web` in `value`, if it starts so.
fn web_suffix(value: &[u8]) -> Option<&[u8]> {
    (value.len() >= PREFIX.len() && value[..PREFIX.len()].eq_ignore_ascii_case(PREFIX)).then(|| &value[PREFIX.len()..])
}

/// The message format a content type names after `+` (`+proto`, `+json`), if any.
fn format(value: &[u8]) -> &[u8] {
    let value = value.split(|&b| b == b';').next().unwrap_or(&[]);
    value.iter().position(|&b| b == b'+').map_or(&[], |i| &value[i..])
}

/// The request's head for the endpoint: a gRPC call's content type, `te: trailers`, no length
/// (a text body is shorter once decoded).
pub(crate) fn to_grpc(headers: &mut HeaderMap) {
    let format = headers.get(header::CONTENT_TYPE).map(|v| format(v.as_bytes()).to_vec()).unwrap_or_default();
    let mut value = b"application/grpc".to_vec();
    value.extend_from_slice(&format);
    if let Ok(v) = HeaderValue::from_bytes(&value) {
        headers.insert(header::CONTENT_TYPE, v);
    }
    headers.remove(header::CONTENT_LENGTH);
    headers.insert(header::TE, HeaderValue::from_static("trailers"));
}

/// The answer's head for the client: a gRPC content type becomes the gRPC-Web one (a
/// trailers-only answer's status stays in the head), and the length goes (the body gains the
/// trailer frame).
pub(crate) fn to_web(headers: &mut HeaderMap, web: Web) -> bool {
    let Some(v) = headers.get(header::CONTENT_TYPE) else { return false };
    let v = v.as_bytes();
    if v.len() < 16 || !v[..16].eq_ignore_ascii_case(b"application/grpc") || v[16..].starts_with(b"-") {
        return false;
    }
    let mut value = PREFIX.to_vec();
    if web.text_out {
        value.extend_from_slice(b"-text");
    }
    value.extend_from_slice(format(v));
    if let Ok(v) = HeaderValue::from_bytes(&value) {
        headers.insert(header::CONTENT_TYPE, v);
    }
    headers.remove(header::CONTENT_LENGTH);
    true
}

/// The trailer frame that carries `trailers` in the body.
fn trailer_frame(trailers: &HeaderMap) -> BytesMut {
    let mut out = BytesMut::with_capacity(64);
    out.extend_from_slice(&[0x80, 0, 0, 0, 0]);
    for (name, value) in trailers {
        // Names are lowercase already (`http` keeps them so).
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b":");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    let len = u32::try_from(out.len() - 5).unwrap_or(u32::MAX);
    out[1..5].copy_from_slice(&len.to_be_bytes());
    out
}

/// Turns an answer's frames into gRPC-Web's: messages as they are (or base64), trailers into the
/// last frame.
#[derive(Debug)]
pub(crate) struct Encoder {
    text: bool,
    /// Bytes not yet encoded (text: fewer than three, carried to the next frame).
    carry: BytesMut,
    /// The trailer frame went out: nothing more follows.
    done: bool,
}

impl Encoder {
    pub(crate) fn new(web: Web) -> Self {
        Encoder { text: web.text_out, carry: BytesMut::new(), done: false }
    }

    /// What a data frame of the answer becomes (possibly nothing yet).
    pub(crate) fn data(&mut self, data: Bytes) -> Bytes {
        if !self.text {
            return data;
        }
        if self.carry.is_empty() && data.len().is_multiple_of(3) {
            return Bytes::from(BASE64.encode(&data));
        }
        self.carry.extend_from_slice(&data);
        let whole = self.carry.len() / 3 * 3;
        let run = self.carry.split_to(whole);
        Bytes::from(BASE64.encode(&run))
    }

    /// The answer's trailers as its last frame.
    pub(crate) fn trailers(&mut self, trailers: &HeaderMap) -> Bytes {
        self.done = true;
        let frame = trailer_frame(trailers);
        if !self.text {
            return frame.freeze();
        }
        self.carry.extend_from_slice(&frame);
        let all = std::mem::take(&mut self.carry);
        Bytes::from(BASE64.encode(&all))
    }

    /// What is left to send when the answer ends without trailers (the bytes a text answer
    /// carried, padded).
    pub(crate) fn finish(&mut self) -> Option<Bytes> {
        self.done = true;
        (!self.carry.is_empty()).then(|| Bytes::from(BASE64.encode(&std::mem::take(&mut self.carry))))
    }

    /// Nothing is held back.
    pub(crate) fn idle(&self) -> bool {
        self.carry.is_empty()
    }
}

/// A `-text` request body, decoded from base64 as it comes: whole groups of four characters at a
/// time, a group with padding ending one message's encoding (the next may follow).
pub(crate) struct TextBody<B> {
    inner: B,
    /// Characters of a group not complete yet.
    partial: Vec<u8>,
}

impl<B> TextBody<B> {
    pub(crate) fn new(inner: B) -> Self {
        TextBody { inner, partial: Vec::new() }
    }
}

/// A `-text` body that is not base64.
#[derive(Debug)]
pub(crate) struct BadText;

impl std::fmt::Display for BadText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a grpc-web-text body that is not base64")
    }
}

impl std::error::Error for BadText {}

/// Decodes whole groups of base64: each run of groups that ends in padding on its own.
fn decode_groups(text: &[u8]) -> Result<Vec<u8>, BadText> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let mut start = 0;
    for end in (4..=text.len()).step_by(4) {
        if text[end - 1] == b'=' || end == text.len() {
            out.extend(BASE64.decode(&text[start..end]).map_err(|_| BadText)?);
            start = end;
        }
    }
    Ok(out)
}

impl<B> Body for TextBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<gatehouse_upstream::BoxError>,
{
    type Data = Bytes;
    type Error = gatehouse_upstream::BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        loop {
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    let data = match frame.into_data() {
                        Ok(data) => data,
                        // Trailers of a browser's request: passed on as they are.
                        Err(frame) => return Poll::Ready(Some(Ok(frame))),
                    };
                    this.partial.extend(data.iter().copied().filter(|b| !b.is_ascii_whitespace()));
                    let whole = this.partial.len() / 4 * 4;
                    if whole == 0 {
                        continue;
                    }
                    let decoded = decode_groups(&this.partial[..whole]);
                    this.partial.drain(..whole);
                    return Poll::Ready(Some(match decoded {
                        Ok(bytes) => Ok(Frame::data(Bytes::from(bytes))),
                        Err(e) => Err(Box::new(e) as Self::Error),
                    }));
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e.into()))),
                Poll::Ready(None) if this.partial.is_empty() => return Poll::Ready(None),
                Poll::Ready(None) => {
                    this.partial.clear();
                    return Poll::Ready(Some(Err(Box::new(BadText))));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.partial.is_empty() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.append(*n, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn the_four_content_types_are_grpc_web_and_others_are_not() {
        let of_type = |t: &'static str| of(&headers(&[("content-type", t)]));
        let binary = Some(Web { text_in: false, text_out: false });
        let text = Some(Web { text_in: true, text_out: true });
        assert_eq!(of_type("application/grpc-web"), binary);
        assert_eq!(of_type("application/grpc-web+proto"), binary);
        assert_eq!(of_type("Application/gRPC-Web+json"), binary);
        assert_eq!(of_type("application/grpc-web; charset=utf-8"), binary);
        assert_eq!(of_type("application/grpc-web-text"), text);
        assert_eq!(of_type("application/grpc-web-text+proto"), text);
        for other in [
            "application/grpc",
            "application/grpc+proto",
            "application/grpc-webx",
            "application/grpc-web-textx",
            "text/plain",
        ] {
            assert_eq!(of_type(other), None, "{other}");
        }
        // The client's Accept decides how the answer goes.
        let h = headers(&[("content-type", "application/grpc-web-text"), ("accept", "application/grpc-web")]);
        assert_eq!(of(&h), Some(Web { text_in: true, text_out: false }));
        let h = headers(&[("content-type", "application/grpc-web+proto"), ("accept", "application/grpc-web-text")]);
        assert_eq!(of(&h), Some(Web { text_in: false, text_out: true }));
        let h = headers(&[("content-type", "application/grpc-web-text"), ("accept", "*/*")]);
        assert_eq!(of(&h), text);
    }

    #[test]
    fn heads_are_translated_both_ways_keeping_the_format() {
        let mut h = headers(&[("content-type", "application/grpc-web-text+proto"), ("content-length", "16")]);
        to_grpc(&mut h);
        assert_eq!(h.get("content-type").map(|v| v.as_bytes()), Some(&b"application/grpc+proto"[..]));
        assert_eq!(h.get("te").map(|v| v.as_bytes()), Some(&b"trailers"[..]));
        assert!(h.get("content-length").is_none());

        let mut h = headers(&[("content-type", "application/grpc"), ("grpc-status", "5")]);
        assert!(to_web(&mut h, Web { text_in: true, text_out: true }));
        assert_eq!(h.get("content-type").map(|v| v.as_bytes()), Some(&b"application/grpc-web-text"[..]));
        assert_eq!(h.get("grpc-status").map(|v| v.as_bytes()), Some(&b"5"[..]));
        let mut h = headers(&[("content-type", "application/grpc+proto")]);
        assert!(to_web(&mut h, Web { text_in: false, text_out: false }));
        assert_eq!(h.get("content-type").map(|v| v.as_bytes()), Some(&b"application/grpc-web+proto"[..]));
        // Not a gRPC answer (an endpoint's error page): left as it is.
        let mut h = headers(&[("content-type", "text/html")]);
        assert!(!to_web(&mut h, Web { text_in: false, text_out: false }));
        assert_eq!(h.get("content-type").map(|v| v.as_bytes()), Some(&b"text/html"[..]));
    }

    #[test]
    fn a_text_answer_is_the_spec_example() {
        // One message "hello", then grpc-status 0 and an empty message, as grpc-web's own
        // interoperability example encodes them.
        let mut enc = Encoder::new(Web { text_in: true, text_out: true });
        let mut out = Vec::new();
        // Split oddly: the encoder carries what does not fill three bytes.
        for part in [&b"\0\0\0"[..], b"\0\x05h", b"e", b"llo"] {
            out.extend_from_slice(&enc.data(Bytes::copy_from_slice(part)));
        }
        assert!(!enc.idle());
        let trailers = headers(&[("grpc-status", "0"), ("grpc-message", "")]);
        out.extend_from_slice(&enc.trailers(&trailers));
        let all = BASE64.decode(&out).expect("one padded run");
        let want = b"\0\0\0\0\x05hello\x80\0\0\0\x1egrpc-status:0\r\ngrpc-message:\r\n".to_vec();
        assert_eq!(all, want);
        // Binary: the same bytes, unencoded.
        let mut enc = Encoder::new(Web { text_in: false, text_out: false });
        let mut bin = enc.data(Bytes::from_static(b"\0\0\0\0\x05hello")).to_vec();
        bin.extend_from_slice(&enc.trailers(&trailers));
        assert_eq!(bin, want);
        assert_eq!(enc.finish(), None);
    }

    #[test]
    fn text_bodies_decode_across_chunks_and_padding() {
        // Two messages, each padded on its own, split at odd places.
        let a = BASE64.encode(b"\0\0\0\0\x05hello");
        let b = BASE64.encode(b"\0\0\0\0\x02hi");
        let joined = format!("{a}{b}");
        assert_eq!(decode_groups(joined.as_bytes()).expect("decodes"), b"\0\0\0\0\x05hello\0\0\0\0\x02hi");
        assert!(decode_groups(b"AA=A").is_err());
        assert!(decode_groups(b"A*AA").is_err());
    }

    /// A body of the given chunks.
    struct Chunks(std::collections::VecDeque<Bytes>);

    impl Body for Chunks {
        type Data = Bytes;
        type Error = std::convert::Infallible;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Poll::Ready(self.0.pop_front().map(|b| Ok(Frame::data(b))))
        }
    }

    fn chunks(parts: &[&[u8]]) -> Chunks {
        Chunks(parts.iter().map(|p| Bytes::copy_from_slice(p)).collect())
    }

    #[tokio::test]
    async fn a_text_body_streams_decoded() {
        use http_body_util::BodyExt;
        let a = BASE64.encode(b"\0\0\0\0\x05hello");
        let b = BASE64.encode(b"\0\0\0\0\x02hi");
        let joined = format!("{a}{b}");
        let (first, rest) = joined.as_bytes().split_at(7);
        let got = TextBody::new(chunks(&[first, rest])).collect().await.expect("decodes").to_bytes();
        assert_eq!(&got[..], b"\0\0\0\0\x05hello\0\0\0\0\x02hi");
        // A body that ends inside a group is refused.
        assert!(TextBody::new(chunks(&[b"AAAAA"])).collect().await.is_err());
    }
}
