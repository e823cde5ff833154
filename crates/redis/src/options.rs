//! Configuration: where Redis is, how to log in, and how long anything may take.

use crate::error::{Error, Result};
use crate::resp::Limits;
use std::fmt;
use std::time::Duration;

/// Settings for a [`Client`](crate::Client) or [`Subscription`](crate::Subscription), built once and
/// shared by the connection task.
#[derive(Clone)]
pub struct ClientOptions {
    /// `host:port` of the Redis server (`[v6addr]:port` for IPv6 literals).
    pub addr: String,
    /// ACL user for `AUTH user password`; only used together with `password`.
    pub username: Option<String>,
    /// Password, sent with `AUTH` on every (re)connect. Never printed.
    pub password: Option<String>,
    /// Database selected with `SELECT` on every (re)connect (0 sends nothing).
    pub db: u32,
    /// Longest time for TCP connect plus `AUTH`/`SELECT` (and the initial `SUBSCRIBE`).
    pub connect_timeout: Duration,
    /// Longest time a command may wait for its reply, queueing included. A connection whose oldest
    /// command has waited this long is considered dead and replaced.
    pub command_timeout: Duration,
    /// First delay before reconnecting after a failure; doubled after each failed attempt.
    pub reconnect_min: Duration,
    /// Longest delay between two reconnect attempts.
    pub reconnect_max: Duration,
    /// An idle connection sends a `PING` after this long, so a silently dropped connection is
    /// noticed before the next command needs it. Zero turns the check off.
    pub health_check_interval: Duration,
    /// Commands waiting to be written, and separately commands written and awaiting a reply, at
    /// most. Beyond that commands fail at once with [`Error::QueueFull`].
    pub max_pending: usize,
    /// Sizes a reply may declare before the connection is treated as broken.
    pub limits: Limits,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            addr: "127.0.0.1:6379".into(),
            username: None,
            password: None,
            db: 0,
            connect_timeout: Duration::from_secs(1),
            command_timeout: Duration::from_secs(1),
            reconnect_min: Duration::from_millis(50),
            reconnect_max: Duration::from_secs(5),
            health_check_interval: Duration::from_secs(10),
            max_pending: 4096,
            limits: Limits::default(),
        }
    }
}

impl fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientOptions")
            .field("addr", &self.addr)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("db", &self.db)
            .field("connect_timeout", &self.connect_timeout)
            .field("command_timeout", &self.command_timeout)
            .field("reconnect_min", &self.reconnect_min)
            .field("reconnect_max", &self.reconnect_max)
            .field("health_check_interval", &self.health_check_interval)
            .field("max_pending", &self.max_pending)
            .field("limits", &self.limits)
            .finish()
    }
}

impl ClientOptions {
    /// When a connection that last heard from Redis at `last_read` is due a health-check `PING`.
    pub(crate) fn health_check_due(&self, last_read: tokio::time::Instant) -> tokio::time::Instant {
        const NEVER: Duration = Duration::from_secs(365 * 24 * 3600);
        last_read + if self.health_check_interval.is_zero() { NEVER } else { self.health_check_interval }
    }

