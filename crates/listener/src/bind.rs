//! Socket creation: one SO_REUSEPORT socket per worker so the kernel spreads connections, or one
//! socket shared by every worker (the classic comparison). Port 0 is resolved once, so every
//! worker's socket shares the same port.

use gatehouse_config::Listener;
use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::{SocketAddr, TcpListener};

/// A listener's sockets: one per worker with `reuse_port`, else one shared.
#[derive(Debug)]
pub struct BoundListener {
    /// Listener name.
    pub name: String,
    /// The address actually bound (port 0 resolved).
    pub addr: SocketAddr,
    /// Its configuration.
    pub config: Listener,
    /// The sockets.
    pub sockets: Vec<TcpListener>,
}

fn socket(addr: SocketAddr, backlog: u32, reuse_port: bool) -> io::Result<TcpListener> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    if reuse_port {
        s.set_reuse_port(true)?;
    }
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    s.listen(i32::try_from(backlog).unwrap_or(i32::MAX))?;
    Ok(s.into())
}

/// Binds `config` for `workers` workers, with a message naming the address on failure.
pub fn bind_listener(name: &str, config: &Listener, workers: usize, reuse_port: bool) -> Result<BoundListener, String> {
    let explain = |e: io::Error| match e.kind() {
        io::ErrorKind::AddrInUse => format!("listener `{name}`: address {} is already in use", config.bind),
        io::ErrorKind::AddrNotAvailable => {
            format!("listener `{name}`: address {} is not available on this host", config.bind)
        }
        io::ErrorKind::PermissionDenied => format!("listener `{name}`: permission denied binding {}", config.bind),
        _ => format!("listener `{name}`: cannot bind {}: {e}", config.bind),
    };
    let first = socket(config.bind, config.backlog, reuse_port).map_err(explain)?;
    let addr = first.local_addr().map_err(explain)?;
    let mut sockets = vec![first];
    if reuse_port {
        for _ in 1..workers {
            sockets.push(socket(addr, config.backlog, true).map_err(explain)?);
        }
    }
    Ok(BoundListener { name: name.to_string(), addr, config: config.clone(), sockets })
}

impl BoundListener {
    /// The socket worker `i` accepts on.
    pub fn socket_for(&self, worker: usize) -> io::Result<TcpListener> {
        self.sockets[worker % self.sockets.len()].try_clone()
    }
}
