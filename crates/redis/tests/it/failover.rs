//! Redis going away and coming back: callers fail fast and never hang, and the client and the
//! subscription recover on their own.

use crate::support::{eventually, fast_options, free_port, next_event, RedisServer};
use bytes::Bytes;
use gatehouse_redis::{Client, ClientOptions, Error, Event, Message};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const FAST: Duration = Duration::from_secs(2);

/// Runs `ping` and checks that it fails with a connection error within [`FAST`].
async fn fails_fast(client: &Client) -> Error {
    let start = Instant::now();
    let result = tokio::time::timeout(FAST, client.ping()).await.expect("command hung");
    assert!(start.elapsed() < FAST);
    match result {
        Err(e @ (Error::Disconnected | Error::Timeout)) => e,
        other => panic!("expected Disconnected or Timeout, got {other:?}"),
    }
}

#[tokio::test]
async fn server_killed_then_restarted_on_the_same_port() {
    let mut server = RedisServer::start();
    let client = Client::connect(server.options()).await.unwrap();
    let mut sub = Client::subscribe(server.options(), &["events"]).unwrap();
    assert_eq!(next_event(&mut sub).await, Event::Subscribed);
    client.set("k", "before").await.unwrap();
    assert_eq!(client.publish("events", "one").await.unwrap(), 1);
    assert_eq!(next_event(&mut sub).await, Event::Message(msg("events", "one")));

    server.kill();
    // Commands in flight or issued right away fail; none hangs.
    let in_flight: Vec<_> = (0..20)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { fails_fast(&client).await })
        })
        .collect();
    for task in in_flight {
        task.await.unwrap();
    }
    eventually(FAST, "client noticed the server is gone", || {
        let connected = client.is_connected();
        async move { !connected }
    })
    .await;
    // Disconnected now: refused at once, without waiting for a timeout.
    for _ in 0..100 {
        let start = Instant::now();
        assert!(matches!(client.get("k").await, Err(Error::Disconnected)));
        assert!(start.elapsed() < Duration::from_millis(250), "took {:?}", start.elapsed());
    }
    eventually(FAST, "subscription noticed the server is gone", || {
        let connected = sub.is_connected();
        async move { !connected }
    })
    .await;

    server.restart();
    eventually(Duration::from_secs(5), "client reconnected", || async { client.ping().await.is_ok() }).await;
    // A new, empty server: the old data is gone, but the client works.
    assert_eq!(client.get("k").await.unwrap(), None);
    assert_eq!(next_event(&mut sub).await, Event::Reconnected);
    assert!(sub.is_connected());
    assert_eq!(client.publish("events", "two").await.unwrap(), 1);
    assert_eq!(next_event(&mut sub).await, Event::Message(msg("events", "two")));
}

fn msg(channel: &str, payload: &str) -> Message {
    Message { channel: Bytes::copy_from_slice(channel.as_bytes()), payload: Bytes::copy_from_slice(payload.as_bytes()) }
}

#[tokio::test]
async fn redis_down_at_start() {
    let port = free_port();
    let opts = fast_options(format!("127.0.0.1:{port}"));
    // Neither constructor blocks; connect reports the failure.
    let start = Instant::now();
    let client = Client::new(opts.clone());
    let mut sub = Client::subscribe(opts.clone(), &["c"]).unwrap();
    assert!(start.elapsed() < Duration::from_millis(100));
    assert!(!client.is_connected());
    assert!(matches!(client.ping().await, Err(Error::Disconnected)));
    match Client::connect(opts.clone()).await {
        Err(Error::Io(e)) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused),
        other => panic!("expected connection refused, got {other:?}"),
    }

    let _server = RedisServer::start_on(port);
    eventually(Duration::from_secs(5), "client connected", || async { client.ping().await.is_ok() }).await;
    assert_eq!(next_event(&mut sub).await, Event::Subscribed);
    client.publish("c", "hello").await.unwrap();
    assert_eq!(next_event(&mut sub).await, Event::Message(msg("c", "hello")));
}

#[tokio::test]
async fn idle_connections_notice_a_hung_server() {
    let server = RedisServer::start();
    let opts = ClientOptions {
        health_check_interval: Duration::from_millis(100),
        command_timeout: Duration::from_millis(300),
        ..server.options()
    };
    let client = Client::connect(opts.clone()).await.unwrap();
    let mut sub = Client::subscribe(opts, &["c"]).unwrap();
    assert_eq!(next_event(&mut sub).await, Event::Subscribed);

    server.pause();
    // No command is sent: the health-check PINGs find out.
    eventually(Duration::from_secs(3), "client and subscription noticed", || {
        let connected = client.is_connected() || sub.is_connected();
        async move { !connected }
    })
    .await;
    let _ = fails_fast(&client).await;

    server.resume();
    eventually(Duration::from_secs(5), "client reconnected", || async { client.ping().await.is_ok() }).await;
    assert_eq!(next_event(&mut sub).await, Event::Reconnected);
    client.publish("c", "back").await.unwrap();
    assert_eq!(next_event(&mut sub).await, Event::Message(msg("c", "back")));
}

#[tokio::test]
async fn a_server_that_stops_answering_times_out_and_is_replaced() {
    // Answers the handshake's PING, then reads commands but never replies.
    let (addr, mut accepted) = fake_server(|_| None).await;
    let opts = ClientOptions { command_timeout: Duration::from_millis(300), ..fast_options(addr.to_string()) };
    let client = Client::connect(opts).await.unwrap();
    accepted.recv().await.unwrap();
    let start = Instant::now();
    assert!(matches!(client.ping().await, Err(Error::Timeout)));
    assert!(start.elapsed() < FAST);
    // The stalled connection is dropped and a new one opened.
    tokio::time::timeout(Duration::from_secs(5), accepted.recv()).await.expect("no reconnect").unwrap();
}

#[tokio::test]
async fn a_reply_over_the_limits_fails_the_command_not_the_process() {
    // Answers the handshake's PING, then every command with a bulk string declaring 600 MiB.
    let (addr, _accepted) = fake_server(|_| Some(b"$629145600\r\nxx".as_slice())).await;
    let client = Client::connect(fast_options(addr.to_string())).await.unwrap();
    match client.get("k").await {
        Err(Error::Protocol(msg)) => assert!(msg.contains("exceeds"), "{msg}"),
        other => panic!("expected a protocol error, got {other:?}"),
    }
}

/// A stand-in for Redis on a loopback port: it answers the first read on each connection (the
/// client's handshake PING) with `+PONG`, and each later read with what `reply` returns for it.
/// Each accepted connection is reported on the returned channel.
async fn fake_server(
    reply: fn(&[u8]) -> Option<&'static [u8]>,
) -> (std::net::SocketAddr, tokio::sync::mpsc::UnboundedReceiver<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (accepted_tx, accepted) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            let _ = accepted_tx.send(());
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let mut first = true;
                while let Ok(n @ 1..) = socket.read(&mut buf).await {
                    let answer = if first { Some(b"+PONG\r\n".as_slice()) } else { reply(&buf[..n]) };
                    first = false;
                    if let Some(answer) = answer {
                        if socket.write_all(answer).await.is_err() {
                            break;
                        }
                    }
                }
            });
        }
    });
    (addr, accepted)
}
