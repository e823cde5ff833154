//! Codec checks against a real socket pair: head parsing, framing rules, chunked decoding.

use super::*;
use crate::pool::TimedIo;
use std::time::Duration;
use tokio::net::TcpListener;

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
    H1Conn::new(TimedIo::for_tests(stream, Duration::from_secs(5)))
}

async fn body(conn: &mut H1Conn, mut framing: Framing) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        match conn.decode(&mut framing)? {
            Some(b) => out.extend_from_slice(&b),
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
    let (resp, framing, reusable) = c.read_head(false, Duration::from_secs(5)).await.expect("head");
    assert_eq!(resp.status(), 200);
    assert!(reusable);
    let xa: Vec<_> = resp.headers().get_all("x-a").iter().collect();
    assert_eq!(xa, ["1", "2"]);
    assert_eq!(body(&mut c, framing).await.expect("body"), b"hello");
}

#[tokio::test]
async fn chunked_body_with_extensions_and_trailers() {
    let mut c = pair(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n",
    )
    .await;
    let (resp, framing, reusable) = c.read_head(false, Duration::from_secs(5)).await.expect("head");
    assert!(reusable);
    assert!(!resp.headers().contains_key(header::TRANSFER_ENCODING));
    assert_eq!(body(&mut c, framing).await.expect("body"), b"hello world");
    assert!(c.rbuf.is_empty());
}

#[tokio::test]
async fn interim_responses_are_skipped() {
    let mut c = pair(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n").await;
    let (resp, framing, _) = c.read_head(false, Duration::from_secs(5)).await.expect("head");
    assert_eq!(resp.status(), 204);
    assert_eq!(framing, Framing::Empty);
}

#[tokio::test]
async fn both_lengths_mean_chunked_and_no_reuse() {
    let mut c =
        pair(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n").await;
    let (resp, framing, reusable) = c.read_head(false, Duration::from_secs(5)).await.expect("head");
    assert!(!reusable);
    assert!(!resp.headers().contains_key(header::CONTENT_LENGTH));
    assert_eq!(body(&mut c, framing).await.expect("body"), b"ok");
}

#[tokio::test]
async fn conflicting_lengths_are_refused() {
    let mut c = pair(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab").await;
    assert!(c.read_head(false, Duration::from_secs(5)).await.is_err());
}

#[tokio::test]
async fn close_delimited_and_http10() {
    let mut c = pair(b"HTTP/1.0 200 OK\r\n\r\nuntil close").await;
    let (_, framing, reusable) = c.read_head(false, Duration::from_secs(5)).await.expect("head");
    assert_eq!(framing, Framing::Close);
    assert!(!reusable);
}

#[tokio::test]
async fn bad_chunk_size_is_an_error() {
    let mut c = pair(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").await;
    let (_, framing, _) = c.read_head(false, Duration::from_secs(5)).await.expect("head");
    assert!(body(&mut c, framing).await.is_err());
}

#[tokio::test]
async fn head_responses_have_no_body() {
    let mut c = pair(b"HTTP/1.1 200 OK\r\nContent-Length: 75\r\n\r\n").await;
    let (resp, framing, _) = c.read_head(true, Duration::from_secs(5)).await.expect("head");
    assert_eq!(framing, Framing::Empty);
    assert_eq!(resp.headers()[header::CONTENT_LENGTH], "75");
}
