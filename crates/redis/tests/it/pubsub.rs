//! Pub/sub delivery on a dedicated connection.

use crate::support::{next_event, RedisServer};
use bytes::Bytes;
use gatehouse_redis::{Client, Error, Event, Message};

fn message(channel: &str, payload: &[u8]) -> Event {
    Event::Message(Message {
        channel: Bytes::copy_from_slice(channel.as_bytes()),
        payload: Bytes::copy_from_slice(payload),
    })
}

#[tokio::test]
async fn delivers_messages_in_order() {
    let server = RedisServer::start();
    let client = Client::connect(server.options()).await.unwrap();
    let mut sub = Client::subscribe(server.options(), &["config", "purge", "config"]).unwrap();
    assert_eq!(next_event(&mut sub).await, Event::Subscribed);
    assert!(sub.is_connected());

    assert_eq!(client.publish("config", "v1").await.unwrap(), 1);
    assert_eq!(client.publish("other", "ignored").await.unwrap(), 0);
    assert_eq!(client.publish("purge", b"/img/\0\r\n".as_slice()).await.unwrap(), 1);
    for i in 0..100 {
        client.publish("config", format!("n{i}")).await.unwrap();
    }
    assert_eq!(next_event(&mut sub).await, message("config", b"v1"));
    assert_eq!(next_event(&mut sub).await, message("purge", b"/img/\0\r\n"));
    for i in 0..100 {
        assert_eq!(next_event(&mut sub).await, message("config", format!("n{i}").as_bytes()));
    }
}

#[tokio::test]
async fn dropping_the_subscription_closes_its_connection() {
    let server = RedisServer::start();
    let client = Client::connect(server.options()).await.unwrap();
    let mut sub = Client::subscribe(server.options(), &["c"]).unwrap();
    assert_eq!(next_event(&mut sub).await, Event::Subscribed);
    let client = &client;
    let subscribers = move || async move { client.cmd(&[b"PUBSUB", b"NUMSUB", b"c"]).await.unwrap() };
    let count = |v: gatehouse_redis::Value| match v {
        gatehouse_redis::Value::Array(items) => items[1].as_int().unwrap(),
        other => panic!("unexpected {other:?}"),
    };
    assert_eq!(count(subscribers().await), 1);
    drop(sub);
    crate::support::eventually(std::time::Duration::from_secs(5), "subscriber gone", move || async move {
        count(subscribers().await) == 0
    })
    .await;
}

#[tokio::test]
async fn needs_a_channel() {
    let server = RedisServer::start();
    let none: &[&str] = &[];
    assert!(matches!(Client::subscribe(server.options(), none), Err(Error::InvalidCommand(_))));
}
