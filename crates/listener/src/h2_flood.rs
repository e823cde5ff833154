//! Serve stage, HTTP/2 connections only: reads the frame headers a client sends (never the
//! payloads) and decides when the connection floods the server with frames the HTTP/2 library
//! answers or acts on without limit of its own.
//!
//! The library already bounds CONTINUATION frames, decoded header lists, streams reset before they
//! are accepted, and streams it resets itself; it answers each PING and SETTINGS frame one at a
//! time, so a flood of them costs CPU but never buffers. What it lacks, checked here:
//! - control frames (PING and SETTINGS that are not ACKs, empty DATA frames that do not end a
//!   stream): a budget of [`CONTROL_BURST`] refilled at [`CONTROL_PER_SEC`] a second, and by one
//!   for each DATA frame the server sends (a gRPC client pings once per round trip while it
//!   receives data, to size its window: that must never run out);
//! - streams the client resets after they were accepted (the slow form of rapid reset, which the
//!   library's pending-accept limit does not see): once [`RESETS_MIN`] resets were sent, at most
//!   half of the streams opened may have been reset.

use gatehouse_telemetry::H2Offence;

/// Size of a frame header (RFC 9113 section 4.1).
pub(crate) const FRAME_HEADER_LEN: usize = 9;
/// The client connection preface, which comes before the first frame.
const PREFACE_LEN: usize = 24;

/// Control frames a client may send at once.
pub(crate) const CONTROL_BURST: u32 = 1000;
/// Control frames a client may send per second, sustained.
pub(crate) const CONTROL_PER_SEC: u32 = 100;
/// Resets a client may send before the share of reset streams is checked.
pub(crate) const RESETS_MIN: u32 = 200;

pub(crate) const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const ACK: u8 = 0x1;
const END_STREAM: u8 = 0x1;
/// ENHANCE_YOUR_CALM (RFC 9113 section 7).
pub(crate) const ENHANCE_YOUR_CALM: u32 = 0xb;

/// A frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FrameHead {
    /// Payload length.
    pub len: usize,
    /// Frame type.
    pub kind: u8,
    /// Flags.
    pub flags: u8,
    /// Stream identifier (0: the connection).
    pub stream: u32,
}

impl FrameHead {
    fn parse(b: &[u8; FRAME_HEADER_LEN]) -> FrameHead {
        FrameHead {
            len: u32::from_be_bytes([0, b[0], b[1], b[2]]) as usize,
            kind: b[3],
            flags: b[4],
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
        }
    }
}

/// Where a stream of frames is: inside a frame header, inside a payload, or between two frames.
#[derive(Debug, Default)]
pub(crate) struct FrameCursor {
    head: [u8; FRAME_HEADER_LEN],
    have: usize,
    left: usize,
}

impl FrameCursor {
    /// Whether the bytes so far end exactly at the end of a frame.
    pub(crate) fn at_boundary(&self) -> bool {
        self.have == 0 && self.left == 0
    }

    /// Bytes that finish the header or the payload in progress (0 at a boundary).
    pub(crate) fn left_in_part(&self) -> usize {
        if self.have > 0 {
            FRAME_HEADER_LEN - self.have
        } else {
            self.left
        }
    }

    /// Moves over `bytes`, calling `on_head` with each frame header completed and the part of its
    /// payload that follows in `bytes`.
    pub(crate) fn feed(&mut self, mut bytes: &[u8], mut on_head: impl FnMut(FrameHead, &[u8])) {
        while !bytes.is_empty() {
            if self.left > 0 {
                let n = self.left.min(bytes.len());
                self.left -= n;
                bytes = &bytes[n..];
                continue;
            }
            let n = (FRAME_HEADER_LEN - self.have).min(bytes.len());
            self.head[self.have..self.have + n].copy_from_slice(&bytes[..n]);
            self.have += n;
            bytes = &bytes[n..];
            if self.have == FRAME_HEADER_LEN {
                self.have = 0;
                let head = FrameHead::parse(&self.head);
                self.left = head.len;
                on_head(head, &bytes[..head.len.min(bytes.len())]);
            }
        }
    }
}

/// What a client has sent so far, and whether it is flooding.
#[derive(Debug)]
pub(crate) struct FloodGuard {
    preface_left: usize,
    frames: FrameCursor,
    /// Highest stream the client opened.
    last_stream: u32,
    opened: u32,
    resets: u32,
    tokens: u32,
    refilled_ms: u64,
}

impl FloodGuard {
    /// A guard for a connection starting at `now_ms`, whose first `replayed` bytes of the client
    /// preface were read before (while sniffing the protocol) and are not shown to the guard.
    pub(crate) fn new(now_ms: u64, replayed: usize) -> Self {
        FloodGuard {
            preface_left: PREFACE_LEN.saturating_sub(replayed),
            frames: FrameCursor::default(),
            last_stream: 0,
            opened: 0,
            resets: 0,
            tokens: CONTROL_BURST,
            refilled_ms: now_ms,
        }
    }

