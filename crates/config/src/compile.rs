//! Validation: everything that a single field's type cannot express (references between sections,
//! duplicates, ranges). All errors are collected; a configuration with any error is rejected whole.

use crate::error::ValueError;
use crate::model::Config;
use crate::schema;
use crate::upstream::{Address, Balance};
use std::collections::{HashMap, HashSet};
use std::fmt;

/// One problem in a configuration, with its path (`upstreams.api.targets[0].weight`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// Where in the file.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl ConfigError {
    pub(crate) fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError { path: path.into(), message: message.into() }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Every error found in a configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Parses and validates a configuration document.
pub fn compile(text: &str) -> Result<Config, ConfigErrors> {
    let (config, errors) = compile_all(text);
    finish(config, errors)
}

/// [`compile`] for a document already parsed (a published revision merged into a node's file),
/// which spares printing and parsing it again.
pub fn compile_value(root: serde_yaml::Value) -> Result<Config, ConfigErrors> {
    let (mut errors, mut unread) = (Vec::new(), schema::Unread::default());
    let config = schema::read_value(root, &mut errors, &mut unread);
    validate(&config, &unread, &mut errors);
    finish(config, errors)
}

/// What of `text` could be read, with every error of the whole document: for `gatehouse
/// check`, whose later steps (files, keys) also look at what was read when some of it was not,
/// so one run lists every mistake. An entry that could not be read is left out, and nothing
/// that refers to it is reported again.
pub fn compile_all(text: &str) -> (Config, Vec<ConfigError>) {
    let (mut errors, mut unread) = (Vec::new(), schema::Unread::default());
    let config = schema::read(text, &mut errors, &mut unread);
    validate(&config, &unread, &mut errors);
    (config, errors)
}

fn finish(config: Config, errors: Vec<ConfigError>) -> Result<Config, ConfigErrors> {
    if errors.is_empty() {
        Ok(config)
    } else {
        Err(ConfigErrors(errors))
    }
}

/// Cipher suite names rustls offers, TLS 1.3 first, in the order a listener prefers them when
/// its `ciphers` are not set: AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305.
pub const PREFERRED_CIPHER_SUITES: &[&str] = &[
    "TLS13_AES_128_GCM_SHA256",
    "TLS13_AES_256_GCM_SHA384",
    "TLS13_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
];

/// What can be told of an upstream's TLS without reading its files (they are read when the
/// configuration is applied, and by `gatehouse check`).
fn validate_upstream_tls(p: &str, t: &crate::UpstreamTls, err: &mut impl FnMut(String, String)) {
    if t.versions.is_empty() {
        err(format!("{p}.tls.versions"), "at least one of `tls1.2`, `tls1.3` is required".into());
    }
    match (&t.cert, &t.key) {
        (Some(_), None) => err(format!("{p}.tls.key"), "a client certificate needs its key".into()),
        (None, Some(_)) => err(format!("{p}.tls.cert"), "a client key needs its certificate".into()),
        _ => {}
    }
    if let Some(name) = &t.server_name {
        if rustls_pki_types::ServerName::try_from(name.as_str()).is_err() {
            err(format!("{p}.tls.server_name"), format!("`{name}` is neither a DNS name nor an IP address"));
        }
    }
    for (i, a) in t.alpn.iter().flatten().enumerate() {
        if a.is_empty() || a.len() > 255 {
            err(format!("{p}.tls.alpn[{i}]"), "must be 1 to 255 bytes".into());
        }
    }
    if !t.verify && t.ca.is_some() {
        err(format!("{p}.tls.ca"), "unused with `verify: false`: verify, or remove `ca`".into());
    }
}

