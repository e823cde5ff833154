//! AUTH on every (re)connect: password, ACL users, wrong credentials.

use crate::support::{next_event, RedisServer};
use gatehouse_redis::{Client, ClientOptions, Error, Event};

#[tokio::test]
async fn requirepass() {
    let mut server = RedisServer::start_with(&["--requirepass", "s3cret"]);
    let opts = ClientOptions { password: Some("s3cret".into()), ..server.options() };
    let client = Client::connect(opts.clone()).await.unwrap();
    client.set("k", "v").await.unwrap();

    // No password: the handshake's PING is refused, so the misconfiguration shows at connect.
    match Client::connect(server.options()).await {
        Err(Error::Server(msg)) => assert!(msg.starts_with("NOAUTH"), "{msg}"),
        other => panic!("expected NOAUTH, got {other:?}"),
    }
    let anonymous = Client::new(server.options()).unwrap();
    assert!(matches!(anonymous.get("k").await, Err(Error::Disconnected)));
    // A wrong password fails the handshake.
    match Client::connect(ClientOptions { password: Some("wrong".into()), ..server.options() }).await {
        Err(Error::Server(msg)) => assert!(msg.starts_with("WRONGPASS"), "{msg}"),
        other => panic!("expected WRONGPASS, got {other:?}"),
    }

    // The subscriber authenticates too, also after a restart.
    let mut sub = Client::subscribe(opts, &["c"]).unwrap();
    assert_eq!(next_event(&mut sub).await, Event::Subscribed);
    server.restart();
    crate::support::eventually(std::time::Duration::from_secs(5), "client re-authenticated", || async {
        client.ping().await.is_ok()
    })
    .await;
    assert_eq!(next_event(&mut sub).await, Event::Reconnected);
    assert_eq!(client.publish("c", "x").await.unwrap(), 1);
}

#[tokio::test]
async fn acl_user_from_url() {
    let server = RedisServer::start_with(&["--requirepass", "adminpw"]);
    let admin = Client::connect(ClientOptions { password: Some("adminpw".into()), ..server.options() }).await.unwrap();
    admin.cmd(&[b"ACL", b"SETUSER", b"app", b"on", b">app pw", b"~app:*", b"+@all"]).await.unwrap();

    let url = format!("redis://app:app%20pw@{}/1", server.addr());
    let app = Client::connect(ClientOptions::from_url(&url).unwrap()).await.unwrap();
    app.set("app:x", "1").await.unwrap();
    match app.set("other", "1").await {
        Err(Error::Server(msg)) => assert!(msg.starts_with("NOPERM"), "{msg}"),
        other => panic!("expected NOPERM, got {other:?}"),
    }
    let bad = ClientOptions::from_url(&format!("redis://app:nope@{}", server.addr())).unwrap();
    assert!(matches!(Client::connect(bad).await, Err(Error::Server(_))));
}
