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
use crate::conn::{SockIo, TlsConn};
use crate::index::{normalise, Pair, PairResolver};
use crate::session::SessionCache;
use crate::stats::{Failure, Mechanism};
use crate::ticket::Ticketer;
use rustls::crypto::CryptoProvider;
use rustls::server::{Acceptor, ServerConfig};
use rustls::{HandshakeKind, ProtocolVersion, SupportedProtocolVersion};
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
    /// The crypto provider, carrying the allowed cipher suites.
    pub provider: Arc<CryptoProvider>,
    /// Protocol versions.
    pub versions: Vec<&'static SupportedProtocolVersion>,
    /// ALPN protocols, preferred first.
    pub alpn: Vec<Vec<u8>>,
    /// Certificate name for clients that send none, or a name nothing matches.
    pub default_name: Option<String>,
}

/// A TLS listener's handshake settings.
#[derive(Debug)]
pub struct TlsAcceptor {
    id: u64,
    offer: Offer,
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
}

#[derive(Default)]
struct WorkerCache {
    generation: u64,
    configs: HashMap<(u64, Box<str>), Arc<ServerConfig>>,
}

thread_local! {
    static WORKER_CACHE: RefCell<WorkerCache> = RefCell::new(WorkerCache::default());
}

impl TlsAcceptor {
    /// Settings for one listener.
    pub fn new(mut offer: Offer, certs: Arc<Certs>, resumption: Resumption) -> Self {
        offer.default_name = offer.default_name.and_then(|n| normalise(&n));
        TlsAcceptor { id: NEXT_ID.fetch_add(1, Relaxed), offer, certs, resumption }
    }

    /// The certificates this listener serves from.
    pub fn certs(&self) -> &Arc<Certs> {
        &self.certs
    }

    fn build(&self, pair: Arc<Pair>) -> Result<Arc<ServerConfig>, rustls::Error> {
        let mut config = ServerConfig::builder_with_provider(self.offer.provider.clone())
            .with_protocol_versions(&self.offer.versions)?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(PairResolver(pair)));
        config.alpn_protocols = self.offer.alpn.clone();
        config.max_early_data_size = 0;
        match &self.resumption.ticketer {
            Some(t) => {
                config.ticketer = t.clone();
                config.send_tls13_tickets = 1;
            }
            None => config.send_tls13_tickets = if self.resumption.sessions.is_some() { 1 } else { 0 },
        }
        match &self.resumption.sessions {
            Some(s) => config.session_storage = s.clone(),
            None => config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {}),
        }
        Ok(Arc::new(config))
    }

    /// The configuration for a ClientHello naming `sni`: its certificate, else the default
    /// certificate, else none (the handshake is refused with `unrecognized_name`).
    async fn config_for(&self, sni: Option<&str>) -> Option<Arc<ServerConfig>> {
        let name = sni.or(self.offer.default_name.as_deref())?;
        let generation = self.certs.generation();
        let hit = WORKER_CACHE.with_borrow_mut(|c| {
            if c.generation != generation {
                c.configs.clear();
                c.generation = generation;
            }
            c.configs.get(&(self.id, name.into())).cloned()
        });
        if let Some(config) = hit {
            self.certs.stats.cert_cache_hits.inc();
            return Some(config);
        }
        let pair = match self.certs.resolve(name).await {
            Some(p) => p,
            None => match (&self.offer.default_name, sni) {
                (Some(default), Some(_)) => self.certs.resolve(default).await?,
                _ => return None,
            },
        };
        let config = match self.build(pair) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "cannot build a TLS configuration");
                return None;
            }
        };
        WORKER_CACHE.with_borrow_mut(|c| {
            if c.generation == generation {
                if c.configs.len() >= WORKER_CACHE_MAX {
                    c.configs.clear();
                }
                c.configs.insert((self.id, name.into()), config.clone());
            }
        });
        Some(config)
    }

    /// Runs the server side of a handshake on `tcp`.
    pub async fn accept(&self, tcp: TcpStream) -> Result<Established, Failure> {
        let stats = &self.certs.stats;
        let result = self.handshake(tcp).await;
        match &result {
            Ok((_, kind, version)) => {
                let tls13 = *version == Some(ProtocolVersion::TLSv1_3);
                let resumed = (*kind == Some(HandshakeKind::Resumed)).then(|| {
                    if self.resumption.ticketer.is_some() {
                        Mechanism::Ticket
                    } else {
                        Mechanism::SessionCache
                    }
                });
                stats.finished(tls13, resumed);
            }
            Err(why) => stats.failed(*why),
        }
        result.map(|(est, _, _)| est)
    }

    async fn handshake(
        &self,
        tcp: TcpStream,
    ) -> Result<(Established, Option<HandshakeKind>, Option<ProtocolVersion>), Failure> {
        let mut acceptor = Acceptor::default();
        let mut first = true;
        let accepted = loop {
            tcp.readable().await.map_err(|_| Failure::Aborted)?;
            match acceptor.read_tls(&mut PeekFirst(SockIo(&tcp), &mut first)) {
                Ok(0) => return Err(Failure::Aborted),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) if e.kind() == io::ErrorKind::InvalidData => return Err(Failure::NotTls),
                Err(_) => return Err(Failure::Aborted),
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
        let sni = accepted.client_hello().server_name().and_then(normalise);
        let Some(config) = self.config_for(sni.as_deref()).await else {
            let _ = tcp.try_write(&UNRECOGNIZED_NAME);
            return Err(Failure::UnknownName);
        };
        let mut conn = match accepted.into_connection(config) {
            Ok(c) => c,
            Err((_, mut alert)) => {
                let _ = alert.write_all(&mut SockIo(&tcp));
                return Err(Failure::Protocol);
            }
        };
        loop {
            while conn.wants_write() {
                match conn.write_tls(&mut SockIo(&tcp)) {
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        tcp.writable().await.map_err(|_| Failure::Aborted)?;
                    }
                    Err(_) => return Err(Failure::Aborted),
                }
            }
            if !conn.is_handshaking() {
                break;
            }
            tcp.readable().await.map_err(|_| Failure::Aborted)?;
            match conn.read_tls(&mut SockIo(&tcp)) {
                Ok(0) => return Err(Failure::Aborted),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(_) => return Err(Failure::Aborted),
            }
            if let Err(e) = conn.process_new_packets() {
                let _ = conn.write_tls(&mut SockIo(&tcp));
                return Err(match e {
                    rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented => {
                        Failure::Certificate
                    }
                    rustls::Error::AlertReceived(a) if format!("{a:?}").contains("Certificate") => Failure::Certificate,
                    _ => Failure::Protocol,
                });
            }
        }
        let h2 = conn.alpn_protocol() == Some(b"h2");
        let kind = conn.handshake_kind();
        let version = conn.protocol_version();
        Ok((Established { conn: TlsConn::new(tcp, conn), h2 }, kind, version))
    }
}

/// Reads from the socket, failing with `InvalidData` when the very first byte cannot start a TLS
/// handshake record, so plain HTTP sent to a TLS port is told apart from a broken handshake.
struct PeekFirst<'a, 'b>(SockIo<'a>, &'b mut bool);

impl io::Read for PeekFirst<'_, '_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.0.read(buf)?;
        if *self.1 && n > 0 {
            *self.1 = false;
            if buf[0] != 0x16 {
                return Err(io::ErrorKind::InvalidData.into());
            }
        }
        Ok(n)
    }
}
