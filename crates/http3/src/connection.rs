//! One QUIC connection: the handshake (the client's name read first where the certificate or the
//! site's settings depend on it; 0-RTT where allowed), then HTTP/3 over it, each request in a task
//! of its own, until the client, the idle timeout or a drain ends it.

use crate::endpoint::{Handshaking, QuicConfigs};
use crate::hello::{HelloPeek, Seen};
use crate::request::serve_request;
use bytes::Bytes;
use gatehouse_clock::ClockScoped;
use gatehouse_listener::{drained, ServeContext};
use gatehouse_proxy::{ClientCert, ConnInfo};
use gatehouse_tls::client_auth::{subject_of, SitePolicy};
use gatehouse_tls::TlsStats;
use rustls::pki_types::CertificateDer;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

type H3Conn = h3::server::Connection<h3_quinn::Connection, Bytes>;

pub(crate) async fn serve_connection(
    incoming: quinn::Incoming,
    local: SocketAddr,
    configs: Arc<QuicConfigs>,
    peek: Arc<HelloPeek>,
    ctx: ServeContext,
    stats: Arc<TlsStats>,
    handshaking: Handshaking,
) {
    let config = configs.listener.clone();
    let timeout = config.tls.as_ref().map_or(config.header_read_timeout.0, |t| t.handshake_timeout.0);
    let deadline = tokio::time::Instant::now() + timeout;
    // Whether the client may send 0-RTT data: unknown unless its ClientHello was read.
    let mut offers_early = true;
    let (handshake, policy) = if peek.enabled() {
        // The client's name first: its certificate loaded, its site's configuration chosen.
        let seen = peek.wait(incoming.remote_address(), incoming.orig_dst_cid(), deadline).await;
        let policy = match seen {
            Some(Seen::Hello(hello)) => {
                offers_early = hello.early_data;
                // A ticket counts only where it is single-use (0-RTT on).
                let psk = hello.psk.filter(|_| config.quic.early_data);
                let prepare = configs.tls.quic_prepare(hello.server_name.as_deref(), psk);
                tokio::time::timeout_at(deadline, prepare).await.ok().flatten()
            }
            _ => None,
        };
        match policy.as_ref().and_then(|p| configs.for_site(p)) {
            Some(site) => (incoming.accept_with(site), policy),
            None => (incoming.accept(), None),
        }
    } else {
        (incoming.accept(), None)
    };
    let connecting = match handshake {
        Ok(connecting) => connecting,
        Err(e) => return handshake_failed(&stats, &e),
    };
    // With 0-RTT on (never for a site verifying client certificates), requests are taken while
    // the handshake completes; `pending` resolves when it has.
    let zero_rtt = config.quic.early_data && policy.is_none() && offers_early;
    let connecting = if zero_rtt { connecting.into_0rtt() } else { Err(connecting) };
    let (conn, mut pending, mut handshaking) = match connecting {
        Ok((conn, accepted)) => (conn, Some(accepted), Some(handshaking)),
        Err(connecting) => {
            let finished = tokio::time::timeout_at(deadline, connecting).await;
            drop(handshaking);
            match finished {
                Ok(Ok(conn)) => {
                    stats.quic.handshakes.inc();
                    (conn, None, None)
                }
                Ok(Err(e)) => return handshake_failed(&stats, &e),
                Err(_) => return handshake_failed(&stats, &quinn::ConnectionError::TimedOut),
            }
        }
    };
    let shared = ctx.shared.clone();
    shared.stats.connections_accepted.inc();
    shared.stats.connections_active.inc();
    let active = Active { shared: shared.clone(), stats: stats.clone(), conn: conn.clone() };
    stats.quic.connections.fetch_add(1, Relaxed);
    let mut info = ConnInfo::new(conn.remote_address(), local, true);
    info.hsts = gatehouse_proxy::hsts_of(config.hsts.as_ref());
    info.body_timeout = config.body_read_timeout.0;
    info.client_cert = policy.and_then(|p| client_cert(&conn, &p));
    let info = Arc::new(info);
    let max_header = config.max_header_bytes.0;
    // No reserved ("grease") frames: aioquic (1.2) never ends a response whose last frame is
    // one, so its clients would wait for the end of every answer.
    let mut h3: H3Conn = match h3::server::builder()
        .max_field_section_size(max_header)
        .send_grease(false)
        .build(h3_quinn::Connection::new(conn))
        .await
    {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!(error = %e, "HTTP/3 connection setup failed");
            return;
        }
    };
    let mut drain = ctx.drain.clone();
    let mut draining = false;
    // Whether a request came in 0-RTT data (quinn does not say whether a server accepted any).
    let mut early_seen = false;
    loop {
        let accepted = tokio::select! {
            // The completion is looked at first: a request that came with the client's Finished
            // (in the same datagram) is not early. One taken before it was seen is (as quinn's
            // `RecvStream::is_0rtt` judges). A 0-RTT request seen only after the completion goes
            // unmarked; it came from a client that completed the handshake with a ticket used
            // once, so it is not a replay (a replayed ClientHello completes nothing).
            biased;
            completed = completion(&mut pending, deadline) => {
                pending = None;
                handshaking = None;
                if !completed {
                    handshake_failed(&stats, &quinn::ConnectionError::TimedOut);
                    break;
                }
                if let Some(e) = active.conn.close_reason() {
                    handshake_failed(&stats, &e);
                    break;
                }
                stats.quic.handshakes.inc();
                if early_seen {
                    stats.quic.zero_rtt.inc();
                }
                continue;
            }
            accepted = h3.accept() => accepted,
            _ = drained(&mut drain), if !draining => {
                // GOAWAY: requests already sent are served, no new one is taken.
                draining = true;
                let _ = h3.shutdown(0).await;
                continue;
            }
        };
        match accepted {
            Ok(Some(resolver)) => {
                stats.quic.requests.inc();
                let early = pending.is_some();
                early_seen |= early;
                let (shared, info) = (shared.clone(), info.clone());
                tokio::spawn(ClockScoped(Box::pin(async move {
                    match resolver.resolve_request().await {
                        Ok((req, stream)) => serve_request(shared, info, req, stream, early).await,
                        Err(e) => tracing::debug!(error = %e, "HTTP/3 request refused"),
                    }
                })));
            }
            Ok(None) => break,
            Err(e) => {
                tracing::debug!(error = %e, "HTTP/3 connection ended");
                break;
            }
        }
    }
    drop((handshaking, active));
}

