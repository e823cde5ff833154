//! Extension stage of `parse`: checks the extensions block and decodes the extensions the gateway reads.

use crate::error::{Field, ParseError};
use crate::lists::{Extensions, ProtocolNames, PskIdentities, U16List};
use crate::reader::Reader;
use crate::server_name;

/// Extension type code points (IANA "TLS ExtensionType Values") that this crate decodes, and a few
/// others worth naming when reading [`Extensions`].
pub mod extension_type {
    /// `server_name` (RFC 6066).
    pub const SERVER_NAME: u16 = 0;
    /// `supported_groups` (RFC 8446), read it through [`crate::Extensions::get`].
    pub const SUPPORTED_GROUPS: u16 = 10;
    /// `signature_algorithms` (RFC 8446).
    pub const SIGNATURE_ALGORITHMS: u16 = 13;
    /// `application_layer_protocol_negotiation` (RFC 7301).
    pub const ALPN: u16 = 16;
    /// `session_ticket` (RFC 5077).
    pub const SESSION_TICKET: u16 = 35;
    /// `pre_shared_key` (RFC 8446).
    pub const PRE_SHARED_KEY: u16 = 41;
    /// `early_data` (RFC 8446).
    pub const EARLY_DATA: u16 = 42;
    /// `supported_versions` (RFC 8446).
    pub const SUPPORTED_VERSIONS: u16 = 43;
    /// `psk_key_exchange_modes` (RFC 8446).
    pub const PSK_KEY_EXCHANGE_MODES: u16 = 45;
    /// `key_share` (RFC 8446), read it through [`crate::Extensions::get`].
    pub const KEY_SHARE: u16 = 51;
    /// `encrypted_client_hello` (TLS Encrypted Client Hello). When present, `server_name` holds the public name of
    /// the ECH provider, not the host the client wants.
    pub const ENCRYPTED_CLIENT_HELLO: u16 = 0xfe0d;
}

use extension_type as ty;

/// The extensions `parse` decodes; anything else stays readable through [`Extensions`].
#[derive(Debug, Default)]
pub(crate) struct Decoded<'a> {
    pub(crate) server_name: Option<&'a str>,
    pub(crate) alpn: Option<ProtocolNames<'a>>,
    pub(crate) supported_versions: Option<U16List<'a>>,
    pub(crate) signature_schemes: Option<U16List<'a>>,
    pub(crate) session_ticket: Option<&'a [u8]>,
    pub(crate) psk_identities: Option<PskIdentities<'a>>,
    pub(crate) psk_modes: Option<&'a [u8]>,
    pub(crate) early_data: bool,
}

/// Extension types seen so far. A real hello carries a couple of dozen extensions: they are
/// compared in a small array, so parsing a hello zeroes no 8 KiB bitmap. Past [`Seen::FEW`] (only
/// a hostile hello has so many) a bitmap of every type takes over, so duplicate detection stays
/// linear however many extensions a hello packs into its 64 KiB.
struct Seen {
    few: [u16; Seen::FEW],
    count: usize,
    all: Option<Box<[u64; 1024]>>,
}

impl Default for Seen {
    fn default() -> Self {
        Seen { few: [0; Seen::FEW], count: 0, all: None }
    }
}

impl Seen {
    const FEW: usize = 64;

    /// Records `ext_type`; false when it was seen before.
    fn insert(&mut self, ext_type: u16) -> bool {
        // Every u16 has its bit: 1024 words of 64.
        let mark = |bits: &mut [u64; 1024], t: u16| {
            bits.get_mut(usize::from(t >> 6)).is_none_or(|word| {
                let bit = 1u64 << (t & 63);
                let new = *word & bit == 0;
                *word |= bit;
                new
            })
        };
        if let Some(bits) = &mut self.all {
            return mark(bits, ext_type);
        }
        if self.few.get(..self.count).is_some_and(|few| few.contains(&ext_type)) {
            return false;
        }
        if let Some(slot) = self.few.get_mut(self.count) {
            *slot = ext_type;
            self.count += 1;
            return true;
        }
        let mut bits = Box::new([0u64; 1024]);
        for &t in &self.few {
            mark(&mut bits, t);
        }
        let new = mark(&mut bits, ext_type);
        self.all = Some(bits);
        new
    }
}

/// Walks the extensions block (without its length prefix): each type at most once, `pre_shared_key`
/// last, every decoded extension well formed. Unknown extensions are only framed.
pub(crate) fn decode(block: &[u8]) -> Result<(Extensions<'_>, Decoded<'_>), ParseError> {
    let mut seen = Seen::default();
    let mut decoded = Decoded::default();
    let mut psk_seen = false;
    let mut reader = Reader::new(block);
    while !reader.is_empty() {
        let ext_type = reader.u16(Field::ExtensionHeader)?;
        let data = reader.vec_u16(Field::ExtensionHeader, 0, 0xffff)?;
        if !seen.insert(ext_type) {
            return Err(ParseError::DuplicateExtension { ext_type });
        }
        if psk_seen {
            return Err(ParseError::PreSharedKeyNotLast);
        }
        match ext_type {
            ty::SERVER_NAME => decoded.server_name = server_name_list(data)?,
            ty::ALPN => decoded.alpn = Some(protocol_names(data)?),
            ty::SUPPORTED_VERSIONS => decoded.supported_versions = Some(supported_versions(data)?),
            ty::SIGNATURE_ALGORITHMS => decoded.signature_schemes = Some(signature_schemes(data)?),
            ty::SESSION_TICKET => decoded.session_ticket = Some(data),
            ty::PRE_SHARED_KEY => {
                decoded.psk_identities = Some(pre_shared_key(data)?);
                psk_seen = true;
            }
            ty::PSK_KEY_EXCHANGE_MODES => decoded.psk_modes = Some(psk_modes(data)?),
            ty::EARLY_DATA => {
                Reader::new(data).finish(Field::EarlyData)?;
                decoded.early_data = true;
            }
            _ => {}
        }
    }
    Ok((Extensions::new(block), decoded))
}

