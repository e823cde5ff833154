//! The name a QUIC client asks for, read before its connection is accepted.
//!
//! quinn reads the ClientHello only once a connection is accepted, with the server configuration
//! chosen beforehand, and its certificate resolver cannot wait. Two things need the name first:
//! a certificate that must be loaded from the store (directory or Redis) on first use, and a site
//! that asks for client certificates (its own TLS configuration). So each worker's UDP socket is
//! wrapped: the Initial packets that go through it are decrypted (their keys derive from the
//! packet's destination connection id, RFC 9001 §5.2), their CRYPTO frames put together, and the
//! ClientHello kept under the client's address and original destination
//! connection id, where the accept side finds it ([`HelloPeek::wait`]).
//!
//! ```text
//! UDP ─► PeekSocket::poll_recv ─► Initial? ─► decrypt ─► CRYPTO frames ─► ClientHello ─► table
//!   └──────────────────────► quinn Endpoint ─► Incoming ─► HelloPeek::wait(addr, odcid) ─┘
//! ```
//! A ClientHello may span several Initial packets (a post-quantum key share makes it longer than
//! one), in any order and split anywhere (Chrome scatters its CRYPTO frames). Only Initial
//! packets are looked at, and only while the listener needs the name; the table is bounded.

use crate::handover::{socket_of, QuicLink};
use bytes::BytesMut;
use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, ConnectionId, UdpPoller};
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Connections being read at once per worker; the oldest is forgotten beyond it.
const TABLE_MAX: usize = 4096;
/// How long an entry is kept for the accept side to take.
const ENTRY_TTL: Duration = Duration::from_secs(10);
/// The longest ClientHello put together.
const HELLO_MAX: u64 = gatehouse_hello::DEFAULT_MAX_HELLO_BYTES as u64;

/// What a QUIC handshake needs of a ClientHello before it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// The name it sent (`server_name`), as sent.
    pub server_name: Option<String>,
    /// Its first PSK identity: the ticket it resumes with.
    pub psk: Option<Vec<u8>>,
    /// It offers 0-RTT data (`early_data`).
    pub early_data: bool,
}

/// What was read of a client's ClientHello.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// The whole ClientHello, which parses: what the handshake needs of it.
    Hello(Hello),
    /// A ClientHello that does not parse, or longer than allowed.
    Unreadable,
}

#[derive(Default)]
struct Entry {
    /// CRYPTO data by offset.
    fragments: Vec<(u64, Vec<u8>)>,
    seen: Option<Seen>,
}

impl Entry {
    /// Adds a CRYPTO frame's data; reads the ClientHello once it is whole.
    fn add(&mut self, offset: u64, data: &[u8]) {
        if self.seen.is_some() || data.is_empty() {
            return;
        }
        let held: usize = self.fragments.iter().map(|(_, d)| d.len()).sum();
        if offset.saturating_add(data.len() as u64) > HELLO_MAX || (held + data.len()) as u64 > HELLO_MAX {
            self.seen = Some(Seen::Unreadable);
            self.fragments = Vec::new();
            return;
        }
        self.fragments.push((offset, data.to_vec()));
        self.fragments.sort_by_key(|(o, _)| *o);
        // The bytes held from offset 0 without a gap.
        let mut prefix: Vec<u8> = Vec::new();
        for (o, d) in &self.fragments {
            let (o, end) = (*o as usize, *o as usize + d.len());
            if o > prefix.len() {
                break;
            }
            if end > prefix.len() {
                prefix.extend_from_slice(&d[prefix.len() - o..]);
            }
        }
        if prefix.len() < 4 {
            return;
        }
        let whole = 4 + (usize::from(prefix[1]) << 16 | usize::from(prefix[2]) << 8 | usize::from(prefix[3]));
        if prefix.len() < whole {
            return;
        }
        prefix.truncate(whole);
        self.seen = Some(match gatehouse_hello::parse(&prefix) {
            Ok(h) => Seen::Hello(Hello {
                server_name: h.server_name.map(str::to_owned),
                psk: h.psk_identities.and_then(|ids| ids.iter().next().map(|p| p.identity.to_vec())),
                early_data: h.early_data,
            }),
            Err(_) => Seen::Unreadable,
        });
        self.fragments = Vec::new();
    }
}

type Key = (SocketAddr, ConnectionId);

#[derive(Default)]
struct Table {
    entries: HashMap<Key, Entry>,
    /// Keys in the order their entries began.
    order: VecDeque<(Key, Instant)>,
}