/// Resolves when a 0-RTT connection's handshake completes or fails (`true`), or at `deadline`
/// (`false`); never without one.
async fn completion(pending: &mut Option<quinn::ZeroRttAccepted>, deadline: tokio::time::Instant) -> bool {
    match pending {
        // It says whether 0-RTT was accepted on a client only.
        Some(accepted) => tokio::time::timeout_at(deadline, accepted).await.is_ok(),
        None => std::future::pending().await,
    }
}

fn handshake_failed(stats: &TlsStats, e: &quinn::ConnectionError) {
    stats.quic.failed.inc();
    tracing::debug!(error = %e, "QUIC handshake failed");
}

/// The client certificate `conn` presented, verified under `policy`.
fn client_cert(conn: &quinn::Connection, policy: &SitePolicy) -> Option<ClientCert> {
    let chain = conn.peer_identity()?.downcast::<Vec<CertificateDer<'static>>>().ok()?;
    let subject = subject_of(chain.first()?.as_ref()).unwrap_or_default();
    Some(ClientCert { site: policy.site.clone(), subject: subject.into() })
}

/// Counts a QUIC connection as open until dropped, then its lost packets.
struct Active {
    shared: Arc<gatehouse_proxy::Shared>,
    stats: Arc<TlsStats>,
    conn: quinn::Connection,
}

impl Drop for Active {
    fn drop(&mut self) {
        self.shared.stats.connections_active.dec();
        self.stats.quic.connections.fetch_sub(1, Relaxed);
        self.stats.quic.packets_lost.add(self.conn.stats().path.lost_packets);
    }
}
