//! The ACME account: made once per directory and kept, so every order (of every node) is placed
//! by the same account. In a directory store it is a file (`.acme/account-<id>.json`, mode 0600);
//! in the Redis store it is sealed with the cluster secret (`{prefix}:acme:account:{<id>}`), as
//! certificates are, since it holds the account's private key. `<id>` names the directory URL.

use crate::error::{ca_call, AcmeError};
use crate::lock::Locks;
use crate::settings::Settings;
use crate::stats::AcmeStats;
use gatehouse_cluster::{Cluster, Purpose};
use instant_acme::{Account, AccountCredentials, ExternalAccountKey, NewAccount};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Longest wait for one exchange with the CA.
pub(crate) const CA_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the account is kept.
#[derive(Debug, Clone)]
pub enum Keep {
    /// Beside the certificates of a directory store.
    Dir(PathBuf),
    /// In the cluster's Redis.
    Redis(Arc<Cluster>),
}

/// Names the directory URL in file and key names.
fn directory_id(directory: &str) -> String {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, directory.as_bytes());
    data_encoding::HEXLOWER.encode(&d.as_ref()[..8])
}

/// The builder of an account whose requests trust `settings`' roots (or the system's, through
/// the platform verifier), each request timed in `stats`.
fn builder(settings: &Settings, stats: &Arc<AcmeStats>) -> Result<instant_acme::AccountBuilder, AcmeError> {
    let connector = hyper_rustls::HttpsConnectorBuilder::new();
    let connector = match &settings.roots {
        Some(roots) => connector.with_tls_config(
            rustls::ClientConfig::builder_with_provider(gatehouse_tls::bundle::provider())
                .with_safe_default_protocol_versions()
                .map_err(|e| AcmeError::Local(format!("client TLS settings: {e}")))?
                .with_root_certificates(roots.clone())
                .with_no_client_auth(),
        ),
        None => connector
            .try_with_platform_verifier()
            .map_err(|e| AcmeError::Local(format!("the system's CA roots: {e}")))?,
    };
    let https = connector.https_only().enable_http1().enable_http2().build();
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build(https);
    let timed = crate::stats::Timed { inner: Box::new(client), stats: stats.clone() };
    Ok(Account::builder_with_http(Box::new(timed)))
}

impl Keep {
    fn file(dir: &std::path::Path, id: &str) -> PathBuf {
        dir.join(".acme").join(format!("account-{id}.json"))
    }

    async fn load(&self, id: &str) -> Result<Option<Vec<u8>>, AcmeError> {
        match self {
            Keep::Dir(dir) => match std::fs::read(Self::file(dir, id)) {
                Ok(b) => Ok(Some(b)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(AcmeError::Local(format!("{}: {e}", Self::file(dir, id).display()))),
            },
            Keep::Redis(cluster) => {
                let key = cluster.key(&format!("acme:account:{{{id}}}"));
                let sealed = cluster.client().get(&key).await.map_err(AcmeError::Redis)?;
                let Some(sealed) = sealed else { return Ok(None) };
                cluster.open(Purpose::Certificates, key.as_bytes(), &sealed).map(Some).ok_or_else(|| {
                    AcmeError::Local("the stored ACME account does not open with this node's cluster secret".into())
                })
            }
        }
    }

    async fn save(&self, id: &str, json: &[u8]) -> Result<(), AcmeError> {
        match self {
            Keep::Dir(dir) => {
                let path = Self::file(dir, id);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)
                        .map_err(|e| AcmeError::Local(format!("{}: {e}", parent.display())))?;
                }
                gatehouse_files::write_private(&path, json)
                    .map_err(|e| AcmeError::Local(format!("{}: {e}", path.display())))
            }
            Keep::Redis(cluster) => {
                let key = cluster.key(&format!("acme:account:{{{id}}}"));
                let sealed = cluster
                    .seal(Purpose::Certificates, key.as_bytes(), json)
                    .ok_or_else(|| AcmeError::Local("cannot seal the ACME account".into()))?;
                cluster.client().set(&key, sealed).await.map_err(AcmeError::Redis)
            }
        }
    }
}

