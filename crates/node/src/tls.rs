//! TLS wiring: certificates from the configuration and the store, the ticket key ring and the
//! session cache (kept across reloads, so sessions survive them), and one acceptor per TLS
//! listener.

use crate::error::{Cause, NodeError, Setting};
use gatehouse_cluster::{Cluster, RedisStats};
use gatehouse_config::{Config, Listener, ListenerProtocol, SessionCacheMode, Tickets, TlsVersion};
use gatehouse_redis::{ClientOptions, Deployment, Tls};
use gatehouse_tls::bundle::{self, Bundle};
use gatehouse_tls::catalog::Catalog;
use gatehouse_tls::certs::Store;
use gatehouse_tls::challenge::Board;
use gatehouse_tls::client_auth::{ClientAuthIndex, SitePolicy};
use gatehouse_tls::dir::DirStore;
use gatehouse_tls::redis_store::RedisStore;
use gatehouse_tls::session::SessionCache;
use gatehouse_tls::ticket::{KeyMaterial, Ticketer};
use gatehouse_tls::{Certs, CertsOptions, Offer, Resumption, TlsAcceptor, TlsStats};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// Longest ticket lifetime TLS 1.3 allows (RFC 8446 §4.6.1).
const MAX_TICKET_LIFETIME: u64 = 7 * 24 * 3600;

/// The client-certificate policies of the sites, with every unreadable CA file listed.
fn client_auth(config: &Config) -> Result<ClientAuthIndex, Vec<Setting>> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let mut index = ClientAuthIndex::default();
    let mut errors = Vec::new();
    for (name, site) in &config.sites {
        let Some(ca) = &site.client_auth else { continue };
        let path = format!("sites.{name}.client_auth.ca");
        let mut roots = rustls::RootCertStore::empty();
        let shown = gatehouse_files::shown(&ca.ca);
        match gatehouse_files::read(&ca.ca) {
            Ok(pem) => {
                for c in CertificateDer::pem_slice_iter(&pem) {
                    let added = match c {
                        Ok(c) => roots.add(c).map_err(Cause::from),
                        Err(e) => Err(Cause::from(e)),
                    };
                    if let Err(e) = added {
                        errors.push(Setting::new(format!("{path}: {shown}"), e));
                    }
                }
            }
            Err(e) => {
                errors.push(Setting::new(format!("{path}: cannot read {shown}"), e));
                continue;
            }
        }
        if roots.is_empty() {
            errors.push(Setting::new(path, format!("{shown} holds no CA certificate")));
            continue;
        }
        let builder = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            gatehouse_tls::bundle::provider(),
        );
        let builder = if ca.required { builder } else { builder.allow_unauthenticated() };
        match builder.build() {
            Ok(verifier) => {
                let policy = Arc::new(SitePolicy { site: name.as_str().into(), verifier });
                index.add(site.hosts.iter().map(String::as_str), policy);
            }
            Err(e) => errors.push(Setting::new(path, e)),
        }
    }
    if errors.is_empty() {
        Ok(index)
    } else {
        Err(errors)
    }
}

/// A reloaded configuration's certificates, read but not yet applied.
pub struct Staged {
    certs: Arc<Certs>,
    /// New configured bundles for the running resolver; `None` when `certs` is a new resolver.
    fixed: Option<Vec<Arc<Bundle>>>,
    store: Option<gatehouse_config::CertStore>,
}

impl Staged {
    /// The resolver the reloaded configuration will use.
    pub fn certs(&self) -> &Arc<Certs> {
        &self.certs
    }
}

/// The ACME manager running for a `tls.acme` section.
struct AcmeRun {
    config: gatehouse_config::Acme,
    certs: Arc<Certs>,
    manager: Arc<gatehouse_acme::Manager>,
    task: JoinHandle<()>,
}

/// The challenge board as the proxy asks it for HTTP-01 answers.
#[derive(Debug)]
struct Http01Answers(Arc<Board>);

