//! Every typed command and the generic one against a real server.

use crate::support::RedisServer;
use bytes::Bytes;
use gatehouse_redis::{Client, ClientOptions, Error, Value};
use std::collections::HashSet;

async fn client(server: &RedisServer) -> Client {
    Client::connect(server.options()).await.unwrap()
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

async fn pttl(client: &Client, key: &str) -> i64 {
    client.cmd(&[b"PTTL", key.as_bytes()]).await.unwrap().as_int().unwrap()
}

#[tokio::test]
async fn strings_keys_and_expiry() {
    let server = RedisServer::start();
    let c = client(&server).await;
    assert!(c.is_connected());
    c.ping().await.unwrap();

    assert_eq!(c.get("missing").await.unwrap(), None);
    c.set("k", "v1").await.unwrap();
    assert_eq!(c.get("k").await.unwrap(), Some(b("v1")));
    assert_eq!(pttl(&c, "k").await, -1);

    c.set_px("k", "v2", 60_000).await.unwrap();
    assert_eq!(c.get("k").await.unwrap(), Some(b("v2")));
    let ttl = pttl(&c, "k").await;
    assert!(ttl > 50_000 && ttl <= 60_000, "ttl {ttl}");

    assert!(!c.set_nx_px("k", "v3", 1000).await.unwrap(), "NX must not overwrite");
    assert_eq!(c.get("k").await.unwrap(), Some(b("v2")));
    assert!(c.set_nx_px("lock", "owner", 30_000).await.unwrap());
    assert!(pttl(&c, "lock").await > 0);

    assert_eq!(c.getdel("k").await.unwrap(), Some(b("v2")));
    assert_eq!(c.getdel("k").await.unwrap(), None);

    c.set("a", "1").await.unwrap();
    c.set("b", "2").await.unwrap();
    assert_eq!(c.exists(&["a", "b", "nope", "a"]).await.unwrap(), 3);
    assert!(c.expire("a", 100).await.unwrap());
    assert!(!c.expire("nope", 100).await.unwrap());
    let ttl = pttl(&c, "a").await;
    assert!(ttl > 90_000 && ttl <= 100_000, "ttl {ttl}");
    assert!(c.pexpire("b", 5_000).await.unwrap());
    assert!(!c.pexpire("nope", 5_000).await.unwrap());
    let ttl = pttl(&c, "b").await;
    assert!(ttl > 0 && ttl <= 5_000, "ttl {ttl}");
    assert_eq!(c.del(&["a", "b", "nope"]).await.unwrap(), 2);
    assert_eq!(c.exists(&["a", "b"]).await.unwrap(), 0);

    assert_eq!(c.incr("n").await.unwrap(), 1);
    assert_eq!(c.incr("n").await.unwrap(), 2);
    assert_eq!(c.get("n").await.unwrap(), Some(b("2")));
}

#[tokio::test]
async fn binary_safe_keys_and_large_values() {
    let server = RedisServer::start();
    let c = client(&server).await;
    let key: &[u8] = b"bin\r\n\0key";
    let small: &[u8] = b"\0\xff\r\n$3\r\n";
    c.set(key, small).await.unwrap();
    assert_eq!(c.get(key).await.unwrap().as_deref(), Some(small));
    // Larger than one read, and than the parser's copy threshold.
    let large: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    c.set("large", &large).await.unwrap();
    assert_eq!(c.get("large").await.unwrap().as_deref(), Some(&large[..]));
}

#[tokio::test]
async fn hashes() {
    let server = RedisServer::start();
    let c = client(&server).await;
    assert_eq!(c.hset("h", &[("f1", "v1"), ("f2", "v2")]).await.unwrap(), 2);
    assert_eq!(c.hset("h", &[("f2", "v2b"), ("f3", "v3")]).await.unwrap(), 1);
    assert_eq!(c.hget("h", "f2").await.unwrap(), Some(b("v2b")));
    assert_eq!(c.hget("h", "none").await.unwrap(), None);
    assert_eq!(c.hget("nokey", "f").await.unwrap(), None);
    let mut all = c.hgetall("h").await.unwrap();
    all.sort();
    assert_eq!(all, vec![(b("f1"), b("v1")), (b("f2"), b("v2b")), (b("f3"), b("v3"))]);
    assert_eq!(c.hdel("h", &["f1", "f3", "none"]).await.unwrap(), 2);
    assert_eq!(c.hgetall("h").await.unwrap(), vec![(b("f2"), b("v2b"))]);
    assert!(c.hgetall("nokey").await.unwrap().is_empty());
}

#[tokio::test]
async fn sets() {
    let server = RedisServer::start();
    let c = client(&server).await;
    assert_eq!(c.sadd("s", &["a", "b", "c", "a"]).await.unwrap(), 3);
    assert_eq!(c.sadd("s", &["c", "d"]).await.unwrap(), 1);
    assert_eq!(c.srem("s", &["a", "zzz"]).await.unwrap(), 1);
    let members: HashSet<Bytes> = c.smembers("s").await.unwrap().into_iter().collect();
    assert_eq!(members, ["b", "c", "d"].into_iter().map(b).collect());
    assert!(c.smembers("nokey").await.unwrap().is_empty());
}

#[tokio::test]
async fn publish_without_subscribers() {
    let server = RedisServer::start();
    let c = client(&server).await;
    assert_eq!(c.publish("nobody", "hello").await.unwrap(), 0);
}

#[tokio::test]
async fn generic_commands_and_server_errors() {
    let server = RedisServer::start();
    let c = client(&server).await;
    assert_eq!(c.cmd(&[b"ECHO", b"hi"]).await.unwrap(), Value::Bulk(b("hi")));
    assert_eq!(c.cmd(&[b"INCRBY", b"n", b"5"]).await.unwrap(), Value::Int(5));
    assert_eq!(c.cmd(&[b"set", b"s", b"text"]).await.unwrap(), Value::Simple("OK".into()));
    match c.cmd(&[b"INCR", b"s"]).await {
        Err(Error::Server(msg)) => assert!(msg.starts_with("ERR"), "{msg}"),
        other => panic!("expected a server error, got {other:?}"),
    }
    c.hset("h", &[("f", "v")]).await.unwrap();
    match c.get("h").await {
        Err(Error::Server(msg)) => assert!(msg.starts_with("WRONGTYPE"), "{msg}"),
        other => panic!("expected WRONGTYPE, got {other:?}"),
    }
    // Error replies leave the connection usable.
    c.ping().await.unwrap();
    assert!(c.is_connected());

    for refused in [&[b"MULTI".as_slice()][..], &[b"select", b"1"], &[b"SUBSCRIBE", b"c"], &[b"BLPOP", b"l", b"0"]] {
        match c.cmd(refused).await {
            Err(Error::InvalidCommand(_)) => {}
            other => panic!("{refused:?}: expected InvalidCommand, got {other:?}"),
        }
    }
    assert!(matches!(c.cmd(&[]).await, Err(Error::InvalidCommand(_))));
    assert!(matches!(c.cmd(&[b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$"]).await, Err(Error::InvalidCommand(_))));
    // XREAD without BLOCK is fine.
    assert_eq!(c.cmd(&[b"XREAD", b"STREAMS", b"nostream", b"0"]).await.unwrap(), Value::Nil);
}

#[tokio::test]
async fn from_url_selects_the_database() {
    let server = RedisServer::start();
    let in_db_3 =
        Client::connect(ClientOptions::from_url(&format!("redis://{}/3", server.addr())).unwrap()).await.unwrap();
    let in_db_0 = client(&server).await;
    in_db_3.set("where", "db3").await.unwrap();
    assert_eq!(in_db_0.get("where").await.unwrap(), None);
    assert_eq!(in_db_3.get("where").await.unwrap(), Some(b("db3")));
    assert_eq!(in_db_0.cmd(&[b"SELECT", b"3"]).await.ok(), None);
}
