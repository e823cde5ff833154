//! The certificate store as operators change it (`gatehouse cert` and the admin API alike):
//! import a checked bundle, list what is stored, remove the bundles of a name, show the bundles
//! that would serve a name. The store is a directory or the cluster's Redis ([`RedisStore`]);
//! nodes reading the store pick the change up by themselves ([`crate::certs`]).

use crate::bundle::{self, BundleError, Facts, KeyKind};
use crate::dir::DirStore;
use crate::index::{normalise, wildcard_parent};
use crate::redis_store::{RedisStore, RedisStoreError};
use std::path::{Path, PathBuf};

/// A certificate store to manage.
#[derive(Debug, Clone)]
pub enum Catalog {
    /// PEM bundles in a directory (`tls.store.dir`).
    Dir(PathBuf),
    /// Sealed bundles in the cluster's Redis (`tls.store.redis`).
    Redis(RedisStore),
}

/// Why a store operation failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum CatalogError {
    /// The bundle was refused (chain order, key, dates).
    Bundle(BundleError),
    /// A file or the directory of a directory store could not be read or written.
    Io {
        /// What was being read or written.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The Redis store failed.
    Redis(RedisStoreError),
    /// The name is neither a host name nor `*.parent`.
    NotAName,
}

impl std::fmt::Display for CatalogError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CatalogError::Bundle(e) => e.fmt(f),
            CatalogError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            CatalogError::Redis(e) => e.fmt(f),
            CatalogError::NotAName => f.write_str("not a name"),
        }
    }
}

impl std::error::Error for CatalogError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CatalogError::Bundle(e) => Some(e),
            CatalogError::Io { source, .. } => Some(source),
            CatalogError::Redis(e) => Some(e),
            CatalogError::NotAName => None,
        }
    }
}

/// A bundle that was imported: its facts, the warnings it raised and where it went.
#[derive(Debug)]
pub struct Imported {
    /// What the certificate says.
    pub facts: Facts,
    /// What is odd about it but not refused (expiring soon, names without a certificate).
    pub warnings: Vec<String>,
    /// Where it is stored (a file path, or `redis`).
    pub place: String,
}

/// What a store holds: its bundles with where each lives, and the entries that could not be read.
#[derive(Debug, Default)]
pub struct Listing {
    /// Usable bundles and where they are.
    pub bundles: Vec<(Facts, String)>,
    /// Entries that are not a usable bundle: where, and why.
    pub unusable: Vec<(String, String)>,
}

/// A file name for a bundle in a directory store: its first name and key type.
fn file_name(facts: &Facts) -> String {
    let first = facts.names.first().map_or("bundle", String::as_str).replace('*', "_wildcard");
    let safe: String =
        first.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect();
    format!("{safe}.{}.pem", facts.key.as_str())
}

impl Catalog {
    /// Checks one bundle (PEM: chain, leaf first, and key) and adds it to the store; it replaces
    /// the bundle of the same key type for each of its names.
    pub async fn import(&self, pem: &[u8], now: i64) -> Result<Imported, CatalogError> {
        match self {
            Catalog::Dir(dir) => {
                let (b, warnings) = bundle::parse(pem, None, now).map_err(CatalogError::Bundle)?;
                let path = dir.join(file_name(&b.facts));
                gatehouse_files::write_private(&path, pem)
                    .map_err(|source| CatalogError::Io { path: path.clone(), source })?;
                Ok(Imported { facts: b.facts, warnings, place: path.display().to_string() })
            }
            Catalog::Redis(r) => {
                let (facts, warnings) = r.import(pem, now).await.map_err(|e| match e {
                    RedisStoreError::Bundle(e) => CatalogError::Bundle(e),
                    e => CatalogError::Redis(e),
                })?;
                Ok(Imported { facts, warnings, place: "redis".to_string() })
            }
        }
    }

    /// Every bundle of the store with where it lives, and the entries that are not usable.
    pub async fn list(&self, now: i64) -> Result<Listing, CatalogError> {
        match self {
            Catalog::Dir(dir) => {
                let d = DirStore::new(dir.clone());
                let mut out = Listing::default();
                for path in d.list().map_err(|source| CatalogError::Io { path: dir.clone(), source })? {
                    match DirStore::load(&path, now) {
                        Ok(b) => out.bundles.push((b.facts.clone(), path.display().to_string())),
                        Err(e) => out.unusable.push((path.display().to_string(), e.to_string())),
                    }
                }
                Ok(out)
            }
            Catalog::Redis(r) => Ok(Listing {
                bundles: r
                    .list()
                    .await
                    .map_err(CatalogError::Redis)?
                    .into_iter()
                    .map(|(id, f)| (f, format!("redis bundle {id}")))
                    .collect(),
                unusable: Vec::new(),
            }),
        }
    }

    /// Every stored bundle as PEM (chain and key) with where it lives, for a copy to another
    /// store; in a directory, the `.pem` files as they are.
    pub async fn export(&self) -> Result<Vec<(String, Vec<u8>)>, CatalogError> {
        match self {
            Catalog::Dir(dir) => {
                let d = DirStore::new(dir.clone());
                let mut out = Vec::new();
                for path in d.list().map_err(|source| CatalogError::Io { path: dir.clone(), source })? {
                    let pem = std::fs::read(&path).map_err(|source| CatalogError::Io { path: path.clone(), source })?;
                    out.push((path.display().to_string(), pem));
                }
                Ok(out)
            }
            Catalog::Redis(r) => Ok(r
                .export()
                .await
                .map_err(CatalogError::Redis)?
                .into_iter()
                .map(|(id, pem)| (format!("redis bundle {id}"), pem))
                .collect()),
        }
    }

    /// Removes the bundles serving the index key `name` (a name or `*.parent`); what was removed.
    pub async fn remove(&self, name: &str, now: i64) -> Result<Vec<(Facts, String)>, CatalogError> {
        let key = normalise(name).ok_or(CatalogError::NotAName)?;
        Ok(match self {
            Catalog::Dir(_) => {
                let mut out = Vec::new();
                for (facts, place) in self.list(now).await?.bundles {
                    if facts.names.contains(&key) {
                        std::fs::remove_file(&place)
                            .map_err(|source| CatalogError::Io { path: PathBuf::from(&place), source })?;
                        let _ = std::fs::remove_file(Path::new(&place).with_extension("ocsp"));
                        out.push((facts, place));
                    }
                }
                out
            }
            Catalog::Redis(r) => r
                .remove(&key)
                .await
                .map_err(CatalogError::Redis)?
                .into_iter()
                .map(|f| (f, "redis".to_string()))
                .collect(),
        })
    }

    /// The stored bundles that would serve `name` (exact name first, else its wildcard), ECDSA
    /// first.
    pub async fn serving(&self, name: &str, now: i64) -> Result<Vec<(Facts, String)>, CatalogError> {
        let name = normalise(name).ok_or(CatalogError::NotAName)?;
        let all = self.list(now).await?.bundles;
        let serving =
            |key: &str| all.iter().filter(|(f, _)| f.names.iter().any(|n| n == key)).cloned().collect::<Vec<_>>();
        let mut found = serving(&name);
        if found.is_empty() {
            if let Some(parent) = wildcard_parent(&name) {
                found = serving(&format!("*.{parent}"));
            }
        }
        found.sort_by_key(|(f, _)| f.key != KeyKind::Ecdsa);
        Ok(found)
    }
}