fn validate_tls(c: &Config, err: &mut impl FnMut(String, String)) {
    let t = &c.tls;
    let has_certs = !t.certificates.is_empty() || t.store.is_some() || t.self_signed.is_some();
    for (name, l) in &c.listeners {
        let Some(lt) = &l.tls else { continue };
        let p = format!("listeners.{name}.tls");
        if !has_certs {
            err(
                p.clone(),
                "a TLS listener needs certificates: set tls.certificates, tls.store or tls.self_signed".into(),
            );
        }
        if lt.versions.is_empty() {
            err(format!("{p}.versions"), "at least one of `tls1.2`, `tls1.3` is required".into());
        }
        if let Some(ciphers) = &lt.ciphers {
            for (i, c) in ciphers.iter().enumerate() {
                if !PREFERRED_CIPHER_SUITES.contains(&c.as_str()) {
                    err(
                        format!("{p}.ciphers[{i}]"),
                        format!("unknown cipher suite `{c}`; expected one of: {}", PREFERRED_CIPHER_SUITES.join(", ")),
                    );
                }
            }
            for v in &lt.versions {
                let (label, tls13) = match v {
                    crate::model::TlsVersion::Tls12 => ("tls1.2", false),
                    crate::model::TlsVersion::Tls13 => ("tls1.3", true),
                };
                if !ciphers.iter().any(|c| c.starts_with("TLS13_") == tls13) {
                    err(format!("{p}.ciphers"), format!("no cipher suite for {label}, which `versions` offers"));
                }
            }
        }
        if lt.handshake_timeout.0.is_zero() {
            err(format!("{p}.handshake_timeout"), "must be more than zero".into());
        }
    }
    if t.ticket_window.0 <= t.ticket_rotation.0 {
        err(
            "tls.ticket_window".into(),
            "must be longer than tls.ticket_rotation, or tickets die with their key".into(),
        );
    }
    if t.ticket_rotation.0.is_zero() {
        err("tls.ticket_rotation".into(), "must be more than zero".into());
    }
    if t.tickets == crate::model::Tickets::Cluster && c.redis.is_none() {
        err("tls.tickets".into(), "`cluster` needs the `redis` section".into());
    }
    if t.session_cache == crate::model::SessionCacheMode::Redis && c.redis.is_none() {
        err("tls.session_cache".into(), "`redis` needs the `redis` section".into());
    }
    if let Some(store) = &t.store {
        match (&store.dir, store.redis) {
            (Some(_), true) => err("tls.store".into(), "set either `dir` or `redis: true`, not both".into()),
            (None, false) => err("tls.store".into(), "set `dir` or `redis: true`".into()),
            (None, true) if c.redis.is_none() => err("tls.store.redis".into(), "needs the `redis` section".into()),
            _ => {}
        }
    }
    if let Some(r) = &c.redis {
        check_redis(r, err);
        if r.prefix.is_empty() || r.prefix.contains(['{', '}', ' ']) {
            err("redis.prefix".into(), "must be non-empty, without braces or spaces".into());
        }
        if r.command_timeout.0.is_zero() || r.connect_timeout.0.is_zero() {
            err("redis".into(), "timeouts must be more than zero".into());
        }
    }
    if t.session_cache_size == 0 {
        err("tls.session_cache_size".into(), "must be at least 1 (use `session_cache: off` to turn it off)".into());
    }
    if t.cert_cache_size == 0 {
        err("tls.cert_cache_size".into(), "must be at least 1".into());
    }
    if let Some(ss) = &t.self_signed {
        if ss.names.is_empty() {
            err("tls.self_signed.names".into(), "at least one name is required".into());
        }
    }
}

fn validate(c: &Config, unread: &schema::Unread, errors: &mut Vec<ConfigError>) {
    let mut err = |path: String, msg: String| errors.push(ConfigError { path, message: msg });
    validate_tls(c, &mut err);
    crate::acme::validate(c, &mut err);
    crate::validate_gateway::validate(c, unread, &mut err);
    crate::control::validate(c, &mut err);
    crate::request_id::validate(c, &mut err);
    crate::proxy_protocol::validate(c, &mut err);
    crate::paths::validate(c, &mut err);
    crate::log::validate(c, &mut err);
    crate::tracing::validate(c, &mut err);
    validate_listeners(c, unread, &mut err);
    validate_resolver(&c.resolver, &mut err);
    validate_upstreams(c, &mut err);
    validate_sites(c, unread, &mut err);
    validate_shutdown_grace(c, &mut err);
}