impl Keep {
    /// Records `name` as issued on demand, so a restarted manager renews it.
    pub async fn record_on_demand(&self, name: &str) -> Result<(), AcmeError> {
        match self {
            Keep::Dir(dir) => {
                let path = dir.join(".acme").join("on-demand-names");
                let mut names = std::fs::read_to_string(&path).unwrap_or_default();
                if names.lines().any(|l| l == name) {
                    return Ok(());
                }
                names.push_str(name);
                names.push('\n');
                gatehouse_files::write_private(&path, names.as_bytes())
                    .map_err(|e| AcmeError::Local(format!("{}: {e}", path.display())))
            }
            Keep::Redis(cluster) => {
                let key = cluster.key("acme:{ondemand}:names");
                cluster.client().sadd(&key, &[name]).await.map(|_| ()).map_err(AcmeError::Redis)
            }
        }
    }

    /// The names issued on demand so far.
    pub async fn on_demand_names(&self) -> Result<Vec<String>, AcmeError> {
        match self {
            Keep::Dir(dir) => {
                let path = dir.join(".acme").join("on-demand-names");
                match std::fs::read_to_string(&path) {
                    Ok(text) => Ok(text.lines().filter(|l| !l.is_empty()).map(str::to_string).collect()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
                    Err(e) => Err(AcmeError::Local(format!("{}: {e}", path.display()))),
                }
            }
            Keep::Redis(cluster) => {
                let key = cluster.key("acme:{ondemand}:names");
                let names = cluster.client().smembers(&key).await.map_err(AcmeError::Redis)?;
                Ok(names.iter().filter_map(|b| std::str::from_utf8(b).ok().map(str::to_string)).collect())
            }
        }
    }
}

/// The account for `settings.directory`: the kept one, else a new one made and kept (under a
/// cluster-wide lock, so the nodes of a cluster make one between them).
pub async fn account(
    settings: &Settings,
    keep: &Keep,
    locks: &Locks,
    stats: &Arc<AcmeStats>,
) -> Result<Account, AcmeError> {
    let id = directory_id(&settings.directory);
    if let Some(account) = restore(settings, keep, &id, stats).await? {
        return Ok(account);
    }
    let guard = locks.wait(&format!("account:{id}")).await?;
    // Another node may have made it while this one waited.
    if let Some(account) = restore(settings, keep, &id, stats).await? {
        guard.release().await;
        return Ok(account);
    }
    let contact: Vec<&str> = settings.contact.iter().map(String::as_str).collect();
    let new = NewAccount { contact: &contact, terms_of_service_agreed: true, only_return_existing: false };
    let eab = settings.eab.as_ref().map(|(kid, key)| ExternalAccountKey::new(kid.clone(), key));
    let created = ca_call!(
        "create the account",
        builder(settings, stats)?.create(&new, settings.directory.clone(), eab.as_ref())
    );
    let saved = match created {
        Ok((account, credentials)) => {
            let json = serde_json::to_vec(&credentials).map_err(|e| AcmeError::Local(e.to_string()))?;
            keep.save(&id, &json).await.map(|()| account)
        }
        Err(e) => Err(e),
    };
    guard.release().await;
    let account = saved?;
    tracing::info!(directory = %settings.directory, account = account.id(), "ACME account made");
    Ok(account)
}

async fn restore(
    settings: &Settings,
    keep: &Keep,
    id: &str,
    stats: &Arc<AcmeStats>,
) -> Result<Option<Account>, AcmeError> {
    let Some(json) = keep.load(id).await? else { return Ok(None) };
    let credentials: AccountCredentials =
        serde_json::from_slice(&json).map_err(|e| AcmeError::Local(format!("the stored ACME account: {e}")))?;
    let account = tokio::time::timeout(CA_TIMEOUT, builder(settings, stats)?.from_credentials(credentials))
        .await
        .map_err(|_| AcmeError::TimedOut("read the directory"))?
        .map_err(AcmeError::ca("read the directory"))?;
    Ok(Some(account))
}
