//! The handshake: read the ClientHello, find the certificate for its name (asynchronously when
//! it must come from the store), then let rustls finish.
//!
//! ```text
//! bytes ─► Acceptor (ClientHello) ─► worker cache ─hit─► ServerConfig ─► handshake ─► TlsConn
//!                                        └─miss─► Certs::resolve (index, cache, store) ─┘
//! ```
//! Each worker keeps its own map from name to a ready `ServerConfig`, so a handshake for a known
//! name takes no lock; the map is emptied when [`Certs::generation`] moves on.

use crate::certs::Certs;
use crate::challenge::{Board, ACME_TLS_ALPN};
use crate::client_auth::{subject_of, ClientAuthIndex, SitePolicy};
use crate::cluster::Fetched;
use crate::conn::{Incomplete, SockIo, TlsConn};
use crate::index::{normalise, Pair, PairResolver};
use crate::on_demand::OnDemandSlot;
use crate::session::SessionCache;
use crate::stats::{Failure, Mechanism};
use crate::ticket::Ticketer;
use rustls::crypto::CryptoProvider;
use rustls::server::StoresServerSessions;
use rustls::server::{Acceptor, ServerConfig};
use rustls::{CipherSuite, HandshakeKind, ProtocolVersion, SupportedProtocolVersion};
use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use tokio::net::TcpStream;

/// A fatal `unrecognized_name` alert in a plaintext TLS 1.2 record, as sent before any key exists.
const UNRECOGNIZED_NAME: [u8; 7] = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x70];

/// Worker-local cache entries per listener before the map is emptied.
const WORKER_CACHE_MAX: usize = 100_000;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Session resumption shared by the listeners of a process.
#[derive(Debug, Clone, Default)]
pub struct Resumption {
    /// Stateless tickets (TLS 1.2 and 1.3); `None` turns them off.
    pub ticketer: Option<Arc<Ticketer>>,
    /// Session ids (TLS 1.2) and, without tickets, stateful TLS 1.3 tickets; `None` turns it off.
    pub sessions: Option<Arc<SessionCache>>,
}

/// What a TLS listener offers.
#[derive(Debug, Clone)]
pub struct Offer {
    /// The crypto provider, carrying the allowed cipher suites in the listener's order of
    /// preference.
    pub provider: Arc<CryptoProvider>,
    /// The server's order of preference decides the cipher suite (else the client's), except for a
    /// client whose first choice is a ChaCha20 suite: a client without AES hardware says so this
    /// way, and gets ChaCha20 (as BoringSSL and Go do).
    pub prefer_server_ciphers: bool,
    /// Protocol versions.
    pub versions: Vec<&'static SupportedProtocolVersion>,
    /// ALPN protocols, preferred first.
    pub alpn: Vec<Vec<u8>>,
    /// Certificate name for clients that send none, or a name nothing matches.
    pub default_name: Option<String>,
    /// Client-certificate policies by site host.
    pub client_auth: Arc<ClientAuthIndex>,
    /// TLS-ALPN-01 answers (RFC 8737), when ACME is on.
    pub acme: Option<Arc<Board>>,
    /// Certificates ordered at a name's first handshake, when `tls.acme.on_demand` is on.
    pub on_demand: Option<Arc<OnDemandSlot>>,
}

/// A TLS listener's handshake settings.
#[derive(Debug)]
pub struct TlsAcceptor {
    id: u64,
    offer: Offer,
    /// The provider with its ChaCha20 suites first, for clients that prefer them; `None` when
    /// the server's order does not decide or no ChaCha20 suite is offered.
    chacha_first: Option<Arc<CryptoProvider>>,
    certs: Arc<Certs>,
    resumption: Resumption,
}

/// A finished handshake.
#[derive(Debug)]
pub struct Established {
    /// The connection.
    pub conn: TlsConn,
    /// ALPN chose HTTP/2.
    pub h2: bool,
    /// A client certificate verified under a site's policy: the site and the subject.
    pub client_cert: Option<(Arc<str>, String)>,
}

/// The listener's ticketer, counting the tickets it opens: over QUIC, each is a resumed
/// handshake (quinn does not say which handshakes resumed).
#[derive(Debug)]
struct CountedTickets {
    inner: Arc<Ticketer>,
    stats: Arc<crate::stats::TlsStats>,
}

