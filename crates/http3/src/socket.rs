//! The UDP sockets an `http3` listener serves QUIC on: bound on the listener's port beside its
//! TCP sockets (one per worker with `reuse_port`, else one), or taken over from the process this
//! one replaces with the pair to it.

use crate::handover::QuicLink;
use socket2::{Protocol, Type};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::unix::net::UnixDatagram;
use std::sync::Arc;

/// A UDP socket QUIC is served on, and its state across a binary upgrade.
#[derive(Debug)]
pub struct QuicSocket {
    /// The socket.
    pub socket: UdpSocket,
    /// Packets to and from the process before or after this one.
    pub link: Arc<QuicLink>,
}

/// Binds the UDP sockets of a listener bound to `addr` (its port resolved) into `sockets` when
/// it has none yet: one per worker with `reuse_port`, else one.
pub fn bind_udp(sockets: &mut Vec<QuicSocket>, addr: SocketAddr, workers: usize, reuse_port: bool) -> io::Result<()> {
    if sockets.is_empty() {
        let count = if reuse_port { workers.max(1) } else { 1 };
        for _ in 0..count {
            let socket = gatehouse_listener::bound_socket(addr, Type::DGRAM, Protocol::UDP, reuse_port)?;
            sockets.push(QuicSocket { socket: UdpSocket::from(socket), link: Arc::default() });
        }
    }
    Ok(())
}

/// Takes over the QUIC sockets `inherited` on `addr`'s port, each with the pair to the old
/// process, which goes on serving its connections from what this one sends it (`handover`), or
/// with none (a socket systemd passed). Sockets on another port (the listener moved) are closed.
pub fn adopt_udp(inherited: Vec<(UdpSocket, Option<UnixDatagram>)>, addr: SocketAddr) -> io::Result<Vec<QuicSocket>> {
    let mut sockets = Vec::new();
    for (socket, pair) in inherited {
        if socket.local_addr()?.port() != addr.port() {
            continue;
        }
        socket.set_nonblocking(true)?;
        sockets.push(QuicSocket { socket, link: Arc::new(QuicLink::new(pair)) });
    }
    Ok(sockets)
}