impl Table {
    fn entry(&mut self, key: Key, now: Instant) -> &mut Entry {
        if !self.entries.contains_key(&key) {
            while let Some((old, at)) = self.order.front() {
                // At most TABLE_MAX entries of at most HELLO_MAX bytes each (64 MiB at worst
                // under a flood of crafted Initial packets; a real ClientHello takes 0.3-2 KB).
                if self.entries.len() < TABLE_MAX && at.elapsed() < ENTRY_TTL {
                    break;
                }
                self.entries.remove(old);
                self.order.pop_front();
            }
            self.order.push_back((key, now));
        }
        self.entries.entry(key).or_default()
    }
}

/// The ClientHellos read on one worker's socket.
pub struct HelloPeek {
    /// Derives the Initial keys (the same for any configuration).
    crypto: Arc<dyn quinn::crypto::ServerConfig>,
    /// Whether the listener needs the name (a store, or a site asking for client certificates).
    enabled: AtomicBool,
    table: Mutex<Table>,
    done: Notify,
}

impl fmt::Debug for HelloPeek {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HelloPeek").field("enabled", &self.enabled).finish_non_exhaustive()
    }
}

impl HelloPeek {
    /// A table reading Initial packets with keys from `crypto`.
    pub fn new(crypto: Arc<dyn quinn::crypto::ServerConfig>) -> Arc<Self> {
        Arc::new(HelloPeek {
            crypto,
            enabled: AtomicBool::new(false),
            table: Mutex::new(Table::default()),
            done: Notify::new(),
        })
    }

    /// Starts or stops reading Initial packets.
    pub fn enable(&self, on: bool) {
        self.enabled.store(on, Relaxed);
        if !on {
            *self.lock() = Table::default();
        }
    }

    /// Whether Initial packets are read.
    pub fn enabled(&self) -> bool {
        self.enabled.load(Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What the client at `addr` whose first Initial went to `orig_dst_cid` sent, waiting for the
    /// rest of its ClientHello until `deadline`; `None` if it did not come whole by then, or
    /// if nothing of it is here (its entry was pushed out by a flood, or the Initial came
    /// before the reading was turned on): the handshake then goes on without the name.
    pub async fn wait(
        &self,
        addr: SocketAddr,
        orig_dst_cid: ConnectionId,
        deadline: tokio::time::Instant,
    ) -> Option<Seen> {
        let key = (addr, orig_dst_cid);
        loop {
            let notified = self.done.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut table = self.lock();
                match table.entries.get(&key).map(|e| e.seen.clone()) {
                    Some(Some(seen)) => {
                        table.entries.remove(&key);
                        return Some(seen);
                    }
                    Some(None) => {
                        // After a Retry the client sends its ClientHello again under the id the
                        // Retry gave it: whole there, though the first flight's may not be.
                        let again = table.entries.iter().find(|((a, _), e)| *a == addr && e.seen.is_some());
                        if let Some((k, e)) = again {
                            let (k, seen) = (*k, e.seen.clone());
                            table.entries.remove(&k);
                            return seen;
                        }
                    }
                    None => return None,
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                self.lock().entries.remove(&key);
                return None;
            }
        }
    }

    /// Reads one received datagram (`stride`-sized segments after GRO).
    fn offer(&self, from: SocketAddr, datagram: &[u8], stride: usize) {
        for segment in datagram.chunks(stride.max(1)) {
            // Long header, fixed bit, type Initial (QUIC v1 and its drafts).
            if segment.first().is_some_and(|b| b & 0xf0 == 0xc0) {
                self.read_initial(from, segment);
            }
        }
    }

    fn read_initial(&self, from: SocketAddr, packet: &[u8]) {
        let Some(initial) = parse_initial(packet) else { return };
        let cid = ConnectionId::new(initial.dcid);
        let key = (from, cid);
        if self.lock().entries.get(&key).is_some_and(|e| e.seen.is_some()) {
            return;
        }
        let Ok(keys) = self.crypto.initial_keys(initial.version, &cid) else { return };
        let Some(payload) = decrypt(&keys, packet, &initial) else { return };
        let mut table = self.lock();
        let entry = table.entry(key, Instant::now());
        let mut frames = &payload[..];
        while let Some((offset, data, rest)) = next_crypto(frames) {
            entry.add(offset, data);
            frames = rest;
        }
        if entry.seen.is_some() {
            drop(table);
            self.done.notify_waiters();
        }
    }
}

/// The fields of an Initial packet's header.
struct Initial<'a> {
    version: u32,
    dcid: &'a [u8],
    /// Where the (protected) packet number starts.
    pn_offset: usize,
    /// Where the packet ends (a datagram may hold more packets after it).
    end: usize,
}

fn parse_initial(packet: &[u8]) -> Option<Initial<'_>> {
    let mut r = Reader { buf: packet, pos: 1 };
    let version = u32::from_be_bytes(r.take(4)?.try_into().ok()?);
    if version == 0 {
        return None;
    }
    let dcid_len = usize::from(r.take(1)?[0]);
    if dcid_len > 20 {
        return None;
    }
    let dcid = r.take(dcid_len)?;
    let scid_len = usize::from(r.take(1)?[0]);
    if scid_len > 20 {
        return None;
    }
    r.take(scid_len)?;
    let token_len = usize::try_from(r.varint()?).ok()?;
    r.take(token_len)?;
    let length = usize::try_from(r.varint()?).ok()?;
    let pn_offset = r.pos;
    let end = pn_offset.checked_add(length)?;
    (end <= packet.len()).then_some(Initial { version, dcid, pn_offset, end })
}