impl rustls::server::ProducesTickets for CountedTickets {
    fn enabled(&self) -> bool {
        self.inner.enabled()
    }

    fn lifetime(&self) -> u32 {
        self.inner.lifetime()
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        self.inner.encrypt(plain)
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        let opened = self.inner.decrypt(cipher);
        if opened.is_some() {
            self.stats.quic.resumed.inc();
        }
        opened
    }
}

/// The session cache, counting the tickets taken from it: over QUIC with 0-RTT on, each is a
/// resumed handshake.
#[derive(Debug)]
struct CountedSessions {
    inner: Arc<SessionCache>,
    stats: Arc<crate::stats::TlsStats>,
}

impl StoresServerSessions for CountedSessions {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        self.inner.put(key, value)
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.inner.get(key)
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        let taken = self.inner.take(key);
        if taken.is_some() {
            self.stats.quic.resumed.inc();
        }
        taken
    }

    fn can_cache(&self) -> bool {
        self.inner.can_cache()
    }
}

/// Chooses a QUIC handshake's certificate among those in memory (see
/// [`TlsAcceptor::quic_config`]).
#[derive(Debug)]
struct QuicResolver {
    certs: Arc<Certs>,
    default_name: Option<String>,
    /// Where a background lookup of a missing name runs.
    runtime: Option<tokio::runtime::Handle>,
}

impl rustls::server::ResolvesServerCert for QuicResolver {
    fn resolve(&self, hello: rustls::server::ClientHello<'_>) -> Option<Arc<rustls::sign::CertifiedKey>> {
        let sni = hello.server_name().and_then(normalise);
        let pair = match sni.as_deref().and_then(|n| self.certs.resolve_now(n)) {
            Some(p) => Some(p),
            None => {
                if let (Some(name), Some(rt)) = (sni.clone(), &self.runtime) {
                    let certs = self.certs.clone();
                    rt.spawn(async move { certs.resolve(&name).await });
                }
                self.default_name.as_deref().and_then(|d| self.certs.resolve_now(d))
            }
        };
        match pair {
            Some(pair) => {
                self.certs.stats.cert_cache_hits.inc();
                pair.choose(hello.signature_schemes()).map(|b| b.certified.clone())
            }
            None => {
                self.certs.stats.failed(Failure::UnknownName);
                None
            }
        }
    }
}

#[derive(Default)]
struct WorkerCache {
    generation: u64,
    /// By listener, then by the name the client sent (`""` for none).
    configs: HashMap<u64, HashMap<Box<str>, Arc<ServerConfig>>>,
}

thread_local! {
    static WORKER_CACHE: RefCell<WorkerCache> = RefCell::new(WorkerCache::default());
}

impl TlsAcceptor {
    /// Settings for one listener.
    pub fn new(mut offer: Offer, certs: Arc<Certs>, resumption: Resumption) -> Self {
        offer.default_name = offer.default_name.and_then(|n| normalise(&n));
        let chacha_first = (offer.prefer_server_ciphers
            && offer.provider.cipher_suites.iter().any(|s| is_chacha(s.suite())))
        .then(|| {
            let mut provider = (*offer.provider).clone();
            // A stable sort: the rest keep the listener's order.
            provider.cipher_suites.sort_by_key(|s| !is_chacha(s.suite()));
            Arc::new(provider)
        });
        // Two ids per listener: its configurations, and those with ChaCha20 first.
        let id = NEXT_ID.fetch_add(2, Relaxed);
        TlsAcceptor { id, offer, chacha_first, certs, resumption }
    }

    /// Whether the client's first choice among the suites this listener offers is ChaCha20.
    fn client_prefers_chacha(&self, offered: &[CipherSuite]) -> bool {
        self.chacha_first.is_some()
            && offered
                .iter()
                .find(|c| self.offer.provider.cipher_suites.iter().any(|s| s.suite() == **c))
                .is_some_and(|c| is_chacha(*c))
    }

    /// The certificates this listener serves from.
    pub fn certs(&self) -> &Arc<Certs> {
        &self.certs
    }

