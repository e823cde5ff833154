//! The Huffman code of HPACK and QPACK string literals (RFC 7541 Appendix B, used by QPACK as
//! RFC 9204 §4.1.2 says), coded a whole code at a time.
//!
//! HTTP/3's header coding (the `h3` crate's QPACK) calls [`encoded_len`], [`encode`] and
//! [`decode`] for every header name and value it writes or reads: the crate's own coder went a
//! few bits at a time through several allocations and cost about a tenth of the CPU of an HTTP/3
//! request (docs/architecture.md, "HTTP/3").
//!
//! Encoding shifts each symbol's code into a 64-bit accumulator and writes whole bytes. Decoding
//! uses the code's canonical form (codes of one length are consecutive and ordered by symbol):
//! for each length from the shortest, the next bits are a code of that length when they fall
//! below that length's last code. The decoder refuses what RFC 7541 §5.2 calls errors: the EOS
//! symbol, padding longer than 7 bits, and padding that is not the most significant bits of EOS
//! (all ones). Nothing here panics on any input.

/// Each symbol's code (right-aligned) and length in bits; the last entry (256) is EOS.
const CODES: [(u32, u8); 257] = [
    (0x1ff8, 13),
    (0x7fffd8, 23),
    (0xfffffe2, 28),
    (0xfffffe3, 28),
    (0xfffffe4, 28),
    (0xfffffe5, 28),
    (0xfffffe6, 28),
    (0xfffffe7, 28),
    (0xfffffe8, 28),
    (0xffffea, 24),
    (0x3ffffffc, 30),
    (0xfffffe9, 28),
    (0xfffffea, 28),
    (0x3ffffffd, 30),
    (0xfffffeb, 28),
    (0xfffffec, 28),
    (0xfffffed, 28),
    (0xfffffee, 28),
    (0xfffffef, 28),
    (0xffffff0, 28),
    (0xffffff1, 28),
    (0xffffff2, 28),
    (0x3ffffffe, 30),
    (0xffffff3, 28),
    (0xffffff4, 28),
    (0xffffff5, 28),
    (0xffffff6, 28),
    (0xffffff7, 28),
    (0xffffff8, 28),
    (0xffffff9, 28),
    (0xffffffa, 28),
    (0xffffffb, 28),
    (0x14, 6),
    (0x3f8, 10),
    (0x3f9, 10),
    (0xffa, 12),
    (0x1ff9, 13),
    (0x15, 6),
    (0xf8, 8),
    (0x7fa, 11),
    (0x3fa, 10),
    (0x3fb, 10),
    (0xf9, 8),
    (0x7fb, 11),
    (0xfa, 8),
    (0x16, 6),
    (0x17, 6),
    (0x18, 6),
    (0x0, 5),
    (0x1, 5),
    (0x2, 5),
    (0x19, 6),
    (0x1a, 6),
    (0x1b, 6),
    (0x1c, 6),
    (0x1d, 6),
    (0x1e, 6),
    (0x1f, 6),
    (0x5c, 7),
    (0xfb, 8),
    (0x7ffc, 15),
    (0x20, 6),
    (0xffb, 12),
    (0x3fc, 10),
    (0x1ffa, 13),
    (0x21, 6),
    (0x5d, 7),
    (0x5e, 7),
    (0x5f, 7),
    (0x60, 7),
    (0x61, 7),
    (0x62, 7),
    (0x63, 7),
    (0x64, 7),
    (0x65, 7),
    (0x66, 7),
    (0x67, 7),
    (0x68, 7),
    (0x69, 7),
    (0x6a, 7),
    (0x6b, 7),
    (0x6c, 7),
    (0x6d, 7),
    (0x6e, 7),
    (0x6f, 7),
    (0x70, 7),
    (0x71, 7),
    (0x72, 7),
    (0xfc, 8),
    (0x73, 7),
    (0xfd, 8),
    (0x1ffb, 13),
    (0x7fff0, 19),
    (0x1ffc, 13),
    (0x3ffc, 14),
    (0x22, 6),
    (0x7ffd, 15),
    (0x3, 5),
    (0x23, 6),
    (0x4, 5),
    (0x24, 6),
    (0x5, 5),
    (0x25, 6),
    (0x26, 6),
    (0x27, 6),
    (0x6, 5),
    (0x74, 7),
    (0x75, 7),
    (0x28, 6),
    (0x29, 6),
    (0x2a, 6),
    (0x7, 5),
    (0x2b, 6),
    (0x76, 7),
    (0x2c, 6),
    (0x8, 5),
    (0x9, 5),
    (0x2d, 6),
    (0x77, 7),
    (0x78, 7),
    (0x79, 7),
    (0x7a, 7),
    (0x7b, 7),
    (0x7ffe, 15),
    (0x7fc, 11),
    (0x3ffd, 14),
    (0x1ffd, 13),
    (0xffffffc, 28),
    (0xfffe6, 20),
    (0x3fffd2, 22),
    (0xfffe7, 20),
    (0xfffe8, 20),
    (0x3fffd3, 22),
    (0x3fffd4, 22),
    (0x3fffd5, 22),
    (0x7fffd9, 23),
    (0x3fffd6, 22),
    (0x7fffda, 23),
    (0x7fffdb, 23),
    (0x7fffdc, 23),
    (0x7fffdd, 23),
    (0x7fffde, 23),
    (0xffffeb, 24),
    (0x7fffdf, 23),
    (0xffffec, 24),
    (0xffffed, 24),
    (0x3fffd7, 22),
    (0x7fffe0, 23),
    (0xffffee, 24),
    (0x7fffe1, 23),
    (0x7fffe2, 23),
    (0x7fffe3, 23),
    (0x7fffe4, 23),
    (0x1fffdc, 21),
    (0x3fffd8, 22),
    (0x7fffe5, 23),
    (0x3fffd9, 22),
    (0x7fffe6, 23),
    (0x7fffe7, 23),
    (0xffffef, 24),
    (0x3fffda, 22),
    (0x1fffdd, 21),
    (0xfffe9, 20),
    (0x3fffdb, 22),
    (0x3fffdc, 22),
    (0x7fffe8, 23),
    (0x7fffe9, 23),
    (0x1fffde, 21),
    (0x7fffea, 23),
    (0x3fffdd, 22),
    (0x3fffde, 22),
    (0xfffff0, 24),
    (0x1fffdf, 21),
    (0x3fffdf, 22),
    (0x7fffeb, 23),
    (0x7fffec, 23),
    (0x1fffe0, 21),
    (0x1fffe1, 21),
    (0x3fffe0, 22),
    (0x1fffe2, 21),
    (0x7fffed, 23),
    (0x3fffe1, 22),
    (0x7fffee, 23),
    (0x7fffef, 23),
    (0xfffea, 20),
    (0x3fffe2, 22),
    (0x3fffe3, 22),
    (0x3fffe4, 22),
    (0x7ffff0, 23),
    (0x3fffe5, 22),
    (0x3fffe6, 22),
    (0x7ffff1, 23),
    (0x3ffffe0, 26),
    (0x3ffffe1, 26),
    (0xfffeb, 20),
    (0x7fff1, 19),
    (0x3fffe7, 22),
    (0x7ffff2, 23),
    (0x3fffe8, 22),
    (0x1ffffec, 25),
    (0x3ffffe2, 26),
    (0x3ffffe3, 26),
    (0x3ffffe4, 26),
    (0x7ffffde, 27),
    (0x7ffffdf, 27),
    (0x3ffffe5, 26),
    (0xfffff1, 24),
    (0x1ffffed, 25),
    (0x7fff2, 19),
    (0x1fffe3, 21),
    (0x3ffffe6, 26),
    (0x7ffffe0, 27),
    (0x7ffffe1, 27),
    (0x3ffffe7, 26),
    (0x7ffffe2, 27),
    (0xfffff2, 24),
    (0x1fffe4, 21),
    (0x1fffe5, 21),
    (0x3ffffe8, 26),
    (0x3ffffe9, 26),
    (0xffffffd, 28),
    (0x7ffffe3, 27),
    (0x7ffffe4, 27),
    (0x7ffffe5, 27),
    (0xfffec, 20),
    (0xfffff3, 24),
    (0xfffed, 20),
    (0x1fffe6, 21),
    (0x3fffe9, 22),
    (0x1fffe7, 21),
    (0x1fffe8, 21),
    (0x7ffff3, 23),
    (0x3fffea, 22),
    (0x3fffeb, 22),
    (0x1ffffee, 25),
    (0x1ffffef, 25),
    (0xfffff4, 24),
    (0xfffff5, 24),
    (0x3ffffea, 26),
    (0x7ffff4, 23),
    (0x3ffffeb, 26),
    (0x7ffffe6, 27),
    (0x3ffffec, 26),
    (0x3ffffed, 26),
    (0x7ffffe7, 27),
    (0x7ffffe8, 27),
    (0x7ffffe9, 27),
    (0x7ffffea, 27),
    (0x7ffffeb, 27),
    (0xffffffe, 28),
    (0x7ffffec, 27),
    (0x7ffffed, 27),
    (0x7ffffee, 27),
    (0x7ffffef, 27),
    (0x7fffff0, 27),
    (0x3ffffee, 26),
    (0x3fffffff, 30),
];

