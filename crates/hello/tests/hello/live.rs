//! Real clients: `openssl s_client` and `curl` connect to a listener on 127.0.0.1:0, and the bytes
//! they send are framed, parsed and checked. Skipped, with a notice, when a tool is missing.
//!
//! `GH_HELLO_WRITE_CORPUS=1 cargo test --test hello write_corpus -- --ignored` refreshes the
//! committed captures in `tests/data/` (see the README there).

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use gatehouse_hello::{record_need, Need, DEFAULT_MAX_HELLO_BYTES};

use crate::corpus::{check, expectation};

const ACCEPT_TIMEOUT: Duration = Duration::from_secs(10);
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// A client invocation whose hello is saved as `tests/data/{name}.bin`.
struct Client {
    name: &'static str,
    program: &'static str,
    args: fn(u16) -> Vec<String>,
}

fn s_client(port: u16, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["s_client".to_owned(), "-connect".to_owned(), format!("127.0.0.1:{port}")];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    args
}

const CLIENTS: &[Client] = &[
    Client {
        name: "openssl-default",
        program: "openssl",
        args: |p| s_client(p, &["-servername", "example.com", "-alpn", "h2,http/1.1"]),
    },
    Client {
        name: "openssl-tls12",
        program: "openssl",
        args: |p| s_client(p, &["-servername", "example.com", "-alpn", "h2,http/1.1", "-tls1_2"]),
    },
    Client {
        name: "openssl-tls13",
        program: "openssl",
        args: |p| s_client(p, &["-servername", "example.com", "-alpn", "h2,http/1.1", "-tls1_3"]),
    },
    Client { name: "openssl-noservername", program: "openssl", args: |p| s_client(p, &["-noservername"]) },
    Client {
        name: "curl-h2",
        program: "curl",
        args: |p| {
            ["--http2", "-k", "-s", "-o", "/dev/null", "--max-time", "2", "--resolve"]
                .iter()
                .map(|s| (*s).to_owned())
                .chain([format!("example.com:{p}:127.0.0.1"), format!("https://example.com:{p}/")])
                .collect()
        },
    },
];

fn available(program: &str) -> bool {
    let probe = if program == "openssl" { "version" } else { "--version" };
    Command::new(program).arg(probe).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// Kills the client when the capture is done or has failed, whichever way the test leaves.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `client` against a fresh listener and returns the records of its ClientHello.
fn capture(client: &Client) -> Result<Vec<u8>, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let (tx, rx) = mpsc::channel();
    let acceptor = std::thread::spawn(move || {
        let _ = tx.send(listener.accept().map(|(stream, _)| stream));
    });
    // stdin stays open (piped, never written) so s_client does not quit on EOF before sending.
    let child = Command::new(client.program)
        .args((client.args)(addr.port()))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("spawn {}: {e}", client.program))?;
    let _child = Reaped(child);
    let stream = match rx.recv_timeout(ACCEPT_TIMEOUT) {
        Ok(accepted) => accepted.map_err(|e| e.to_string())?,
        Err(_) => {
            unblock(addr);
            let _ = acceptor.join();
            return Err(format!("{} did not connect within {ACCEPT_TIMEOUT:?}", client.name));
        }
    };
    let _ = acceptor.join();
    read_hello(stream)
}

/// Wakes an acceptor thread still blocked in `accept`.
fn unblock(addr: SocketAddr) {
    let _ = TcpStream::connect_timeout(&addr, Duration::from_secs(1));
}

fn read_hello(mut stream: TcpStream) -> Result<Vec<u8>, String> {
    stream.set_read_timeout(Some(READ_TIMEOUT)).map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match record_need(&buf, DEFAULT_MAX_HELLO_BYTES).map_err(|e| e.to_string())? {
            Need::Complete(len) => {
                buf.truncate(len);
                return Ok(buf);
            }
            Need::NotTls => return Err("client sent something other than a ClientHello".into()),
            Need::More(_) => {}
        }
        let n = stream.read(&mut chunk).map_err(|e| format!("read after {} bytes: {e}", buf.len()))?;
        if n == 0 {
            return Err(format!("client closed after {} bytes", buf.len()));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[test]
fn live_clients_hellos_parse() {
    let mut ran = 0;
    for client in CLIENTS {
        if !available(client.program) {
            println!("notice: {} not found, skipping live capture {}", client.program, client.name);
            continue;
        }
        let records = capture(client).unwrap_or_else(|e| panic!("{}: {e}", client.name));
        check(client.name, &records, expectation(client.name));
        ran += 1;
    }
    println!("live capture: {ran} of {} clients checked", CLIENTS.len());
}

#[test]
#[ignore = "rewrites tests/data; run by hand with GH_HELLO_WRITE_CORPUS=1"]
fn write_corpus() {
    if std::env::var_os("GH_HELLO_WRITE_CORPUS").is_none() {
        println!("notice: set GH_HELLO_WRITE_CORPUS=1 to rewrite tests/data");
        return;
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    for client in CLIENTS {
        let records = capture(client).unwrap_or_else(|e| panic!("{}: {e}", client.name));
        std::fs::write(dir.join(format!("{}.bin", client.name)), &records).unwrap();
        println!("wrote {}.bin ({} bytes)", client.name, records.len());
    }
}
