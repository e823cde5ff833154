//! Many callers on one connection: replies matched in order under concurrency, callers on other
//! runtimes and threads, and the bounded queue.

use crate::support::RedisServer;
use bytes::Bytes;
use gatehouse_redis::{Client, Error};
use std::time::Duration;
use tokio::sync::oneshot;

/// Each task interleaves writes and reads of its own keys; a reply handed to the wrong caller
/// shows up as a wrong value.
async fn exercise(client: Client, task: usize, rounds: usize) {
    for i in 0..rounds {
        let key = format!("t{task}:k{i}");
        let value = format!("t{task}:v{i}");
        client.set(&key, &value).await.unwrap();
        assert_eq!(client.incr(format!("t{task}:n")).await.unwrap(), i as i64 + 1);
        assert_eq!(client.get(&key).await.unwrap(), Some(Bytes::from(value)));
    }
}

#[test]
fn handles_are_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync + Clone + 'static>() {}
    fn assert_send<T: Send + 'static>() {}
    assert_send_sync::<Client>();
    assert_send::<gatehouse_redis::Subscription>();
}

#[tokio::test]
async fn concurrent_commands_from_many_tasks_are_pipelined_in_order() {
    let server = RedisServer::start();
    let client = Client::connect(server.options()).await.unwrap();
    let tasks: Vec<_> = (0..16).map(|t| tokio::spawn(exercise(client.clone(), t, 200))).collect();
    for task in tasks {
        task.await.unwrap();
    }
    for t in 0..16 {
        assert_eq!(client.get(format!("t{t}:n")).await.unwrap(), Some(Bytes::from("200")));
    }
    // Commands issued together without awaiting in between go out and come back in order.
    let burst: Vec<_> = (0..1000)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move { client.cmd(&[b"ECHO", i.to_string().as_bytes()]).await })
        })
        .collect();
    for (i, reply) in burst.into_iter().enumerate() {
        assert_eq!(reply.await.unwrap().unwrap().as_int(), Some(i as i64));
    }
}

#[tokio::test]
async fn callers_on_other_runtimes_and_threads() {
    let server = RedisServer::start();
    // The connection task lives on this test's runtime; the callers run on their own
    // current-thread runtimes, as the gateway's workers do.
    let client = Client::connect(server.options()).await.unwrap();
    let mut done = Vec::new();
    for t in 0..3 {
        let client = client.clone();
        let (tx, rx) = oneshot::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                let tasks: Vec<_> = (0..4).map(|k| tokio::spawn(exercise(client.clone(), t * 10 + k, 100))).collect();
                for task in tasks {
                    task.await.unwrap();
                }
            });
            let _ = tx.send(());
        });
        done.push(rx);
    }
    // Wait without blocking this runtime, which runs the connection task.
    for rx in done {
        tokio::time::timeout(Duration::from_secs(30), rx).await.unwrap().expect("worker thread panicked");
    }
    assert_eq!(client.get("t21:n").await.unwrap(), Some(Bytes::from("100")));
}

#[test]
fn client_on_a_control_runtime_used_from_a_worker_runtime() {
    let server = RedisServer::start();
    let control = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let handle = control.handle().clone();
    let control_thread = std::thread::spawn(move || control.block_on(stopped));

    let worker = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    // Created from a thread outside any runtime: the task goes to the control runtime.
    let client = Client::with_runtime(server.options(), &handle).unwrap();
    worker.block_on(async {
        crate::support::eventually(Duration::from_secs(5), "client connected", || {
            let connected = client.is_connected();
            async move { connected }
        })
        .await;
        exercise(client.clone(), 0, 50).await;
    });
    let _ = stop.send(());
    control_thread.join().unwrap().unwrap();
    // The control runtime is gone, and with it the connection: callers are told, not hung.
    let result = worker.block_on(client.ping());
    assert!(matches!(result, Err(Error::Disconnected)), "{result:?}");
}
