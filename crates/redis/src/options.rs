//! Configuration: which Redis deployment, how to log in and encrypt, and how long anything may take.

use crate::error::{Error, Result};
use std::fmt;
use std::time::Duration;

/// Where Redis is: one server, a Sentinel-watched primary, or a Redis Cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Deployment {
    /// One server at `host:port` (`[v6]:port` for IPv6 literals).
    Standalone {
        /// `host:port`.
        addr: String,
    },
    /// The current primary of the group `master`, asked of the Sentinels at `nodes` on every
    /// (re)connect, so a failover is followed.
    Sentinel {
        /// The group's name (`sentinel monitor NAME ...`).
        master: String,
        /// `host:port` of each Sentinel.
        nodes: Vec<String>,
    },
    /// A Redis Cluster reached through any of the seed `nodes`; the slot map is learned from them
    /// and kept current (`MOVED`, `ASK`, failovers).
    Cluster {
        /// `host:port` of each seed node.
        nodes: Vec<String>,
    },
}

/// TLS towards Redis (and towards the Sentinels, in Sentinel mode). The server's certificate is
/// always verified: against `ca` when set, otherwise against the system's roots.
#[derive(Clone, Default)]
pub struct Tls {
    /// PEM of the certificate authorities that sign Redis's certificates.
    pub ca: Option<Vec<u8>>,
    /// PEM of the client certificate chain, for servers that ask for one (`tls-auth-clients`).
    pub cert: Option<Vec<u8>>,
    /// PEM of the client certificate's private key. Never printed.
    pub key: Option<Vec<u8>>,
    /// The name Redis's certificate is checked against, when it is not the host that is
    /// connected to (standalone only).
    pub server_name: Option<String>,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("ca", &self.ca.as_ref().map(|_| "<pem>"))
            .field("cert", &self.cert.as_ref().map(|_| "<pem>"))
            .field("key", &self.key.as_ref().map(|_| "<redacted>"))
            .field("server_name", &self.server_name)
            .finish()
    }
}

/// Settings for a [`Client`](crate::Client) or [`Subscription`](crate::Subscription).
#[derive(Clone)]
pub struct ClientOptions {
    /// Which servers.
    pub deployment: Deployment,
    /// TLS, or plain TCP when `None`.
    pub tls: Option<Tls>,
    /// ACL user for `AUTH user password`; only used together with `password`.
    pub username: Option<String>,
    /// Password, sent with `AUTH` on every (re)connect. Never printed.
    pub password: Option<String>,
    /// ACL user for the Sentinels themselves (Sentinel mode).
    pub sentinel_username: Option<String>,
    /// Password of the Sentinels themselves (Sentinel mode; their `requirepass`). Never printed.
    pub sentinel_password: Option<String>,
    /// Database selected on every (re)connect (standalone and Sentinel; a Cluster has only 0).
    pub db: u32,
    /// Longest time for one connection attempt: TCP, TLS, `AUTH`/`SELECT` (and, with Sentinel,
    /// asking the Sentinels), and the initial `SUBSCRIBE`.
    pub connect_timeout: Duration,
    /// Longest time a command may wait for its reply, redirections and retries included.
    pub command_timeout: Duration,
    /// First delay before reconnecting after a failure; doubled after each failed attempt.
    pub reconnect_min: Duration,
    /// Longest delay between two reconnect attempts.
    pub reconnect_max: Duration,
    /// An idle connection sends a `PING` after this long, so a silently dropped connection is
    /// noticed before the next command needs it. Zero turns the check off.
    pub health_check_interval: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            deployment: Deployment::Standalone { addr: "127.0.0.1:6379".into() },
            tls: None,
            username: None,
            password: None,
            sentinel_username: None,
            sentinel_password: None,
            db: 0,
            connect_timeout: Duration::from_secs(1),
            command_timeout: Duration::from_secs(1),
            reconnect_min: Duration::from_millis(50),
            reconnect_max: Duration::from_secs(1),
            health_check_interval: Duration::from_secs(5),
        }
    }
}

impl fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redacted = |p: &Option<String>| p.as_ref().map(|_| "<redacted>");
        f.debug_struct("ClientOptions")
            .field("deployment", &self.deployment)
            .field("tls", &self.tls)
            .field("username", &self.username)
            .field("password", &redacted(&self.password))
            .field("sentinel_username", &self.sentinel_username)
            .field("sentinel_password", &redacted(&self.sentinel_password))
            .field("db", &self.db)
            .field("connect_timeout", &self.connect_timeout)
            .field("command_timeout", &self.command_timeout)
            .field("reconnect_min", &self.reconnect_min)
            .field("reconnect_max", &self.reconnect_max)
            .field("health_check_interval", &self.health_check_interval)
            .finish()
    }
}

impl fmt::Display for Deployment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Deployment::Standalone { addr } => f.write_str(addr),
            Deployment::Sentinel { master, nodes } => write!(f, "sentinel master {master} via {}", nodes.join(",")),
            Deployment::Cluster { nodes } => write!(f, "cluster via {}", nodes.join(",")),
        }
    }
}

impl ClientOptions {
    /// When a connection that last heard from Redis at `since` is due a health-check `PING`.
    pub(crate) fn health_check_due(&self, since: tokio::time::Instant) -> tokio::time::Instant {
        const NEVER: Duration = Duration::from_secs(365 * 24 * 3600);
        since + if self.health_check_interval.is_zero() { NEVER } else { self.health_check_interval }
    }

