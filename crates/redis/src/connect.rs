//! Connect stage: redis-rs connections to each kind of deployment (one server, a Sentinel group's
//! primary, a Cluster) with TLS and `AUTH`, each attempt bounded by the connect timeout; and the
//! reconnect backoff shared by the command and subscriber tasks. Every connection speaks RESP3, so
//! a subscription shares the command connection's code (pushes arrive beside replies).

use crate::error::{Error, Result};
use crate::options::{split_host_port, ClientOptions, Deployment, Tls};
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::io::AsyncDNSResolver;
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{
    AsyncConnectionConfig, ClientTlsConfig, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, ProtocolVersion,
    RedisConnectionInfo, TlsCertificates, TlsMode,
};
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;
use std::time::Duration;

/// A live connection: commands from any number of tasks are pipelined on it.
#[derive(Clone)]
pub(crate) enum Conn {
    /// One server's multiplexed connection (standalone, or the Sentinel group's primary).
    Single(MultiplexedConnection),
    /// A Redis Cluster: each command goes to the primary that owns its key's slot.
    Cluster(ClusterConnection),
}

impl Conn {
    pub(crate) async fn send(&mut self, cmd: &redis::Cmd) -> redis::RedisResult<redis::Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd).await,
            Conn::Cluster(c) => c.req_packed_command(cmd).await,
        }
    }
}

/// Makes connections to the configured deployment, again after every failure.
pub(crate) struct Connector {
    opts: ClientOptions,
    kind: Kind,
}

// One per client or subscription, made once: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
enum Kind {
    Standalone(redis::Client),
    /// The Sentinels are asked for the current primary on every connect.
    Sentinel(Box<SentinelClient>),
    Cluster {
        client: ClusterClient,
        seeds: Vec<redis::Client>,
    },
}

impl Connector {
    /// Checks the options and prepares the clients; connects nothing yet.
    pub(crate) fn new(opts: &ClientOptions) -> Result<Connector> {
        let certs = opts.tls.as_ref().map(certificates).transpose()?;
        let kind = match &opts.deployment {
            Deployment::Standalone { addr } => Kind::Standalone(node_client(opts, addr, certs.as_ref())?),
            Deployment::Sentinel { master, nodes } => {
                if nodes.is_empty() {
                    return Err(Error::Config("sentinel: at least one Sentinel node is needed".into()));
                }
                let addrs = nodes
                    .iter()
                    .map(|n| address(n, opts.tls.as_ref()).map(|info| info.addr().clone()))
                    .collect::<Result<Vec<_>>>()?;
                let mut b = SentinelClientBuilder::new(addrs, master, SentinelServerType::Master)
                    .map_err(Error::from_redis)?
                    .set_client_to_redis_db(i64::from(opts.db))
                    .set_client_to_redis_protocol(ProtocolVersion::RESP3)
                    .set_client_to_redis_tcp_settings(tcp_settings());
                if let Some(certs) = &certs {
                    b = b
                        .set_client_to_redis_tls_mode(TlsMode::Secure)
                        .set_client_to_redis_certificates(certs.clone())
                        .set_client_to_sentinel_tls_mode(TlsMode::Secure)
                        .set_client_to_sentinel_certificates(certs.clone());
                }
                if let Some(password) = &opts.password {
                    b = b.set_client_to_redis_password(password);
                    if let Some(user) = &opts.username {
                        b = b.set_client_to_redis_username(user);
                    }
                }
                if let Some(password) = &opts.sentinel_password {
                    b = b.set_client_to_sentinel_password(password);
                    if let Some(user) = &opts.sentinel_username {
                        b = b.set_client_to_sentinel_username(user);
                    }
                }
                Kind::Sentinel(Box::new(b.build().map_err(Error::from_redis)?))
            }
            Deployment::Cluster { nodes } => {
                if nodes.is_empty() {
                    return Err(Error::Config("cluster: at least one seed node is needed".into()));
                }
                if opts.db != 0 {
                    return Err(Error::Config("a Redis Cluster has only database 0".into()));
                }
                let infos = nodes.iter().map(|n| address(n, opts.tls.as_ref())).collect::<Result<Vec<_>>>()?;
                let mut b = ClusterClientBuilder::new(infos)
                    .connection_timeout(opts.connect_timeout)
                    .response_timeout(opts.command_timeout)
                    // Redirections and a slot-map refresh fit in the command timeout; the caller's
                    // timeout cuts anything longer.
                    .retries(3)
                    .min_retry_wait(5)
                    .max_retry_wait(100)
                    .use_protocol(ProtocolVersion::RESP3)
                    .tcp_settings(tcp_settings());
                if let Some(certs) = &certs {
                    b = b.tls(TlsMode::Secure).certs(certs.clone());
                }
                if let Some(password) = &opts.password {
                    b = b.password(password);
                    if let Some(user) = &opts.username {
                        b = b.username(user);
                    }
                }
                let client = b.build().map_err(Error::from_redis)?;
                let seeds = nodes.iter().map(|n| node_client(opts, n, certs.as_ref())).collect::<Result<Vec<_>>>()?;
                Kind::Cluster { client, seeds }
            }
        };
        Ok(Connector { opts: opts.clone(), kind })
    }

