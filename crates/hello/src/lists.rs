//! Borrowed views of the ClientHello's lists, validated once by `parse` and then read in place.
//!
//! Nothing here allocates. The iterators still check every read, so a view can never panic, even if
//! it were built around bytes that `parse` did not validate.

use std::fmt;

use crate::error::Field;
use crate::reader::Reader;

/// A list of big-endian `u16` code points: cipher suites, versions or signature schemes.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct U16List<'a> {
    bytes: &'a [u8],
}

impl<'a> U16List<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }

    /// The code points in the client's order of preference.
    pub fn iter(&self) -> U16Iter<'a> {
        U16Iter { rest: self.bytes }
    }

    /// Number of code points.
    pub fn len(&self) -> usize {
        self.bytes.len() / 2
    }

    /// Whether the list is empty (never the case for a list `parse` accepted).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the client listed `value`.
    pub fn contains(&self, value: u16) -> bool {
        self.iter().any(|v| v == value)
    }

    /// The list as it was on the wire, without its length prefix.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

impl fmt::Debug for U16List<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter().map(Hex)).finish()
    }
}

impl<'a> IntoIterator for U16List<'a> {
    type Item = u16;
    type IntoIter = U16Iter<'a>;

    fn into_iter(self) -> U16Iter<'a> {
        self.iter()
    }
}

/// Iterator over a [`U16List`].
#[derive(Debug, Clone)]
pub struct U16Iter<'a> {
    rest: &'a [u8],
}

impl Iterator for U16Iter<'_> {
    type Item = u16;

    fn next(&mut self) -> Option<u16> {
        let (value, rest) = self.rest.split_first_chunk::<2>()?;
        self.rest = rest;
        Some(u16::from_be_bytes(*value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.rest.len() / 2, Some(self.rest.len() / 2))
    }
}

impl ExactSizeIterator for U16Iter<'_> {}

/// The ALPN `ProtocolNameList`: protocol names such as `h2` and `http/1.1`, as raw bytes.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct ProtocolNames<'a> {
    bytes: &'a [u8],
}

impl<'a> ProtocolNames<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }

    /// The protocol names in the client's order of preference.
    pub fn iter(&self) -> ProtocolNameIter<'a> {
        ProtocolNameIter { reader: Reader::new(self.bytes) }
    }

    /// Whether the client offered `protocol`, for example `b"h2"`.
    pub fn contains(&self, protocol: &[u8]) -> bool {
        self.iter().any(|p| p == protocol)
    }
}

impl fmt::Debug for ProtocolNames<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter().map(String::from_utf8_lossy)).finish()
    }
}

impl<'a> IntoIterator for ProtocolNames<'a> {
    type Item = &'a [u8];
    type IntoIter = ProtocolNameIter<'a>;

    fn into_iter(self) -> ProtocolNameIter<'a> {
        self.iter()
    }
}

/// Iterator over [`ProtocolNames`].
#[derive(Debug, Clone)]
pub struct ProtocolNameIter<'a> {
    reader: Reader<'a>,
}

impl<'a> Iterator for ProtocolNameIter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let name = self.reader.vec_u8(Field::ProtocolName, 1, 255);
        self.reader.fuse(name)
    }
}

/// One offered TLS 1.3 pre-shared key (RFC 8446 §4.2.11): a session ticket or an external PSK label.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PskIdentity<'a> {
    /// The identity: for resumption, the ticket the server issued, which the gateway looks up.
    pub identity: &'a [u8],
    /// The ticket's age in milliseconds plus the server's `ticket_age_add`, modulo 2^32.
    pub obfuscated_ticket_age: u32,
}

impl fmt::Debug for PskIdentity<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PskIdentity")
            .field("identity", &HexBytes(self.identity))
            .field("obfuscated_ticket_age", &self.obfuscated_ticket_age)
            .finish()
    }
}

/// The `identities` of a `pre_shared_key` extension. The binders were checked for shape and count
/// but are not exposed: verifying them needs the key, which is rustls's job.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct PskIdentities<'a> {
    bytes: &'a [u8],
}