/// At least one listener, each on an address of its own, with limits and timeouts it can serve by.
fn validate_listeners(c: &Config, unread: &schema::Unread, err: &mut impl FnMut(String, String)) {
    if c.listeners.is_empty() && !unread.any("listeners") {
        err("listeners".into(), "at least one listener is required".into());
    }
    let mut binds = HashMap::new();
    for (name, l) in &c.listeners {
        let p = format!("listeners.{name}");
        check_bind(c, &p, name, l, &mut binds, err);
        check_listener_limits(&p, l, err);
        check_http3(&p, l, err);
        if let Some(hsts) = &l.hsts {
            hsts.check(&p, err);
            if l.tls.is_none() {
                err(format!("{p}.hsts"), "a listener without `tls` cannot send it (RFC 6797 §7.2)".into());
            }
        }
        if l.quic.early_data && c.tls.session_cache == crate::model::SessionCacheMode::Off {
            // rustls allows 0-RTT only with single-use (stateful) tickets (RFC 8446 §8.1).
            err(format!("{p}.quic.early_data"), "0-RTT needs `tls.session_cache` (`local` or `redis`)".into());
        }
    }
}

/// A listener's address is neither another listener's nor the admin listener's (port 0 excepted:
/// each gets a port of its own). `binds` holds the addresses of the listeners checked before.
fn check_bind<'c>(
    c: &Config,
    p: &str,
    name: &'c String,
    l: &crate::Listener,
    binds: &mut HashMap<std::net::SocketAddr, &'c String>,
    err: &mut impl FnMut(String, String),
) {
    if l.bind.port() != 0 {
        if let Some(other) = binds.insert(l.bind, name) {
            err(format!("{p}.bind"), format!("{} is already bound by listener `{other}`", l.bind));
        }
    }
    if let Some(admin) = &c.admin {
        if admin.bind == l.bind && l.bind.port() != 0 {
            err(format!("{p}.bind"), format!("{} is the admin listener's address", l.bind));
        }
    }
}

/// A listener's connection and header limits, its timeouts and its HTTP/2 settings.
fn check_listener_limits(p: &str, l: &crate::Listener, err: &mut impl FnMut(String, String)) {
    if l.max_connections == 0 {
        err(format!("{p}.max_connections"), "must be at least 1".into());
    }
    if l.max_header_bytes.0 < 1024 || l.max_header_bytes.0 > (1 << 20) {
        err(format!("{p}.max_header_bytes"), "must be between 1k and 1m".into());
    }
    for (field, d) in [
        ("header_read_timeout", l.header_read_timeout),
        ("body_read_timeout", l.body_read_timeout),
        ("send_timeout", l.send_timeout),
    ] {
        if d.0.is_zero() {
            err(format!("{p}.{field}"), "must be greater than zero".into());
        }
    }
    if !(1..=10_000).contains(&l.http2_max_concurrent_streams) {
        err(format!("{p}.http2_max_concurrent_streams"), "must be between 1 and 10000".into());
    }
    if l.http2_ping_timeout.0.is_zero() {
        err(format!("{p}.http2_ping_timeout"), "must be greater than zero".into());
    }
}

/// The resolver's timeouts, attempts and TTL bounds.
fn validate_resolver(r: &crate::Resolver, err: &mut impl FnMut(String, String)) {
    for (field, d) in [("timeout", r.timeout), ("failure_retry", r.failure_retry), ("max_ttl", r.max_ttl)] {
        if d.0.is_zero() {
            err(format!("resolver.{field}"), "must be greater than zero".into());
        }
    }
    if r.attempts == 0 {
        err("resolver.attempts".into(), "must be at least 1".into());
    }
    if r.min_ttl.0 > r.max_ttl.0 {
        err("resolver.min_ttl".into(), "must not be longer than resolver.max_ttl".into());
    }
}