    /// Gives back one control frame for a DATA frame the server sent.
    pub(crate) fn earn(&mut self) {
        self.tokens = (self.tokens + 1).min(CONTROL_BURST);
    }

    /// The highest stream the client opened: the last stream a GOAWAY can say was processed.
    pub(crate) fn last_stream(&self) -> u32 {
        self.last_stream
    }

    /// Reads the frame headers in `bytes` (the next bytes from the client); `now_ms` gives the time
    /// when a control frame needs it. Returns the offence once the client crosses a limit.
    pub(crate) fn observe(&mut self, mut bytes: &[u8], now_ms: impl Fn() -> u64) -> Option<H2Offence> {
        if self.preface_left > 0 {
            let n = self.preface_left.min(bytes.len());
            self.preface_left -= n;
            bytes = &bytes[n..];
        }
        let mut offence = None;
        let FloodGuard { frames, last_stream, opened, resets, tokens, refilled_ms, .. } = self;
        frames.feed(bytes, |head, _| {
            let control = match head.kind {
                PING => (head.flags & ACK == 0).then_some(H2Offence::Ping),
                SETTINGS => (head.flags & ACK == 0).then_some(H2Offence::Settings),
                DATA => (head.len == 0 && head.flags & END_STREAM == 0).then_some(H2Offence::EmptyFrames),
                HEADERS => {
                    // Trailers come on a stream already open; a new stream has a higher number.
                    if head.stream > *last_stream {
                        *last_stream = head.stream;
                        *opened += 1;
                    }
                    None
                }
                RST_STREAM => {
                    *resets += 1;
                    if *resets >= RESETS_MIN && u64::from(*resets) * 2 > u64::from(*opened) {
                        offence = offence.or(Some(H2Offence::Resets));
                    }
                    None
                }
                _ => None,
            };
            let Some(kind) = control else { return };
            if *tokens == 0 {
                let now = now_ms();
                let earned = now.saturating_sub(*refilled_ms) * u64::from(CONTROL_PER_SEC) / 1000;
                if earned > 0 {
                    *tokens = u32::try_from(earned).unwrap_or(u32::MAX).min(CONTROL_BURST);
                    *refilled_ms = now;
                }
            }
            match tokens.checked_sub(1) {
                Some(left) => *tokens = left,
                None => offence = offence.or(Some(kind)),
            }
        });
        offence
    }
}

/// What a GOAWAY frame the server wrote says about the client: the offence when it is
/// ENHANCE_YOUR_CALM (from the debug data the library puts in it), `None` otherwise. `payload` is
/// the part of the frame's payload written together with its header.
pub(crate) fn goaway_offence(head: FrameHead, payload: &[u8]) -> Option<H2Offence> {
    if head.kind != GOAWAY {
        return None;
    }
    let code = u32::from_be_bytes(payload.get(4..8)?.try_into().ok()?);
    if code != ENHANCE_YOUR_CALM {
        return None;
    }
    Some(match payload.get(8..).unwrap_or_default() {
        b"too_many_resets" => H2Offence::Resets,
        b"too_many_continuations" => H2Offence::Continuation,
        b"header_list_way_too_large" => H2Offence::HeaderList,
        b"too_many_internal_resets" => H2Offence::StreamErrors,
        _ => H2Offence::Other,
    })
}

