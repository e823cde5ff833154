//! Connect stage, shared by the command and subscriber connections: TCP connect, `AUTH` and
//! `SELECT` within the connect timeout, buffered reading of replies, and the reconnect backoff.

use crate::error::{Error, Result};
use crate::options::ClientOptions;
use crate::resp::{encode_command, Decimal, Parser};
use crate::value::Value;
use bytes::BytesMut;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Free space below which the read buffer grows before the next read.
const READ_HEADROOM: usize = 4 * 1024;

/// An open, authenticated connection and its read side state.
pub(crate) struct Conn {
    pub(crate) stream: TcpStream,
    pub(crate) rbuf: BytesMut,
    pub(crate) parser: Parser,
}

impl Conn {
    /// Connects to `opts.addr`, then sends `AUTH` and `SELECT` as configured and a `PING`, and
    /// checks their replies, all within `opts.connect_timeout`.
    pub(crate) async fn open(opts: &ClientOptions) -> Result<Conn> {
        let handshake = async {
            let stream = TcpStream::connect(opts.addr.as_str()).await?;
            // Commands are batched by the writer already; Nagle would only add latency.
            stream.set_nodelay(true)?;
            let mut conn = Conn { stream, rbuf: BytesMut::with_capacity(16 * 1024), parser: Parser::new(opts.limits) };
            let mut out = BytesMut::new();
            let mut replies = 0;
            if let Some(password) = &opts.password {
                match &opts.username {
                    Some(user) => encode_command(&mut out, &[b"AUTH".as_slice(), user.as_bytes(), password.as_bytes()]),
                    None => encode_command(&mut out, &[b"AUTH".as_slice(), password.as_bytes()]),
                }
                replies += 1;
            }
            if opts.db != 0 {
                encode_command(&mut out, &[b"SELECT".as_slice(), Decimal::from(u64::from(opts.db)).as_ref()]);
                replies += 1;
            }
            // A TCP connect alone proves little (a stopped server's kernel still accepts): count
            // the connection as up only once Redis has answered.
            encode_command(&mut out, &[b"PING"]);
            replies += 1;
            conn.stream.write_all(&out).await?;
            for _ in 0..replies {
                conn.read_value().await?;
            }
            Ok(conn)
        };
        tokio::time::timeout(opts.connect_timeout, handshake).await.map_err(|_| Error::Timeout)?
    }

    /// Reads the next reply; an error reply is `Err(Error::Server)`. Cancel-safe: bytes read
    /// and partly parsed replies stay in `self`.
    pub(crate) async fn read_value(&mut self) -> Result<Value> {
        loop {
            if let Some(v) = self.parser.parse(&mut self.rbuf)? {
                return Ok(v);
            }
            reserve_read_space(&mut self.rbuf);
            if self.stream.read_buf(&mut self.rbuf).await? == 0 {
                return Err(Error::Disconnected);
            }
        }
    }
}

/// Makes room for a large read, so `read_buf` never reads a few bytes at a time.
pub(crate) fn reserve_read_space(rbuf: &mut BytesMut) {
    if rbuf.capacity() - rbuf.len() < READ_HEADROOM {
        rbuf.reserve(16 * 1024);
    }
}

/// Exponential reconnect delays with jitter, so many clients do not reconnect in lockstep.
#[derive(Debug)]
pub(crate) struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub(crate) fn new(opts: &ClientOptions) -> Self {
        let min = opts.reconnect_min.max(Duration::from_millis(1));
        Backoff { min, max: opts.reconnect_max.max(min), next: min }
    }

    /// After a successful connect: the next failure waits the minimum again.
    pub(crate) fn reset(&mut self) {
        self.next = self.min;
    }

    /// The delay before the next attempt: between half and all of the current step, which then
    /// doubles up to the maximum.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let step = self.next;
        self.next = (step * 2).min(self.max);
        let half = step / 2;
        let jitter_ns = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX).max(1);
        half + Duration::from_nanos(random_u64() % jitter_ns)
    }
}

/// A random number from the standard library's per-process hash keys (no extra dependency).
fn random_u64() -> u64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(0x5eed);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_maximum_and_resets() {
        let opts = ClientOptions {
            reconnect_min: Duration::from_millis(100),
            reconnect_max: Duration::from_millis(350),
            ..ClientOptions::default()
        };
        let mut b = Backoff::new(&opts);
        let steps: Vec<Duration> = (0..5).map(|_| b.next_delay()).collect();
        let bounds = [100, 200, 350, 350, 350];
        for (got, max) in steps.iter().zip(bounds) {
            let max = Duration::from_millis(max);
            assert!(*got >= max / 2 && *got <= max, "{got:?} not in [{:?}, {max:?}]", max / 2);
        }
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(100));
    }
}
