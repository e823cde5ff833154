//! A worker's QUIC endpoint: its settings as quinn takes them, the accept loop with its limits
//! (connections, Retry under load), and each connection handed to its own task.

use crate::connection::serve_connection;
use crate::handover::{GenerationCids, QuicLink};
use crate::hello::{HelloPeek, PeekSocket};
use gatehouse_clock::ClockScoped;
use gatehouse_config::{Listener, QuicRetry};
use gatehouse_listener::{drained, AcceptorCell, ServeContext};
use gatehouse_tls::client_auth::SitePolicy;
use gatehouse_tls::TlsAcceptor;
use std::collections::HashMap;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use tokio::sync::{watch, Semaphore};

/// A listener's QUIC settings as quinn takes them: the default configuration, and one per site
/// that verifies client certificates (made when a client first names it).
pub(crate) struct QuicConfigs {
    pub(crate) listener: Arc<Listener>,
    pub(crate) tls: Arc<TlsAcceptor>,
    default: Arc<quinn::ServerConfig>,
    /// By site policy (its address: a reload makes new policies, and new `QuicConfigs`).
    by_site: Mutex<HashMap<usize, Arc<quinn::ServerConfig>>>,
}

impl QuicConfigs {
    fn new(listener: Arc<Listener>, tls: Arc<TlsAcceptor>) -> Option<Arc<QuicConfigs>> {
        let default = Arc::new(server_config(&listener, &tls, None)?);
        Some(Arc::new(QuicConfigs { listener, tls, default, by_site: Mutex::new(HashMap::new()) }))
    }

    /// The configuration for a client of `policy`'s site.
    pub(crate) fn for_site(&self, policy: &Arc<SitePolicy>) -> Option<Arc<quinn::ServerConfig>> {
        let key = Arc::as_ptr(policy) as usize;
        let mut by_site = self.by_site.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = by_site.get(&key) {
            return Some(c.clone());
        }
        let config = Arc::new(server_config(&self.listener, &self.tls, Some(policy))?);
        by_site.insert(key, config.clone());
        Some(config)
    }
}

/// The QUIC settings of a listener, as quinn takes them, for clients of `policy`'s site.
fn server_config(
    listener: &Listener,
    tls: &TlsAcceptor,
    policy: Option<&Arc<SitePolicy>>,
) -> Option<quinn::ServerConfig> {
    let rustls = match tls.quic_config(policy, listener.quic.early_data) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "cannot make the QUIC TLS settings");
            return None;
        }
    };
    let crypto = match quinn::crypto::rustls::QuicServerConfig::try_from(rustls) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "the TLS settings cannot serve QUIC");
            return None;
        }
    };
    let q = &listener.quic;
    let mut transport = quinn::TransportConfig::default();
    transport
        .max_concurrent_bidi_streams(q.max_streams.into())
        // The client's control stream and its two QPACK streams; no pushes, nothing else.
        .max_concurrent_uni_streams(3u32.into())
        .stream_receive_window(varint(q.stream_window.0))
        .receive_window(varint(q.connection_window.0))
        .max_idle_timeout(quinn::IdleTimeout::try_from(q.idle_timeout.0).ok())
        .enable_segmentation_offload(q.gso);
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(Arc::new(transport));
    Some(config)
}

fn varint(n: u64) -> quinn::VarInt {
    quinn::VarInt::from_u64(n).unwrap_or(quinn::VarInt::MAX)
}