impl gatehouse_proxy::acme::Http01 for Http01Answers {
    fn key_authorization<'a>(
        &'a self,
        token: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<String>> + Send + 'a>> {
        Box::pin(self.0.http01(token))
    }
}

/// The process's TLS state.
pub struct TlsRuntime {
    certs: Arc<Certs>,
    /// ACME challenge answers (kept across reloads, so an order survives one).
    board: Arc<Board>,
    acme: Option<AcmeRun>,
    /// The running manager's on-demand hook, read by the acceptors at a name's first handshake.
    on_demand: Arc<gatehouse_tls::on_demand::OnDemandSlot>,
    /// The running manager, for the admin API.
    acme_slot: Arc<gatehouse_acme::ManagerSlot>,
    /// ACME counters, kept across the reloads that replace the manager.
    acme_stats: Arc<gatehouse_acme::AcmeStats>,
    cluster: Option<Arc<Cluster>>,
    stats: Arc<TlsStats>,
    store: Option<gatehouse_config::CertStore>,
    resumption: Resumption,
    rotation: Option<JoinHandle<()>>,
}

pub(crate) use gatehouse_control::now_secs;

/// Checks the certificate files of a configuration, as `gatehouse check` does: every error,
/// one per line. The self-signed certificate is checked only if it has been made already.
pub fn check_certificates(config: &Config) -> Result<(), NodeError> {
    let mut config = config.clone();
    if let Some(ss) = &config.tls.self_signed {
        if !ss.dir.join("self-signed.pem").exists() {
            config.tls.self_signed = None;
        }
    }
    let errors: Vec<Setting> = [
        fixed_bundles(&config).err(),
        client_auth(&config).err(),
        upstream_tls(&config).err(),
        acme_settings(&config).err(),
    ]
    .into_iter()
    .flatten()
    .flatten()
    .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(NodeError::Settings(errors))
    }
}

/// `tls.acme` with its files read, as `check` and `run` both read them.
fn acme_settings(config: &Config) -> Result<Option<gatehouse_acme::Settings>, Vec<Setting>> {
    let Some(acme) = &config.tls.acme else { return Ok(None) };
    gatehouse_acme::Settings::load(acme)
        .map(Some)
        .map_err(|errors| errors.into_iter().map(|e| Setting::new(e.path, e.message)).collect())
}