    /// Options for `redis://[[user]:password@]host[:port][/db]`, defaults for everything else.
    ///
    /// The port defaults to 6379 and the database to 0. User and password may be
    /// percent-encoded. `rediss://` (TLS), query strings and Unix sockets are not supported.
    /// Error messages never contain the password.
    pub fn from_url(url: &str) -> Result<ClientOptions> {
        let invalid = |msg: &str| Error::InvalidUrl(msg.to_string());
        let rest = match url.strip_prefix("redis://") {
            Some(rest) => rest,
            None if url.starts_with("rediss://") => return Err(invalid("TLS (rediss://) is not supported")),
            None if url.starts_with("unix://") => return Err(invalid("unix sockets are not supported")),
            None => return Err(invalid("expected a URL starting with redis://")),
        };
        // The last '@' ends the credentials, so a password with an unencoded '/' or '@' still works.
        let (credentials, rest) = match rest.rfind('@') {
            Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
            None => (None, rest),
        };
        if rest.contains(['?', '#']) {
            return Err(invalid("query strings and fragments are not supported"));
        }
        let (host_port, path) = match rest.find('/') {
            Some(slash) => (&rest[..slash], &rest[slash + 1..]),
            None => (rest, ""),
        };
        let mut opts = ClientOptions { addr: parse_host_port(host_port)?, ..ClientOptions::default() };
        if let Some(credentials) = credentials {
            let Some((user, password)) = credentials.split_once(':') else {
                return Err(invalid("credentials must be ':password' or 'user:password' before '@'"));
            };
            let decode = |part: &str, what: &str| {
                percent_decode(part).ok_or_else(|| {
                    Error::InvalidUrl(format!(
                        "invalid percent-encoding in the {what} (each % starts two hex digits, and the result must be UTF-8)"
                    ))
                })
            };
            let user = decode(user, "user name")?;
            let password = decode(password, "password")?;
            if password.is_empty() && !user.is_empty() {
                return Err(invalid("a user name needs a password"));
            }
            opts.username = Some(user).filter(|u| !u.is_empty());
            opts.password = Some(password).filter(|p| !p.is_empty());
        }
        if !path.is_empty() {
            opts.db = path
                .parse()
                .map_err(|_| Error::InvalidUrl(format!("database must be a number from 0, got {path:?}")))?;
        }
        Ok(opts)
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port` into `host:port`.
fn parse_host_port(s: &str) -> Result<String> {
    let (host, port) = if let Some(bracketed) = s.strip_prefix('[') {
        let Some((v6, after)) = bracketed.split_once(']') else {
            return Err(Error::InvalidUrl("missing ']' after IPv6 address".into()));
        };
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or_else(|| Error::InvalidUrl("expected ':port' after ']'".into()))?),
        };
        (format!("[{v6}]"), port)
    } else {
        match s.split_once(':') {
            Some((host, port)) => (host.to_string(), Some(port)),
            None => (s.to_string(), None),
        }
    };
    if host.is_empty() || host == "[]" {
        return Err(Error::InvalidUrl("missing host".into()));
    }
    let port: u16 = match port {
        None => 6379,
        Some(p) => match p.parse() {
            Ok(port) if port != 0 => port,
            _ => return Err(Error::InvalidUrl(format!("port must be a number from 1 to 65535, got {p:?}"))),
        },
    };
    Ok(format!("{host}:{port}"))
}

/// Decodes the `%XX` escapes of a URL component (RFC 3986 §2.1), as in the user name and password
/// of a `redis://` URL; `None` when a `%` does not start two hex digits or the result is not
/// UTF-8. The gateway's other URL readers (the admin API's paths and queries) use it too, so every
/// part of Gatehouse decodes alike.
pub fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = |j: usize| bytes.get(j).and_then(|&c| char::from(c).to_digit(16));
            out.push(u8::try_from(hex(i + 1)? * 16 + hex(i + 2)?).ok()?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url_error(url: &str) -> String {
        match ClientOptions::from_url(url) {
            Err(Error::InvalidUrl(msg)) => msg,
            other => panic!("{url}: expected an invalid URL error, got {other:?}"),
        }
    }

    #[test]
    fn parses_full_and_minimal_urls() {
        let o = ClientOptions::from_url("redis://app:s%40cr%2Ft@cache.internal:6380/3").unwrap();
        assert_eq!(o.addr, "cache.internal:6380");
        assert_eq!(o.username.as_deref(), Some("app"));
        assert_eq!(o.password.as_deref(), Some("s@cr/t"));
        assert_eq!(o.db, 3);

        let o = ClientOptions::from_url("redis://localhost").unwrap();
        assert_eq!((o.addr.as_str(), o.username, o.password, o.db), ("localhost:6379", None, None, 0));

        let o = ClientOptions::from_url("redis://:pw@[::1]:7000/").unwrap();
        assert_eq!((o.addr.as_str(), o.username, o.password.as_deref()), ("[::1]:7000", None, Some("pw")));

        // An unencoded '@' or '/' in the password: the last '@' ends the credentials.
        let o = ClientOptions::from_url("redis://u:a@b/c@h:1/2").unwrap();
        assert_eq!((o.addr.as_str(), o.password.as_deref(), o.db), ("h:1", Some("a@b/c"), 2));
    }

    #[test]
    fn rejects_bad_urls_with_clear_messages() {
        assert!(url_error("http://h").contains("redis://"));
        assert!(url_error("rediss://h").contains("TLS"));
        assert!(url_error("redis://").contains("missing host"));
        assert!(url_error("redis://h:0").contains("port"));
        assert!(url_error("redis://h:99999").contains("port"));
        assert!(url_error("redis://h:x").contains("port"));
        assert!(url_error("redis://h/x").contains("database"));
        assert!(url_error("redis://h/-1").contains("database"));
        assert!(url_error("redis://h?db=1").contains("query"));
        assert!(url_error("redis://[::1:6379").contains("]"));
        assert!(url_error("redis://user@h").contains("credentials"));
        assert!(url_error("redis://user:@h").contains("password"));
        assert!(url_error("redis://:%zz@h").contains("percent"));
        assert!(url_error("redis://:%ff@h").contains("UTF-8"));
    }

    #[test]
    fn percent_escapes_decode_strictly() {
        assert_eq!(percent_decode("127.0.0.1%3A8080").as_deref(), Some("127.0.0.1:8080"));
        assert_eq!(percent_decode("%e2%82%AC and +").as_deref(), Some("€ and +"));
        for broken in ["%zz", "%4", "a%", "%+f", "%ff"] {
            assert_eq!(percent_decode(broken), None, "{broken:?}");
        }
    }

    #[test]
    fn never_shows_the_password() {
        let o = ClientOptions::from_url("redis://:hunter2@h").unwrap();
        assert!(!format!("{o:?}").contains("hunter2"));
        assert!(!url_error("redis://:hunter2@h:bad").contains("hunter2"));
    }
}
