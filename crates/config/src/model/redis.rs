//! The `redis` section: the Redis that the nodes of a cluster share, how to reach it and log in.

use super::defaults;
use crate::units::Duration;
use serde::Deserialize;
use std::path::PathBuf;

/// The cluster's Redis: exactly one of `url` (one server), `sentinel` or `cluster`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Redis {
    /// One server: `redis://host:port[/db]`, or `rediss://host:port[/db]` for TLS.
    #[serde(default)]
    pub url: Option<String>,
    /// A primary watched by Sentinels, followed through failovers.
    #[serde(default)]
    pub sentinel: Option<RedisSentinel>,
    /// A Redis Cluster: `host:port` of one or more seed nodes.
    #[serde(default)]
    pub cluster: Option<Vec<String>>,
    /// ACL user name (with `password_file`).
    #[serde(default)]
    pub username: Option<String>,
    /// File holding the password (`requirepass`, or the ACL user's).
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    /// Database for `sentinel` (a `url` names its own in its path; a Cluster has only 0).
    #[serde(default)]
    pub db: u32,
    /// TLS to Redis (and to the Sentinels); `rediss://` for `url`.
    #[serde(default)]
    pub tls: Option<RedisTls>,
    /// First word of every key (`gatehouse:tls:sess:{…}`); each key's hash tag names the thing it
    /// belongs to, so keys spread over a Redis Cluster's shards.
    #[serde(default = "defaults::redis_prefix")]
    pub prefix: String,
    /// File holding the cluster secret (at least 32 bytes): it seals what nodes store in Redis
    /// (ticket keys, sessions, private keys). Every node of a cluster needs the same one.
    pub secret_file: PathBuf,
    /// Time allowed to connect.
    #[serde(default = "defaults::redis_connect_timeout")]
    pub connect_timeout: Duration,
    /// Time allowed for one command; a handshake waits at most this long for a session.
    #[serde(default = "defaults::redis_command_timeout")]
    pub command_timeout: Duration,
}

/// A Sentinel group.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisSentinel {
    /// The group's name (`sentinel monitor NAME ...`).
    pub master: String,
    /// `host:port` of each Sentinel.
    pub nodes: Vec<String>,
    /// ACL user name of the Sentinels themselves.
    #[serde(default)]
    pub username: Option<String>,
    /// File holding the Sentinels' own password, when they have one.
    #[serde(default)]
    pub password_file: Option<PathBuf>,
}

/// TLS towards Redis. The server's certificate is always verified.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisTls {
    /// PEM file of the certificate authorities that sign Redis's certificates; the system's
    /// roots when unset.
    #[serde(default)]
    pub ca: Option<PathBuf>,
    /// PEM file of the client certificate chain (for `tls-auth-clients`).
    #[serde(default)]
    pub cert: Option<PathBuf>,
    /// PEM file of the client certificate's key.
    #[serde(default)]
    pub key: Option<PathBuf>,
    /// Name Redis's certificate is checked against when it is not the URL's host (`url` only).
    #[serde(default)]
    pub server_name: Option<String>,
}