    fn build(
        &self,
        pair: Arc<Pair>,
        policy: Option<&Arc<SitePolicy>>,
        chacha: bool,
    ) -> Result<Arc<ServerConfig>, rustls::Error> {
        let provider = match (&self.chacha_first, chacha) {
            (Some(p), true) => p.clone(),
            _ => self.offer.provider.clone(),
        };
        let builder = ServerConfig::builder_with_provider(provider).with_protocol_versions(&self.offer.versions)?;
        let mut config = verify_clients(builder, policy).with_cert_resolver(Arc::new(PairResolver(pair)));
        let tickets = self.resumption.ticketer.clone().map(|t| t as Arc<dyn rustls::server::ProducesTickets>);
        self.settle(&mut config, self.offer.alpn.clone(), tickets);
        Ok(Arc::new(config))
    }

    /// What every configuration of this listener shares, TCP or QUIC: ALPN, no early data, the
    /// server's cipher order, and resumption by `tickets` (the listener's ticketer, as the
    /// caller wraps it) and the session cache.
    fn settle(
        &self,
        config: &mut ServerConfig,
        alpn: Vec<Vec<u8>>,
        tickets: Option<Arc<dyn rustls::server::ProducesTickets>>,
    ) {
        config.alpn_protocols = alpn;
        config.max_early_data_size = 0;
        config.ignore_client_order = self.offer.prefer_server_ciphers;
        match tickets {
            Some(t) => {
                config.ticketer = t;
                config.send_tls13_tickets = 1;
            }
            None => config.send_tls13_tickets = if self.resumption.sessions.is_some() { 1 } else { 0 },
        }
        match &self.resumption.sessions {
            Some(s) => config.session_storage = s.clone(),
            None => config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {}),
        }
    }

    /// The handshake settings of this listener's QUIC side (HTTP/3): TLS 1.3 only, ALPN `h3`,
    /// the same certificates and resumption (tickets sealed with the same keys, so a session
    /// made over TCP or QUIC on any node resumes on any other), no early data; client
    /// certificates verified under `policy`, the site's the client named (see
    /// [`TlsAcceptor::quic_prepare`]). With `early_data` (and no `policy`: a client is
    /// verified before anything it sends is served), a resuming client may send 0-RTT data.
    ///
    /// The certificate is chosen while the ClientHello is read, without waiting, among those in
    /// memory: [`TlsAcceptor::quic_prepare`] has loaded the one the client names. Should it not
    /// be there after all (the name was not read beforehand), it is looked up in the background
    /// and this handshake gets the default certificate, or is refused.
    pub fn quic_config(
        &self,
        policy: Option<&Arc<SitePolicy>>,
        early_data: bool,
    ) -> Result<Arc<ServerConfig>, rustls::Error> {
        let builder = ServerConfig::builder_with_provider(self.offer.provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])?;
        let builder = verify_clients(builder, policy);
        let resolver = QuicResolver {
            certs: self.certs.clone(),
            default_name: self.offer.default_name.clone(),
            runtime: tokio::runtime::Handle::try_current().ok(),
        };
        let mut config = builder.with_cert_resolver(Arc::new(resolver));
        // 0-RTT takes single-use tickets, kept in the session cache (and, with `session_cache:
        // redis`, taken from Redis by the first node that sees one: RFC 8446 §8.1 across the
        // cluster); rustls refuses early data with stateless tickets, which a replay could reuse.
        let early = early_data && policy.is_none() && self.resumption.sessions.is_some();
        let tickets = self.resumption.ticketer.as_ref().filter(|_| !early).map(|t| {
            Arc::new(CountedTickets { inner: t.clone(), stats: self.certs.stats.clone() })
                as Arc<dyn rustls::server::ProducesTickets>
        });
        self.settle(&mut config, vec![b"h3".to_vec()], tickets);
        if let (true, Some(sessions)) = (early, &self.resumption.sessions) {
            config.session_storage =
                Arc::new(CountedSessions { inner: sessions.clone(), stats: self.certs.stats.clone() });
            // QUIC bounds early data by its flow control; TLS must say "any amount" (RFC 9001 §4.6.1).
            config.max_early_data_size = u32::MAX;
        }
        Ok(Arc::new(config))
    }

    /// Whether a QUIC handshake must see the ClientHello before it starts: certificates come
    /// from a store (loaded on first use), a site verifies client certificates, or (with
    /// `early_data`) single-use tickets are shared through Redis.
    pub fn quic_needs_name(&self, early_data: bool) -> bool {
        self.certs.has_store()
            || !self.offer.client_auth.is_empty()
            || (early_data && self.resumption.sessions.as_ref().is_some_and(|s| s.remote().is_some()))
    }

    /// Readies a QUIC handshake for a client whose ClientHello named `sni` (as sent) and
    /// resumes with the single-use ticket `psk` (0-RTT on: see [`TlsAcceptor::quic_config`]):
    /// loads the name's certificate from the store if it is not in memory, brings the ticket,
    /// issued by another node, from Redis into the session cache (as [`TlsAcceptor::accept`]
    /// does), and gives the client-certificate policy of its site, whose configuration
    /// ([`TlsAcceptor::quic_config`]) the handshake must use.
    pub async fn quic_prepare(&self, sni: Option<&str>, psk: Option<Vec<u8>>) -> Option<Arc<SitePolicy>> {
        let sni = sni.and_then(normalise);
        if psk.is_some() {
            self.prefetch(&Offered { psk, ..Offered::default() }, true).await;
        }
        if let Some(name) = sni.as_deref() {
            if self.certs.resolve_now(name).is_none()
                && self.certs.has_store()
                && self.certs.resolve(name).await.is_none()
            {
                self.on_demand(Some(name)).await;
            }
        }
        self.offer.client_auth.get(sni.as_deref()).cloned()
    }

    /// The configuration for a ClientHello naming `sni`: its certificate, else the default
    /// certificate, else none (the handshake is refused with `unrecognized_name`).
    async fn config_for(&self, sni: Option<&str>, chacha: bool) -> Option<Arc<ServerConfig>> {
        let name = sni.or(self.offer.default_name.as_deref())?;
        let key = sni.unwrap_or("");
        let id = self.id + u64::from(chacha);
        let generation = self.certs.generation();
        let hit = WORKER_CACHE.with_borrow_mut(|c| {
            if c.generation != generation {
                c.configs.clear();
                c.generation = generation;
            }
            c.configs.get(&id).and_then(|m| m.get(key)).cloned()
        });
        if let Some(config) = hit {
            self.certs.stats.cert_cache_hits.inc();
            return Some(config);
        }
        let mut own = true;
        let pair = match self.certs.resolve(name).await {
            Some(p) => p,
            None => match self.on_demand(sni).await {
                Some(p) => p,
                None => {
                    // With on-demand certificates, a name that gets the default now may get its
                    // own later: not kept in the worker's cache.
                    own = self.offer.on_demand.is_none();
                    match (&self.offer.default_name, sni) {
                        (Some(default), Some(_)) => self.certs.resolve(default).await?,
                        _ => return None,
                    }
                }
            },
        };
        let config = match self.build(pair, self.offer.client_auth.get(sni), chacha) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "cannot build a TLS configuration");
                return None;
            }
        };
        WORKER_CACHE.with_borrow_mut(|c| {
            if c.generation == generation && own {
                let mine = c.configs.entry(id).or_default();
                if mine.len() >= WORKER_CACHE_MAX {
                    mine.clear();
                }
                mine.insert(key.into(), config.clone());
            }
        });
        Some(config)
    }

    /// The certificates of `sni` ordered now, when on-demand certificates are on and the name is
    /// allowed (the wait is bounded by the listener's handshake timeout).
    async fn on_demand(&self, sni: Option<&str>) -> Option<Arc<Pair>> {
        let (Some(slot), Some(name)) = (&self.offer.on_demand, sni) else { return None };
        let hook = slot.get()?;
        if hook.obtain(name).await {
            self.certs.resolve(name).await
        } else {
            None
        }
    }

    /// Runs the server side of a handshake on `tcp`.
    pub async fn accept(&self, tcp: TcpStream) -> Result<Established, Failure> {
        let stats = &self.certs.stats;
        let result = self.handshake(tcp).await;
        match &result {
            Ok((_, kind, version, ticket_sent)) => {
                let tls13 = *version == Some(ProtocolVersion::TLSv1_3);
                let resumed = (*kind == Some(HandshakeKind::Resumed)).then(|| {
                    let by_ticket = if tls13 { self.resumption.ticketer.is_some() } else { *ticket_sent };
                    if by_ticket {
                        Mechanism::Ticket
                    } else {
                        Mechanism::SessionCache
                    }
                });
                stats.finished(tls13, resumed);
            }
            Err(Failure::Challenge) => {}
            Err(why) => stats.failed(*why),
        }
        result.map(|(est, ..)| est)
    }

    async fn handshake(
        &self,
        tcp: TcpStream,
    ) -> Result<(Established, Option<HandshakeKind>, Option<ProtocolVersion>, bool), Failure> {
        let mut acceptor = Acceptor::default();
        // The bytes of the ClientHello, kept to read what rustls does not show (session id, PSK
        // identities, the ticket extension).
        let mut raw: Vec<u8> = Vec::new();
        let accepted = loop {
            tcp.readable().await.map_err(|_| Failure::Aborted)?;
            let mut chunk = [0u8; 2048];
            let n = match tcp.try_read(&mut chunk) {
                Ok(0) => return Err(Failure::Aborted),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(_) => return Err(Failure::Aborted),
            };
            if raw.is_empty() && chunk[0] != 0x16 {
                return Err(Failure::NotTls);
            }
            if raw.len() + n > gatehouse_hello::DEFAULT_MAX_HELLO_BYTES {
                return Err(Failure::Protocol);
            }
            raw.extend_from_slice(&chunk[..n]);
            if acceptor.read_tls(&mut &chunk[..n]).is_err() {
                return Err(Failure::Protocol);
            }
            match acceptor.accept() {
                Ok(None) => {}
                Ok(Some(a)) => break a,
                Err((_, mut alert)) => {
                    let _ = alert.write_all(&mut SockIo(&tcp));
                    return Err(Failure::Protocol);
                }
            }
        };
        let hello = accepted.client_hello();
        let sni = hello.server_name().and_then(normalise);
        if let Some(board) = &self.offer.acme {
            if hello.alpn().is_some_and(|mut offered| offered.any(|p| p == ACME_TLS_ALPN)) {
                return Err(self.answer_challenge(board, sni.as_deref(), accepted, tcp).await);
            }
        }
        let chacha = self.client_prefers_chacha(hello.cipher_suites());
        let Some(config) = self.config_for(sni.as_deref(), chacha).await else {
            let _ = tcp.try_write(&UNRECOGNIZED_NAME);
            return Err(Failure::UnknownName);
        };
        let tls13 = self.offer.versions.iter().any(|v| v.version == ProtocolVersion::TLSv1_3);
        let offered = Offered::read(&raw, tls13);
        self.prefetch(&offered, self.resumption.ticketer.is_none()).await;
        let conn = match accepted.into_connection(config) {
            Ok(c) => c,
            Err((_, mut alert)) => {
                let _ = alert.write_all(&mut SockIo(&tcp));
                return Err(Failure::Protocol);
            }
        };
        let established = match crate::conn::complete(tcp, conn).await {
            Ok(c) => c,
            Err(Incomplete::Io(_)) => return Err(Failure::Aborted),
            Err(Incomplete::Tls(e)) => {
                return Err(match e {
                    rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented => {
                        Failure::Certificate
                    }
                    rustls::Error::AlertReceived(a) if format!("{a:?}").contains("Certificate") => Failure::Certificate,
                    _ => Failure::Protocol,
                })
            }
        };
        let conn = established.lock();
        let h2 = conn.alpn_protocol() == Some(b"h2");
        let client_cert = match (self.offer.client_auth.get(sni.as_deref()), conn.peer_certificates()) {
            (Some(policy), Some([leaf, ..])) => {
                Some((policy.site.clone(), subject_of(leaf.as_ref()).unwrap_or_default()))
            }
            _ => None,
        };
        let kind = conn.handshake_kind();
        let version = conn.protocol_version();
        drop(conn);
        Ok((Established { conn: established, h2, client_cert }, kind, version, offered.ticket))
    }

    /// Answers a TLS-ALPN-01 validation (RFC 8737 §3): the handshake completes with the
    /// challenge certificate for `sni` and ALPN `acme-tls/1`, then the connection is closed; a
    /// name with no challenge under way is refused with `unrecognized_name`.
    async fn answer_challenge(
        &self,
        board: &Board,
        sni: Option<&str>,
        accepted: rustls::server::Accepted,
        tcp: TcpStream,
    ) -> Failure {
        let Some(cert) = (match sni {
            Some(name) => board.alpn01(name).await,
            None => None,
        }) else {
            let _ = tcp.try_write(&UNRECOGNIZED_NAME);
            return Failure::UnknownName;
        };
        let builder = match ServerConfig::builder_with_provider(self.offer.provider.clone())
            .with_protocol_versions(&self.offer.versions)
        {
            Ok(b) => b,
            Err(_) => return Failure::Protocol,
        };
        let mut config =
            builder.with_no_client_auth().with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(cert)));
        config.alpn_protocols = vec![ACME_TLS_ALPN.to_vec()];
        config.send_tls13_tickets = 0;
        let conn = match accepted.into_connection(Arc::new(config)) {
            Ok(c) => c,
            Err((_, mut alert)) => {
                let _ = alert.write_all(&mut SockIo(&tcp));
                return Failure::Protocol;
            }
        };
        match crate::conn::complete(tcp, conn).await {
            Ok(_) => {
                tracing::debug!(name = sni.unwrap_or_default(), "tls-alpn-01 validation answered");
                Failure::Challenge
            }
            Err(_) => Failure::Protocol,
        }
    }

    /// Brings a session that another node made into the local cache before rustls looks for it:
    /// a TLS 1.2 session id, or (without stateless tickets) a TLS 1.3 ticket id, which is taken
    /// from Redis so that it is used once across the cluster.
    async fn prefetch(&self, offered: &Offered, stateful_tickets: bool) {
        let Some(cache) = &self.resumption.sessions else { return };
        let Some(cluster) = cache.remote() else { return };
        let (id, fetched) = if let (Some(id), true) = (&offered.psk, stateful_tickets) {
            // Stateful TLS 1.3 tickets are used once across the cluster: Redis is asked even when
            // this node holds the ticket, and a ticket Redis no longer has is not used here either.
            let fetched = crate::cluster::fetch_session_settled(cluster, id, true, &self.certs.stats).await;
            if fetched == Fetched::Missing {
                let _ = cache.take(id);
            }
            (id, fetched)
        } else if let Some(id) = offered.session_id.as_ref().filter(|id| !cache.contains(id)) {
            (id, crate::cluster::fetch_session_settled(cluster, id, false, &self.certs.stats).await)
        } else {
            return;
        };
        if let Fetched::Found(value) = fetched {
            self.certs.stats.sessions_fetched.inc();
            cache.insert(id.clone(), value);
        }
    }
}