/// `ServerNameList` (RFC 6066 §3): returns the one `host_name`, if any.
///
/// Entries of other name types are skipped: RFC 6066 gives every name type a 16-bit length prefix
/// so that servers can do exactly that.
fn server_name_list(data: &[u8]) -> Result<Option<&str>, ParseError> {
    let mut outer = Reader::new(data);
    let list = outer.vec_u16(Field::ServerNameList, 1, 0xffff)?;
    outer.finish(Field::ServerNameList)?;
    let mut reader = Reader::new(list);
    let mut host = None;
    while !reader.is_empty() {
        let name_type = reader.u8(Field::ServerName)?;
        let name = reader.vec_u16(Field::ServerName, 0, 0xffff)?;
        if name_type != 0 {
            continue;
        }
        if host.is_some() {
            return Err(ParseError::DuplicateHostName);
        }
        host = Some(server_name::host_name(name)?);
    }
    Ok(host)
}

/// `ProtocolNameList` (RFC 7301 §3.1): at least one name, each 1 to 255 bytes.
fn protocol_names(data: &[u8]) -> Result<ProtocolNames<'_>, ParseError> {
    let mut outer = Reader::new(data);
    let list = outer.vec_u16(Field::ProtocolNameList, 2, 0xffff)?;
    outer.finish(Field::ProtocolNameList)?;
    let mut reader = Reader::new(list);
    while !reader.is_empty() {
        reader.vec_u8(Field::ProtocolName, 1, 255)?;
    }
    Ok(ProtocolNames::new(list))
}

/// `supported_versions` in a ClientHello (RFC 8446 §4.2.1): 1 to 127 versions.
fn supported_versions(data: &[u8]) -> Result<U16List<'_>, ParseError> {
    let mut reader = Reader::new(data);
    let list = even(Field::SupportedVersions, reader.vec_u8(Field::SupportedVersions, 2, 254)?)?;
    reader.finish(Field::SupportedVersions)?;
    Ok(list)
}

/// `signature_algorithms` (RFC 8446 §4.2.3): at least one scheme.
fn signature_schemes(data: &[u8]) -> Result<U16List<'_>, ParseError> {
    let mut reader = Reader::new(data);
    let list = even(Field::SignatureAlgorithms, reader.vec_u16(Field::SignatureAlgorithms, 2, 0xfffe)?)?;
    reader.finish(Field::SignatureAlgorithms)?;
    Ok(list)
}

/// `OfferedPsks` (RFC 8446 §4.2.11): identities and binders, as many of one as of the other.
fn pre_shared_key(data: &[u8]) -> Result<PskIdentities<'_>, ParseError> {
    let mut outer = Reader::new(data);
    let identities = outer.vec_u16(Field::PskIdentities, 7, 0xffff)?;
    let binders = outer.vec_u16(Field::PskBinders, 33, 0xffff)?;
    outer.finish(Field::PskBinders)?;

    let mut identity_count = 0usize;
    let mut reader = Reader::new(identities);
    while !reader.is_empty() {
        reader.vec_u16(Field::PskIdentity, 1, 0xffff)?;
        reader.u32(Field::PskIdentity)?;
        identity_count += 1;
    }
    let mut binder_count = 0usize;
    let mut reader = Reader::new(binders);
    while !reader.is_empty() {
        reader.vec_u8(Field::PskBinder, 32, 255)?;
        binder_count += 1;
    }
    if identity_count != binder_count {
        return Err(ParseError::PskBinderCountMismatch { identities: identity_count, binders: binder_count });
    }
    Ok(PskIdentities::new(identities))
}

/// `psk_key_exchange_modes` (RFC 8446 §4.2.9): 1 to 255 modes.
fn psk_modes(data: &[u8]) -> Result<&[u8], ParseError> {
    let mut reader = Reader::new(data);
    let modes = reader.vec_u8(Field::PskKeyExchangeModes, 1, 255)?;
    reader.finish(Field::PskKeyExchangeModes)?;
    Ok(modes)
}

fn even(field: Field, list: &[u8]) -> Result<U16List<'_>, ParseError> {
    if list.len().is_multiple_of(2) {
        Ok(U16List::new(list))
    } else {
        Err(ParseError::BadLength { field, len: list.len() })
    }
}

#[cfg(test)]
mod tests {
    use super::Seen;

    #[test]
    fn seen_finds_every_repeat_before_and_after_the_bitmap_takes_over() {
        for total in [1usize, Seen::FEW - 1, Seen::FEW, Seen::FEW + 1, 5_000] {
            let mut seen = Seen::default();
            // Spread over the whole range, GREASE-like values included.
            let types: Vec<u16> = (0..total).map(|i| (i as u16).wrapping_mul(0x0a0b)).collect();
            for &t in &types {
                assert!(seen.insert(t), "{total}: {t} is new");
            }
            for &t in &types {
                assert!(!seen.insert(t), "{total}: {t} was seen");
            }
            assert_eq!(seen.all.is_some(), total > Seen::FEW, "{total}");
        }
    }
}
