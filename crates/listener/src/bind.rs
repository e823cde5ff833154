//! Socket creation: one SO_REUSEPORT socket per worker so the kernel spreads connections, or one
//! socket shared by every worker (the classic comparison). Port 0 is resolved once, so every
//! worker's socket shares the same port. A binary upgrade hands a listener's sockets to the new
//! process, which adopts them instead of binding: their accept queues carry over, so no connection
//! waiting in them is lost.

use gatehouse_config::Listener;
use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;

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

/// Why a listener has no sockets.
#[derive(Debug)]
#[non_exhaustive]
pub enum BindError {
    /// A socket for the listener's address could not be bound or set up.
    Bind {
        /// The listener.
        listener: String,
        /// The configured address.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// A socket handed down by the process this one replaces could not be taken over.
    Adopt {
        /// The listener.
        listener: String,
        /// The configured address.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// The handed-down sockets of one listener are bound to different addresses.
    MixedAddresses {
        /// The listener.
        listener: String,
    },
    /// The listener was to be taken over, but no socket was handed down.
    NoSocket {
        /// The listener.
        listener: String,
    },
}

impl std::fmt::Display for BindError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BindError::Bind { listener, addr, source } => match source.kind() {
                io::ErrorKind::AddrInUse => write!(f, "listener `{listener}`: address {addr} is already in use"),
                io::ErrorKind::AddrNotAvailable => {
                    write!(f, "listener `{listener}`: address {addr} is not available on this host")
                }
                io::ErrorKind::PermissionDenied => write!(f, "listener `{listener}`: permission denied binding {addr}"),
                _ => write!(f, "listener `{listener}`: cannot bind {addr}: {source}"),
            },
            BindError::Adopt { listener, addr, source } => {
                write!(f, "listener `{listener}`: cannot take over the socket of {addr}: {source}")
            }
            BindError::MixedAddresses { listener } => {
                write!(f, "listener `{listener}`: handed-down sockets are bound to different addresses")
            }
            BindError::NoSocket { listener } => write!(f, "listener `{listener}`: no socket was handed down"),
        }
    }
}

impl std::error::Error for BindError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BindError::Bind { source, .. } | BindError::Adopt { source, .. } => Some(source),
            BindError::MixedAddresses { .. } | BindError::NoSocket { .. } => None,
        }
    }
}

/// A non-blocking socket of `kind` bound to `addr` (IPv6 only for an IPv6 address), sharing the
/// port with its siblings under `reuse_port`: a listener's TCP sockets, and its UDP ones for
/// HTTP/3 (`gatehouse-http3`).
pub fn bound_socket(addr: SocketAddr, kind: Type, protocol: Protocol, reuse_port: bool) -> io::Result<Socket> {
    let s = Socket::new(Domain::for_address(addr), kind, Some(protocol))?;
    if kind == Type::STREAM {
        s.set_reuse_address(true)?;
    }
    if reuse_port {
        s.set_reuse_port(true)?;
    }
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    Ok(s)
}

fn socket(addr: SocketAddr, config: &Listener, reuse_port: bool) -> io::Result<TcpListener> {
    let s = bound_socket(addr, Type::STREAM, Protocol::TCP, reuse_port)?;
    s.listen(i32::try_from(config.backlog).unwrap_or(i32::MAX))?;
    let s = TcpListener::from(s);
    set_defer_accept(&s, config.defer_accept)?;
    Ok(s)
}

/// Seconds a connection that has sent nothing waits in the kernel under `defer_accept`; then the
/// kernel hands it over anyway (after its next SYN-ACK is answered), and the listener's header
/// read timeout applies from there. nginx's `deferred` and HAProxy's `defer-accept` use 1 too.
const DEFER_ACCEPT_SECS: libc::c_int = 1;

