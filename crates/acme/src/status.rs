//! What is known of each name ACME keeps, written to the store next to the certificates, so that
//! every node's admin API and `gatehouse cert list` show the whole cluster's state: the source
//! of the certificate, when it is renewed next, the last failure. In a directory store it is
//! `.acme/status.json`; in Redis the hash `{prefix}:acme:{status}`, a field per name.

use crate::account::Keep;
use crate::error::AcmeError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Serialises this process's writes of a directory store's status file.
static DIR_WRITES: Mutex<()> = Mutex::new(());

/// The state of one kept name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NameStatus {
    /// `acme` (in `tls.acme.names`) or `on-demand`.
    pub source: String,
    /// End of the stored certificate's validity, Unix seconds.
    pub not_after: Option<i64>,
    /// Its issuer.
    pub issuer: Option<String>,
    /// When it is renewed (or tried again) next, Unix seconds.
    pub next_renewal: Option<i64>,
    /// The last failure, until an order succeeds.
    pub last_error: Option<String>,
    /// When this was written, Unix seconds.
    pub updated: i64,
}

impl Keep {
    /// Writes the status of `name`.
    pub async fn save_status(&self, name: &str, status: &NameStatus) -> Result<(), AcmeError> {
        let json = serde_json::to_string(status).map_err(|e| AcmeError::Local(e.to_string()))?;
        match self {
            Keep::Dir(dir) => {
                let path = dir.join(".acme").join("status.json");
                let _one = DIR_WRITES.lock().unwrap_or_else(|p| p.into_inner());
                let mut all: BTreeMap<String, NameStatus> =
                    std::fs::read(&path).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
                all.insert(name.to_string(), status.clone());
                let text = serde_json::to_vec_pretty(&all).map_err(|e| AcmeError::Local(e.to_string()))?;
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)
                        .map_err(|e| AcmeError::Local(format!("{}: {e}", parent.display())))?;
                }
                gatehouse_files::write_private(&path, &text)
                    .map_err(|e| AcmeError::Local(format!("{}: {e}", path.display())))
            }
            Keep::Redis(cluster) => {
                let key = cluster.key("acme:{status}");
                cluster.client().hset(&key, &[(name, json.as_str())]).await.map(|_| ()).map_err(AcmeError::Redis)
            }
        }
    }

    /// The status of every kept name.
    pub async fn statuses(&self) -> Result<BTreeMap<String, NameStatus>, AcmeError> {
        match self {
            Keep::Dir(dir) => {
                let path = dir.join(".acme").join("status.json");
                match std::fs::read(&path) {
                    Ok(b) => {
                        serde_json::from_slice(&b).map_err(|e| AcmeError::Local(format!("{}: {e}", path.display())))
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
                    Err(e) => Err(AcmeError::Local(format!("{}: {e}", path.display()))),
                }
            }
            Keep::Redis(cluster) => {
                let key = cluster.key("acme:{status}");
                let fields = cluster.client().hgetall(&key).await.map_err(AcmeError::Redis)?;
                Ok(fields
                    .iter()
                    .filter_map(|(k, v)| {
                        let name = std::str::from_utf8(k).ok()?.to_string();
                        Some((name, serde_json::from_slice(v).ok()?))
                    })
                    .collect())
            }
        }
    }

    /// Where the account and statuses of a certificate store are kept.
    pub fn of(catalog: &gatehouse_tls::catalog::Catalog) -> Keep {
        match catalog {
            gatehouse_tls::catalog::Catalog::Dir(d) => Keep::Dir(d.clone()),
            gatehouse_tls::catalog::Catalog::Redis(r) => Keep::Redis(r.cluster().clone()),
        }
    }
}
