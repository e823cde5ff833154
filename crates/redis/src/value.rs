//! A reply from Redis, as data, and the conversions the typed commands use to check its shape.

use crate::error::{Error, Result};
use bytes::Bytes;

/// One reply (error replies are [`Error::Server`] instead). RESP3's richer types arrive flattened:
/// maps and sets as arrays, doubles and big numbers as their decimal text, booleans as 0 and 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A null bulk string or null array (`$-1`, `*-1`): a missing key, a failed `SET NX`.
    Nil,
    /// An integer reply (`:42`).
    Int(i64),
    /// A bulk string (`$3\r\nfoo`): binary-safe.
    Bulk(Bytes),
    /// A simple status string (`+OK`).
    Simple(String),
    /// An array, possibly nested.
    Array(Vec<Value>),
}

impl Value {
    /// Whether this is [`Value::Nil`].
    pub fn is_nil(&self) -> bool {
        matches!(self, Value::Nil)
    }

    /// The bytes of a bulk or simple string.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bulk(b) => Some(b),
            Value::Simple(s) => Some(s.as_bytes()),
            _ => None,
        }
    }

    /// The number in an integer reply, or in a string reply that holds one (`GET` of a counter).
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Bulk(_) | Value::Simple(_) => std::str::from_utf8(self.as_bytes()?).ok()?.parse().ok(),
            _ => None,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Value::Nil => "nil",
            Value::Int(_) => "integer",
            Value::Bulk(_) => "bulk string",
            Value::Simple(_) => "simple string",
            Value::Array(_) => "array",
        }
    }
}

impl Value {
    /// A reply from redis-rs; an error nested in it fails the whole reply.
    pub(crate) fn from_redis(v: redis::Value) -> Result<Value> {
        use redis::Value as R;
        let all = |items: Vec<R>| items.into_iter().map(Value::from_redis).collect::<Result<Vec<_>>>();
        Ok(match v {
            R::Nil => Value::Nil,
            R::Int(i) => Value::Int(i),
            R::BulkString(b) => Value::Bulk(Bytes::from(b)),
            R::Array(items) | R::Set(items) | R::Push { data: items, .. } => Value::Array(all(items)?),
            R::SimpleString(s) => Value::Simple(s),
            R::Okay => Value::Simple("OK".into()),
            R::Map(pairs) => Value::Array(all(pairs.into_iter().flat_map(|(k, v)| [k, v]).collect())?),
            R::Attribute { data, .. } => Value::from_redis(*data)?,
            R::Double(d) => Value::Bulk(Bytes::from(d.to_string())),
            R::Boolean(b) => Value::Int(i64::from(b)),
            R::VerbatimString { text, .. } => Value::Bulk(Bytes::from(text)),
            R::BigNumber(n) => Value::Bulk(Bytes::from(n)),
            R::ServerError(e) => {
                let msg = match e.details() {
                    Some(detail) => format!("{} {detail}", e.code()),
                    None => e.code().to_string(),
                };
                return Err(Error::Server(msg));
            }
            other => return Err(Error::Protocol(format!("unexpected reply {other:?}"))),
        })
    }
}

/// The error for a reply whose shape does not fit the command.
fn unexpected(command: &str, wanted: &str, got: &Value) -> Error {
    Error::Protocol(format!("{command}: expected {wanted}, got {}", got.kind()))
}

/// `+OK` (or any status reply).
pub(crate) fn expect_ok(command: &str, v: Value) -> Result<()> {
    match v {
        Value::Simple(_) => Ok(()),
        other => Err(unexpected(command, "status reply", &other)),
    }
}

/// An integer reply.
pub(crate) fn expect_int(command: &str, v: Value) -> Result<i64> {
    match v {
        Value::Int(i) => Ok(i),
        other => Err(unexpected(command, "integer", &other)),
    }
}

/// A non-negative integer reply (a count).
pub(crate) fn expect_count(command: &str, v: Value) -> Result<u64> {
    let i = expect_int(command, v)?;
    u64::try_from(i).map_err(|_| Error::Protocol(format!("{command}: negative count {i}")))
}

/// A bulk string or nil.
pub(crate) fn expect_bulk_opt(command: &str, v: Value) -> Result<Option<Bytes>> {
    match v {
        Value::Nil => Ok(None),
        Value::Bulk(b) => Ok(Some(b)),
        Value::Simple(s) => Ok(Some(Bytes::from(s))),
        other => Err(unexpected(command, "bulk string or nil", &other)),
    }
}

/// An array of bulk strings.
pub(crate) fn expect_bulks(command: &str, v: Value) -> Result<Vec<Bytes>> {
    match v {
        Value::Array(items) => items
            .into_iter()
            .map(|item| expect_bulk_opt(command, item)?.ok_or_else(|| unexpected(command, "bulk string", &Value::Nil)))
            .collect(),
        other => Err(unexpected(command, "array", &other)),
    }
}
