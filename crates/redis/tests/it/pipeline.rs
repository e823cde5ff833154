//! Many callers on one connection: replies matched in order under concurrency, callers on other
//! runtimes and threads, and the bounded queue.

use crate::support::RedisServer;
use bytes::Bytes;
use gatehouse_redis::{Client, ClientOptions, Error};
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
    let client = Client::with_runtime(server.options(), &handle);
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

#[tokio::test]
async fn a_full_queue_fails_at_once() {
    let server = RedisServer::start();
    let opts = ClientOptions { max_pending: 2, ..server.options() };
    let client = Client::connect(opts).await.unwrap();
    // All tasks run before the connection task gets a turn on this single-threaded runtime, so
    // only the first two fit in the queue.
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.ping().await })
        })
        .collect();
    let (mut ok, mut full) = (0, 0);
    for task in tasks {
        match task.await.unwrap() {
            Ok(()) => ok += 1,
            Err(Error::QueueFull) => full += 1,
            Err(e) => panic!("unexpected error {e}"),
        }
    }
    assert!(ok >= 2 && full > 0, "ok {ok}, full {full}");
    client.ping().await.unwrap();
}

#[tokio::test]
async fn queued_commands_go_out_in_one_write() {
    // A stand-in for Redis that answers PINGs and counts how many reads the commands took.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (reads_tx, mut reads_rx) = tokio::sync::mpsc::unbounded_channel::<usize>();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut socket, _) = listener.accept().await.unwrap();
        let ping = b"*1\r\n$4\r\nPING\r\n";
        let mut pending = Vec::new();
        let mut buf = vec![0u8; 256 * 1024];
        while let Ok(n @ 1..) = socket.read(&mut buf).await {
            pending.extend_from_slice(&buf[..n]);
            let complete = pending.len() / ping.len();
            assert!(pending.chunks(ping.len()).all(|c| ping.starts_with(c)), "unexpected command");
            pending.drain(..complete * ping.len());
            let _ = reads_tx.send(complete);
            socket.write_all(&b"+PONG\r\n".repeat(complete)).await.unwrap();
        }
    });
    let client = Client::connect(crate::support::fast_options(addr.to_string())).await.unwrap();
    assert_eq!(reads_rx.recv().await, Some(1), "handshake PING");

    // Spawned together on this single-threaded runtime: all are queued before the connection
    // task runs, so it writes them as one batch.
    let tasks: Vec<_> = (0..1000)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.ping().await })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let mut reads = 0;
    let mut commands = 0;
    while commands < 1000 {
        commands += reads_rx.recv().await.unwrap();
        reads += 1;
    }
    assert_eq!(commands, 1000);
    assert!(reads <= 5, "1000 queued commands took {reads} reads");
}