fn validate_upstreams(c: &Config, err: &mut impl FnMut(String, String)) {
    for (name, u) in &c.upstreams {
        let p = format!("upstreams.{name}");
        check_targets(&p, u, err);
        check_balance(&p, u, err);
        check_retries_and_timeouts(&p, u, err);
        if let Some(t) = &u.tls {
            validate_upstream_tls(&p, t, err);
        }
        if u.send_proxy_protocol.is_some() && u.protocol != crate::UpstreamProtocol::Http1 {
            err(
                format!("{p}.send_proxy_protocol"),
                "needs `protocol: http1`: an HTTP/2 connection carries many clients' requests, and a PROXY header names one client".into(),
            );
        }
        if let Some(hc) = &u.health_check {
            check_health_check(&p, u, hc, err);
        }
    }
}

/// At least one target; each with a weight Gatehouse takes, a port, and listed once.
fn check_targets(p: &str, u: &crate::Upstream, err: &mut impl FnMut(String, String)) {
    if u.targets.is_empty() {
        err(format!("{p}.targets"), "at least one target is required".into());
    }
    let mut seen = HashSet::new();
    for (i, t) in u.targets.iter().enumerate() {
        if !(1..=1000).contains(&t.weight) {
            err(format!("{p}.targets[{i}].weight"), "must be from 1 to 1000".into());
        }
        let port = match &t.address {
            Address::Ip(a) => a.port(),
            Address::Name { port, .. } => *port,
            Address::Srv(_) => 1,
        };
        if port == 0 {
            err(format!("{p}.targets[{i}].address"), "port 0 is not a valid endpoint".into());
        }
        if !seen.insert(&t.address) {
            err(format!("{p}.targets[{i}].address"), format!("{} is listed twice", t.address));
        }
    }
}

/// A `hash_key` exactly when the balancer is `consistent_hash`.
fn check_balance(p: &str, u: &crate::Upstream, err: &mut impl FnMut(String, String)) {
    match (u.balance, &u.hash_key) {
        (Balance::ConsistentHash, None) => err(
            format!("{p}.hash_key"),
            "consistent_hash needs a hash_key (client_ip, uri, header:NAME or cookie:NAME)".into(),
        ),
        (Balance::ConsistentHash, Some(_)) | (_, None) => {}
        (_, Some(_)) => err(format!("{p}.hash_key"), "hash_key is only used with balance: consistent_hash".into()),
    }
}

fn check_retries_and_timeouts(p: &str, u: &crate::Upstream, err: &mut impl FnMut(String, String)) {
    if u.retries > 10 {
        err(format!("{p}.retries"), "at most 10 retries".into());
    }
    for (i, s) in u.retry_on_status.iter().enumerate() {
        if !(500..=599).contains(s) {
            err(format!("{p}.retry_on_status[{i}]"), "only 5xx statuses can be retried".into());
        }
    }
    for (field, d) in [("connect", u.timeouts.connect), ("read", u.timeouts.read), ("write", u.timeouts.write)] {
        if d.0.is_zero() {
            err(format!("{p}.timeouts.{field}"), "must be greater than zero".into());
        }
    }
    if u.keepalive.ping_timeout.0.is_zero() {
        err(format!("{p}.keepalive.ping_timeout"), "must be greater than zero".into());
    }
}

/// An active health check's request fits its type (and the upstream's protocol), and its
/// thresholds and times are not zero.
fn check_health_check(p: &str, u: &crate::Upstream, hc: &crate::HealthCheck, err: &mut impl FnMut(String, String)) {
    match hc.kind {
        crate::HealthCheckKind::Http if !hc.path.starts_with('/') => {
            err(format!("{p}.health_check.path"), "must start with `/`".into());
        }
        crate::HealthCheckKind::Http if !hc.service.is_empty() => {
            err(format!("{p}.health_check.service"), "only with `type: grpc`".into());
        }
        crate::HealthCheckKind::Grpc if !hc.path.is_empty() => {
            err(format!("{p}.health_check.path"), "not with `type: grpc` (it asks grpc.health.v1.Health/Check)".into());
        }
        crate::HealthCheckKind::Grpc if u.protocol != crate::UpstreamProtocol::Http2 => {
            err(format!("{p}.health_check.type"), "`grpc` needs the upstream's `protocol: http2`".into());
        }
        _ => {}
    }
    if hc.rise == 0 || hc.fall == 0 {
        err(format!("{p}.health_check"), "rise and fall must be at least 1".into());
    }
    if hc.interval.0.is_zero() || hc.timeout.0.is_zero() {
        err(format!("{p}.health_check"), "interval and timeout must be greater than zero".into());
    }
}