/// Reads the files of every upstream's `tls` (CA, client certificate and key) as applying the
/// configuration would, each error said as applying says it (`upstreams.u.tls.ca: cannot read …`).
fn upstream_tls(config: &Config) -> Result<(), Vec<Setting>> {
    let errors: Vec<Setting> = config
        .upstreams
        .iter()
        .filter_map(|(name, u)| Some((name, u, u.tls.as_ref()?)))
        .filter_map(|(name, u, t)| gatehouse_upstream::TlsClient::new(t, u.protocol).err().map(|e| (name, e)))
        .map(|(name, e)| {
            let text = e.to_string();
            let (field, why) = text.split_once(": ").unwrap_or(("tls", text.as_str()));
            Setting::new(format!("upstreams.{name}.{field}"), why.to_string())
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Loads the bundles named in the configuration (and the quick start's self-signed one), with
/// every error listed by its path.
fn fixed_bundles(config: &Config) -> Result<Vec<Arc<Bundle>>, Vec<Setting>> {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let now = now_secs();
    for (i, c) in config.tls.certificates.iter().enumerate() {
        let path = format!("tls.certificates[{i}]");
        let mut pem = match std::fs::read(&c.cert) {
            Ok(p) => p,
            Err(e) => {
                errors.push(Setting::new(format!("{path}.cert: cannot read {}", c.cert.display()), e));
                continue;
            }
        };
        if let Some(key) = &c.key {
            match std::fs::read(key) {
                Ok(k) => {
                    pem.push(b'\n');
                    pem.extend_from_slice(&k);
                }
                Err(e) => {
                    errors.push(Setting::new(format!("{path}.key: cannot read {}", key.display()), e));
                    continue;
                }
            }
        }
        let ocsp = match &c.ocsp {
            Some(p) => match std::fs::read(p) {
                Ok(o) => Some(o),
                Err(e) => {
                    errors.push(Setting::new(format!("{path}.ocsp: cannot read {}", p.display()), e));
                    continue;
                }
            },
            None => None,
        };
        match bundle::parse(&pem, ocsp, now) {
            Ok((b, warnings)) => {
                for w in warnings {
                    tracing::warn!(file = %c.cert.display(), "{w}");
                }
                out.push(Arc::new(b));
            }
            Err(e) => errors.push(Setting::new(format!("{path}: {}", c.cert.display()), e)),
        }
    }
    if let Some(ss) = &config.tls.self_signed {
        let names: Vec<&str> = ss.names.iter().map(String::as_str).collect();
        let loaded = gatehouse_tls::issue::ensure_self_signed(&ss.dir, &names)
            .and_then(|path| DirStore::load(&path, now).map_err(|e| e.at(path.display().to_string())));
        match loaded {
            Ok(b) => out.push(b),
            Err(e) => errors.push(Setting::new("tls.self_signed", e)),
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

fn certs_options(config: &Config) -> CertsOptions {
    CertsOptions {
        cache_size: config.tls.cert_cache_size,
        negative_ttl: config.tls.negative_cache_ttl.0,
        scan_interval: config.tls.store.as_ref().map_or(Duration::from_secs(2), |s| s.scan_interval.0),
    }
}

/// The cluster's Redis and keys, when the configuration has a `redis` section.
pub fn cluster(config: &Config, stats: Arc<RedisStats>) -> Result<Option<Arc<Cluster>>, NodeError> {
    let Some(r) = &config.redis else { return Ok(None) };
    let secret = cluster_secret(r)?;
    Cluster::new(redis_options(r)?, &r.prefix, &secret, stats).map(Some).map_err(NodeError::Cluster)
}

/// `redis.secret_file` read (surrounding white space dropped) and judged, as `run` and `check`
/// both do.
pub(crate) fn cluster_secret(r: &gatehouse_config::Redis) -> Result<Vec<u8>, NodeError> {
    let secret = std::fs::read(&r.secret_file).map_err(|source| NodeError::File {
        setting: Some("redis.secret_file"),
        action: "read",
        path: r.secret_file.clone(),
        source,
    })?;
    let secret = secret.trim_ascii().to_vec();
    Cluster::check_secret(&secret).map_err(NodeError::Cluster)?;
    Ok(secret)
}

/// The Redis client's options from the `redis` section, with the password and TLS files read.
pub fn redis_options(r: &gatehouse_config::Redis) -> Result<ClientOptions, NodeError> {
    let read = |setting: &'static str, path: &std::path::PathBuf| {
        std::fs::read(path).map_err(|source| NodeError::File {
            setting: Some(setting),
            action: "read",
            path: path.clone(),
            source,
        })
    };
    let secret_text = |setting: &'static str, path: &std::path::PathBuf| -> Result<String, NodeError> {
        let bytes = read(setting, path)?;
        String::from_utf8(bytes.trim_ascii_end().to_vec())
            .map_err(|_| NodeError::Settings(vec![Setting::new(setting, "the file is not UTF-8 text")]))
    };
    let invalid = |setting: &'static str, e: gatehouse_redis::Error| {
        NodeError::Settings(vec![Setting::new(setting, e.to_string())])
    };
    let mut opts = match (&r.url, &r.sentinel, &r.cluster) {
        (Some(url), _, _) => ClientOptions::from_url(url).map_err(|e| invalid("redis.url", e))?,
        (None, Some(s), _) => ClientOptions {
            deployment: Deployment::Sentinel { master: s.master.clone(), nodes: s.nodes.clone() },
            db: r.db,
            sentinel_username: s.username.clone(),
            sentinel_password: s
                .password_file
                .as_ref()
                .map(|p| secret_text("redis.sentinel.password_file", p))
                .transpose()?,
            ..ClientOptions::default()
        },
        (None, None, Some(nodes)) => {
            ClientOptions { deployment: Deployment::Cluster { nodes: nodes.clone() }, ..ClientOptions::default() }
        }
        (None, None, None) => {
            return Err(NodeError::Settings(vec![Setting::new("redis", "set one of `url`, `sentinel` or `cluster`")]))
        }
    };
    opts.username = r.username.clone();
    opts.password = r.password_file.as_ref().map(|p| secret_text("redis.password_file", p)).transpose()?;
    if let Some(t) = &r.tls {
        opts.tls = Some(Tls {
            ca: t.ca.as_ref().map(|p| read("redis.tls.ca", p)).transpose()?,
            cert: t.cert.as_ref().map(|p| read("redis.tls.cert", p)).transpose()?,
            key: t.key.as_ref().map(|p| read("redis.tls.key", p)).transpose()?,
            server_name: t.server_name.clone(),
        });
    }
    opts.connect_timeout = r.connect_timeout.0;
    opts.command_timeout = r.command_timeout.0;
    Ok(opts)
}

fn store_of(config: &Config, cluster: Option<&Arc<Cluster>>) -> Result<Option<Store>, NodeError> {
    let Some(s) = &config.tls.store else { return Ok(None) };
    if let Some(dir) = &s.dir {
        return Ok(Some(Store::Dir(DirStore::new(dir.clone()))));
    }
    match cluster {
        Some(c) => Ok(Some(Store::Redis(RedisStore::new(c.clone())))),
        None => Err(NodeError::Settings(vec![Setting::new("tls.store.redis", "needs the `redis` section")])),
    }
}

impl TlsRuntime {
    /// TLS state for `config`. Runs on the control runtime: background work (ticket rotation,
    /// store watching) is spawned there.
    pub async fn new(config: &Config) -> Result<Self, NodeError> {
        let fixed = fixed_bundles(config).map_err(NodeError::Settings)?;
        let stats = Arc::new(TlsStats::default());
        let cluster = cluster(config, stats.redis.clone())?;
        if let Some(c) = &cluster {
            // The client connects in the background; give it its connect timeout before the
            // first use, so a node whose Redis is up starts on the cluster's state.
            if let Err(e) = c.connected().await {
                tracing::warn!(error = %e, "starting without Redis; TLS state is local until it answers");
            }
        }
        let store = config.tls.store.clone();
        let certs = Certs::new(fixed, store_of(config, cluster.as_ref())?, certs_options(config), stats.clone());
        Certs::watch(&certs);
        let t = &config.tls;
        let ticketer = match t.tickets {
            Tickets::Off => None,
            Tickets::Local | Tickets::Cluster => {
                let lifetime = t.ticket_window.0.saturating_sub(t.ticket_rotation.0).as_secs().min(MAX_TICKET_LIFETIME);
                Some(
                    Ticketer::new(lifetime as u32, stats.clone())
                        .ok_or(NodeError::NoRandomness("cannot make a ticket key"))?,
                )
            }
        };
        let sessions = match (t.session_cache, &cluster) {
            (SessionCacheMode::Off, _) => None,
            (SessionCacheMode::Redis, Some(c)) => {
                Some(Arc::new(SessionCache::shared(t.session_cache_size, t.session_timeout.0, c.clone())))
            }
            _ => Some(Arc::new(SessionCache::new(t.session_cache_size, t.session_timeout.0))),
        };
        let (rotation, window) = (t.ticket_rotation.0, t.ticket_window.0);
        let rotation_task = match (&ticketer, t.tickets, &cluster) {
            (Some(tk), Tickets::Cluster, Some(c)) => {
                // Every node reads the ring often enough to follow a rotation within seconds.
                let poll = (rotation / 4).clamp(Duration::from_millis(200), Duration::from_secs(10));
                let (tx, rx) = tokio::sync::oneshot::channel();
                let task = tokio::spawn(gatehouse_tls::cluster::run_tickets(
                    c.clone(),
                    tk.clone(),
                    rotation,
                    window,
                    poll,
                    tx,
                ));
                // Sealing with the cluster's key from the first connection on; bounded, so a
                // node starts even when Redis is away.
                let wait = config.redis.as_ref().map_or(Duration::from_secs(1), |r| r.connect_timeout.0 * 2);
                if tokio::time::timeout(wait, rx).await.is_err() {
                    tracing::warn!("starting without the cluster's ticket keys; they are loaded when Redis answers");
                }
                Some(task)
            }
            (Some(tk), _, _) => Some(tokio::spawn(rotate_locally(tk.clone(), rotation, window))),
            (None, _, _) => None,
        };
        Ok(TlsRuntime {
            certs,
            board: Board::new(cluster.clone(), stats.clone()),
            acme: None,
            on_demand: Arc::default(),
            acme_slot: Arc::default(),
            acme_stats: Arc::default(),
            store,
            resumption: Resumption { ticketer, sessions },
            rotation: rotation_task,
            stats,
            cluster,
        })
    }

    /// Reads a reloaded configuration's certificates without applying them, and its acceptors.
    /// Sessions and ticket keys survive reloads; ticket and session settings change only on
    /// restart.
    pub fn stage(&self, config: &Config) -> Result<Staged, NodeError> {
        let fixed = fixed_bundles(config).map_err(NodeError::Settings)?;
        acme_settings(config).map_err(NodeError::Settings)?;
        let staged = if config.tls.store != self.store {
            let store = store_of(config, self.cluster.as_ref())?;
            Staged {
                certs: Certs::new(fixed, store, certs_options(config), self.stats.clone()),
                fixed: None,
                store: config.tls.store.clone(),
            }
        } else {
            Staged { certs: self.certs.clone(), fixed: Some(fixed), store: self.store.clone() }
        };
        Ok(staged)
    }

    /// Applies what [`TlsRuntime::stage`] read, `config` being the configuration it was read
    /// from.
    pub fn commit(&mut self, staged: Staged, config: &Config) -> Result<(), NodeError> {
        match staged.fixed {
            Some(fixed) => staged.certs.set_fixed(fixed),
            None => Certs::watch(&staged.certs),
        }
        self.certs = staged.certs;
        self.store = staged.store;
        self.follow_acme(config)
    }

    /// Starts, restarts or stops the ACME manager for `config`'s `tls.acme` (kept running when
    /// neither it nor the certificate store changed). Runs on the control runtime.
    pub fn follow_acme(&mut self, config: &Config) -> Result<(), NodeError> {
        let same = match (&self.acme, &config.tls.acme) {
            (Some(run), Some(acme)) => run.config == *acme && Arc::ptr_eq(&run.certs, &self.certs),
            (None, None) => true,
            _ => false,
        };
        if same {
            return Ok(());
        }
        if let Some(old) = self.acme.take() {
            old.task.abort();
            old.manager.stop();
        }
        self.on_demand.set(None);
        self.acme_slot.set(None);
        let Some(settings) = acme_settings(config).map_err(NodeError::Settings)? else { return Ok(()) };
        let Some(acme) = config.tls.acme.clone() else { return Ok(()) };
        let (catalog, keep) = match (&config.tls.store, &self.cluster) {
            (Some(gatehouse_config::CertStore { dir: Some(dir), .. }), _) => {
                (Catalog::Dir(dir.clone()), gatehouse_acme::account::Keep::Dir(dir.clone()))
            }
            (Some(_), Some(c)) => {
                (Catalog::Redis(RedisStore::new(c.clone())), gatehouse_acme::account::Keep::Redis(c.clone()))
            }
            _ => return Err(NodeError::Settings(vec![Setting::new("tls.acme", "needs `tls.store`")])),
        };
        let on_demand = settings.on_demand.is_some();
        let manager = gatehouse_acme::Manager::new(gatehouse_acme::Parts {
            settings,
            catalog,
            certs: self.certs.clone(),
            board: self.board.clone(),
            keep,
            locks: gatehouse_acme::lock::Locks::new(self.cluster.clone()),
            stats: self.acme_stats.clone(),
        })
        .map_err(|e| NodeError::Settings(vec![Setting::new("tls.acme", e)]))?;
        if on_demand {
            self.on_demand.set(Some(manager.clone() as Arc<dyn gatehouse_tls::on_demand::OnDemand>));
        }
        self.acme_slot.set(Some(manager.clone()));
        let task = tokio::spawn(manager.clone().run());
        self.acme = Some(AcmeRun { config: acme, certs: self.certs.clone(), manager, task });
        Ok(())
    }

    /// ACME counters, for `/metrics`.
    pub fn acme_stats(&self) -> &Arc<gatehouse_acme::AcmeStats> {
        &self.acme_stats
    }

    /// Where the admin API finds the running ACME manager.
    pub fn acme_slot(&self) -> &Arc<gatehouse_acme::ManagerSlot> {
        &self.acme_slot
    }

    /// The HTTP-01 answers for a snapshot of `config` (none without `tls.acme`).
    pub fn http01(&self, config: &Config) -> Option<Arc<dyn gatehouse_proxy::acme::Http01>> {
        config
            .tls
            .acme
            .as_ref()
            .map(|_| Arc::new(Http01Answers(self.board.clone())) as Arc<dyn gatehouse_proxy::acme::Http01>)
    }

    /// The cluster's Redis and keys, when there is a `redis` section.
    pub fn cluster(&self) -> Option<&Arc<Cluster>> {
        self.cluster.as_ref()
    }

    /// Handshake and certificate counters (kept across reloads).
    pub fn stats(&self) -> &Arc<TlsStats> {
        &self.stats
    }

    /// Recounts the certificates in memory that expire within 30 days.
    pub fn refresh_expiring(&self) {
        let n = self.certs.expiring_before(now_secs() + 30 * 24 * 3600);
        self.stats.certs_expiring_30d.store(n as u64, std::sync::atomic::Ordering::Relaxed);
    }

    /// The shared certificate resolver.
    pub fn certs(&self) -> &Arc<Certs> {
        &self.certs
    }

    /// One acceptor per TLS listener of `config`, resolving from `certs`.
    pub fn acceptors(
        &self,
        config: &Config,
        certs: &Arc<Certs>,
    ) -> Result<BTreeMap<String, Arc<TlsAcceptor>>, NodeError> {
        let client_auth = Arc::new(client_auth(config).map_err(NodeError::Settings)?);
        let mut out = BTreeMap::new();
        for (name, l) in &config.listeners {
            let made = self
                .acceptor(config, l, certs, &client_auth)
                .map_err(|e| NodeError::Settings(vec![Setting::new(format!("listeners.{name}.tls"), e)]))?;
            if let Some(a) = made {
                out.insert(name.clone(), Arc::new(a));
            }
        }
        Ok(out)
    }

    fn acceptor(
        &self,
        config: &Config,
        l: &Listener,
        certs: &Arc<Certs>,
        client_auth: &Arc<ClientAuthIndex>,
    ) -> Result<Option<TlsAcceptor>, &'static str> {
        let Some(lt) = &l.tls else { return Ok(None) };
        let mut provider = gatehouse_tls::bundle::crypto_provider();
        // In the listener's order of preference, else AES-128-GCM first (its key schedule hashes
        // with SHA-256, which CPUs accelerate: a full TLS 1.3 handshake costs ~13 % less CPU than
        // with SHA-384), then AES-256-GCM, then ChaCha20, as BoringSSL and Go order them.
        let rank = |s: &rustls::SupportedCipherSuite| {
            let name = s.suite().as_str();
            let at = match &lt.ciphers {
                Some(names) => name.and_then(|n| names.iter().position(|w| w == n)),
                None => name.and_then(|n| gatehouse_config::PREFERRED_CIPHER_SUITES.iter().position(|w| *w == n)),
            };
            at.unwrap_or(usize::MAX)
        };
        provider.cipher_suites.retain(|s| rank(s) != usize::MAX);
        provider.cipher_suites.sort_by_key(rank);
        if provider.cipher_suites.is_empty() {
            return Err("no usable cipher suite");
        }
        let versions = lt
            .versions
            .iter()
            .map(|v| match v {
                TlsVersion::Tls12 => &rustls::version::TLS12,
                TlsVersion::Tls13 => &rustls::version::TLS13,
            })
            .collect();
        let alpn: Vec<Vec<u8>> = match l.protocol {
            ListenerProtocol::Auto => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
            ListenerProtocol::Http1 => vec![b"http/1.1".to_vec()],
            ListenerProtocol::H2c => vec![b"h2".to_vec()],
        };
        let default_name = lt
            .default_certificate
            .clone()
            .or_else(|| config.tls.default_certificate.clone())
            .or_else(|| config.tls.self_signed.as_ref().and_then(|s| s.names.first().cloned()))
            .or_else(|| {
                // The one configured certificate, when it is all the listener can serve: clients
                // that send no name (Go's and others' for an IP address) get it.
                let sole = config.tls.certificates.len() == 1 && config.tls.store.is_none();
                sole.then(|| certs.sole_fixed_name()).flatten()
            });
        let offer = Offer {
            provider: Arc::new(provider),
            prefer_server_ciphers: lt.prefer_server_ciphers,
            versions,
            alpn,
            default_name,
            client_auth: client_auth.clone(),
            acme: config.tls.acme.as_ref().map(|_| self.board.clone()),
            on_demand: config.tls.acme.as_ref().and_then(|a| a.on_demand.as_ref()).map(|_| self.on_demand.clone()),
        };
        Ok(Some(TlsAcceptor::new(offer, certs.clone(), self.resumption.clone())))
    }
}

impl Drop for TlsRuntime {
    fn drop(&mut self) {
        if let Some(r) = self.rotation.take() {
            r.abort();
        }
        if let Some(a) = self.acme.take() {
            a.task.abort();
            a.manager.stop();
        }
    }
}

/// Replaces the sealing key every `rotation`, keeping older keys for opening while younger than
/// `window`.
async fn rotate_locally(ticketer: Arc<Ticketer>, rotation: Duration, window: Duration) {
    let mut keys: Vec<KeyMaterial> = Vec::new();
    let mut tick = tokio::time::interval(rotation);
    loop {
        tick.tick().await;
        let now = now_secs() as u64;
        let Some(fresh) = KeyMaterial::generate(now) else {
            tracing::error!("cannot make a ticket key: no system randomness; keeping the current one");
            continue;
        };
        keys.insert(0, fresh);
        keys.retain(|k| now.saturating_sub(k.created) < window.as_secs());
        ticketer.install(&keys);
    }
}

/// The admin listener's TLS settings: its certificate, and client certificates required from
/// `client_ca` when set.
pub fn admin_server_config(t: &gatehouse_config::AdminTls) -> Result<Arc<rustls::ServerConfig>, NodeError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let refused = |at: String, e: Cause| NodeError::Settings(vec![Setting::new(at, e)]);
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&t.cert)
        .and_then(|it| it.collect::<Result<_, _>>())
        .map_err(|e| refused(format!("admin.tls.cert: {}", t.cert.display()), e.into()))?;
    let key = PrivateKeyDer::from_pem_file(&t.key)
        .map_err(|e| refused(format!("admin.tls.key: {}", t.key.display()), e.into()))?;
    let provider = gatehouse_tls::bundle::provider();
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| refused("admin.tls".into(), e.into()))?;
    let builder = match &t.client_ca {
        Some(ca) => {
            let at = || format!("admin.tls.client_ca: {}", ca.display());
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_file_iter(ca).map_err(|e| refused(at(), e.into()))? {
                let c = c.map_err(|e| refused(at(), e.into()))?;
                roots.add(c).map_err(|e| refused(at(), e.into()))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| refused("admin.tls.client_ca".into(), e.into()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(chain, key).map_err(|e| refused("admin.tls".into(), e.into()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
