//! The one error type of the crate: why a byte stream is not an acceptable ClientHello.

use std::fmt;

/// A structure of the ClientHello wire format, named as in RFC 8446 and the extension RFCs.
///
/// Used by [`ParseError`] to say where a length or a byte count went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Field {
    /// The 4-byte handshake header: `msg_type` and the 24-bit `length`.
    HandshakeHeader,
    /// The handshake message body as a whole.
    HandshakeBody,
    /// `legacy_version`.
    LegacyVersion,
    /// `random`.
    Random,
    /// `legacy_session_id`.
    SessionId,
    /// `cipher_suites`.
    CipherSuites,
    /// `legacy_compression_methods`.
    CompressionMethods,
    /// The `extensions` vector as a whole.
    Extensions,
    /// The type and length header of one extension.
    ExtensionHeader,
    /// `server_name` (type 0): the `ServerNameList`.
    ServerNameList,
    /// `server_name`: one `HostName` or name of another type.
    ServerName,
    /// `signature_algorithms` (type 13).
    SignatureAlgorithms,
    /// `application_layer_protocol_negotiation` (type 16): the `ProtocolNameList`.
    ProtocolNameList,
    /// `application_layer_protocol_negotiation`: one `ProtocolName`.
    ProtocolName,
    /// `session_ticket` (type 35).
    SessionTicket,
    /// `pre_shared_key` (type 41): the `identities` vector.
    PskIdentities,
    /// `pre_shared_key`: one `PskIdentity`.
    PskIdentity,
    /// `pre_shared_key`: the `binders` vector.
    PskBinders,
    /// `pre_shared_key`: one `PskBinderEntry`.
    PskBinder,
    /// `early_data` (type 42).
    EarlyData,
    /// `supported_versions` (type 43).
    SupportedVersions,
    /// `psk_key_exchange_modes` (type 45).
    PskKeyExchangeModes,
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::HandshakeHeader => "handshake header",
            Self::HandshakeBody => "handshake body",
            Self::LegacyVersion => "legacy_version",
            Self::Random => "random",
            Self::SessionId => "legacy_session_id",
            Self::CipherSuites => "cipher_suites",
            Self::CompressionMethods => "legacy_compression_methods",
            Self::Extensions => "extensions",
            Self::ExtensionHeader => "extension header",
            Self::ServerNameList => "server_name list",
            Self::ServerName => "server_name entry",
            Self::SignatureAlgorithms => "signature_algorithms",
            Self::ProtocolNameList => "ALPN protocol_name_list",
            Self::ProtocolName => "ALPN protocol name",
            Self::SessionTicket => "session_ticket",
            Self::PskIdentities => "pre_shared_key identities",
            Self::PskIdentity => "pre_shared_key identity",
            Self::PskBinders => "pre_shared_key binders",
            Self::PskBinder => "pre_shared_key binder",
            Self::EarlyData => "early_data",
            Self::SupportedVersions => "supported_versions",
            Self::PskKeyExchangeModes => "psk_key_exchange_modes",
        })
    }
}