fn validate_sites(c: &Config, unread: &schema::Unread, err: &mut impl FnMut(String, String)) {
    // Lower-cased host pattern → the site that serves it.
    let mut hosts: HashMap<String, &str> = HashMap::new();
    for (name, site) in &c.sites {
        let p = format!("sites.{name}");
        check_site_hosts(&p, name, site, &mut hosts, err);
        if let Some(hsts) = &site.hsts {
            hsts.check(&p, err);
        }
        if let Some(compression) = &site.compression {
            compression.check(&p, err);
        }
        let mut paths = HashSet::new();
        for (i, r) in site.routes.iter().enumerate() {
            check_route(c, unread, &format!("{p}.routes[{i}]"), r, &mut paths, err);
        }
    }
}

/// A site's host patterns: at least one, each well-formed and served by no other site.
fn check_site_hosts<'c>(
    p: &str,
    name: &'c str,
    site: &crate::Site,
    hosts: &mut HashMap<String, &'c str>,
    err: &mut impl FnMut(String, String),
) {
    if site.hosts.is_empty() {
        err(format!("{p}.hosts"), "at least one host name (or `*`) is required".into());
    }
    for (i, h) in site.hosts.iter().enumerate() {
        let lower = h.to_ascii_lowercase();
        if let Err(e) = check_host_pattern(&lower) {
            err(format!("{p}.hosts[{i}]"), e.to_string());
        } else if let Some(other) = hosts.insert(lower, name) {
            err(format!("{p}.hosts[{i}]"), format!("`{h}` is already served by site `{other}`"));
        }
    }
}

/// One route (at `rp`) of a site; `paths` holds the paths of the site's routes checked before.
fn check_route<'c>(
    c: &Config,
    unread: &schema::Unread,
    rp: &str,
    r: &'c crate::Route,
    paths: &mut HashSet<&'c str>,
    err: &mut impl FnMut(String, String),
) {
    if !r.path.starts_with('/') {
        err(format!("{rp}.path"), "must start with `/`".into());
    }
    if !paths.insert(r.path.as_str()) {
        err(format!("{rp}.path"), format!("`{}` is routed twice in this site", r.path));
    }
    let known = |name: &str| c.upstreams.contains_key(name) || unread.has("upstreams", name);
    crate::split::check_destination(rp, &r.upstream, r.sticky.as_ref(), r.mirror.as_ref(), known, err);
    if r.stream_timeout.is_some_and(|d| d.0.is_zero()) {
        err(format!("{rp}.stream_timeout"), "must be more than 0 (leave it out for none)".into());
    }
    if let Some(cors) = &r.cors {
        cors.check(rp, err);
    }
    if let Some(compression) = &r.compression {
        compression.check(rp, err);
    }
    if let Some(rw) = &r.rewrite {
        if !rw.starts_with('/') {
            err(format!("{rp}.rewrite"), "must start with `/`".into());
        }
        if r.strip_prefix {
            err(format!("{rp}.rewrite"), "use either strip_prefix or rewrite, not both".into());
        }
    }
    if let crate::model::HostHeader::Literal(h) = &r.host_header {
        if h.is_empty() || h.bytes().any(|b| b <= b' ' || b == 0x7f) {
            err(format!("{rp}.host_header"), "must be `preserve`, `upstream` or a host name".into());
        }
    }
}