    /// A connection for commands, with `AUTH` and `SELECT` done and one `PING` answered, within
    /// the connect timeout.
    pub(crate) async fn connect(&mut self) -> Result<Conn> {
        let opts = &self.opts;
        let attempt = async {
            let mut conn = match &mut self.kind {
                Kind::Standalone(client) => {
                    Conn::Single(client.get_multiplexed_async_connection_with_config(&config(opts)).await?)
                }
                Kind::Sentinel(sentinel) => {
                    let primary = sentinel.async_get_client().await?;
                    Conn::Single(primary.get_multiplexed_async_connection_with_config(&config(opts)).await?)
                }
                Kind::Cluster { client, .. } => Conn::Cluster(client.get_async_connection().await?),
            };
            // A TCP connect alone proves little (a stopped server's kernel still accepts): count
            // the connection as up only once Redis has answered.
            conn.send(&redis::cmd("PING")).await?;
            Ok::<_, redis::RedisError>(conn)
        };
        match tokio::time::timeout(opts.connect_timeout, attempt).await {
            Ok(result) => result.map_err(Error::from_redis),
            Err(_) => Err(Error::Timeout),
        }
    }

    /// A connection to one server to hold a subscription on, its pushes (messages, and a
    /// `Disconnection` when it breaks) going to `push`: the server itself, the Sentinel group's
    /// current primary, or the `attempt`-th Cluster seed in turn (a Cluster carries classic
    /// `PUBLISH` to every node, so any node hears every message).
    pub(crate) async fn subscriber(
        &mut self,
        attempt: usize,
        push: impl redis::aio::AsyncPushSender,
    ) -> Result<MultiplexedConnection> {
        let opts = &self.opts;
        let config = config(opts).set_push_sender(push);
        let connect = async {
            let client = match &mut self.kind {
                Kind::Standalone(client) => client.clone(),
                Kind::Sentinel(sentinel) => sentinel.async_get_client().await?,
                Kind::Cluster { seeds, .. } => match seeds.get(attempt % seeds.len().max(1)) {
                    Some(seed) => seed.clone(),
                    None => return Err(redis::RedisError::from((redis::ErrorKind::InvalidClientConfig, "no seeds"))),
                },
            };
            client.get_multiplexed_async_connection_with_config(&config).await
        };
        match tokio::time::timeout(opts.connect_timeout, connect).await {
            Ok(result) => result.map_err(Error::from_redis),
            Err(_) => Err(Error::Timeout),
        }
    }

    pub(crate) fn options(&self) -> &ClientOptions {
        &self.opts
    }
}

