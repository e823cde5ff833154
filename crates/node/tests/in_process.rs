//! The node run in this process, as a program embedding it would: started on a configuration
//! file, ready with its listeners' addresses in the `ready` event, serving a real backend, then
//! stopped through its stop channel and drained.

use gatehouse_node::{run_with, Events, Inherited};
use gatehouse_testkit::Backend;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc::Receiver;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

fn next(events: &Receiver<Value>, name: &str) -> Value {
    loop {
        let ev = events.recv_timeout(WAIT).unwrap_or_else(|e| panic!("no `{name}` event: {e}"));
        if ev["event"] == name {
            return ev;
        }
    }
}

fn get(addr: SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect to the node");
    s.set_read_timeout(Some(WAIT)).expect("timeout");
    write!(s, "GET {path} HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n").expect("send");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read the answer");
    out
}

#[test]
fn a_node_runs_in_process_serves_and_stops_when_told() {
    let backend = Backend::start("in-process");
    let dir = std::env::temp_dir().join(format!("gatehouse-node-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("gatehouse.yaml");
    std::fs::write(
        &file,
        format!(
            "workers: 1\n\
             control: {{ dir: {dir} }}\n\
             listeners: {{ web: {{ bind: \"127.0.0.1:0\" }} }}\n\
             upstreams: {{ app: {{ targets: [\"{backend}\"] }} }}\n\
             sites: {{ main: {{ hosts: [\"*\"], routes: [{{ path: /, upstream: app }}] }} }}\n",
            dir = dir.join("control").display(),
            backend = backend.addr(),
        ),
    )
    .expect("write the configuration");

    let (events, rx) = Events::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let node = std::thread::spawn(move || run_with(Some(file), events, Inherited::default(), Some(stopped)));

    let ready = next(&rx, "ready");
    let addr: SocketAddr =
        ready["listeners"]["web"].as_str().and_then(|a| a.parse().ok()).unwrap_or_else(|| panic!("{ready}"));
    let answer = get(addr, "/hello");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("in-process"), "{answer}");
    assert_eq!(backend.requests().last().map(|r| r.uri.clone()).as_deref(), Some("/hello"));

    stop.send(()).expect("the node listens for its stop");
    next(&rx, "draining");
    assert_eq!(next(&rx, "stopped")["unfinished_connections"], 0);
    assert_eq!(node.join().expect("the node's thread ends"), Ok(()));
    assert!(TcpStream::connect(addr).is_err(), "the listener is closed after the stop");
    let _ = std::fs::remove_dir_all(&dir);
}