fn validate_shutdown_grace(c: &Config, err: &mut impl FnMut(String, String)) {
    if c.shutdown_grace.0 > std::time::Duration::from_secs(3600) {
        err("shutdown_grace".into(), "at most 1h".into());
    }
}

/// Checks a lower-cased host pattern: `*`, `*.suffix` or an exact name.
pub(crate) fn check_host_pattern(h: &str) -> Result<(), ValueError> {
    if h == "*" {
        return Ok(());
    }
    let name = h.strip_prefix("*.").unwrap_or(h);
    let ok = !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    if ok {
        Ok(())
    } else {
        Err(ValueError::NotAHostPattern { host: h.into() })
    }
}

/// The `redis` section's deployment, login and TLS settings.
fn check_redis(r: &crate::model::Redis, err: &mut impl FnMut(String, String)) {
    let kinds = [r.url.is_some(), r.sentinel.is_some(), r.cluster.is_some()].into_iter().filter(|&k| k).count();
    if kinds != 1 {
        err("redis".into(), "set exactly one of `url` (one server), `sentinel` or `cluster`".into());
    }
    if let Some(url) = &r.url {
        let Some(rest) = url.strip_prefix("redis://").or_else(|| url.strip_prefix("rediss://")) else {
            err("redis.url".into(), "expected redis://host:port[/db] or rediss://host:port[/db]".into());
            return;
        };
        let authority = rest.split('/').next().unwrap_or_default();
        if authority.contains('@') {
            err(
                "redis.url".into(),
                "no credentials in the URL: set `username` and `password_file`, so no secret sits in the configuration"
                    .into(),
            );
        }
        if r.tls.is_some() && !url.starts_with("rediss://") {
            err("redis.tls".into(), "TLS settings need a rediss:// URL".into());
        }
        if r.db != 0 {
            err("redis.db".into(), "with `url`, name the database in the URL's path".into());
        }
    }
    let check_nodes = |setting: &str, nodes: &[String], err: &mut dyn FnMut(String, String)| {
        if nodes.is_empty() {
            err(setting.into(), "needs at least one host:port".into());
        }
        for (i, node) in nodes.iter().enumerate() {
            let ok = node.rsplit_once(':').is_some_and(|(host, port)| {
                !host.is_empty() && !host.contains(['/', '@', ' ']) && port.parse::<u16>().is_ok_and(|p| p != 0)
            });
            if !ok {
                err(format!("{setting}[{i}]"), format!("expected host:port, got {node:?}"));
            }
        }
    };
    if let Some(s) = &r.sentinel {
        if s.master.is_empty() {
            err("redis.sentinel.master".into(), "needs the group's name".into());
        }
        check_nodes("redis.sentinel.nodes", &s.nodes, &mut *err);
        if s.username.is_some() && s.password_file.is_none() {
            err("redis.sentinel.username".into(), "needs `password_file`".into());
        }
    }
    if let Some(nodes) = &r.cluster {
        check_nodes("redis.cluster", nodes, &mut *err);
        if r.db != 0 {
            err("redis.db".into(), "a Redis Cluster has only database 0".into());
        }
    }
    if r.username.is_some() && r.password_file.is_none() {
        err("redis.username".into(), "needs `password_file`".into());
    }
    if let Some(t) = &r.tls {
        if t.cert.is_some() != t.key.is_some() {
            err("redis.tls".into(), "a client certificate needs both `cert` and `key`".into());
        }
        if t.server_name.is_some() && r.url.is_none() {
            err(
                "redis.tls.server_name".into(),
                "only with `url`: Sentinel and Cluster nodes are checked against the addresses they announce".into(),
            );
        }
    }
}

