//! QUIC across a binary upgrade: the new process takes over the UDP sockets, and the packets of
//! the old process's connections still reach it.
//!
//! A TCP connection belongs to the process whose socket accepted it; a QUIC connection is only
//! packets arriving on a socket both processes now hold. So each process puts its *generation*
//! (one more than its predecessor's) in the first byte of every connection id it issues, and,
//! once the new process reads the sockets, it sends each packet addressed to the previous
//! generation (a short-header packet, or a Handshake packet, whose destination id the server
//! chose) to the old process over a Unix datagram socket pair made for each UDP socket. The old
//! process stops reading the UDP sockets when the new one is ready, serves its connections from
//! what comes over the pair (sending its answers on the shared socket, as before) while they
//! drain, and exits; packets for it that arrive after are the new process's (stateless reset).
//!
//! ```text
//! client ─► UDP socket i ─► new process, worker's PeekSocket ─ generation N+1? ─► its endpoint
//!                                                             └ generation N ─► pair i ─► old process's endpoint i
//! old process's endpoint i ─► UDP socket i (shared) ─► client
//! ```
//! A client's Initial and 0-RTT packets carry an id it chose, so they go to the new process: a
//! handshake under way in the old process when the new one takes over is started again.

use atomic_waker::AtomicWaker;
use quinn::udp::{EcnCodepoint, RecvMeta};
use quinn::{ConnectionId, ConnectionIdGenerator};
use std::collections::VecDeque;
use std::io::{self, IoSliceMut};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

/// This process's generation: 0, or its predecessor's plus one (wrapping).
static GENERATION: AtomicU8 = AtomicU8::new(0);

/// The length of the connection ids this server issues.
pub const CID_LEN: usize = 8;
/// The bytes put before a forwarded datagram: version, source address (family, 16 bytes of
/// address, port), destination address (family, 16 bytes), ECN.
const HEADER_LEN: usize = 1 + 1 + 16 + 2 + 1 + 16 + 1;
const HEADER_VERSION: u8 = 1;

/// This process's generation, to hand to a successor.
pub fn quic_generation() -> u8 {
    GENERATION.load(Relaxed)
}

/// Records that this process follows one of generation `previous`: its connection ids carry
/// `previous + 1`.
pub fn follow_generation(previous: u8) {
    GENERATION.store(previous.wrapping_add(1), Relaxed);
}

/// Connection ids of [`CID_LEN`] bytes: this process's generation, the index of the UDP socket
/// whose endpoint owns the connection, then random bytes.
#[derive(Debug)]
pub struct GenerationCids {
    generation: u8,
    socket: u8,
}

impl GenerationCids {
    /// Ids of this process's generation, for the endpoint on socket `socket` of its listener.
    pub fn new(socket: usize) -> Self {
        GenerationCids { generation: quic_generation(), socket: socket as u8 }
    }
}

impl ConnectionIdGenerator for GenerationCids {
    fn generate_cid(&mut self) -> ConnectionId {
        let mut bytes = [0u8; CID_LEN];
        // A failing system random source leaves zeros: ids then only collide, which quinn
        // handles; there is nothing better to do mid-connection.
        let _ = aws_lc_rs::rand::fill(&mut bytes[2..]);
        bytes[0] = self.generation;
        bytes[1] = self.socket;
        ConnectionId::new(&bytes)
    }