/// The longest code, in bits (EOS and a few control characters).
const MAX_LEN: u32 = 30;
/// The shortest code, in bits.
const MIN_LEN: u32 = 5;

/// The canonical decoding tables, built from [`CODES`] at compile time.
struct Canonical {
    /// Per length: the first code of that length.
    first: [u32; MAX_LEN as usize + 1],
    /// Per length: the number of codes of that length.
    count: [u32; MAX_LEN as usize + 1],
    /// Per length: where its symbols start in `symbols`.
    offset: [u16; MAX_LEN as usize + 1],
    /// The symbols ordered by code length, then by symbol (which is code order).
    symbols: [u16; 257],
}

const fn canonical() -> Canonical {
    let mut count = [0u32; MAX_LEN as usize + 1];
    let mut i = 0;
    while i < 257 {
        count[CODES[i].1 as usize] += 1;
        i += 1;
    }
    let mut first = [0u32; MAX_LEN as usize + 1];
    let mut offset = [0u16; MAX_LEN as usize + 1];
    let mut len = 1;
    while len <= MAX_LEN as usize {
        first[len] = (first[len - 1] + count[len - 1]) << 1;
        offset[len] = offset[len - 1] + count[len - 1] as u16;
        len += 1;
    }
    let mut symbols = [0u16; 257];
    let mut placed = [0u16; MAX_LEN as usize + 1];
    let mut sym = 0;
    while sym < 257 {
        let len = CODES[sym].1 as usize;
        symbols[offset[len] as usize + placed[len] as usize] = sym as u16;
        placed[len] += 1;
        sym += 1;
    }
    Canonical { first, count, offset, symbols }
}

