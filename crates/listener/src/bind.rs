//! Socket creation: one SO_REUSEPORT socket per worker so the kernel spreads connections, or one
//! socket shared by every worker (the classic comparison). Port 0 is resolved once, so every
//! worker's socket shares the same port. A binary upgrade hands a listener's sockets to the new
//! process, which adopts them instead of binding: their accept queues carry over, so no connection
//! waiting in them is lost.

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

/// Takes over `sockets`, listening sockets of `config` handed down by the process this one
/// replaces. With `reuse_port` and fewer sockets than `workers` (the old process had fewer
/// workers), more SO_REUSEPORT sockets join them when the handed-down ones allow it.
pub fn adopt_listener(
    name: &str,
    config: &Listener,
    sockets: Vec<TcpListener>,
    workers: usize,
    reuse_port: bool,
) -> Result<BoundListener, String> {
    let explain = |e: io::Error| format!("listener `{name}`: cannot take over the socket of {}: {e}", config.bind);
    let mut addr = None;
    for s in &sockets {
        let a = s.local_addr().map_err(explain)?;
        s.set_nonblocking(true).map_err(explain)?;
        if *addr.get_or_insert(a) != a {
            return Err(format!("listener `{name}`: handed-down sockets are bound to different addresses"));
        }
    }
    let addr = addr.ok_or_else(|| format!("listener `{name}`: no socket was handed down"))?;
    let mut sockets = sockets;
    let shareable = sockets.iter().all(|s| socket2::SockRef::from(s).reuse_port().unwrap_or(false));
    if reuse_port && shareable {
        while sockets.len() < workers {
            sockets.push(socket(addr, config.backlog, true).map_err(explain)?);
        }
    }
    Ok(BoundListener { name: name.to_string(), addr, config: config.clone(), sockets })
}

impl BoundListener {
    /// The sockets each worker accepts on: every socket is served by one worker when there are at
    /// least as many sockets as workers (a handed-down socket is never left without an acceptor),
    /// else worker `i` accepts on socket `i mod sockets`.
    pub fn assignments(&self, workers: usize) -> io::Result<Vec<(usize, TcpListener)>> {
        let workers = workers.max(1);
        if self.sockets.len() >= workers {
            self.sockets.iter().enumerate().map(|(j, s)| Ok((j % workers, s.try_clone()?))).collect()
        } else {
            (0..workers).map(|i| Ok((i, self.sockets[i % self.sockets.len()].try_clone()?))).collect()
        }
    }
}