    fn cid_len(&self) -> usize {
        CID_LEN
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

/// The upgrade state of one UDP socket, shared by its endpoint's socket wrapper and the node.
#[derive(Debug)]
pub struct QuicLink {
    /// Whether this process reads the UDP socket (until its successor does).
    reads_socket: AtomicBool,
    /// Whether there is a successor to read from, or a predecessor to forward to (so the hot
    /// path takes no lock).
    receiving: AtomicBool,
    forwarding: AtomicBool,
    /// From the successor: the packets of this process's connections.
    from_successor: Mutex<Inbound>,
    /// To the predecessor: the packets of its connections; `None` once it is gone.
    to_predecessor: Mutex<Option<UnixDatagram>>,
    /// Packets of this socket's connections that arrived on a sibling socket (the client's
    /// address changed, and the kernel's hash chose another socket), and whom to wake for them.
    inbox: Mutex<VecDeque<(RecvMeta, Vec<u8>)>>,
    inbox_len: AtomicUsize,
    inbox_waker: AtomicWaker,
}

/// Packets waiting in an inbox at most; more are dropped (the client sends again).
const INBOX_MAX: usize = 1024;

#[derive(Debug, Default)]
enum Inbound {
    #[default]
    None,
    /// Not yet registered with the worker's runtime (done on the first poll, on that worker).
    Std(UnixDatagram),
    Tokio(tokio::net::UnixDatagram),
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Default for QuicLink {
    fn default() -> Self {
        QuicLink {
            reads_socket: AtomicBool::new(true),
            receiving: AtomicBool::new(false),
            forwarding: AtomicBool::new(false),
            from_successor: Mutex::default(),
            to_predecessor: Mutex::default(),
            inbox: Mutex::default(),
            inbox_len: AtomicUsize::new(0),
            inbox_waker: AtomicWaker::new(),
        }
    }
}

impl QuicLink {
    /// A socket of this process's own, or (with `to_predecessor`) one taken over from the
    /// process this one replaces.
    pub fn new(to_predecessor: Option<UnixDatagram>) -> Self {
        let link = QuicLink::default();
        if let Some(pair) = to_predecessor {
            if let Err(e) = pair.set_nonblocking(true) {
                tracing::warn!(error = %e, "cannot make the upgrade pair non-blocking; not forwarding");
            } else {
                *lock(&link.to_predecessor) = Some(pair);
                link.forwarding.store(true, Relaxed);
            }
        }
        link
    }

    /// Starts an upgrade: the end the successor writes to, whose other end this process reads
    /// from now on.
    pub fn pair_for_successor(&self) -> io::Result<UnixDatagram> {
        let (mine, theirs) = UnixDatagram::pair()?;
        mine.set_nonblocking(true)?;
        *lock(&self.from_successor) = Inbound::Std(mine);
        self.receiving.store(true, Relaxed);
        Ok(theirs)
    }

    /// The successor reads the socket now: this process reads only what it forwards.
    pub fn handed_over(&self) {
        self.reads_socket.store(false, Relaxed);
    }

    /// The upgrade failed: this process goes on reading its socket alone.
    pub fn upgrade_failed(&self) {
        *lock(&self.from_successor) = Inbound::None;
        self.receiving.store(false, Relaxed);
        self.reads_socket.store(true, Relaxed);
    }

    /// Whether this process reads the UDP socket.
    pub fn reads_socket(&self) -> bool {
        self.reads_socket.load(Relaxed)
    }

    /// A datagram the successor forwarded, into `buf` and `meta`; `Pending` (with the waker
    /// registered) when none is waiting or there is no successor.
    pub fn poll_forwarded(&self, cx: &mut Context<'_>, buf: &mut [u8], meta: &mut RecvMeta) -> Poll<io::Result<()>> {
        if !self.receiving.load(Relaxed) {
            return Poll::Pending;
        }
        let mut inbound = lock(&self.from_successor);
        if let Inbound::Std(_) = &*inbound {
            if let Inbound::Std(std) = std::mem::take(&mut *inbound) {
                match tokio::net::UnixDatagram::from_std(std) {
                    Ok(t) => *inbound = Inbound::Tokio(t),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot read the upgrade pair; packets forwarded to this process are lost");
                        return Poll::Pending;
                    }
                }
            }
        }
        let Inbound::Tokio(pair) = &*inbound else { return Poll::Pending };
        let mut message = [0u8; HEADER_LEN + u16::MAX as usize];
        loop {
            let mut read = tokio::io::ReadBuf::new(&mut message);
            match pair.poll_recv(cx, &mut read) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => {
                    // The successor is gone (it failed, or it is the one that drained first).
                    tracing::debug!(error = %e, "the upgrade pair closed");
                    *inbound = Inbound::None;
                    self.receiving.store(false, Relaxed);
                    return Poll::Pending;
                }
                Poll::Ready(Ok(())) => {
                    let filled = read.filled();
                    let Some((m, payload)) = decode(filled) else { continue };
                    if payload.len() > buf.len() {
                        continue;
                    }
                    buf[..payload.len()].copy_from_slice(payload);
                    *meta = RecvMeta { len: payload.len(), stride: payload.len(), ..m };
                    return Poll::Ready(Ok(()));
                }
            }
        }
    }

    /// Hands this socket's endpoint a datagram that arrived on a sibling socket.
    pub fn deliver(&self, datagram: &[u8], meta: &RecvMeta) {
        let mut inbox = lock(&self.inbox);
        if inbox.len() < INBOX_MAX {
            let stride = meta.stride.max(1);
            for segment in datagram.chunks(stride) {
                let m = RecvMeta { len: segment.len(), stride: segment.len(), ..*meta };
                inbox.push_back((m, segment.to_vec()));
            }
            self.inbox_len.store(inbox.len(), Relaxed);
        }
        drop(inbox);
        self.inbox_waker.wake();
    }

    /// Datagrams from sibling sockets, into `bufs` and `meta`: how many (0 with the waker
    /// registered).
    pub fn poll_inbox(&self, cx: &mut Context<'_>, bufs: &mut [IoSliceMut<'_>], meta: &mut [RecvMeta]) -> usize {
        self.inbox_waker.register(cx.waker());
        if self.inbox_len.load(Relaxed) == 0 {
            return 0;
        }
        let mut inbox = lock(&self.inbox);
        let mut n = 0;
        while n < bufs.len().min(meta.len()) {
            let Some((m, data)) = inbox.pop_front() else { break };
            if data.len() > bufs[n].len() {
                continue;
            }
            bufs[n][..data.len()].copy_from_slice(&data);
            meta[n] = m;
            n += 1;
        }
        self.inbox_len.store(inbox.len(), Relaxed);
        n
    }

