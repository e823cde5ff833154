//! Codec checks against a real socket pair: head parsing, framing rules, chunked decoding.

use super::*;
use crate::io::{TimedIo, UpstreamIo};
use gatehouse_http1::MAX_LINES;
use http::HeaderMap;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::net::TcpStream;

async fn pair(response: &'static [u8]) -> H1Conn {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.expect("accept");
        s.write_all(response).await.expect("write");
        // Keep the socket open until the reader is done.
        let mut sink = [0u8; 1];
        let _ = tokio::io::AsyncReadExt::read(&mut s, &mut sink).await;
    });
    let stream = TcpStream::connect(addr).await.expect("connect");
    H1Conn::new(UpstreamIo::Plain(TimedIo::for_tests(stream, Duration::from_secs(5))))
}

/// Every header the client would get: the map and the lines passed on unparsed.
fn headers(head: &mut Head) -> HeaderMap {
    let mut map = head.response.headers().clone();
    if let Some(raw) = head.raw.take() {
        raw.into_map(&mut map);
    }
    map
}

async fn body(conn: &mut H1Conn, mut framing: Framing) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        match conn.decode_piece(&mut framing).map_err(|e| e.to_string())? {
            Some(Piece::Data(b)) => out.extend_from_slice(&b),
            Some(Piece::Trailer(_)) => {}
            None if matches!(framing, Framing::Length(0) | Framing::Empty) => return Ok(out),
            None => {
                let n = std::future::poll_fn(|cx| conn.poll_fill(cx)).await.map_err(|e| e.to_string())?;
                if n == 0 {
                    return if framing == Framing::Close { Ok(out) } else { Err("eof".into()) };
                }
            }
        }
    }
}

