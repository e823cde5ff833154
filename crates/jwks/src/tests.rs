//! The source against a small provider on loopback: first fetch awaited, unknown kid refetched at most once per
//! `min_refetch`, the last good set kept when the provider fails.

use super::*;
use gatehouse_jwt::sign::SigningKey;
use gatehouse_jwt::Algorithm;
use std::sync::atomic::AtomicUsize;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// A provider serving whatever `body` holds now (empty: answers 500), counting requests.
struct Provider {
    url: String,
    body: Arc<Mutex<String>>,
    hits: Arc<AtomicUsize>,
}

async fn provider() -> Provider {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/jwks", listener.local_addr().expect("addr"));
    let body = Arc::new(Mutex::new(String::new()));
    let hits = Arc::new(AtomicUsize::new(0));
    let (b, h) = (body.clone(), hits.clone());
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf).await;
            h.fetch_add(1, Relaxed);
            let doc = b.lock().expect("lock").clone();
            let head = match doc.is_empty() {
                true => "HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_string(),
                false => format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncache-control: max-age=3600\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{doc}",
                    doc.len()
                ),
            };
            let _ = conn.write_all(head.as_bytes()).await;
        }
    });
    Provider { url, body, hits }
}

fn jwks(kids: &[&str]) -> String {
    let keys: Vec<_> = kids
        .iter()
        .map(|kid| SigningKey::generate(Algorithm::Es256).expect("key").0.public_jwk(kid).expect("jwk"))
        .collect();
    serde_json::json!({ "keys": keys }).to_string()
}

fn settings(url: &str, min_refetch: Duration) -> Settings {
    // `min_refetch` under 1s is refused by the configuration; here it lets a test fetch on demand.
    Settings {
        source: Source::Uri(url.into()),
        refresh: Duration::from_secs(600),
        min_refetch,
        timeout: Duration::from_secs(5),
        roots: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_fetch_is_awaited_then_unknown_kids_refetch_at_most_once_per_min_refetch() {
    let p = provider().await;
    *p.body.lock().expect("lock") = jwks(&["a"]);
    let source =
        KeySource::start(settings(&p.url, Duration::from_secs(600)), Some(&tokio::runtime::Handle::current()), None);
    let set = source.keys(Some("a")).await.expect("the first fetch is awaited");
    assert!(set.has_kid("a"));
    assert_eq!(p.hits.load(Relaxed), 1);

    // Rotation: the provider now has b; the first token naming b brings one refetch.
    *p.body.lock().expect("lock") = jwks(&["b"]);
    let set = source.keys(Some("b")).await.expect("set");
    assert!(set.has_kid("b") && !set.has_kid("a"));
    assert_eq!((p.hits.load(Relaxed), source.stats.unknown_kid_fetches.get()), (2, 1));

    // Within min_refetch, unknown kids cost no request: a client cannot make the gateway hammer the provider.
    for kid in ["c", "d", "e"] {
        let set = source.keys(Some(kid)).await.expect("set");
        assert!(!set.has_kid(kid));
    }
    assert_eq!(p.hits.load(Relaxed), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_provider_leaves_the_last_good_set_in_use() {
    let p = provider().await;
    *p.body.lock().expect("lock") = jwks(&["a"]);
    let source = KeySource::start(settings(&p.url, Duration::ZERO), Some(&tokio::runtime::Handle::current()), None);
    assert!(source.keys(Some("a")).await.is_some());

    p.body.lock().expect("lock").clear();
    let set = source.keys(Some("new")).await.expect("the last good set");
    assert!(set.has_kid("a"));
    assert_eq!((source.stats.failed.get(), source.stats.stale.load(Relaxed)), (1, true));

    // A set with no usable key is a failure too, not a replacement.
    *p.body.lock().expect("lock") = r#"{"keys": [{"kty": "oct", "kid": "s", "k": "c2VjcmV0"}]}"#.into();
    assert!(source.keys(Some("s")).await.expect("set").has_kid("a"));
    assert_eq!(source.stats.failed.get(), 2);

    *p.body.lock().expect("lock") = jwks(&["z"]);
    assert!(source.keys(Some("z")).await.expect("set").has_kid("z"));
    assert!(!source.stats.stale.load(Relaxed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_never_reached_gives_no_set_and_the_task_stops_with_its_source() {
    let p = provider().await;
    let source =
        KeySource::start(settings(&p.url, Duration::from_secs(600)), Some(&tokio::runtime::Handle::current()), None);
    assert!(source.keys(None).await.is_none());
    assert_eq!(source.stats.failed.get(), 1);
    // Within min_refetch no request waits for another fetch.
    assert!(source.keys(None).await.is_none());
    assert_eq!(p.hits.load(Relaxed), 1);

    // Dropped, the source's task ends (its Drop wakes it): the runtime is back to the provider's
    // own task.
    let metrics = tokio::runtime::Handle::current().metrics();
    drop(source);
    let deadline = Instant::now() + Duration::from_secs(5);
    while metrics.num_alive_tasks() > 1 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(metrics.num_alive_tasks(), 1, "the refresher outlived its source");
    *p.body.lock().expect("lock") = jwks(&["a"]);
    let again =
        KeySource::start(settings(&p.url, Duration::from_secs(600)), Some(&tokio::runtime::Handle::current()), None);
    assert!(again.keys(Some("a")).await.is_some());
    assert_eq!(p.hits.load(Relaxed), 2);
}

#[test]
fn without_a_runtime_nothing_is_fetched() {
    let source = KeySource::start(settings("http://127.0.0.1:1/jwks", Duration::ZERO), None, None);
    assert!(source.current().is_none());
}
