//! Human-friendly units used in the configuration: durations (`250ms`, `5s`, `2m`, `1h`, `30d`) and byte
//! sizes (`512`, `16k`, `10m`, `1g`).

use crate::error::ValueError;
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use std::fmt;

/// A duration written as an integer with a unit (`ms`, `s`, `m`, `h`, `d`); a bare integer means seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Duration(pub std::time::Duration);

impl Duration {
    /// A duration of `secs` seconds.
    pub const fn secs(secs: u64) -> Self {
        Duration(std::time::Duration::from_secs(secs))
    }
    /// A duration of `ms` milliseconds.
    pub const fn millis(ms: u64) -> Self {
        Duration(std::time::Duration::from_millis(ms))
    }
    /// Parses `250ms`, `5s`, `2m`, `1h`, `30d` or a bare number of seconds.
    pub fn parse(text: &str) -> Result<Self, ValueError> {
        let text = text.trim();
        let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
        let (digits, unit) = text.split_at(split);
        let value: u64 = digits.parse().map_err(|_| ValueError::InvalidDuration { text: text.into() })?;
        let ms = match unit.trim() {
            "ms" => Some(value),
            "" | "s" => value.checked_mul(1000),
            "m" => value.checked_mul(60_000),
            "h" => value.checked_mul(3_600_000),
            "d" => value.checked_mul(86_400_000),
            other => return Err(ValueError::DurationUnit { unit: other.into(), text: text.into() }),
        };
        ms.map(Self::millis).ok_or_else(|| ValueError::DurationTooLarge { text: text.into() })
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Duration;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a duration such as 500ms, 5s, 2m, 1h or 30d")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
                Ok(Duration(std::time::Duration::from_secs(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
                u64::try_from(v)
                    .map(|v| Duration(std::time::Duration::from_secs(v)))
                    .map_err(|_| E::custom("a duration cannot be negative"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
                Duration::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A size in bytes written as an integer with an optional `k`, `m` or `g` suffix (powers of 1024).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// Parses `512`, `16k`, `10m`, `1g` (case-insensitive, optional trailing `b`).
    pub fn parse(text: &str) -> Result<Self, ValueError> {
        let lower = text.trim().to_ascii_lowercase();
        let body = lower.strip_suffix('b').unwrap_or(&lower);
        let split = body.find(|c: char| !c.is_ascii_digit()).unwrap_or(body.len());
        let (digits, unit) = body.split_at(split);
        let value: u64 = digits.parse().map_err(|_| ValueError::InvalidSize { text: text.into() })?;
        let mult = match unit {
            "" => 1,
            "k" => 1 << 10,
            "m" => 1 << 20,
            "g" => 1 << 30,
            other => return Err(ValueError::SizeUnit { unit: other.into(), text: text.into() }),
        };
        value.checked_mul(mult).map(ByteSize).ok_or_else(|| ValueError::SizeTooLarge { text: text.into() })
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ByteSize;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a size such as 512, 16k, 10m or 1g")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ByteSize, E> {
                Ok(ByteSize(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ByteSize, E> {
                u64::try_from(v).map(ByteSize).map_err(|_| E::custom("a size cannot be negative"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteSize, E> {
                ByteSize::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(Duration::parse("250ms"), Ok(Duration::millis(250)));
        assert_eq!(Duration::parse("5"), Ok(Duration::secs(5)));
        assert_eq!(Duration::parse("2m"), Ok(Duration::secs(120)));
        assert_eq!(Duration::parse("1h"), Ok(Duration::secs(3600)));
        assert_eq!(Duration::parse("365d"), Ok(Duration::secs(365 * 86_400)));
        assert!(Duration::parse("1w").is_err());
        assert!(Duration::parse("5 parsecs").is_err());
        assert!(Duration::parse("").is_err());
        assert!(Duration::parse("99999999999999999999h").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(ByteSize::parse("512"), Ok(ByteSize(512)));
        assert_eq!(ByteSize::parse("16k"), Ok(ByteSize(16384)));
        assert_eq!(ByteSize::parse("10MB"), Ok(ByteSize(10 << 20)));
        assert!(ByteSize::parse("1t").is_err());
    }

    #[test]
    fn errors_quote_the_value_as_written() {
        let message = |r: Result<Duration, ValueError>| r.map_err(|e| e.to_string()).expect_err("invalid");
        assert_eq!(
            message(Duration::parse("5 parsecs")),
            "invalid duration unit `parsecs` in `5 parsecs`: use ms, s, m, h or d"
        );
        assert_eq!(message(Duration::parse("soon")), "invalid duration `soon`: expected e.g. 500ms, 5s, 2m, 1h");
        assert_eq!(
            ByteSize::parse("1t").map_err(|e| e.to_string()),
            Err("invalid size unit `t` in `1t`: use k, m or g".into())
        );
    }
}