impl<'a> PskIdentities<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }

    /// The identities in the client's order; the server picks one by index.
    pub fn iter(&self) -> PskIdentityIter<'a> {
        PskIdentityIter { reader: Reader::new(self.bytes) }
    }

    /// Number of identities.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// Whether there are none (never the case for a list `parse` accepted).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

impl fmt::Debug for PskIdentities<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<'a> IntoIterator for PskIdentities<'a> {
    type Item = PskIdentity<'a>;
    type IntoIter = PskIdentityIter<'a>;

    fn into_iter(self) -> PskIdentityIter<'a> {
        self.iter()
    }
}

/// Iterator over [`PskIdentities`].
#[derive(Debug, Clone)]
pub struct PskIdentityIter<'a> {
    reader: Reader<'a>,
}

impl<'a> Iterator for PskIdentityIter<'a> {
    type Item = PskIdentity<'a>;

    fn next(&mut self) -> Option<PskIdentity<'a>> {
        let mut reader = self.reader;
        let entry = reader.vec_u16(Field::PskIdentity, 1, 0xffff).and_then(|identity| {
            let obfuscated_ticket_age = reader.u32(Field::PskIdentity)?;
            Ok(PskIdentity { identity, obfuscated_ticket_age })
        });
        self.reader = reader;
        self.reader.fuse(entry)
    }
}

/// One extension as it appeared on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extension<'a> {
    /// The extension type (see [`crate::extension_type`]).
    pub ext_type: u16,
    /// The `extension_data`, without its length prefix.
    pub data: &'a [u8],
}

/// All extensions of the ClientHello, in the client's order, each type at most once.
///
/// For what the parsed fields do not cover: JA3/JA4 fingerprints, `supported_groups`, `key_share`.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct Extensions<'a> {
    bytes: &'a [u8],
}

impl<'a> Extensions<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }

    /// The extensions in wire order.
    pub fn iter(&self) -> ExtensionIter<'a> {
        ExtensionIter { reader: Reader::new(self.bytes) }
    }

    /// The extension types in wire order.
    pub fn types(&self) -> impl Iterator<Item = u16> + 'a {
        self.iter().map(|e| e.ext_type)
    }

    /// The data of the extension of type `ext_type`, if the client sent it.
    pub fn get(&self, ext_type: u16) -> Option<&'a [u8]> {
        self.iter().find(|e| e.ext_type == ext_type).map(|e| e.data)
    }

    /// The extensions block as it was on the wire, without its length prefix.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

impl fmt::Debug for Extensions<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.types().map(Hex)).finish()
    }
}

impl<'a> IntoIterator for Extensions<'a> {
    type Item = Extension<'a>;
    type IntoIter = ExtensionIter<'a>;

    fn into_iter(self) -> ExtensionIter<'a> {
        self.iter()
    }
}

/// Iterator over [`Extensions`].
#[derive(Debug, Clone)]
pub struct ExtensionIter<'a> {
    reader: Reader<'a>,
}

impl<'a> Iterator for ExtensionIter<'a> {
    type Item = Extension<'a>;

    fn next(&mut self) -> Option<Extension<'a>> {
        let mut reader = self.reader;
        let entry = reader.u16(Field::ExtensionHeader).and_then(|ext_type| {
            let data = reader.vec_u16(Field::ExtensionHeader, 0, 0xffff)?;
            Ok(Extension { ext_type, data })
        });
        self.reader = reader;
        self.reader.fuse(entry)
    }
}

/// Code points print as `0x1301`, the way the registries list them.
pub(crate) struct Hex(pub(crate) u16);

impl fmt::Debug for Hex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#06x}", self.0)
    }
}

/// Opaque bytes (random, session ids, tickets) print as one hex string rather than a column of decimals.
pub(crate) struct HexBytes<'a>(pub(crate) &'a [u8]);

impl fmt::Debug for HexBytes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("0x")?;
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}