#[tokio::test]
async fn length_body_and_reuse() {
    let mut c = pair(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: 1\r\nX-A: 2\r\n\r\nhello").await;
    let mut head = c.read_head(false, Duration::from_secs(5)).await.expect("head");
    assert_eq!(head.response.status(), 200);
    assert!(head.reusable);
    let xa: Vec<_> = headers(&mut head).get_all("x-a").iter().cloned().collect();
    assert_eq!(xa, ["1", "2"]);
    assert_eq!(body(&mut c, head.framing).await.expect("body"), b"hello");
}

#[tokio::test]
async fn chunked_body_with_extensions_and_trailers() {
    let mut c = pair(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n",
    )
    .await;
    let mut head = c.read_head(false, Duration::from_secs(5)).await.expect("head");
    assert!(head.reusable);
    assert!(!headers(&mut head).contains_key(header::TRANSFER_ENCODING));
    assert_eq!(body(&mut c, head.framing).await.expect("body"), b"hello world");
    assert!(c.rbuf.is_empty());
}

#[tokio::test]
async fn interim_responses_are_skipped() {
    let mut c = pair(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n").await;
    let head = c.read_head(false, Duration::from_secs(5)).await.expect("head");
    assert_eq!(head.response.status(), 204);
    assert_eq!(head.framing, Framing::Empty);
}

#[tokio::test]
async fn both_lengths_mean_chunked_and_no_reuse() {
    let mut c =
        pair(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n").await;
    let mut head = c.read_head(false, Duration::from_secs(5)).await.expect("head");
    assert!(!head.reusable);
    assert!(!headers(&mut head).contains_key(header::CONTENT_LENGTH));
    assert_eq!(body(&mut c, head.framing).await.expect("body"), b"ok");
}

#[tokio::test]
async fn conflicting_lengths_are_refused() {
    let mut c = pair(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab").await;
    assert!(c.read_head(false, Duration::from_secs(5)).await.is_err());
}

#[tokio::test]
async fn close_delimited_and_http10() {
    let mut c = pair(b"HTTP/1.0 200 OK\r\n\r\nuntil close").await;
    let head = c.read_head(false, Duration::from_secs(5)).await.expect("head");
    assert_eq!(head.framing, Framing::Close);
    assert!(!head.reusable);
}

#[tokio::test]
async fn bad_chunk_size_is_an_error() {
    let mut c = pair(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").await;
    let head = c.read_head(false, Duration::from_secs(5)).await.expect("head");
    assert!(body(&mut c, head.framing).await.is_err());
}

#[tokio::test]
async fn head_responses_have_no_body() {
    let mut c = pair(b"HTTP/1.1 200 OK\r\nContent-Length: 75\r\n\r\n").await;
    let mut head = c.read_head(true, Duration::from_secs(5)).await.expect("head");
    assert_eq!(head.framing, Framing::Empty);
    assert_eq!(headers(&mut head)[header::CONTENT_LENGTH], "75");
}

/// The written head, as the client side would write it: the lines passed on, then the map.
fn written(head: &Head) -> Vec<u8> {
    let mut w = Vec::new();
    if let Some(raw) = &head.raw {
        raw.write(&mut w);
    }
    for (name, value) in head.response.headers() {
        w.extend_from_slice(name.as_str().as_bytes());
        w.extend_from_slice(b": ");
        w.extend_from_slice(value.as_bytes());
        w.extend_from_slice(b"\r\n");
    }
    w
}

#[tokio::test]
async fn the_usual_head_is_passed_on_as_written_without_its_hop_by_hop_lines() {
    let mut c = pair(
        b"HTTP/1.1 200 OK\r\nServer: nginx\r\nConnection: keep-alive\r\nContent-Length: 2\r\nKeep-Alive: timeout=5\r\n\
          X-A:  1 \r\nTE: trailers\r\nDate: Mon, 23 Nov 2026 03:00:00 GMT\r\nUpgrade: h2c\r\n\r\nok",
    )
    .await;
    let head = c.read_head(false, Duration::from_secs(5)).await.expect("head");
    let raw = head.raw.as_ref().expect("passed on unparsed");
    assert!(raw.has_date() && raw.has_content_length());
    assert_eq!(
        written(&head),
        b"Server: nginx\r\nContent-Length: 2\r\nX-A:  1 \r\nDate: Mon, 23 Nov 2026 03:00:00 GMT\r\n"
    );
    assert!(head.reusable);
    assert_eq!(body(&mut c, head.framing).await.expect("body"), b"ok");
    assert!(c.rbuf.is_empty());
}

#[tokio::test]
async fn a_length_beside_chunked_coding_is_not_passed_on() {
    let mut c = pair(
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nX-A: 1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
    )
    .await;
    let head = c.read_head(false, Duration::from_secs(5)).await.expect("head");
    assert!(!head.raw.as_ref().expect("unparsed").has_content_length());
    assert_eq!(written(&head), b"X-A: 1\r\n");
    assert_eq!(body(&mut c, head.framing).await.expect("body"), b"ok");
}

#[tokio::test]
async fn heads_the_lines_cannot_pass_go_into_the_map() {
    // A bare LF, a `Connection` naming another header, a switch: parsed into the map, as before.
    for response in [
        &b"HTTP/1.1 200 OK\r\nX-A: 1\nContent-Length: 0\r\n\r\n"[..],
        b"HTTP/1.1 200 OK\r\nConnection: x-secret\r\nX-Secret: 1\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n",
        // A line to leave out before the bare LF: nothing may have moved when the map is made.
        b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nX-A: 1\r\nX-B: 2\nContent-Length: 0\r\n\r\n",
    ] {
        let mut c = pair(response).await;
        let head = c.read_head(false, Duration::from_secs(5)).await.expect("head");
        assert!(head.raw.is_none(), "{:?}", String::from_utf8_lossy(response));
        assert!(!head.response.headers().is_empty());
        if response.windows(4).any(|w| w == b"X-B:") {
            let h = head.response.headers();
            assert_eq!((h["x-a"].as_bytes(), h["x-b"].as_bytes(), h.len()), (&b"1"[..], &b"2"[..], 3), "{h:?}");
        }
    }
    // More lines than the unparsed form tracks.
    let mut many = b"HTTP/1.1 200 OK\r\n".to_vec();
    for i in 0..=MAX_LINES {
        many.extend_from_slice(format!("X-{i}: {i}\r\n").as_bytes());
    }
    many.extend_from_slice(b"Content-Length: 0\r\n\r\n");
    let mut c = pair(Box::leak(many.into_boxed_slice())).await;
    let head = c.read_head(false, Duration::from_secs(5)).await.expect("head");
    assert!(head.raw.is_none());
    assert_eq!(head.response.headers().len(), MAX_LINES + 2);
}

#[tokio::test]
async fn a_head_ending_in_a_bare_lf_still_passes_its_crlf_lines() {
    let mut c = pair(b"HTTP/1.1 204 No Content\r\nX-A: 1\r\n\n").await;
    let head = c.read_head(false, Duration::from_secs(5)).await.expect("head");
    assert_eq!(written(&head), b"X-A: 1\r\n");
}
