//! Answers to ACME challenges, published by the node that placed an order and given by whichever
//! node the CA's validation reaches.
//!
//! ```text
//! order (any node) ─publish─► this node's board ──┐
//!                    └──────► Redis (cluster) ─────┤
//! CA validation ─► GET /.well-known/acme-challenge/TOKEN   ─► http01(token)   ─► key authorization
//!               └► ClientHello ALPN acme-tls/1, SNI name    ─► alpn01(name)    ─► challenge certificate
//! ```
//! With a cluster, an answer is kept in Redis too (`{prefix}:acme:http01:{TOKEN}`,
//! `{prefix}:acme:alpn01:{NAME}`, the key authorization, for an hour), so a node that did not
//! place the order answers from there: behind an L4 balancer the validation may reach any node.
//! A key authorization is not secret (RFC 8555 §8.1: the token and the account key's thumbprint),
//! so it is stored as it is.

use crate::bundle::BundleError;
use crate::stats::TlsStats;
use gatehouse_cluster::Cluster;
use rustls::sign::CertifiedKey;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The ALPN protocol of TLS-ALPN-01 (RFC 8737 §6.2).
pub const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

/// How long a published answer is kept in Redis: longer than any order takes.
const REMOTE_TTL: Duration = Duration::from_secs(3600);

/// How long a challenge certificate made from an answer read in Redis is reused.
const REMOTE_CACHE: Duration = Duration::from_secs(60);

/// Longest token taken from a request path (the CA's are 43 characters: RFC 8555 §8.3).
const MAX_TOKEN: usize = 128;

/// A challenge type as the board keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// HTTP-01: by token.
    Http01,
    /// TLS-ALPN-01: by name.
    TlsAlpn01,
}

impl Kind {
    fn key_part(self) -> &'static str {
        match self {
            Kind::Http01 => "http01",
            Kind::TlsAlpn01 => "alpn01",
        }
    }
}

/// Why an answer could not be published.
#[derive(Debug)]
#[non_exhaustive]
pub enum BoardError {
    /// The cluster's Redis did not take it.
    Redis(gatehouse_redis::Error),
    /// The TLS-ALPN-01 certificate could not be made.
    Certificate(BundleError),
}

impl std::fmt::Display for BoardError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BoardError::Redis(e) => write!(f, "cannot publish the challenge answer in redis: {e}"),
            BoardError::Certificate(e) => write!(f, "cannot make the tls-alpn-01 certificate: {e}"),
        }
    }
}

impl std::error::Error for BoardError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BoardError::Redis(e) => Some(e),
            BoardError::Certificate(e) => Some(e),
        }
    }
}

#[derive(Default)]
struct Local {
    /// HTTP-01 key authorizations by token.
    http: HashMap<String, String>,
    /// TLS-ALPN-01 certificates by name, with when they were read from Redis (`None`: published
    /// here).
    alpn: HashMap<String, (Arc<CertifiedKey>, Option<Instant>)>,
}

/// The challenge answers this node gives.
#[derive(Default)]
pub struct Board {
    local: Mutex<Local>,
    cluster: Option<Arc<Cluster>>,
    stats: Arc<TlsStats>,
}

impl std::fmt::Debug for Board {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Board").field("cluster", &self.cluster.is_some()).finish_non_exhaustive()
    }
}

/// The certificate answering TLS-ALPN-01 for `name` with `key_authorization`.
fn alpn_certificate(name: &str, key_authorization: &str) -> Result<Arc<CertifiedKey>, BundleError> {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, key_authorization.as_bytes());
    let (cert, key) = crate::issue::acme_alpn(name, digest.as_ref())?;
    // Not through `bundle::parse`: its checks refuse the critical acmeIdentifier extension, which
    // only the CA's validator reads.
    let key = rustls::pki_types::PrivatePkcs8KeyDer::from(key);
    let signer = crate::bundle::provider().key_provider.load_private_key(key.into()).map_err(BundleError::Key)?;
    Ok(Arc::new(CertifiedKey::new(vec![cert.into()], signer)))
}