/// A GOAWAY frame: `last_stream` was the last stream processed, and the client should calm down.
pub(crate) fn calm_goaway(last_stream: u32) -> [u8; FRAME_HEADER_LEN + 8] {
    let mut f = [0u8; FRAME_HEADER_LEN + 8];
    f[2] = 8;
    f[3] = GOAWAY;
    f[9..13].copy_from_slice(&(last_stream & 0x7fff_ffff).to_be_bytes());
    f[13..17].copy_from_slice(&ENHANCE_YOUR_CALM.to_be_bytes());
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, stream: u32, len: usize) -> Vec<u8> {
        let mut f = (len as u32).to_be_bytes()[1..].to_vec();
        f.extend_from_slice(&[kind, flags]);
        f.extend_from_slice(&stream.to_be_bytes());
        f.resize(FRAME_HEADER_LEN + len, 0);
        f
    }

    fn preface() -> Vec<u8> {
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec()
    }

    #[test]
    fn the_cursor_finds_headers_split_across_reads() {
        let mut bytes = frame(HEADERS, 4, 1, 5);
        bytes.extend(frame(PING, 0, 0, 8));
        for split in 0..bytes.len() {
            let mut c = FrameCursor::default();
            let mut seen = Vec::new();
            c.feed(&bytes[..split], |h, _| seen.push(h.kind));
            assert_eq!(c.at_boundary(), split == 0 || split == 14, "split at {split}");
            c.feed(&bytes[split..], |h, _| seen.push(h.kind));
            assert_eq!(seen, [HEADERS, PING], "split at {split}");
            assert!(c.at_boundary());
        }
        let mut c = FrameCursor::default();
        c.feed(&bytes[..3], |_, _| {});
        assert_eq!(c.left_in_part(), 6);
        c.feed(&bytes[3..11], |_, _| {});
        assert_eq!(c.left_in_part(), 3);
    }

    #[test]
    fn a_ping_flood_spends_the_budget_and_time_refills_it() {
        let mut g = FloodGuard::new(0, 0);
        let mut bytes = preface();
        bytes.extend(frame(SETTINGS, 0, 0, 0));
        for _ in 1..CONTROL_BURST {
            bytes.extend(frame(PING, 0, 0, 8));
        }
        assert_eq!(g.observe(&bytes, || 0), None);
        // ACKs are answers, not requests: free.
        assert_eq!(g.observe(&frame(PING, ACK, 0, 8), || 0), None);
        assert_eq!(g.observe(&frame(PING, 0, 0, 8), || 0), Some(H2Offence::Ping));
        // The preface was read while sniffing: the frames start at once.
        let mut g = FloodGuard::new(0, PREFACE_LEN);
        let burst: Vec<u8> = (0..CONTROL_BURST).flat_map(|_| frame(SETTINGS, 0, 0, 6)).collect();
        assert_eq!(g.observe(&burst, || 0), None);
        // A second later, CONTROL_PER_SEC more are allowed.
        let more: Vec<u8> = (0..CONTROL_PER_SEC).flat_map(|_| frame(SETTINGS, 0, 0, 6)).collect();
        assert_eq!(g.observe(&more, || 1000), None);
        // Each DATA frame sent pays for one more, as for a client pinging while it downloads.
        g.earn();
        assert_eq!(g.observe(&frame(PING, 0, 0, 8), || 1000), None);
        assert_eq!(g.observe(&frame(SETTINGS, 0, 0, 6), || 1000), Some(H2Offence::Settings));
    }

    #[test]
    fn empty_data_frames_count_unless_they_end_the_stream() {
        let mut g = FloodGuard::new(0, 0);
        let ends: Vec<u8> = (0..2 * CONTROL_BURST).flat_map(|i| frame(DATA, END_STREAM, 2 * i + 1, 0)).collect();
        assert_eq!(g.observe(&preface(), || 0), None);
        assert_eq!(g.observe(&ends, || 0), None);
        let empty: Vec<u8> = (0..=CONTROL_BURST).flat_map(|_| frame(DATA, 0, 1, 0)).collect();
        assert_eq!(g.observe(&empty, || 0), Some(H2Offence::EmptyFrames));
    }

    #[test]
    fn resets_of_most_streams_are_a_flood_and_a_few_are_not() {
        let mut g = FloodGuard::new(0, 0);
        assert_eq!(g.observe(&preface(), || 0), None);
        // Two of every three streams complete: a third reset is allowed however long it goes on.
        for i in 0..3 * RESETS_MIN {
            let id = 2 * i + 1;
            let mut bytes = frame(HEADERS, 5, id, 3);
            if i % 3 == 0 {
                bytes.extend(frame(RST_STREAM, 0, id, 4));
            }
            assert_eq!(g.observe(&bytes, || 0), None);
        }
        assert_eq!(g.last_stream(), 6 * RESETS_MIN - 1);
        let mut g = FloodGuard::new(0, 0);
        assert_eq!(g.observe(&preface(), || 0), None);
        let mut found = None;
        for i in 0..2 * RESETS_MIN {
            let id = 2 * i + 1;
            let mut bytes = frame(HEADERS, 5, id, 3);
            bytes.extend(frame(RST_STREAM, 0, id, 4));
            found = g.observe(&bytes, || 0);
            if found.is_some() {
                assert_eq!(i + 1, RESETS_MIN);
                break;
            }
        }
        assert_eq!(found, Some(H2Offence::Resets));
    }

    #[test]
    fn library_goaways_are_read_by_their_debug_data() {
        let mut payload = vec![0, 0, 0, 1, 0, 0, 0, 0xb];
        payload.extend_from_slice(b"too_many_resets");
        let head = FrameHead { len: payload.len(), kind: GOAWAY, flags: 0, stream: 0 };
        assert_eq!(goaway_offence(head, &payload), Some(H2Offence::Resets));
        payload[7] = 0;
        assert_eq!(goaway_offence(head, &payload), None);
        let ours = calm_goaway(7);
        let mut c = FrameCursor::default();
        let mut seen = None;
        c.feed(&ours, |h, p| seen = goaway_offence(h, p));
        assert_eq!(seen, Some(H2Offence::Other));
        assert!(c.at_boundary());
    }
}