/// The packet's plaintext frames, or `None` if it does not open.
fn decrypt(keys: &quinn::crypto::Keys, packet: &[u8], initial: &Initial<'_>) -> Option<BytesMut> {
    let header_key = &keys.header.remote;
    if initial.pn_offset + 4 + header_key.sample_size() > initial.end {
        return None;
    }
    let mut copy = packet[..initial.end].to_vec();
    header_key.decrypt(initial.pn_offset, &mut copy);
    let pn_len = usize::from(copy[0] & 0x03) + 1;
    let header_end = initial.pn_offset + pn_len;
    // The client's first packets are numbered from 0: the truncated number is the number.
    let pn = copy[initial.pn_offset..header_end].iter().fold(0u64, |n, b| n << 8 | u64::from(*b));
    let mut payload = BytesMut::from(&copy[header_end..]);
    keys.packet.remote.decrypt(pn, &copy[..header_end], &mut payload).ok()?;
    Some(payload)
}

/// The next CRYPTO frame's offset and data, and the frames after it; `None` at the end or at a
/// frame a client's Initial packet does not carry.
fn next_crypto(mut frames: &[u8]) -> Option<(u64, &[u8], &[u8])> {
    loop {
        let mut r = Reader { buf: frames, pos: 0 };
        match r.varint()? {
            0x00 | 0x01 => {}
            t @ (0x02 | 0x03) => {
                // ACK: largest, delay, range count, first range, then the ranges (and ECN counts).
                let (_, _) = (r.varint()?, r.varint()?);
                let ranges = r.varint()?;
                r.varint()?;
                for _ in 0..ranges.min(256) {
                    r.varint()?;
                    r.varint()?;
                }
                if t == 0x03 {
                    for _ in 0..3 {
                        r.varint()?;
                    }
                }
            }
            0x06 => {
                let offset = r.varint()?;
                let len = usize::try_from(r.varint()?).ok()?;
                let data = r.take(len)?;
                return Some((offset, data, &frames[r.pos..]));
            }
            _ => return None,
        }
        frames = &frames[r.pos..];
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }

    /// A QUIC variable-length integer (RFC 9000 §16).
    fn varint(&mut self) -> Option<u64> {
        let first = *self.buf.get(self.pos)?;
        let len = 1usize << (first >> 6);
        let bytes = self.take(len)?;
        Some(bytes[1..].iter().fold(u64::from(first & 0x3f), |n, b| n << 8 | u64::from(*b)))
    }
}

/// A worker's UDP socket, with the Initial packets that come in read by a [`HelloPeek`], and
/// the packets of a predecessor's connections sent on to it (a binary upgrade, [`QuicLink`]).
#[derive(Debug)]
pub struct PeekSocket {
    inner: Arc<dyn AsyncUdpSocket>,
    peek: Arc<HelloPeek>,
    /// The listener's sockets' links, this one's at `index`.
    links: Arc<[Arc<QuicLink>]>,
    index: usize,
    stats: Arc<gatehouse_tls::TlsStats>,
}

impl PeekSocket {
    /// Wraps `inner`, socket `index` of a listener whose sockets' links are `links`.
    pub fn new(
        inner: Arc<dyn AsyncUdpSocket>,
        peek: Arc<HelloPeek>,
        links: Arc<[Arc<QuicLink>]>,
        index: usize,
        stats: Arc<gatehouse_tls::TlsStats>,
    ) -> Arc<Self> {
        Arc::new(PeekSocket { inner, peek, links, index, stats })
    }

    fn link(&self) -> &QuicLink {
        &self.links[self.index]
    }