static CANONICAL: Canonical = canonical();

/// The length in bytes of `raw` Huffman-coded (padding included).
pub fn encoded_len(raw: &[u8]) -> usize {
    let bits: usize = raw.iter().map(|&b| CODES[b as usize].1 as usize).sum();
    bits.div_ceil(8)
}

/// Appends `raw` Huffman-coded to `out`, padded with the most significant bits of EOS;
/// [`encoded_len`] bytes.
pub fn encode(raw: &[u8], out: &mut Vec<u8>) {
    out.reserve(encoded_len(raw));
    encode_each(raw, |b| out.push(b));
}

/// Gives `put` the bytes of `raw` Huffman-coded, in order, as [`encode`] would append them.
pub fn encode_each(raw: &[u8], mut put: impl FnMut(u8)) {
    // `pending` bits are waiting in the low end of `acc`; fewer than 8 between symbols, so a
    // 30-bit code always fits beside them.
    let mut acc: u64 = 0;
    let mut pending: u32 = 0;
    for &b in raw {
        let (code, len) = CODES[b as usize];
        acc = (acc << len) | u64::from(code);
        pending += u32::from(len);
        while pending >= 8 {
            pending -= 8;
            put((acc >> pending) as u8);
        }
    }
    if pending > 0 {
        put(((acc << (8 - pending)) as u8) | (0xff >> pending));
    }
}

/// Why a Huffman-coded string was refused (RFC 7541 §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// The EOS symbol appeared in the string.
    Eos,
    /// The string ends with more than 7 bits that are no whole code, or with padding that is not
    /// all ones.
    Padding,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DecodeError::Eos => "Huffman string holds the EOS symbol",
            DecodeError::Padding => "Huffman string ends with invalid padding",
        })
    }
}

impl std::error::Error for DecodeError {}

/// Appends the decoding of the Huffman-coded `coded` to `out`.
pub fn decode(coded: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
    let t = &CANONICAL;
    // Every code is at least 5 bits long: at most 8/5 bytes out per byte in.
    out.reserve(coded.len() * 8 / 5);
    let mut acc: u64 = 0;
    // Bits not yet decoded, in the low end of `acc`.
    let mut have: u32 = 0;
    let mut input = coded.iter();
    loop {
        // Keep more than the longest code in hand while input lasts.
        while have <= 56 {
            match input.next() {
                Some(&b) => {
                    acc = (acc << 8) | u64::from(b);
                    have += 8;
                }
                None => break,
            }
        }
        let mut len = MIN_LEN;
        let mut found = None;
        while len <= have.min(MAX_LEN) {
            let code = ((acc >> (have - len)) & ((1u64 << len) - 1)) as u32;
            // Canonical: shorter lengths did not match, so `code >= first[len]`.
            if code < t.first[len as usize] + t.count[len as usize] {
                found = Some((len, code));
                break;
            }
            len += 1;
        }
        let Some((len, code)) = found else {
            // The input is used up (more than 56 bits always hold a whole code): what is left
            // must be padding, at most 7 bits, all ones.
            if have > 7 {
                return Err(DecodeError::Padding);
            }
            let mask = (1u64 << have) - 1;
            return if acc & mask == mask { Ok(()) } else { Err(DecodeError::Padding) };
        };
        let index = t.offset[len as usize] as usize + (code - t.first[len as usize]) as usize;
        match t.symbols.get(index) {
            Some(&sym) if sym < 256 => out.push(sym as u8),
            _ => return Err(DecodeError::Eos),
        }
        have -= len;
    }
}

#[cfg(test)]
mod tests;