/// An HTTP/3 listener's settings.
fn check_http3(p: &str, l: &crate::Listener, err: &mut impl FnMut(String, String)) {
    if l.http3 {
        match &l.tls {
            None => err(format!("{p}.http3"), "HTTP/3 needs a TLS listener (`tls`)".into()),
            Some(tls) if !tls.versions.contains(&crate::TlsVersion::Tls13) => {
                err(format!("{p}.http3"), "HTTP/3 needs TLS 1.3 among `tls.versions`".into())
            }
            Some(_) => {}
        }
        if l.proxy_protocol.is_some() {
            err(format!("{p}.http3"), "QUIC has no PROXY protocol header: not with `proxy_protocol`".into());
        }
    }
    if let crate::AltSvc::Value(v) = &l.alt_svc {
        if v.is_empty() || !v.bytes().all(|b| b == b'\t' || (0x20..0x7f).contains(&b)) {
            err(format!("{p}.alt_svc"), "`auto`, `off` or a header value (visible ASCII)".into());
        }
    }
    let q = &l.quic;
    if !(1..=10_000).contains(&q.max_streams) {
        err(format!("{p}.quic.max_streams"), "must be between 1 and 10000".into());
    }
    if q.idle_timeout.0.is_zero() {
        err(format!("{p}.quic.idle_timeout"), "must be greater than zero".into());
    }
    for (field, size) in [("stream_window", q.stream_window.0), ("connection_window", q.connection_window.0)] {
        if !(16 << 10..=1 << 30).contains(&size) {
            err(format!("{p}.quic.{field}"), "must be between 16k and 1g".into());
        }
    }
    if q.connection_window.0 < q.stream_window.0 {
        err(format!("{p}.quic.connection_window"), "must be at least `quic.stream_window`".into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
listeners:
  main: { bind: "127.0.0.1:0" }
upstreams:
  api:
    targets: ["127.0.0.1:9001", { address: "127.0.0.1:9002", weight: 3 }]
    balance: consistent_hash
    hash_key: header:X-User
sites:
  example:
    hosts: ["example.com", "*.example.com"]
    routes:
      - { path: /api/, upstream: api, strip_prefix: true }
"#;

    #[test]
    fn good_config_compiles() {
        let c = compile(GOOD).expect("valid");
        assert_eq!(c.upstreams["api"].targets[1].weight, 3);
        assert_eq!(c.upstreams["api"].hash_key, Some(crate::HashKey::Header("x-user".into())));
        assert!(c.reuse_port);
    }

    #[test]
    fn quickstart_compiles() {
        let c = compile(crate::QUICKSTART).expect("quick-start config is valid");
        assert!(c.listeners["https"].http3, "the quick start serves HTTP/3");
    }

    #[test]
    fn http3_needs_tls_1_3_and_sane_quic_settings() {
        let bad = r#"
tls: { self_signed: { dir: /tmp/x, names: [a.test] } }
listeners:
  plain: { bind: "127.0.0.1:0", http3: true }
  old: { bind: "127.0.0.1:0", http3: true, tls: { versions: [tls1.2] } }
  proxied: { bind: "127.0.0.1:0", http3: true, tls: {}, proxy_protocol: { trusted: [10.0.0.1] } }
  odd: { bind: "127.0.0.1:0", tls: {}, alt_svc: "h3=\":443\"\u0001" }
  limits: { bind: "127.0.0.1:0", tls: {}, http3: true, quic: { max_streams: 0, idle_timeout: 0s, stream_window: 1k, connection_window: 16k } }
  fine: { bind: "127.0.0.1:0", tls: {}, http3: true, alt_svc: off, quic: { max_streams: 50 } }
"#;
        let errs = compile(bad).expect_err("invalid").0;
        let paths: Vec<&str> = errs.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "listeners.limits.quic.max_streams",
                "listeners.limits.quic.idle_timeout",
                "listeners.limits.quic.stream_window",
                "listeners.odd.alt_svc",
                "listeners.old.http3",
                "listeners.plain.http3",
                "listeners.proxied.http3",
            ],
            "{errs:?}"
        );
        let good = compile("tls: {self_signed: {dir: /tmp/x, names: [a.test]}}\nlisteners:\n  h: { bind: \"127.0.0.1:0\", tls: {}, http3: true, alt_svc: 'h3=\":443\"' }\n")
            .expect("valid");
        assert_eq!(good.listeners["h"].alt_svc, crate::AltSvc::Value("h3=\":443\"".into()));
        assert_eq!(good.listeners["h"].quic.max_streams, 100);
        assert!(!good.listeners["h"].quic.early_data);
        let no_cache = "tls: {self_signed: {dir: /tmp/x, names: [a.test]}, session_cache: off}\nlisteners:\n  h: { bind: \"127.0.0.1:0\", tls: {}, http3: true, quic: { early_data: true } }\n";
        let errs = compile(no_cache).expect_err("0-RTT without a session cache").0;
        assert_eq!(errs.iter().map(|e| e.path.as_str()).collect::<Vec<_>>(), ["listeners.h.quic.early_data"]);
    }

    #[test]
    fn every_error_is_reported_with_its_path() {
        let bad = r#"
workers: many
bogus: 1
listeners:
  main: { bind: "127.0.0.1:99999" }
  other: { bind: "127.0.0.1:0", color: blue }
upstreams:
  api:
    targets: [{ address: "127.0.0.1:9001", weight: 0 }]
    timeouts: { connect: 5 parsecs }
  hashed:
    targets: ["127.0.0.1:9003"]
    balance: consistent_hash
sites:
  a:
    hosts: ["example.com"]
    routes: [{ path: api, upstream: nowhere }]
  b:
    hosts: ["EXAMPLE.com", "bad host"]
    routes: []
"#;
        let errs = compile(bad).expect_err("invalid").0;
        let paths: Vec<&str> = errs.iter().map(|e| e.path.as_str()).collect();
        for expected in [
            "workers",
            "bogus",
            "listeners.main.bind",
            "listeners.other.color",
            "upstreams.api.timeouts.connect",
            "upstreams.hashed.hash_key",
            "sites.a.routes[0].path",
            "sites.a.routes[0].upstream",
            "sites.b.hosts[0]",
            "sites.b.hosts[1]",
        ] {
            assert!(paths.iter().any(|p| p.starts_with(expected)), "missing {expected} in {paths:?}");
        }
    }

    #[test]
    fn grpc_failures_are_status_names_or_numbers() {
        let text = GOOD.replace(
            "    balance: consistent_hash\n",
            "    balance: consistent_hash\n    passive_health: { grpc_failures: [unavailable, 4, DATA_LOSS] }\n",
        );
        let c = compile(&text).expect("valid");
        let codes: Vec<u8> = c.upstreams["api"].passive_health.grpc_failures.iter().map(|c| c.0).collect();
        assert_eq!(codes, [14, 4, 15]);
        for bad in ["17", "NOPE", "-1"] {
            let text = GOOD.replace(
                "    balance: consistent_hash\n",
                &format!("    balance: consistent_hash\n    passive_health: {{ grpc_failures: [{bad}] }}\n"),
            );
            let errs = compile(&text).expect_err(bad).0;
            assert!(errs[0].path.starts_with("upstreams.api.passive_health.grpc_failures"), "{bad}: {}", errs[0].path);
        }
    }

    #[test]
    fn weight_zero_is_rejected() {
        let text = GOOD.replace("weight: 3", "weight: 0");
        let errs = compile(&text).expect_err("invalid").0;
        assert_eq!(errs[0].path, "upstreams.api.targets[1].weight");
    }

    #[test]
    fn http2_stream_limit_defaults_to_256_and_is_bounded() {
        assert_eq!(compile(GOOD).expect("valid").listeners["main"].http2_max_concurrent_streams, 256);
        let text =
            GOOD.replace(r#"bind: "127.0.0.1:0" }"#, r#"bind: "127.0.0.1:0", http2_max_concurrent_streams: 0 }"#);
        let errs = compile(&text).expect_err("invalid").0;
        assert_eq!(errs[0].path, "listeners.main.http2_max_concurrent_streams");
        assert_eq!(errs[0].message, "must be between 1 and 10000");
    }

    #[test]
    fn syntax_error_has_a_line() {
        let errs = compile("listeners: [\n").expect_err("invalid").0;
        assert!(errs[0].path.starts_with("line "), "{errs:?}");
    }
}
