//! Where drafts, revisions, releases and node reports live: a directory for a single node, the
//! cluster's Redis for many.

use crate::local::LocalStore;
use crate::redis_store::RedisStore;
use crate::types::{Draft, Event, NodeReport, Releases, Revision, RevisionMeta};
use gatehouse_cluster::Cluster;
use serde_json::Value;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// Why a store operation failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreError {
    /// The draft changed since the version the caller read.
    Conflict {
        /// The draft's version now.
        current: u64,
    },
    /// A file of a local store cannot be read or written.
    Io {
        /// `read`, `write` or `open`.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Redis cannot be reached, or refused a command.
    Redis(gatehouse_redis::Error),
    /// A stored record is not the JSON it should be.
    Json {
        /// The file, for a local store.
        path: Option<PathBuf>,
        /// Why.
        source: serde_json::Error,
    },
    /// A stored value is not what the store writes (a field of the releases, the revision
    /// counter).
    BadField {
        /// The field.
        field: String,
        /// What it holds.
        value: String,
    },
    /// What the store holds cannot be used (a revision sealed under another cluster secret, an
    /// unexpected script reply), or a value cannot be sealed or made.
    Damaged(&'static str),
    /// The directory of a local store cannot be created.
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Notices of changes cannot be subscribed to in Redis.
    Subscribe(gatehouse_redis::Error),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Conflict { current } => write!(f, "the draft is at version {current}; read it again"),
            StoreError::Io { action, path, source } => {
                write!(f, "revision store unavailable: cannot {action} {}: {source}", path.display())
            }
            StoreError::Redis(e) => write!(f, "revision store unavailable: redis: {e}"),
            StoreError::Json { path: Some(p), source } => {
                write!(f, "revision store damaged: {}: {source}", p.display())
            }
            StoreError::Json { path: None, source } => write!(f, "revision store damaged: {source}"),
            StoreError::BadField { field, value } => write!(f, "revision store damaged: {field}: {value}"),
            StoreError::Damaged(why) => write!(f, "revision store damaged: {why}"),
            StoreError::CreateDir { path, source } => write!(f, "cannot create {}: {source}", path.display()),
            StoreError::Subscribe(e) => e.fmt(f),
        }
    }
}

impl StoreError {
    /// Whether the store could not be reached or written (it may answer later), rather than
    /// holding something it cannot use or refusing a stale write.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            StoreError::Io { .. } | StoreError::Redis(_) | StoreError::CreateDir { .. } | StoreError::Subscribe(_)
        )
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::CreateDir { source, .. } | StoreError::Io { source, .. } => Some(source),
            StoreError::Subscribe(e) | StoreError::Redis(e) => Some(e),
            StoreError::Json { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The revision store of a node: local or in Redis. Cheap to clone.
#[derive(Clone, Debug)]
pub enum Store {
    /// Files in a directory, for a single node.
    Local(Arc<LocalStore>),
    /// The cluster's Redis.
    Redis(Arc<RedisStore>),
}

impl Store {
    /// A store in `dir`, created (mode 700) when missing.
    pub fn local(dir: PathBuf) -> Result<Store, StoreError> {
        Ok(Store::Local(Arc::new(LocalStore::open(dir)?)))
    }

    /// A store in the cluster's Redis.
    pub fn redis(cluster: Arc<Cluster>) -> Store {
        Store::Redis(Arc::new(RedisStore::new(cluster)))
    }

    /// The draft; none before the first change.
    pub async fn draft(&self) -> Result<Option<Draft>, StoreError> {
        match self {
            Store::Local(s) => s.draft(),
            Store::Redis(s) => s.draft().await,
        }
    }

    /// Replaces the draft's document if its version is still `expected` (0: no draft yet).
    pub async fn put_draft(&self, expected: u64, document: Value, who: &str) -> Result<Draft, StoreError> {
        let draft = Draft { version: expected + 1, document, updated_by: who.to_string(), updated: crate::now_secs() };
        match self {
            Store::Local(s) => s.put_draft(expected, draft),
            Store::Redis(s) => s.put_draft(expected, draft).await,
        }
    }

    /// Stores `document` as the next revision; its hash is that of its canonical text.
    pub async fn commit(&self, document: Value, author: &str, message: &str) -> Result<Revision, StoreError> {
        let meta = RevisionMeta {
            number: 0,
            hash: crate::document::content_hash(&document),
            author: author.to_string(),
            message: message.to_string(),
            created: crate::now_secs(),
        };
        let revision = Revision { meta, document };
        match self {
            Store::Local(s) => s.commit(revision),
            Store::Redis(s) => s.commit(revision).await,
        }
    }

    /// Revision `number`.
    pub async fn revision(&self, number: u64) -> Result<Option<Revision>, StoreError> {
        match self {
            Store::Local(s) => s.revision(number),
            Store::Redis(s) => s.revision(number).await,
        }
    }

    /// Every revision's metadata, oldest first.
    pub async fn revisions(&self) -> Result<Vec<RevisionMeta>, StoreError> {
        match self {
            Store::Local(s) => s.revisions(),
            Store::Redis(s) => s.revisions().await,
        }
    }

    /// Revision `number`'s metadata, without its document.
    pub async fn revision_meta(&self, number: u64) -> Result<Option<RevisionMeta>, StoreError> {
        match self {
            Store::Local(s) => Ok(s.revisions()?.into_iter().find(|m| m.number == number)),
            Store::Redis(s) => s.revision_meta(number).await,
        }
    }

    /// Which revision runs where.
    pub async fn releases(&self) -> Result<Releases, StoreError> {
        match self {
            Store::Local(s) => s.releases(),
            Store::Redis(s) => s.releases().await,
        }
    }

    /// Applies `event` to the releases, keeps it in the history and tells every node.
    pub async fn record(&self, event: Event) -> Result<Releases, StoreError> {
        match self {
            Store::Local(s) => s.record(event),
            Store::Redis(s) => s.record(event).await,
        }
    }

    /// The last `limit` release events, newest first.
    pub async fn history(&self, limit: usize) -> Result<Vec<Event>, StoreError> {
        match self {
            Store::Local(s) => s.history(limit),
            Store::Redis(s) => s.history(limit).await,
        }
    }

    /// Records what a node says about itself.
    pub async fn report(&self, report: &NodeReport) -> Result<(), StoreError> {
        match self {
            Store::Local(s) => s.report(report),
            Store::Redis(s) => s.report(report).await,
        }
    }

    /// What every node last said, by id.
    pub async fn nodes(&self) -> Result<Vec<NodeReport>, StoreError> {
        match self {
            Store::Local(s) => s.nodes(),
            Store::Redis(s) => s.nodes().await,
        }
    }

    /// Notices of changes to the releases.
    pub fn changes(&self) -> Result<Changes, StoreError> {
        match self {
            Store::Local(s) => Ok(Changes::Local(s.subscribe())),
            Store::Redis(s) => s.subscribe().map(Changes::Redis),
        }
    }
}

/// A stream of "the releases may have changed" notices.
#[derive(Debug)]
pub enum Changes {
    /// In-process.
    Local(tokio::sync::watch::Receiver<u64>),
    /// Redis pub/sub; a (re)subscription also counts as a change, since messages may be lost.
    Redis(gatehouse_redis::Subscription),
}

impl Changes {
    /// Waits for the next notice; `false` when no more can come.
    pub async fn changed(&mut self) -> bool {
        match self {
            Changes::Local(rx) => rx.changed().await.is_ok(),
            Changes::Redis(sub) => sub.next().await.is_some(),
        }
    }
}
