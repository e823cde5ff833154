//! Redis going away and coming back: callers fail fast and never hang, and the client and the
//! subscription recover on their own.

use crate::support::{eventually, fast_options, free_port, next_event, RedisServer};
use bytes::Bytes;
use gatehouse_redis::{Client, ClientOptions, Error, Event, Message};
use std::time::{Duration, Instant};

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
    let client = Client::new(opts.clone()).unwrap();
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
    let server = RedisServer::start();
    let opts = ClientOptions { command_timeout: Duration::from_millis(300), ..server.options() };
    let client = Client::connect(opts).await.unwrap();
    server.pause();
    let start = Instant::now();
    assert!(matches!(client.ping().await, Err(Error::Timeout)));
    assert!(start.elapsed() < FAST);
    eventually(FAST, "the stalled connection is dropped", || {
        let connected = client.is_connected();
        async move { !connected }
    })
    .await;
    server.resume();
    eventually(Duration::from_secs(5), "a new connection", || async { client.ping().await.is_ok() }).await;
}