/// Whether `token` can be an ACME token (base64url, RFC 8555 §8.1), so nothing else is looked up.
fn is_token(token: &str) -> bool {
    !token.is_empty()
        && token.len() <= MAX_TOKEN
        && token.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl Board {
    /// A board; with `cluster`, answers are shared through its Redis. Requests are counted in
    /// `stats`.
    pub fn new(cluster: Option<Arc<Cluster>>, stats: Arc<TlsStats>) -> Arc<Self> {
        Arc::new(Board { local: Mutex::default(), cluster, stats })
    }

    /// Counts a challenge request of `kind`, answered or not.
    fn count<T>(&self, kind: Kind, found: Option<T>) -> Option<T> {
        let i = match kind {
            Kind::Http01 => 0,
            Kind::TlsAlpn01 => 1,
        };
        let counter =
            if found.is_some() { &self.stats.challenges.answered[i] } else { &self.stats.challenges.unknown[i] };
        counter.inc();
        found
    }

    fn lock(&self) -> MutexGuard<'_, Local> {
        self.local.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn remote_key(cluster: &Cluster, kind: Kind, id: &str) -> String {
        cluster.key(&format!("acme:{}:{{{id}}}", kind.key_part()))
    }

    /// Publishes the answer to a challenge of `kind` for `id` (the token of HTTP-01, the name of
    /// TLS-ALPN-01).
    pub async fn publish(&self, kind: Kind, id: &str, key_authorization: &str) -> Result<(), BoardError> {
        match kind {
            Kind::Http01 => {
                self.lock().http.insert(id.to_string(), key_authorization.to_string());
            }
            Kind::TlsAlpn01 => {
                let cert = alpn_certificate(id, key_authorization).map_err(BoardError::Certificate)?;
                self.lock().alpn.insert(id.to_string(), (cert, None));
            }
        }
        if let Some(cluster) = &self.cluster {
            let key = Self::remote_key(cluster, kind, id);
            let ttl = REMOTE_TTL.as_millis() as u64;
            cluster.client().set_px(key, key_authorization, ttl).await.map_err(BoardError::Redis)?;
        }
        Ok(())
    }

    /// Takes the answer for `id` back once its challenge is over.
    pub async fn withdraw(&self, kind: Kind, id: &str) {
        match kind {
            Kind::Http01 => {
                self.lock().http.remove(id);
            }
            Kind::TlsAlpn01 => {
                self.lock().alpn.remove(id);
            }
        }
        if let Some(cluster) = &self.cluster {
            if let Err(e) = cluster.client().del(&[Self::remote_key(cluster, kind, id)]).await {
                // It expires by itself.
                cluster.failed("withdraw an acme challenge answer", &e);
            }
        }
    }

    /// The key authorization to answer `GET /.well-known/acme-challenge/{token}` with.
    pub async fn http01(&self, token: &str) -> Option<String> {
        let found = self.find_http01(token).await;
        self.count(Kind::Http01, found)
    }

    async fn find_http01(&self, token: &str) -> Option<String> {
        if !is_token(token) {
            return None;
        }
        if let Some(answer) = self.lock().http.get(token) {
            return Some(answer.clone());
        }
        let cluster = self.cluster.as_ref()?;
        match cluster.client().get(Self::remote_key(cluster, Kind::Http01, token)).await {
            Ok(found) => found.and_then(|b| String::from_utf8(b.to_vec()).ok()),
            Err(e) => {
                cluster.failed("read an acme challenge answer", &e);
                None
            }
        }
    }

    /// The certificate to answer a TLS-ALPN-01 handshake naming `name` (normalised) with.
    pub async fn alpn01(&self, name: &str) -> Option<Arc<CertifiedKey>> {
        let found = self.find_alpn01(name).await;
        self.count(Kind::TlsAlpn01, found)
    }

    async fn find_alpn01(&self, name: &str) -> Option<Arc<CertifiedKey>> {
        if let Some((cert, read)) = self.lock().alpn.get(name) {
            if read.is_none_or(|at| at.elapsed() < REMOTE_CACHE) {
                return Some(cert.clone());
            }
        }
        let cluster = self.cluster.as_ref()?;
        let found = match cluster.client().get(Self::remote_key(cluster, Kind::TlsAlpn01, name)).await {
            Ok(found) => found?,
            Err(e) => {
                cluster.failed("read an acme challenge answer", &e);
                return None;
            }
        };
        let key_authorization = std::str::from_utf8(&found).ok()?;
        let cert = match alpn_certificate(name, key_authorization) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(name, error = %e, "cannot make the tls-alpn-01 certificate");
                return None;
            }
        };
        self.lock().alpn.insert(name.to_string(), (cert.clone(), Some(Instant::now())));
        Some(cert)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_base64url_and_bounded() {
        assert!(is_token("LoqXcYV8q5ONbJQxbmR7SCTNo3tiAXDfowyjxAjEuX0"));
        for bad in ["", "a/b", "..", "a%2f", "a b", &"a".repeat(MAX_TOKEN + 1)] {
            assert!(!is_token(bad), "{bad}");
        }
    }

    #[tokio::test]
    async fn published_answers_are_given_and_withdrawn() {
        let board = Board::new(None, Arc::default());
        board.publish(Kind::Http01, "tok", "tok.thumb").await.expect("publish");
        assert_eq!(board.http01("tok").await.as_deref(), Some("tok.thumb"));
        assert_eq!(board.http01("other").await, None);
        board.publish(Kind::TlsAlpn01, "a.example.com", "tok.thumb").await.expect("publish");
        let cert = board.alpn01("a.example.com").await.expect("certificate");
        // The acmeIdentifier extension (1.3.6.1.5.5.7.1.31) holds the SHA-256 of the key
        // authorization.
        let leaf = cert.cert[0].as_ref();
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, b"tok.thumb");
        assert!(leaf.windows(32).any(|w| w == digest.as_ref()), "digest in the certificate");
        assert!(board.alpn01("b.example.com").await.is_none());
        board.withdraw(Kind::Http01, "tok").await;
        board.withdraw(Kind::TlsAlpn01, "a.example.com").await;
        assert_eq!(board.http01("tok").await, None);
        assert!(board.alpn01("a.example.com").await.is_none());
        let acme = &board.stats.challenges;
        assert_eq!((acme.answered[0].get(), acme.unknown[0].get()), (1, 2));
        assert_eq!((acme.answered[1].get(), acme.unknown[1].get()), (1, 2));
    }
}