/// Turns `TCP_DEFER_ACCEPT` on or off for a listening socket: on, the kernel queues a new
/// connection for accept only when its first bytes arrive, so the worker is woken once, for the
/// accept and the first read together, instead of once for the accept and again for the bytes.
fn set_defer_accept(socket: &TcpListener, on: bool) -> io::Result<()> {
    let value: libc::c_int = if on { DEFER_ACCEPT_SECS } else { 0 };
    // SAFETY: `socket` is a live descriptor borrowed for the call; the option value points to an
    // initialised `c_int` that outlives the call, and the length passed is exactly its size. No
    // safe binding offers this option (socket2 and rustix do not).
    #[allow(unsafe_code)]
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_DEFER_ACCEPT,
            std::ptr::from_ref(&value).cast::<libc::c_void>(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Binds `config` for `workers` workers; an error names the listener and its address.
pub fn bind_listener(
    name: &str,
    config: &Listener,
    workers: usize,
    reuse_port: bool,
) -> Result<BoundListener, BindError> {
    let explain = |source| BindError::Bind { listener: name.into(), addr: config.bind, source };
    let first = socket(config.bind, config, reuse_port).map_err(explain)?;
    let addr = first.local_addr().map_err(explain)?;
    let mut sockets = vec![first];
    if reuse_port {
        for _ in 1..workers {
            sockets.push(socket(addr, config, true).map_err(explain)?);
        }
    }
    let bound = BoundListener { name: name.to_string(), addr, config: config.clone(), sockets };
    bound.apply_socket_options().map_err(explain)?;
    Ok(bound)
}

/// Takes over `sockets`, listening sockets of `config` handed down by the process this one
/// replaces. With `reuse_port` and fewer
/// sockets than `workers` (the old process had fewer workers), more SO_REUSEPORT sockets join
/// them when the handed-down ones allow it.
pub fn adopt_listener(
    name: &str,
    config: &Listener,
    sockets: Vec<TcpListener>,
    workers: usize,
    reuse_port: bool,
) -> Result<BoundListener, BindError> {
    let explain = |source| BindError::Adopt { listener: name.into(), addr: config.bind, source };
    let mut addr = None;
    for s in &sockets {
        let a = s.local_addr().map_err(explain)?;
        s.set_nonblocking(true).map_err(explain)?;
        if *addr.get_or_insert(a) != a {
            return Err(BindError::MixedAddresses { listener: name.into() });
        }
    }
    let addr = addr.ok_or_else(|| BindError::NoSocket { listener: name.into() })?;
    let mut sockets = sockets;
    let shareable = sockets.iter().all(|s| socket2::SockRef::from(s).reuse_port().unwrap_or(false));
    if reuse_port && shareable {
        while sockets.len() < workers {
            sockets.push(socket(addr, config, true).map_err(explain)?);
        }
    }
    let bound = BoundListener { name: name.to_string(), addr, config: config.clone(), sockets };
    bound.apply_socket_options().map_err(explain)?;
    Ok(bound)
}

impl BoundListener {
    /// Sets the options of `config` that a bound socket can change (`defer_accept`) on every
    /// socket: for sockets handed down by a previous process and for sockets kept across a reload.
    pub fn apply_socket_options(&self) -> io::Result<()> {
        self.sockets.iter().try_for_each(|s| set_defer_accept(s, self.config.defer_accept))
    }

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpStream;

    fn listener(defer_accept: bool) -> BoundListener {
        let yaml = format!("listeners:\n  main: {{ bind: \"127.0.0.1:0\", defer_accept: {defer_accept} }}\n");
        let config = gatehouse_config::compile(&yaml).unwrap_or_else(|e| panic!("{e}"));
        let cfg = &config.listeners["main"];
        bind_listener("main", cfg, 1, true).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn an_address_in_use_is_named_with_its_listener() {
        let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = taken.local_addr().expect("addr");
        let mut config = listener(false).config;
        config.bind = addr;
        let e = bind_listener("main", &config, 1, false).expect_err("in use");
        assert!(matches!(&e, BindError::Bind { source, .. } if source.kind() == io::ErrorKind::AddrInUse), "{e:?}");
        assert_eq!(e.to_string(), format!("listener `main`: address {addr} is already in use"));
    }

    #[test]
    fn with_defer_accept_a_connection_is_handed_over_only_when_its_first_bytes_arrive() {
        let bound = listener(true);
        let socket = &bound.sockets[0];
        let mut client = TcpStream::connect(bound.addr).expect("connect");
        // On loopback the handshake's last ACK has reached the listener when connect returns:
        // without the option the connection would be waiting in the accept queue now.
        let err = socket.accept().expect_err("accepted a connection that has sent nothing");
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        client.write_all(b"GET / HTTP/1.1\r\n").expect("write");
        socket.set_nonblocking(false).expect("blocking");
        let (_conn, peer) = socket.accept().expect("accept after the first bytes");
        assert_eq!(peer, client.local_addr().expect("local addr"));
    }

    #[test]
    fn without_defer_accept_a_silent_connection_is_accepted_at_once() {
        let bound = listener(false);
        let socket = &bound.sockets[0];
        let client = TcpStream::connect(bound.addr).expect("connect");
        let (_conn, peer) = socket.accept().expect("a silent connection is accepted without the option");
        assert_eq!(peer, client.local_addr().expect("local addr"));
    }

    #[test]
    fn reapplying_options_to_a_kept_socket_switches_defer_accept() {
        let mut bound = listener(true);
        bound.config.defer_accept = false;
        bound.apply_socket_options().expect("setsockopt");
        let client = TcpStream::connect(bound.addr).expect("connect");
        let (_conn, peer) = bound.sockets[0].accept().expect("accepted once the option is off");
        assert_eq!(peer, client.local_addr().expect("local addr"));
    }
}