    /// Looks at `n` received buffers: Initial packets are read; a predecessor's packets are sent
    /// on, and packets of a sibling socket's connections handed to its endpoint (their buffers
    /// replaced by the last ones). What is left for quinn.
    fn sort(&self, bufs: &mut [IoSliceMut<'_>], meta: &mut [RecvMeta], n: usize) -> usize {
        let mut n = n.min(bufs.len()).min(meta.len());
        let mut i = 0;
        while i < n {
            let len = meta[i].len.min(bufs[i].len());
            let datagram = &bufs[i][..len];
            let sibling = socket_of(datagram).filter(|&s| s != self.index).and_then(|s| self.links.get(s));
            let moved = if let Some(sibling) = sibling {
                // The client's address changed and the kernel chose this socket: the packet goes
                // to the endpoint that has the connection, which validates the new path.
                sibling.deliver(datagram, &meta[i]);
                self.stats.quic.steered.inc();
                true
            } else if self.link().forward(datagram, &meta[i]) {
                self.stats.quic.forwarded.inc();
                true
            } else {
                false
            };
            if moved {
                n -= 1;
                if i != n {
                    let (head, tail) = bufs.split_at_mut(n);
                    let last = meta[n].len.min(tail[0].len()).min(head[i].len());
                    head[i][..last].copy_from_slice(&tail[0][..last]);
                    meta[i] = meta[n];
                }
                continue;
            }
            if self.peek.enabled() {
                self.peek.offer(meta[i].addr, &bufs[i][..len], meta[i].stride);
            }
            i += 1;
        }
        n
    }
}

impl AsyncUdpSocket for PeekSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &Transmit<'_>) -> io::Result<()> {
        self.inner.try_send(transmit)
    }

    fn poll_recv(
        &self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        if let (Some(buf), Some(m)) = (bufs.first_mut(), meta.first_mut()) {
            while let Poll::Ready(r) = self.link().poll_forwarded(cx, buf, m) {
                if let Err(e) = r {
                    return Poll::Ready(Err(e));
                }
                // From the successor, during a drain: a connection of a sibling socket (its client
                // moved) goes to that socket's endpoint.
                let len = m.len.min(buf.len());
                match socket_of(&buf[..len]).filter(|&s| s != self.index).and_then(|s| self.links.get(s)) {
                    Some(sibling) => {
                        sibling.deliver(&buf[..len], m);
                        self.stats.quic.steered.inc();
                    }
                    None => return Poll::Ready(Ok(1)),
                }
            }
        }
        let steered = self.link().poll_inbox(cx, bufs, meta);
        if steered > 0 {
            return Poll::Ready(Ok(steered));
        }
        if !self.link().reads_socket() {
            return Poll::Pending;
        }
        loop {
            match self.inner.poll_recv(cx, bufs, meta) {
                Poll::Ready(Ok(n)) => {
                    let left = self.sort(bufs, meta, n);
                    if left > 0 || n == 0 {
                        return Poll::Ready(Ok(left));
                    }
                }
                other => return other,
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crypto_frames_put_together_out_of_order() {
        let body = b"\x03\x03rest of a hello that does not parse";
        let mut msg = vec![1u8, 0, 0, body.len() as u8];
        msg.extend_from_slice(body);
        let mut e = Entry::default();
        e.add(10, &msg[10..]);
        assert_eq!(e.seen, None);
        e.add(0, &msg[..6]);
        assert_eq!(e.seen, None, "a gap from 6 to 10");
        e.add(4, &msg[4..12]);
        assert_eq!(e.seen, Some(Seen::Unreadable));
    }

    #[test]
    fn a_hello_beyond_the_limit_is_unreadable() {
        let mut e = Entry::default();
        e.add(HELLO_MAX, b"x");
        assert_eq!(e.seen, Some(Seen::Unreadable));
    }

    #[test]
    fn frames_before_crypto_are_skipped_and_unknown_ones_end_the_reading() {
        // PADDING, PING, ACK (largest 5, delay 0, one more range), CRYPTO at 7 with "abc".
        let frames = [0x00, 0x01, 0x02, 0x05, 0x00, 0x01, 0x00, 0x01, 0x00, 0x06, 0x07, 0x03, b'a', b'b', b'c', 0x08];
        let (offset, data, rest) = next_crypto(&frames).expect("a crypto frame");
        assert_eq!((offset, data), (7, &b"abc"[..]));
        assert_eq!(next_crypto(rest), None);
    }

    #[test]
    fn a_short_or_odd_header_is_no_initial() {
        assert!(parse_initial(&[0xc0, 0, 0, 0, 1]).is_none());
        // Version 0 is version negotiation.
        assert!(parse_initial(&[0xc0, 0, 0, 0, 0, 0, 0, 0, 0]).is_none());
        // A connection id longer than 20 bytes.
        assert!(parse_initial(&[0xc0, 0, 0, 0, 1, 21]).is_none());
    }
}
