//! A minimal HPACK encoder written by hand (RFC 7541): indexed fields, literals with and without
//! incremental indexing, dynamic table size updates; strings as raw octets, never Huffman-coded.
//! Also just enough decoding to read a response's `:status`.

/// A header block under construction. Field representations follow RFC 7541 section 6; strings
/// are sent as raw octets (never Huffman-coded).
#[derive(Clone, Debug, Default)]
pub struct Hpack {
    block: Vec<u8>,
}

/// Static table indices a request needs (RFC 7541 appendix A).
pub mod static_index {
    /// `:authority` (name only).
    pub const AUTHORITY: usize = 1;
    /// `:method: GET`.
    pub const METHOD_GET: usize = 2;
    /// `:method: POST`.
    pub const METHOD_POST: usize = 3;
    /// `:path` (name; value `/`).
    pub const PATH: usize = 4;
    /// `:scheme: http`.
    pub const SCHEME_HTTP: usize = 6;
    /// Index of the first dynamic table entry (the newest).
    pub const FIRST_DYNAMIC: usize = 62;
}

impl Hpack {
    /// An empty block.
    pub fn new() -> Hpack {
        Hpack::default()
    }

    /// The request pseudo-headers of `GET path` for `authority` over `http`.
    pub fn get(authority: &str, path: &str) -> Hpack {
        let mut h = Hpack::new();
        h.indexed(static_index::METHOD_GET)
            .indexed(static_index::SCHEME_HTTP)
            .literal_name_ref(static_index::PATH, path.as_bytes())
            .literal_name_ref(static_index::AUTHORITY, authority.as_bytes());
        h
    }

    /// Integer with an `prefix_bits`-bit prefix, the first byte's high bits set to `pattern`.
    fn int(&mut self, pattern: u8, prefix_bits: u32, mut value: usize) {
        let max = (1usize << prefix_bits) - 1;
        if value < max {
            self.block.push(pattern | value as u8);
            return;
        }
        self.block.push(pattern | max as u8);
        value -= max;
        while value >= 128 {
            self.block.push((value % 128) as u8 | 0x80);
            value /= 128;
        }
        self.block.push(value as u8);
    }

    fn string(&mut self, s: &[u8]) {
        self.int(0, 7, s.len());
        self.block.extend_from_slice(s);
    }

    /// Indexed header field (static or dynamic table).
    pub fn indexed(&mut self, index: usize) -> &mut Hpack {
        self.int(0x80, 7, index);
        self
    }

    /// Literal with incremental indexing, new name: the field enters the dynamic table.
    pub fn literal_indexed(&mut self, name: &[u8], value: &[u8]) -> &mut Hpack {
        self.block.push(0x40);
        self.string(name);
        self.string(value);
        self
    }

    /// Literal without indexing, new name.
    pub fn literal(&mut self, name: &[u8], value: &[u8]) -> &mut Hpack {
        self.block.push(0x00);
        self.string(name);
        self.string(value);
        self
    }

    /// Literal without indexing whose name is table entry `index`.
    pub fn literal_name_ref(&mut self, index: usize, value: &[u8]) -> &mut Hpack {
        self.int(0x00, 4, index);
        self.string(value);
        self
    }

    /// Dynamic table size update.
    pub fn table_size_update(&mut self, size: usize) -> &mut Hpack {
        self.int(0x20, 5, size);
        self
    }

    /// The encoded block so far.
    pub fn bytes(&self) -> &[u8] {
        &self.block
    }

    /// The encoded block.
    pub fn into_bytes(self) -> Vec<u8> {
        self.block
    }
}

/// The `:status` of a response header block, when it is the block's first field (servers put it
/// there) sent as a static index (8-14) or a literal on the `:status` name, raw or Huffman-coded.
pub(crate) fn decode_status(block: &[u8]) -> Option<u16> {
    const STATIC: [(u8, u16); 7] = [(8, 200), (9, 204), (10, 206), (11, 304), (12, 400), (13, 404), (14, 500)];
    let mut i = 0;
    // Skip dynamic table size updates.
    while block.get(i).is_some_and(|b| b & 0xe0 == 0x20) {
        i += 1;
    }
    let first = *block.get(i)?;
    if first & 0x80 != 0 {
        return STATIC.iter().find(|(idx, _)| *idx == first & 0x7f).map(|(_, s)| *s);
    }
    // A literal whose name is a static `:status` index (8-14).
    let name = first & if first & 0x40 != 0 { 0x3f } else { 0x0f };
    if !(8..=14).contains(&name) {
        return None;
    }
    let len_byte = *block.get(i + 1)?;
    let len = usize::from(len_byte & 0x7f);
    let value = block.get(i + 2..i + 2 + len)?;
    let text = if len_byte & 0x80 != 0 { huffman_digits(value)? } else { String::from_utf8(value.to_vec()).ok()? };
    text.parse().ok()
}

/// Decodes a Huffman-coded string of decimal digits (RFC 7541 appendix B: `0`-`2` are the 5-bit
/// codes 0-2, `3`-`9` the 6-bit codes 25-31); `None` for anything else.
fn huffman_digits(bytes: &[u8]) -> Option<String> {
    let bits = bytes.len() * 8;
    let bit = |at: usize| (bytes[at / 8] >> (7 - at % 8)) & 1;
    let take = |at: usize, n: usize| (at..at + n).fold(0u8, |v, b| v << 1 | bit(b));
    let mut out = String::new();
    let mut at = 0;
    while at + 5 <= bits {
        if take(at, 5) <= 2 {
            out.push(char::from(b'0' + take(at, 5)));
            at += 5;
        } else if at + 6 <= bits && (25..=31).contains(&take(at, 6)) {
            out.push(char::from(b'0' + take(at, 6) - 22));
            at += 6;
        } else {
            break;
        }
    }
    // What is left must be padding: fewer than 8 bits, all ones.
    ((bits - at) < 8 && (at..bits).all(|b| bit(b) == 1)).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_use_the_prefix_then_continuation_bytes() {
        // RFC 7541 C.1.2: 1337 with a 5-bit prefix.
        let mut h = Hpack::new();
        h.int(0, 5, 1337);
        assert_eq!(h.bytes(), &[31, 154, 10]);
        let mut h = Hpack::new();
        h.indexed(2);
        assert_eq!(h.bytes(), &[0x82]);
    }

    #[test]
    fn literal_with_indexing_matches_the_rfc_example() {
        // RFC 7541 C.2.1.
        let mut h = Hpack::new();
        h.literal_indexed(b"custom-key", b"custom-header");
        let mut want = vec![0x40, 0x0a];
        want.extend_from_slice(b"custom-key");
        want.push(0x0d);
        want.extend_from_slice(b"custom-header");
        assert_eq!(h.bytes(), want.as_slice());
    }

    #[test]
    fn status_is_read_raw_or_huffman_coded() {
        assert_eq!(decode_status(&[0x88]), Some(200));
        assert_eq!(decode_status(&[0x08, 3, b'4', b'3', b'1']), Some(431));
        // "431" Huffman-coded: 011010 011001 00001, padded with ones.
        assert_eq!(decode_status(&[0x08, 0x83, 0x69, 0x90, 0xff]), Some(431));
        assert_eq!(huffman_digits(&[0x69, 0x90, 0xff]).as_deref(), Some("431"));
        // Padding that is not all ones is refused.
        assert_eq!(huffman_digits(&[0x69, 0x90, 0x00]), None);
    }
}