/// Connection settings of one server's multiplexed connection.
fn config(opts: &ClientOptions) -> AsyncConnectionConfig {
    let mut config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(opts.connect_timeout))
        // Every command already runs under the caller's timeout (`Client::request`); a second timer
        // per command inside redis-rs would only cost.
        .set_response_timeout(None);
    if let (Some(name), Deployment::Standalone { addr }) =
        (opts.tls.as_ref().and_then(|t| t.server_name.as_ref()), &opts.deployment)
    {
        if let Ok((host, port)) = split_host_port(addr) {
            config = config.set_dns_resolver(ServerNameResolver { name: name.clone(), host, port });
        }
    }
    config
}

/// Keepalive on every connection to Redis, so a peer that vanished is noticed by the kernel too.
fn tcp_settings() -> redis::io::tcp::TcpSettings {
    redis::io::tcp::TcpSettings::default().set_nodelay(true)
}

/// The redis-rs client of one server at `addr`, with the options' login and TLS.
fn node_client(opts: &ClientOptions, addr: &str, certs: Option<&TlsCertificates>) -> Result<redis::Client> {
    let mut info = address(addr, opts.tls.as_ref())?;
    if let (Some(name), Deployment::Standalone { .. }) =
        (opts.tls.as_ref().and_then(|t| t.server_name.as_ref()), &opts.deployment)
    {
        // Connect "to" the server name, which the resolver below maps to the real address, so the
        // certificate is checked against that name.
        let (_, port) = split_host_port(addr)?;
        info = info.set_addr(ConnectionAddr::TcpTls { host: name.clone(), port, insecure: false, tls_params: None });
    }
    let mut redis = RedisConnectionInfo::default().set_db(i64::from(opts.db)).set_protocol(ProtocolVersion::RESP3);
    if let Some(password) = &opts.password {
        redis = redis.set_password(password);
        if let Some(user) = &opts.username {
            redis = redis.set_username(user);
        }
    }
    let info = info.set_redis_settings(redis).set_tcp_settings(tcp_settings());
    match certs {
        Some(certs) => redis::Client::build_with_tls(info, certs.clone()),
        None => redis::Client::open(info),
    }
    .map_err(Error::from_redis)
}

/// `host:port` as a redis-rs address, TLS or not.
fn address(addr: &str, tls: Option<&Tls>) -> Result<ConnectionInfo> {
    let (host, port) = split_host_port(addr)?;
    let addr = match tls {
        Some(_) => ConnectionAddr::TcpTls { host, port, insecure: false, tls_params: None },
        None => ConnectionAddr::Tcp(host, port),
    };
    addr.into_connection_info().map_err(Error::from_redis)
}

/// The PEM material redis-rs builds its rustls configuration from.
fn certificates(tls: &Tls) -> Result<TlsCertificates> {
    let client_tls = match (&tls.cert, &tls.key) {
        (Some(cert), Some(key)) => Some(ClientTlsConfig { client_cert: cert.clone(), client_key: key.clone() }),
        (None, None) => None,
        _ => return Err(Error::Config("tls: a client certificate needs both cert and key".into())),
    };
    Ok(TlsCertificates { client_tls, root_cert: tls.ca.clone() })
}

/// Resolves the TLS server name to the configured host, so a standalone server is reached at its
/// address while its certificate is checked against the name.
struct ServerNameResolver {
    name: String,
    host: String,
    port: u16,
}

impl AsyncDNSResolver for ServerNameResolver {
    fn resolve<'a, 'b: 'a>(
        &'a self,
        host: &'b str,
        port: u16,
    ) -> redis::RedisFuture<'a, Box<dyn Iterator<Item = SocketAddr> + Send + 'a>> {
        Box::pin(async move {
            let (host, port) = if host == self.name { (self.host.as_str(), self.port) } else { (host, port) };
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port)).await?.collect();
            Ok(Box::new(addrs.into_iter()) as Box<dyn Iterator<Item = SocketAddr> + Send>)
        })
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

    #[test]
    fn a_client_certificate_needs_its_key() {
        let half = Tls { cert: Some(b"pem".to_vec()), ..Tls::default() };
        assert!(matches!(certificates(&half), Err(Error::Config(_))));
    }
}
