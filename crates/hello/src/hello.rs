//! Parse stage: decode one ClientHello handshake message into the fields the gateway routes and caches on.

use std::fmt;

use crate::error::{Field, ParseError};
use crate::extension;
use crate::lists::{Extensions, Hex, HexBytes, ProtocolNames, PskIdentities, U16List};
use crate::reader::Reader;

const HANDSHAKE_CLIENT_HELLO: u8 = 1;
const NULL_COMPRESSION: u8 = 0;
const TLS13: u16 = 0x0304;

/// A ClientHello, borrowed from the handshake message it was parsed from.
///
/// Lists are views over the message bytes, validated by [`parse`]; iterating them allocates nothing.
/// `Option` fields are `None` when the client did not send the extension.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct ClientHello<'a> {
    /// `legacy_version`: `0x0303` for TLS 1.2 and 1.3 clients (1.3 is offered in `supported_versions`).
    pub legacy_version: u16,
    /// `random`.
    pub random: &'a [u8; 32],
    /// `legacy_session_id`, 0 to 32 bytes: a TLS 1.2 session to resume, or a TLS 1.3
    /// middlebox-compatibility value that names nothing.
    pub session_id: &'a [u8],
    /// `cipher_suites`, at least one, in the client's order of preference.
    pub cipher_suites: U16List<'a>,
    /// `legacy_compression_methods`; always includes `null` (0).
    pub compression_methods: &'a [u8],
    /// The `host_name` of `server_name`: 1 to 255 printable ASCII bytes, exactly as sent (not
    /// lowercased, trailing dot kept). May be an IP literal, see [`crate::is_ip_literal`]. A name
    /// that is not printable ASCII or is too long fails the parse ([`ParseError::InvalidHostName`]).
    pub server_name: Option<&'a str>,
    /// `application_layer_protocol_negotiation` protocol names.
    pub alpn: Option<ProtocolNames<'a>>,
    /// `supported_versions`; absent for clients that only speak TLS 1.2 or older.
    pub supported_versions: Option<U16List<'a>>,
    /// `signature_algorithms`.
    pub signature_schemes: Option<U16List<'a>>,
    /// `session_ticket` (RFC 5077): `Some(&[])` when the client supports tickets but has none.
    pub session_ticket: Option<&'a [u8]>,
    /// Identities of `pre_shared_key` (TLS 1.3 resumption tickets or external PSKs).
    pub psk_identities: Option<PskIdentities<'a>>,
    /// `psk_key_exchange_modes`: 0 is `psk_ke`, 1 is `psk_dhe_ke`.
    pub psk_modes: Option<&'a [u8]>,
    /// Whether the client sent `early_data`, i.e. 0-RTT data follows the hello.
    pub early_data: bool,
    /// Every extension in wire order, including those decoded above.
    pub extensions: Extensions<'a>,
}

impl ClientHello<'_> {
    /// Whether the client offers TLS 1.3.
    pub fn offers_tls13(&self) -> bool {
        self.supported_versions.is_some_and(|v| v.contains(TLS13))
    }
}

impl fmt::Debug for ClientHello<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientHello")
            .field("legacy_version", &Hex(self.legacy_version))
            .field("random", &HexBytes(self.random))
            .field("session_id", &HexBytes(self.session_id))
            .field("cipher_suites", &self.cipher_suites)
            .field("compression_methods", &self.compression_methods)
            .field("server_name", &self.server_name)
            .field("alpn", &self.alpn)
            .field("supported_versions", &self.supported_versions)
            .field("signature_schemes", &self.signature_schemes)
            .field("session_ticket", &self.session_ticket.map(HexBytes))
            .field("psk_identities", &self.psk_identities)
            .field("psk_modes", &self.psk_modes)
            .field("early_data", &self.early_data)
            .field("extensions", &self.extensions)
            .finish()
    }
}

/// Parses a ClientHello handshake message: the 4-byte handshake header and its body, as returned by
/// [`crate::reassemble`]. Borrows from `message` and allocates nothing.
///
/// # Errors
///
/// Any departure from the wire format: a length that overruns its enclosing structure, a vector
/// length outside its RFC range, bytes after the message or inside a structure, a repeated
/// extension type, `pre_shared_key` not last or with mismatched binders, no `null` compression,
/// or a `host_name` this crate does not accept.
pub fn parse(message: &[u8]) -> Result<ClientHello<'_>, ParseError> {
    let mut reader = Reader::new(message);
    let msg_type = reader.u8(Field::HandshakeHeader)?;
    if msg_type != HANDSHAKE_CLIENT_HELLO {
        return Err(ParseError::NotClientHello { msg_type });
    }
    let body_len = reader.u24(Field::HandshakeHeader)?;
    let body = reader.take(body_len, Field::HandshakeBody)?;
    reader.finish(Field::HandshakeBody)?;

    let mut reader = Reader::new(body);
    let legacy_version = reader.u16(Field::LegacyVersion)?;
    let random = reader.array::<32>(Field::Random)?;
    let session_id = reader.vec_u8(Field::SessionId, 0, 32)?;
    let cipher_suites = reader.vec_u16(Field::CipherSuites, 2, 0xfffe)?;
    if cipher_suites.len() % 2 != 0 {
        return Err(ParseError::BadLength { field: Field::CipherSuites, len: cipher_suites.len() });
    }
    let compression_methods = reader.vec_u8(Field::CompressionMethods, 1, 255)?;
    if !compression_methods.contains(&NULL_COMPRESSION) {
        return Err(ParseError::NoNullCompression);
    }
    // Hellos from before extensions existed simply end here (RFC 5246 §7.4.1.2).
    let block = if reader.is_empty() { &[][..] } else { reader.vec_u16(Field::Extensions, 0, 0xffff)? };
    reader.finish(Field::Extensions)?;
    let (extensions, decoded) = extension::decode(block)?;

    Ok(ClientHello {
        legacy_version,
        random,
        session_id,
        cipher_suites: U16List::new(cipher_suites),
        compression_methods,
        server_name: decoded.server_name,
        alpn: decoded.alpn,
        supported_versions: decoded.supported_versions,
        signature_schemes: decoded.signature_schemes,
        session_ticket: decoded.session_ticket,
        psk_identities: decoded.psk_identities,
        psk_modes: decoded.psk_modes,
        early_data: decoded.early_data,
        extensions,
    })
}