/// Serves HTTP/3 on `socket` until the task is aborted, the process drains, or the listener no
/// longer has `http3`: accepts QUIC connections up to the listener's `max_connections` for this
/// worker. A reload that changes the listener's settings sends them on `settings`: the endpoint,
/// and every connection on it, stays; new connections get the new settings.
pub async fn quic_loop(
    socket: UdpSocket,
    index: usize,
    links: Arc<[Arc<QuicLink>]>,
    mut settings: watch::Receiver<Arc<Listener>>,
    tls: AcceptorCell,
    ctx: ServeContext,
) {
    let mut config = settings.borrow_and_update().clone();
    let mut configs = match QuicConfigs::new(config.clone(), tls.load_full()) {
        Some(c) => c,
        None => return,
    };
    let runtime = quinn::TokioRuntime;
    let endpoint = quinn::Runtime::wrap_udp_socket(&runtime, socket).and_then(|socket| {
        let peek = HelloPeek::new(configs.default.crypto.clone());
        peek.enable(configs.tls.quic_needs_name(config.quic.early_data));
        // What the kernel offers: packets per system call, each way (GSO and GRO, where the
        // kernel has them; quinn-udp finds out).
        tracing::debug!(
            gso_segments = socket.max_transmit_segments(),
            gro_segments = socket.max_receive_segments(),
            "QUIC on the worker's UDP socket"
        );
        let socket = PeekSocket::new(socket, peek.clone(), links, index, configs.tls.certs().stats.clone());
        // Connection ids carry this process's generation and this socket's index, so a
        // successor tells its packets from ours, and a sibling socket the ones of our
        // connections whose client moved (`handover`).
        let mut endpoint_config = quinn::EndpointConfig::default();
        endpoint_config.cid_generator(move || Box::new(GenerationCids::new(index)));
        let endpoint = quinn::Endpoint::new_with_abstract_socket(
            endpoint_config,
            Some((*configs.default).clone()),
            socket,
            Arc::new(runtime),
        )?;
        Ok((endpoint, peek))
    });
    let (endpoint, peek) = match endpoint {
        Ok(e) => e,
        Err(e) => {
            tracing::error!(error = %e, "cannot serve QUIC on the listener's UDP socket");
            return;
        }
    };
    let local = endpoint.local_addr().unwrap_or(config.bind);
    let limit = Arc::new(Semaphore::new(config.max_connections));
    let handshaking = Arc::new(AtomicUsize::new(0));
    let mut drain = ctx.drain.clone();
    // New settings (on reload) apply to new connections.
    let renew = |configs: &mut Arc<QuicConfigs>, config: &Arc<Listener>, acceptor: Arc<TlsAcceptor>| {
        if let Some(new) = QuicConfigs::new(config.clone(), acceptor) {
            peek.enable(new.tls.quic_needs_name(config.quic.early_data));
            endpoint.set_server_config(Some((*new.default).clone()));
            *configs = new;
        }
    };
    loop {
        let incoming = tokio::select! {
            incoming = endpoint.accept() => incoming,
            _ = drained(&mut drain) => break,
            changed = settings.changed() => {
                let new = settings.borrow_and_update().clone();
                if changed.is_err() || !new.http3 {
                    break;
                }
                let (old_max, new_max) = (config.max_connections, new.max_connections);
                if new_max > old_max {
                    limit.add_permits(new_max - old_max);
                } else {
                    limit.forget_permits(old_max - new_max);
                }
                config = new;
                let acceptor = configs.tls.clone();
                renew(&mut configs, &config, acceptor);
                continue;
            }
        };
        let Some(incoming) = incoming else { break };
        // Certificates or resumption changed on reload: new handshakes use the new settings.
        let now = tls.load_full();
        if !Arc::ptr_eq(&now, &configs.tls) {
            renew(&mut configs, &config, now);
        }
        let stats = configs.tls.certs().stats.clone();
        let incoming = if !incoming.remote_address_validated()
            && incoming.may_retry()
            && must_retry(&config, &limit, &handshaking)
        {
            // One more round trip for the client, none of our state: only a client that
            // receives at its address comes back, with the token.
            match incoming.retry() {
                Ok(()) => {
                    stats.quic.retries.inc();
                    continue;
                }
                Err(e) => e.into_incoming(),
            }
        } else {
            incoming
        };
        let Ok(permit) = limit.clone().try_acquire_owned() else {
            // Full: refused at once (CONNECTION_REFUSED), the client may try TCP.
            stats.quic.refused.inc();
            incoming.refuse();
            continue;
        };
        let (configs, peek, ctx) = (configs.clone(), peek.clone(), ctx.clone());
        let started = Handshaking::start(&handshaking);
        tokio::spawn(ClockScoped(Box::pin(async move {
            let _permit = permit;
            serve_connection(incoming, local, configs, peek, ctx, stats, started).await;
        })));
    }
    // Draining (or HTTP/3 turned off): no new connection; those open finish their requests
    // (each watches the drain).
    endpoint.set_server_config(None);
    endpoint.wait_idle().await;
}

/// Handshakes at once on one worker above which new clients prove their address first
/// (`quic.retry: auto`): a flood of Initial packets from spoofed addresses then costs a Retry
/// packet each, no handshake and no state.
const RETRY_ABOVE_HANDSHAKES: usize = 64;

/// Whether a client whose address is not validated yet is sent a Retry first.
fn must_retry(config: &Listener, limit: &Semaphore, handshaking: &AtomicUsize) -> bool {
    match config.quic.retry {
        QuicRetry::Always => true,
        QuicRetry::Never => false,
        QuicRetry::Auto => {
            handshaking.load(Relaxed) >= RETRY_ABOVE_HANDSHAKES
                || limit.available_permits() < config.max_connections.div_ceil(10)
        }
    }
}

/// A handshake under way on this worker, counted until dropped.
pub(crate) struct Handshaking(Arc<AtomicUsize>);

impl Handshaking {
    fn start(count: &Arc<AtomicUsize>) -> Handshaking {
        count.fetch_add(1, Relaxed);
        Handshaking(count.clone())
    }
}

impl Drop for Handshaking {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}
