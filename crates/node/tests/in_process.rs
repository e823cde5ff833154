//! The node run in this process, as a program embedding it would: started on a configuration
//! file, ready with its listeners' addresses in the `ready` event, serving a real backend, then
//! stopped through its stop channel and drained.

use gatehouse_node::{run_with, Events, Inherited, NodeError};
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

/// A configuration for one HTTP listener on `bind` in front of `backend`, in a directory of its
/// own (removed by the caller).
fn config_file(name: &str, bind: &str, backend: SocketAddr) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("gatehouse-node-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("gatehouse.yaml");
    std::fs::write(
        &file,
        format!(
            "workers: 1\n\
             control: {{ dir: {dir} }}\n\
             listeners: {{ web: {{ bind: \"{bind}\" }} }}\n\
             upstreams: {{ app: {{ targets: [\"{backend}\"] }} }}\n\
             sites: {{ main: {{ hosts: [\"*\"], routes: [{{ path: /, upstream: app }}] }} }}\n",
            dir = dir.join("control").display(),
        ),
    )
    .expect("write the configuration");
    (dir, file)
}

#[test]
fn a_node_runs_in_process_serves_and_stops_when_told() {
    let backend = Backend::start("in-process");
    let (dir, file) = config_file("serves", "127.0.0.1:0", backend.addr());

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
    if let Err(e) = node.join().expect("the node's thread ends") {
        panic!("the node stopped with an error: {e}");
    }
    assert!(TcpStream::connect(addr).is_err(), "the listener is closed after the stop");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_listener_address_in_use_is_a_typed_error_with_its_cause() {
    let backend = Backend::start("unused");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("hold a port");
    let addr = taken.local_addr().expect("address").to_string();
    let (dir, file) = config_file("in-use", &addr, backend.addr());
    let (events, _rx) = Events::channel();
    let err = run_with(Some(file), events, Inherited::default(), None).expect_err("the port is taken");
    assert!(matches!(err, NodeError::Listener(_)), "{err:?}");
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&err);
    let mut kinds = Vec::new();
    while let Some(e) = cause {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            kinds.push(io.kind());
        }
        cause = e.source();
    }
    assert_eq!(kinds, [std::io::ErrorKind::AddrInUse], "{err}");
    assert!(err.to_string().contains(&addr), "{err}");
    drop(taken);
    let _ = std::fs::remove_dir_all(&dir);
}