    /// Whether the options can work (the TLS files' PEM, the Sentinel and Cluster nodes), as a
    /// client made from them would judge; connects nothing.
    pub fn check(&self) -> Result<()> {
        crate::connect::Connector::new(self).map(drop)
    }

    /// Options for `redis[s]://[[user]:password@]host[:port][/db]`, defaults for everything else.
    ///
    /// The port defaults to 6379 and the database to 0. User and password may be
    /// percent-encoded. `rediss://` turns TLS on with the system's roots (set [`ClientOptions::tls`]
    /// for a private CA or a client certificate). Query strings and Unix sockets are not
    /// supported. Error messages never contain the password.
    pub fn from_url(url: &str) -> Result<ClientOptions> {
        let invalid = |msg: &str| Error::InvalidUrl(msg.to_string());
        let (rest, tls) = if let Some(rest) = url.strip_prefix("redis://") {
            (rest, None)
        } else if let Some(rest) = url.strip_prefix("rediss://") {
            (rest, Some(Tls::default()))
        } else if url.starts_with("unix://") {
            return Err(invalid("unix sockets are not supported"));
        } else {
            return Err(invalid("expected a URL starting with redis:// or rediss://"));
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
        let addr = parse_host_port(host_port)?;
        let mut opts = ClientOptions { deployment: Deployment::Standalone { addr }, tls, ..ClientOptions::default() };
        if let Some(credentials) = credentials {
            let Some((user, password)) = credentials.split_once(':') else {
                return Err(invalid("credentials must be ':password' or 'user:password' before '@'"));
            };
            let decode = |part: &str, what: &str| {
                gatehouse_path::percent_decode(part).ok_or_else(|| {
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

/// `host`, `host:port`, `[v6]` or `[v6]:port` into `host:port` (the port defaulting to 6379), as
/// Sentinel and Cluster node lists are written too.
pub fn parse_host_port(s: &str) -> Result<String> {
    let (host, port) = split_host_port(s)?;
    Ok(if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") })
}

/// `host:port` (or `[v6]:port`) into the host without brackets and the port.
pub(crate) fn split_host_port(s: &str) -> Result<(String, u16)> {
    let (host, port) = if let Some(bracketed) = s.strip_prefix('[') {
        let Some((v6, after)) = bracketed.split_once(']') else {
            return Err(Error::InvalidUrl("missing ']' after IPv6 address".into()));
        };
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or_else(|| Error::InvalidUrl("expected ':port' after ']'".into()))?),
        };
        (v6.to_string(), port)
    } else {
        match s.split_once(':') {
            Some((host, port)) => (host.to_string(), Some(port)),
            None => (s.to_string(), None),
        }
    };
    if host.is_empty() {
        return Err(Error::InvalidUrl(format!("missing host in {s:?}")));
    }
    let port: u16 = match port {
        None => 6379,
        Some(p) => match p.parse() {
            Ok(port) if port != 0 => port,
            _ => return Err(Error::InvalidUrl(format!("port must be a number from 1 to 65535, got {p:?}"))),
        },
    };
    Ok((host, port))
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

    fn addr(o: &ClientOptions) -> &str {
        match &o.deployment {
            Deployment::Standalone { addr } => addr,
            other => panic!("not standalone: {other:?}"),
        }
    }

    #[test]
    fn parses_full_and_minimal_urls() {
        let o = ClientOptions::from_url("redis://app:s%40cr%2Ft@cache.internal:6380/3").unwrap();
        assert_eq!(addr(&o), "cache.internal:6380");
        assert_eq!(o.username.as_deref(), Some("app"));
        assert_eq!(o.password.as_deref(), Some("s@cr/t"));
        assert_eq!(o.db, 3);
        assert!(o.tls.is_none());

        let o = ClientOptions::from_url("redis://localhost").unwrap();
        assert_eq!((addr(&o), o.username.clone(), o.password.clone(), o.db), ("localhost:6379", None, None, 0));

        let o = ClientOptions::from_url("redis://:pw@[::1]:7000/").unwrap();
        assert_eq!((addr(&o), o.username.clone(), o.password.as_deref()), ("[::1]:7000", None, Some("pw")));

        // An unencoded '@' or '/' in the password: the last '@' ends the credentials.
        let o = ClientOptions::from_url("redis://u:a@b/c@h:1/2").unwrap();
        assert_eq!((addr(&o), o.password.as_deref(), o.db), ("h:1", Some("a@b/c"), 2));

        let o = ClientOptions::from_url("rediss://cache:6390").unwrap();
        assert_eq!(addr(&o), "cache:6390");
        assert!(o.tls.is_some());
    }

    #[test]
    fn rejects_bad_urls_with_clear_messages() {
        assert!(url_error("http://h").contains("redis://"));
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
    fn node_lists_take_the_same_addresses() {
        assert_eq!(parse_host_port("10.0.0.1").unwrap(), "10.0.0.1:6379");
        assert_eq!(parse_host_port("[::1]:7001").unwrap(), "[::1]:7001");
        assert_eq!(split_host_port("[::1]:7001").unwrap(), ("::1".to_string(), 7001));
        assert!(parse_host_port(":1").is_err());
    }

    #[test]
    fn never_shows_secrets() {
        let mut o = ClientOptions::from_url("redis://:hunter2@h").unwrap();
        o.sentinel_password = Some("sentinel-secret".into());
        o.tls = Some(Tls { key: Some(b"PRIVATE KEY".to_vec()), ..Tls::default() });
        let shown = format!("{o:?}");
        for secret in ["hunter2", "sentinel-secret", "PRIVATE KEY"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert!(!url_error("redis://:hunter2@h:bad").contains("hunter2"));
    }
}
