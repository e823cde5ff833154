//! Configuration stage: why one value of the file does not read as what its field holds (a
//! duration, a size, a network, a hash key, a host pattern, an app key). Validation reports it
//! beside the value's path, as a [`crate::ConfigError`].

use std::fmt;

/// A value that does not parse. The text shown is the operator's own, from their file.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ValueError {
    /// Not a number followed by a unit.
    InvalidDuration {
        /// The value as written.
        text: String,
    },
    /// A unit other than `ms`, `s`, `m` or `h`.
    DurationUnit {
        /// The unit as written.
        unit: String,
        /// The value as written.
        text: String,
    },
    /// More milliseconds than fit in 64 bits.
    DurationTooLarge {
        /// The value as written.
        text: String,
    },
    /// Not a number with an optional `k`, `m` or `g`.
    InvalidSize {
        /// The value as written.
        text: String,
    },
    /// A suffix other than `k`, `m` or `g`.
    SizeUnit {
        /// The suffix as written (lower-cased).
        unit: String,
        /// The value as written.
        text: String,
    },
    /// More bytes than fit in 64 bits.
    SizeTooLarge {
        /// The value as written.
        text: String,
    },
    /// Not an address, or an address with a prefix length too long for it.
    InvalidNetwork {
        /// The value as written.
        text: String,
    },
    /// None of `client_ip`, `uri`, `header:NAME`, `cookie:NAME`.
    InvalidHashKey {
        /// The value as written.
        text: String,
    },
    /// Not `*`, `*.suffix` or a host name.
    NotAHostPattern {
        /// The pattern, lower-cased.
        host: String,
    },
    /// An app key of no characters or more than 512.
    AppKeyLength,
    /// An app key with a character that would need escaping in a header, query or path.
    AppKeyCharacters,
}

impl fmt::Display for ValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueError::InvalidDuration { text } => {
                write!(f, "invalid duration `{text}`: expected e.g. 500ms, 5s, 2m, 1h")
            }
            ValueError::DurationUnit { unit, text } => {
                write!(f, "invalid duration unit `{unit}` in `{text}`: use ms, s, m, h or d")
            }
            ValueError::DurationTooLarge { text } => write!(f, "duration `{text}` is too large"),
            ValueError::InvalidSize { text } => write!(f, "invalid size `{text}`: expected e.g. 512, 16k, 10m, 1g"),
            ValueError::SizeUnit { unit, text } => write!(f, "invalid size unit `{unit}` in `{text}`: use k, m or g"),
            ValueError::SizeTooLarge { text } => write!(f, "size `{text}` is too large"),
            ValueError::InvalidNetwork { text } => {
                write!(f, "invalid network `{text}`: expected e.g. 10.0.0.0/8, 2001:db8::/32 or 192.0.2.7")
            }
            ValueError::InvalidHashKey { text } => {
                write!(f, "invalid hash_key `{text}`: use client_ip, uri, header:NAME or cookie:NAME")
            }
            ValueError::NotAHostPattern { host } => write!(f, "`{host}` is not a host name, `*.` wildcard or `*`"),
            ValueError::AppKeyLength => f.write_str("from 1 to 512 characters"),
            ValueError::AppKeyCharacters => f.write_str("letters, digits and `-._~+=!$'()*,;:@` only"),
        }
    }
}

impl std::error::Error for ValueError {}