/// Why the bytes are not an acceptable ClientHello.
///
/// Every variant is a protocol violation by the peer (or a limit of ours it exceeded): the gateway
/// closes the connection, normally after a `decode_error` alert. [`ParseError::RecordLimit`] is the
/// only variant a well-behaved client could trigger, by sending a hello bigger than the gateway allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseError {
    /// A length field, or the fixed size of `field`, needs more bytes than its enclosing structure holds.
    Overrun {
        /// The structure that was cut short.
        field: Field,
    },
    /// `field` ended before its enclosing structure did.
    TrailingBytes {
        /// The structure followed by unexpected bytes.
        field: Field,
    },
    /// A vector's length is outside the range its RFC allows (including odd lengths of `u16` lists).
    BadLength {
        /// The vector.
        field: Field,
        /// The length found on the wire, in bytes.
        len: usize,
    },
    /// The handshake message is not a ClientHello (`msg_type` 1).
    NotClientHello {
        /// The `msg_type` found.
        msg_type: u8,
    },
    /// The bytes do not start with a TLS handshake record carrying a ClientHello ([`crate::Need::NotTls`]).
    NotTls,
    /// The records stop before the ClientHello does: call [`crate::record_need`] first.
    Incomplete,
    /// The ClientHello would occupy more bytes of records than the caller allows.
    RecordLimit {
        /// The caller's limit, in bytes of records including their headers.
        max: usize,
    },
    /// The ClientHello is spread over more than [`crate::MAX_RECORDS`] records.
    TooManyRecords,
    /// A record of the ClientHello carries no bytes (forbidden for handshake records, RFC 8446 §5.1).
    EmptyRecord,
    /// A record is longer than the 2^14 bytes a plaintext record may carry (RFC 8446 §5.1).
    RecordOverflow {
        /// The record length found.
        len: usize,
    },
    /// A record other than handshake arrived before the ClientHello was complete.
    UnexpectedContentType {
        /// The record's content type.
        content_type: u8,
    },
    /// A record after the first one has a `legacy_record_version` that is not `0x03XX`.
    BadRecordVersion {
        /// The version found.
        version: u16,
    },
    /// The last record of the ClientHello carries bytes after it.
    ///
    /// Nothing may follow a ClientHello in its flight: the client waits for the server's reply,
    /// or switches to early-data keys, which must start on a record boundary (RFC 8446 §5.1).
    DataAfterClientHello,
    /// `legacy_compression_methods` does not offer `null` (0).
    NoNullCompression,
    /// An extension type appears twice (RFC 8446 §4.2).
    DuplicateExtension {
        /// The repeated extension type.
        ext_type: u16,
    },
    /// `pre_shared_key` is not the last extension (RFC 8446 §4.2.11).
    PreSharedKeyNotLast,
    /// `pre_shared_key` carries a different number of identities and binders.
    PskBinderCountMismatch {
        /// Number of identities.
        identities: usize,
        /// Number of binders.
        binders: usize,
    },
    /// The `server_name` list holds two `host_name` entries (RFC 6066 §3).
    DuplicateHostName,
    /// The `host_name` is empty, longer than 255 bytes, or holds a byte that is not printable ASCII.
    InvalidHostName,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Overrun { field } => write!(f, "{field} overruns its enclosing structure"),
            Self::TrailingBytes { field } => write!(f, "unexpected bytes after {field}"),
            Self::BadLength { field, len } => write!(f, "{field} has invalid length {len}"),
            Self::NotClientHello { msg_type } => write!(f, "handshake message type {msg_type} is not ClientHello"),
            Self::NotTls => f.write_str("not a TLS handshake record carrying a ClientHello"),
            Self::Incomplete => f.write_str("records end before the ClientHello does"),
            Self::RecordLimit { max } => write!(f, "ClientHello records exceed the limit of {max} bytes"),
            Self::TooManyRecords => write!(f, "ClientHello spread over more than {} records", crate::MAX_RECORDS),
            Self::EmptyRecord => f.write_str("empty handshake record"),
            Self::RecordOverflow { len } => write!(f, "record length {len} exceeds 16384"),
            Self::UnexpectedContentType { content_type } => {
                write!(f, "record of content type {content_type} interleaved with the ClientHello")
            }
            Self::BadRecordVersion { version } => write!(f, "record version {version:#06x}"),
            Self::DataAfterClientHello => f.write_str("record carries data after the ClientHello"),
            Self::NoNullCompression => f.write_str("null compression not offered"),
            Self::DuplicateExtension { ext_type } => write!(f, "extension {ext_type} appears twice"),
            Self::PreSharedKeyNotLast => f.write_str("pre_shared_key is not the last extension"),
            Self::PskBinderCountMismatch { identities, binders } => {
                write!(f, "pre_shared_key has {identities} identities but {binders} binders")
            }
            Self::DuplicateHostName => f.write_str("server_name lists two host names"),
            Self::InvalidHostName => f.write_str("server_name host name is empty, too long or not printable ASCII"),
        }
    }
}

impl std::error::Error for ParseError {}