    /// Sends `datagram`, received by this process, to the predecessor when it belongs to one of
    /// its connections; `false` when it is this process's to handle.
    pub fn forward(&self, datagram: &[u8], meta: &RecvMeta) -> bool {
        // A link has a pair to a predecessor only in a process that took its sockets over.
        if !self.forwarding.load(Relaxed) || !addressed_to(datagram, quic_generation().wrapping_sub(1)) {
            return false;
        }
        let mut to = lock(&self.to_predecessor);
        let Some(pair) = to.as_ref() else { return false };
        let stride = meta.stride.max(1);
        for segment in datagram.chunks(stride) {
            let mut message = Vec::with_capacity(HEADER_LEN + segment.len());
            encode(&mut message, meta);
            message.extend_from_slice(segment);
            match pair.send(&message) {
                Ok(_) => {}
                // A full queue loses the packet, as a full socket would.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => {
                    // The old process has exited: what comes for it is this process's now.
                    tracing::info!(error = %e, "the previous process is gone; its QUIC packets are no longer forwarded");
                    *to = None;
                    self.forwarding.store(false, Relaxed);
                    return false;
                }
            }
        }
        true
    }
}

/// The socket index in the connection id a short-header datagram of this process's generation is
/// addressed to, if any.
pub fn socket_of(datagram: &[u8]) -> Option<usize> {
    let first = *datagram.first()?;
    (first & 0x80 == 0 && datagram.len() > CID_LEN && datagram[1] == quic_generation())
        .then(|| usize::from(datagram[2]))
}

/// Whether a datagram's first packet is addressed to a connection id of `generation`: a
/// short-header packet, or a long-header Handshake packet (both carry an id the server chose).
fn addressed_to(datagram: &[u8], generation: u8) -> bool {
    match datagram.first() {
        Some(b) if b & 0x80 == 0 => datagram.len() > CID_LEN && datagram[1] == generation,
        // Long header, fixed bit, type Handshake (QUIC v1): version, id length, id.
        Some(b) if b & 0xf0 == 0xe0 => {
            datagram.len() > 6 + CID_LEN && usize::from(datagram[5]) == CID_LEN && datagram[6] == generation
        }
        _ => false,
    }
}

