//! One HTTP/3 request: checked as RFC 9114 asks (length, connection-specific headers), limited to
//! safe methods in 0-RTT data, sent through the request path, and its answer written back.

use crate::body::H3Body;
use bytes::Bytes;
use gatehouse_proxy::error::ProxyError;
use gatehouse_proxy::{ConnInfo, ResponseBody};
use http::header;
use http_body::Body;
use std::pin::Pin;
use std::sync::Arc;

type SendHalf = h3::server::RequestStream<h3_quinn::SendStream<Bytes>, Bytes>;

pub(crate) async fn serve_request(
    shared: Arc<gatehouse_proxy::Shared>,
    info: Arc<ConnInfo>,
    req: http::Request<()>,
    stream: h3::server::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>,
    early: bool,
) {
    let (mut send, recv) = stream.split();
    let mut req = req;
    if req.method() == http::Method::CONNECT {
        // No extended CONNECT (RFC 9220) yet, and no tunnels.
        shared.stats.bad_requests.inc();
        return refuse(&mut send, ProxyError::NotForwarded("CONNECT over HTTP/3")).await;
    }
    if early {
        // 0-RTT data can be replayed: only a safe method is served from it, and the backend is
        // told (RFC 8470), so it can answer 425 itself. The client sends anything else again
        // once the handshake is complete.
        if !matches!(*req.method(), http::Method::GET | http::Method::HEAD | http::Method::OPTIONS) {
            return refuse(&mut send, ProxyError::TooEarly).await;
        }
        req.headers_mut().insert(EARLY_DATA, http::HeaderValue::from_static("1"));
    }
    // A body must be as long as its content-length says (RFC 9114 §4.1.2): toward an HTTP/1.1
    // endpoint the excess would be read as a request of its own. Connection-specific headers
    // make a request malformed too (§4.2).
    let length = declared_length(req.headers()).ok().filter(|_| !connection_specific(req.headers()));
    let Some(length) = length else {
        shared.stats.bad_requests.inc();
        return refuse(&mut send, ProxyError::BadRequest("content-length or a connection-specific header")).await;
    };
    // The request path bounds the wait for each part of the body (`body_read_timeout`).
    let req = req.map(|()| H3Body::new(recv, length));
    let resp = gatehouse_proxy::handle(shared, req, info).await;
    if let Err(e) = send_response(&mut send, resp).await {
        tracing::debug!(error = %e, "HTTP/3 response not sent whole");
    }
}

/// Answers a request that is not forwarded with its error's response (as the other protocols do)
/// and ends the stream.
async fn refuse(send: &mut SendHalf, error: ProxyError) {
    if let Err(e) = send_response(send, error.into_response()).await {
        tracing::debug!(error = %e, "HTTP/3 refusal not sent whole");
    }
}

/// The request's `content-length`: none, or one value (repeated values must agree); `Err` for
/// anything else.
fn declared_length(headers: &http::HeaderMap) -> Result<Option<u64>, ()> {
    let mut length = None;
    for v in headers.get_all(header::CONTENT_LENGTH) {
        let n = std::str::from_utf8(v.as_bytes())
            .ok()
            .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|t| t.parse::<u64>().ok())
            .ok_or(())?;
        if length.replace(n).is_some_and(|old| old != n) {
            return Err(());
        }
    }
    Ok(length)
}

/// Whether a request carries a header HTTP/3 forbids (RFC 9114 §4.2): a connection-specific
/// one, or `te` other than `trailers`. Such a request is malformed.
fn connection_specific(headers: &http::HeaderMap) -> bool {
    CONNECTION_SPECIFIC.iter().any(|name| headers.contains_key(name))
        || headers.get_all(header::TE).iter().any(|v| !v.as_bytes().eq_ignore_ascii_case(b"trailers"))
}

/// Set on a request forwarded from 0-RTT data (RFC 8470 §5.1).
const EARLY_DATA: header::HeaderName = header::HeaderName::from_static("early-data");

/// Headers HTTP/3 forbids (RFC 9114, 4.2): connection-specific ones.
const CONNECTION_SPECIFIC: [header::HeaderName; 5] = [
    header::CONNECTION,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::HeaderName::from_static("keep-alive"),
    header::HeaderName::from_static("proxy-connection"),
];

async fn send_response(send: &mut SendHalf, resp: http::Response<ResponseBody>) -> Result<(), h3::error::StreamError> {
    let (mut parts, mut body) = resp.into_parts();
    if let Some(raw) = body.take_raw_head() {
        raw.into_map(&mut parts.headers);
    }
    for name in &CONNECTION_SPECIFIC {
        parts.headers.remove(name);
    }
    parts.version = http::Version::HTTP_3;
    send.send_response(http::Response::from_parts(parts, ())).await?;
    loop {
        match std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => {
                    if !data.is_empty() {
                        send.send_data(data).await?;
                    }
                }
                Err(frame) => {
                    if let Ok(trailers) = frame.into_trailers() {
                        send.send_trailers(trailers).await?;
                    }
                }
            },
            Some(Err(e)) => {
                // The endpoint's answer broke off: so does the client's, not cleanly.
                tracing::debug!(error = %e, "response body failed; resetting the HTTP/3 stream");
                send.stop_stream(h3::error::Code::H3_INTERNAL_ERROR);
                return Ok(());
            }
            None => break,
        }
    }
    send.finish().await
}
