//! Loopback ports for servers a test starts.

use std::net::TcpListener;

/// A loopback port nothing listens on right now (the kernel's choice of an ephemeral port,
/// released at once; the server that takes it binds it next).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("pick a free port")
}