fn encode(out: &mut Vec<u8>, meta: &RecvMeta) {
    out.push(HEADER_VERSION);
    push_ip(out, Some(meta.addr.ip()));
    out.extend_from_slice(&meta.addr.port().to_be_bytes());
    push_ip(out, meta.dst_ip);
    out.push(meta.ecn.map_or(0, |e| e as u8));
}

fn push_ip(out: &mut Vec<u8>, ip: Option<IpAddr>) {
    match ip {
        None => out.extend_from_slice(&[0; 17]),
        Some(IpAddr::V4(v4)) => {
            out.push(4);
            out.extend_from_slice(&v4.to_ipv6_mapped().octets());
        }
        Some(IpAddr::V6(v6)) => {
            out.push(6);
            out.extend_from_slice(&v6.octets());
        }
    }
}

fn read_ip(family: u8, bytes: &[u8]) -> Option<Option<IpAddr>> {
    let octets: [u8; 16] = bytes.try_into().ok()?;
    let v6 = Ipv6Addr::from(octets);
    match family {
        0 => Some(None),
        4 => Some(Some(IpAddr::V4(v6.to_ipv4_mapped().unwrap_or(Ipv4Addr::UNSPECIFIED)))),
        6 => Some(Some(IpAddr::V6(v6))),
        _ => None,
    }
}

/// A forwarded message's metadata and datagram.
fn decode(message: &[u8]) -> Option<(RecvMeta, &[u8])> {
    if message.len() <= HEADER_LEN || message[0] != HEADER_VERSION {
        return None;
    }
    let src = read_ip(message[1], &message[2..18])??;
    let port = u16::from_be_bytes([message[18], message[19]]);
    let dst_ip = read_ip(message[20], &message[21..37])?;
    let ecn = EcnCodepoint::from_bits(message[37]);
    let meta = RecvMeta { addr: SocketAddr::new(src, port), dst_ip, ecn, ..RecvMeta::default() };
    Some((meta, &message[HEADER_LEN..]))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn metadata_survives_the_pair() {
        let cases: [(SocketAddr, Option<IpAddr>); 2] = [
            ("192.0.2.7:4433".parse().unwrap(), Some("127.0.0.1".parse().unwrap())),
            ("[2001:db8::1]:443".parse().unwrap(), None),
        ];
        for (addr, dst) in cases {
            let meta = RecvMeta { addr, dst_ip: dst, ecn: Some(EcnCodepoint::Ect0), len: 3, stride: 3 };
            let mut message = Vec::new();
            encode(&mut message, &meta);
            message.extend_from_slice(b"abc");
            let (back, payload) = decode(&message).unwrap();
            assert_eq!((back.addr, back.dst_ip, back.ecn, payload), (addr, dst, Some(EcnCodepoint::Ect0), &b"abc"[..]));
        }
        assert!(decode(&[9; 50]).is_none());
    }

    #[test]
    fn packets_are_told_apart_by_the_generation_in_the_id() {
        let mut short = vec![0x40, 7];
        short.extend_from_slice(&[0; 20]);
        assert!(addressed_to(&short, 7));
        assert!(!addressed_to(&short, 8));
        // Handshake packet: 0xe0 | pn length, version 1, id length 8, id starting with 7.
        let mut handshake = vec![0xe1, 0, 0, 0, 1, 8, 7];
        handshake.extend_from_slice(&[0; 30]);
        assert!(addressed_to(&handshake, 7));
        // An Initial carries an id the client chose: never forwarded.
        handshake[0] = 0xc1;
        assert!(!addressed_to(&handshake, 7));
    }

    #[test]
    fn ids_carry_the_generation() {
        let mut ids = GenerationCids { generation: 42, socket: 3 };
        let a = ids.generate_cid();
        let b = ids.generate_cid();
        assert_eq!((a.len(), a[0], a[1], b[0], b[1]), (CID_LEN, 42, 3, 42, 3));
        assert_ne!(a, b);
    }
}
