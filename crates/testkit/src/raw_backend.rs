//! A backend on raw TCP for faults a well-behaved server never commits: accepting and then never
//! answering, or resetting the connection in the middle of a response body.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// What a [`RawBackend`] does with each connection.
#[derive(Clone, Copy, Debug)]
pub enum Fault {
    /// Accepts and holds the connection open, never reading nor answering.
    Silent,
    /// Reads the request head, answers `200` announcing a 100,000-byte body (by `Content-Length`,
    /// or chunked), sends 1,000 bytes of it, then resets the connection.
    ResetMidBody {
        /// Chunked transfer coding instead of `Content-Length`.
        chunked: bool,
    },
}

/// A running raw backend; stopped (its connections closed) when dropped.
#[derive(Debug)]
pub struct RawBackend {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// Bytes of the body sent before the reset.
const SENT_BEFORE_RESET: usize = 1_000;

impl RawBackend {
    /// Starts a raw backend committing `fault` on every connection.
    pub fn start(fault: Fault) -> RawBackend {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a raw backend on 127.0.0.1:0");
        let addr = listener.local_addr().expect("raw backend address");
        let accepted = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (count, stopped) = (accepted.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("raw-backend".into())
            .spawn(move || {
                let mut held = Vec::new();
                for stream in listener.incoming() {
                    if stopped.load(SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    count.fetch_add(1, SeqCst);
                    match fault {
                        Fault::Silent => held.push(stream),
                        Fault::ResetMidBody { chunked } => {
                            // Each on a thread of its own, so one slow client does not hold up the next.
                            std::thread::spawn(move || reset_mid_body(stream, chunked));
                        }
                    }
                }
            })
            .expect("spawn the raw backend thread");
        RawBackend { addr, accepted, stop, thread: Some(thread) }
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(SeqCst)
    }
}

impl Drop for RawBackend {
    fn drop(&mut self) {
        self.stop.store(true, SeqCst);
        // Wakes the accept loop, which sees the flag and returns, dropping what it holds.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn reset_mid_body(mut stream: TcpStream, chunked: bool) {
    let _ = stream.set_read_timeout(Some(crate::IO_TIMEOUT));
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let body = vec![b'x'; SENT_BEFORE_RESET];
    let mut out = Vec::new();
    if chunked {
        out.extend_from_slice(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n");
        out.extend_from_slice(format!("{:x}\r\n", 100_000).as_bytes());
    } else {
        out.extend_from_slice(b"HTTP/1.1 200 OK\r\ncontent-length: 100000\r\n\r\n");
    }
    out.extend_from_slice(&body);
    let _ = stream.write_all(&out);
    // SO_LINGER 0: close sends RST instead of FIN.
    let _ = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO));
}