/// What a ClientHello offers for resumption.
#[derive(Debug, Default)]
struct Offered {
    /// A TLS 1.2 session id to resume (not the random one TLS 1.3 clients send).
    session_id: Option<Vec<u8>>,
    /// The first TLS 1.3 PSK identity.
    psk: Option<Vec<u8>>,
    /// A non-empty TLS 1.2 session ticket was sent.
    ticket: bool,
}

impl Offered {
    /// Reads `raw`; `tls13` says whether this listener speaks TLS 1.3 (then a client offering it
    /// will get it, and its legacy session id is not a session to look up).
    fn read(raw: &[u8], tls13: bool) -> Offered {
        let Ok(message) = gatehouse_hello::reassemble(raw) else { return Offered::default() };
        let Ok(hello) = gatehouse_hello::parse(&message) else { return Offered::default() };
        let ticket = hello.session_ticket.is_some_and(|t| !t.is_empty());
        let psk = hello.psk_identities.and_then(|ids| ids.iter().next().map(|p| p.identity.to_vec()));
        let tls13_wins = tls13 && hello.offers_tls13();
        let lookup = !(hello.session_id.is_empty() || ticket || tls13_wins);
        let session_id = lookup.then(|| hello.session_id.to_vec());
        Offered { session_id, psk, ticket }
    }
}

/// Client certificates verified under `policy`, or none asked for.
fn verify_clients(
    builder: rustls::ConfigBuilder<ServerConfig, rustls::WantsVerifier>,
    policy: Option<&Arc<SitePolicy>>,
) -> rustls::ConfigBuilder<ServerConfig, rustls::server::WantsServerCert> {
    match policy {
        Some(p) => builder.with_client_cert_verifier(p.verifier.clone()),
        None => builder.with_no_client_auth(),
    }
}

fn is_chacha(suite: CipherSuite) -> bool {
    matches!(
        suite,
        CipherSuite::TLS13_CHACHA20_POLY1305_SHA256
            | CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
            | CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
    )
}
