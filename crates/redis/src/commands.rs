//! Typed commands: each builds its arguments and checks the shape of the reply.

use crate::client::Client;
use crate::error::{Error, Result};

use crate::value::{expect_bulk_opt, expect_bulks, expect_count, expect_int, expect_ok, Value};
use bytes::Bytes;

/// `name` followed by `first` and every element of `rest`.
fn with_list<'a, K: AsRef<[u8]>>(name: &'a [u8], first: &'a [u8], rest: &'a [K]) -> Vec<&'a [u8]> {
    let mut args = Vec::with_capacity(rest.len() + 2);
    args.push(name);
    args.push(first);
    args.extend(rest.iter().map(AsRef::as_ref));
    args
}

impl Client {
    /// `PING`: a round trip to Redis.
    pub async fn ping(&self) -> Result<()> {
        expect_ok("PING", self.request(&[b"PING"]).await?)
    }

    /// `GET key`: the value, or `None` if the key does not exist.
    pub async fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        expect_bulk_opt("GET", self.request(&[b"GET", key.as_ref()]).await?)
    }

    /// `SET key value`, without expiry.
    pub async fn set(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let args: [&[u8]; 3] = [b"SET", key.as_ref(), value.as_ref()];
        expect_ok("SET", self.request(&args).await?)
    }

    /// `SET key value PX ttl_ms`: set with an expiry in milliseconds (must be above 0).
    pub async fn set_px(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>, ttl_ms: u64) -> Result<()> {
        let ttl = ttl_ms.to_string();
        let args: [&[u8]; 5] = [b"SET", key.as_ref(), value.as_ref(), b"PX", ttl.as_bytes()];
        expect_ok("SET", self.request(&args).await?)
    }

    /// `SET key value NX PX ttl_ms`: set only if the key does not exist (a lock, a dedup
    /// marker); `true` if it was set.
    pub async fn set_nx_px(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>, ttl_ms: u64) -> Result<bool> {
        let ttl = ttl_ms.to_string();
        let args: [&[u8]; 6] = [b"SET", key.as_ref(), value.as_ref(), b"NX", b"PX", ttl.as_bytes()];
        match self.request(&args).await? {
            Value::Nil => Ok(false),
            other => expect_ok("SET", other).map(|()| true),
        }
    }

    /// `GETDEL key`: the value, deleting the key; `None` if it did not exist.
    pub async fn getdel(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        expect_bulk_opt("GETDEL", self.request(&[b"GETDEL", key.as_ref()]).await?)
    }

    /// `DEL key...`: how many of the keys existed.
    pub async fn del<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<u64> {
        let mut args: Vec<&[u8]> = vec![b"DEL"];
        args.extend(keys.iter().map(AsRef::as_ref));
        expect_count("DEL", self.request(&args).await?)
    }

    /// `EXISTS key...`: how many of the keys exist (a key named twice counts twice).
    pub async fn exists<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<u64> {
        let mut args: Vec<&[u8]> = vec![b"EXISTS"];
        args.extend(keys.iter().map(AsRef::as_ref));
        expect_count("EXISTS", self.request(&args).await?)
    }

    /// `EXPIRE key seconds`: `true` if the key exists and the expiry was set.
    pub async fn expire(&self, key: impl AsRef<[u8]>, seconds: u64) -> Result<bool> {
        let secs = seconds.to_string();
        let args: [&[u8]; 3] = [b"EXPIRE", key.as_ref(), secs.as_bytes()];
        Ok(expect_int("EXPIRE", self.request(&args).await?)? == 1)
    }

    /// `PEXPIRE key milliseconds`: `true` if the key exists and the expiry was set.
    pub async fn pexpire(&self, key: impl AsRef<[u8]>, ttl_ms: u64) -> Result<bool> {
        let ms = ttl_ms.to_string();
        let args: [&[u8]; 3] = [b"PEXPIRE", key.as_ref(), ms.as_bytes()];
        Ok(expect_int("PEXPIRE", self.request(&args).await?)? == 1)
    }

    /// `INCR key`: the value after incrementing (a missing key counts as 0).
    pub async fn incr(&self, key: impl AsRef<[u8]>) -> Result<i64> {
        expect_int("INCR", self.request(&[b"INCR", key.as_ref()]).await?)
    }

    /// `HGET key field`: the field's value, or `None`.
    pub async fn hget(&self, key: impl AsRef<[u8]>, field: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        let args: [&[u8]; 3] = [b"HGET", key.as_ref(), field.as_ref()];
        expect_bulk_opt("HGET", self.request(&args).await?)
    }

    /// `HSET key field value [field value ...]`: how many fields were added (not updated).
    pub async fn hset<F: AsRef<[u8]>, V: AsRef<[u8]>>(&self, key: impl AsRef<[u8]>, fields: &[(F, V)]) -> Result<u64> {
        let mut args: Vec<&[u8]> = Vec::with_capacity(2 + 2 * fields.len());
        args.push(b"HSET");
        args.push(key.as_ref());
        for (field, value) in fields {
            args.push(field.as_ref());
            args.push(value.as_ref());
        }
        expect_count("HSET", self.request(&args).await?)
    }

    /// `HGETALL key`: every field and value, in Redis's order (empty if the key is missing).
    pub async fn hgetall(&self, key: impl AsRef<[u8]>) -> Result<Vec<(Bytes, Bytes)>> {
        let flat = expect_bulks("HGETALL", self.request(&[b"HGETALL", key.as_ref()]).await?)?;
        if flat.len() % 2 != 0 {
            return Err(Error::Protocol("HGETALL: odd number of elements".into()));
        }
        let mut items = flat.into_iter();
        let mut pairs = Vec::with_capacity(items.len() / 2);
        while let (Some(field), Some(value)) = (items.next(), items.next()) {
            pairs.push((field, value));
        }
        Ok(pairs)
    }

    /// `HDEL key field...`: how many fields were removed.
    pub async fn hdel<F: AsRef<[u8]>>(&self, key: impl AsRef<[u8]>, fields: &[F]) -> Result<u64> {
        expect_count("HDEL", self.request(&with_list(b"HDEL", key.as_ref(), fields)).await?)
    }

    /// `SADD key member...`: how many members were added.
    pub async fn sadd<M: AsRef<[u8]>>(&self, key: impl AsRef<[u8]>, members: &[M]) -> Result<u64> {
        expect_count("SADD", self.request(&with_list(b"SADD", key.as_ref(), members)).await?)
    }

    /// `SREM key member...`: how many members were removed.
    pub async fn srem<M: AsRef<[u8]>>(&self, key: impl AsRef<[u8]>, members: &[M]) -> Result<u64> {
        expect_count("SREM", self.request(&with_list(b"SREM", key.as_ref(), members)).await?)
    }

    /// `SMEMBERS key`: every member, in no particular order.
    pub async fn smembers(&self, key: impl AsRef<[u8]>) -> Result<Vec<Bytes>> {
        expect_bulks("SMEMBERS", self.request(&[b"SMEMBERS", key.as_ref()]).await?)
    }

    /// `PUBLISH channel payload`: how many subscribers received it.
    pub async fn publish(&self, channel: impl AsRef<[u8]>, payload: impl AsRef<[u8]>) -> Result<u64> {
        let args: [&[u8]; 3] = [b"PUBLISH", channel.as_ref(), payload.as_ref()];
        expect_count("PUBLISH", self.request(&args).await?)
    }
}
