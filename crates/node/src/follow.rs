//! How a node follows published revisions: which store it reads, what it should run (the first
//! of its labels with a staged revision, else the released one), the revision merged into its own
//! file, the copy kept on disk for a restart while the store is away, and its report to the store.

use crate::error::NodeError;
use gatehouse_admin::bodies::{ControlStatus, StoreKind};
use gatehouse_config::Config;
use gatehouse_control::{document, now_secs, ApplyError, Health, NodeReport, Revision, Store};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The revision a node runs.
#[derive(Clone, Debug)]
pub struct Running {
    /// Its number.
    pub number: u64,
    /// Its content hash.
    pub hash: String,
    /// Its document, merged into the file on every reload.
    pub document: Value,
}

/// This node's place in the control plane.
pub struct Follower {
    /// Where revisions are; none when nothing is published for this node to follow.
    pub store: Option<Store>,
    /// Node id.
    pub id: String,
    /// Node labels.
    pub labels: Vec<String>,
    /// Apply released and staged revisions.
    pub follow: bool,
    /// What runs; none: the file alone.
    pub running: Option<Running>,
    /// What should run, as last read.
    pub target: Option<u64>,
    /// The last revision that could not be applied, while it is the target.
    pub failed: Option<ApplyError>,
    /// Whether the store answered last time.
    pub store_ok: bool,
    /// Where the applied revision is kept for restarts.
    cache: PathBuf,
    started: i64,
    /// When the last store error was logged (they are logged once a minute).
    last_warning: Option<std::time::Instant>,
    /// The releases' sequence number when the running revision was last checked against the store.
    checked_seq: Option<u64>,
    /// The releases' epoch as last read: `seq` counts within it.
    epoch: String,
    /// What relative paths resolve against: the configuration file's directory.
    pub dir: PathBuf,
}

/// The host name, as node ids default to it.
pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "gatehouse".into())
}

impl Follower {
    /// The store for `config`: the cluster's Redis when there is one, else the local directory
    /// when the admin API can write it or it already holds revisions.
    pub fn new(
        config: &Config,
        cluster: Option<&std::sync::Arc<gatehouse_cluster::Cluster>>,
        config_dir: PathBuf,
    ) -> Result<Self, NodeError> {
        let api_on = config.admin.as_ref().is_some_and(gatehouse_config::Admin::api_on);
        let dir = &config.control.dir;
        let store = match cluster {
            Some(c) => Some(Store::redis(c.clone())),
            None if api_on || dir.join("releases.json").exists() => {
                Some(Store::local(dir.clone()).map_err(NodeError::Store)?)
            }
            None => None,
        };
        Ok(Follower {
            store,
            id: config.node.id.clone().unwrap_or_else(hostname),
            labels: config.node.labels.clone(),
            follow: config.control.follow,
            running: None,
            target: None,
            failed: None,
            store_ok: true,
            cache: dir.join("applied.json"),
            started: now_secs(),
            last_warning: None,
            checked_seq: None,
            epoch: String::new(),
            dir: config_dir,
        })
    }

    fn warn(&mut self, what: &str, e: &dyn std::fmt::Display) {
        self.store_ok = false;
        let now = std::time::Instant::now();
        if self.last_warning.is_none_or(|t| now.duration_since(t) > Duration::from_secs(60)) {
            self.last_warning = Some(now);
            tracing::warn!(error = %e, "{what}; running revision {:?} meanwhile", self.running.as_ref().map(|r| r.number));
        }
    }

    /// The revision this node should run now, if it differs from what runs and has not already
    /// been refused. `None` also when the store cannot be read (the node keeps what it runs).
    pub async fn pending(&mut self) -> Option<Revision> {
        if !self.follow {
            return None;
        }
        let store = self.store.clone()?;
        let releases = match store.releases().await {
            Ok(r) => r,
            Err(e) => {
                self.warn("cannot read the releases", &e);
                return None;
            }
        };
        self.store_ok = true;
        if releases.epoch != self.epoch {
            // The store began its history again (a Redis that lost its data): revision numbers and
            // `seq` count from 1 again, so a refusal or a check recorded before names a revision
            // that is gone, whose number a new one may carry.
            self.failed = None;
            self.checked_seq = None;
            self.epoch.clone_from(&releases.epoch);
        }
        self.target = releases.target_for(&self.labels);
        let n = self.target?;
        if self.failed.as_ref().is_some_and(|f| f.revision == n) {
            return None;
        }
        if let Some(running) = &self.running {
            if running.number == n {
                // Same number; after the releases changed, make sure it is the same revision too: a
                // Redis that lost its data numbers new revisions from 1 again.
                if self.checked_seq == Some(releases.seq) {
                    return None;
                }
                match store.revision_meta(n).await {
                    Ok(Some(meta)) if meta.hash != running.hash => {}
                    Ok(_) => {
                        self.checked_seq = Some(releases.seq);
                        return None;
                    }
                    Err(e) => {
                        self.warn("cannot read a revision", &e);
                        return None;
                    }
                }
            }
        }
        match store.revision(n).await {
            Ok(Some(rev)) => Some(rev),
            Ok(None) => {
                self.failed = Some(ApplyError { revision: n, at: now_secs(), errors: vec!["no such revision".into()] });
                None
            }
            Err(e) => {
                self.warn("cannot read a revision", &e);
                None
            }
        }
    }

    /// The configuration to start with: the revision this node should run if the store says so
    /// (or, with the store away, the one it ran last), else the file.
    pub async fn initial_config(&mut self, base: &str, file: Config) -> Config {
        let wait = file.redis.as_ref().map_or(Duration::from_secs(2), |r| r.connect_timeout.0 * 2);
        let rev = match tokio::time::timeout(wait, self.pending()).await {
            Ok(Some(rev)) => rev,
            Ok(None) if self.store_ok => return file,
            _ => match self.cached().filter(|_| self.follow) {
                Some(rev) => {
                    tracing::warn!(
                        revision = rev.meta.number,
                        "revision store away; starting on the revision applied last"
                    );
                    rev
                }
                None => return file,
            },
        };
        let number = rev.meta.number;
        match Follower::merged(base, &rev, &self.dir) {
            Ok((config, running)) => {
                tracing::info!(revision = number, "starting on published revision");
                self.applied(rev, running)();
                config
            }
            Err(e) => {
                tracing::error!(revision = number, "published revision refused, starting on the file:\n{e}");
                self.refused(number, &e);
                file
            }
        }
    }

    /// The configuration of `rev` on this node: its document merged into `base`, compiled, its
    /// relative paths resolved against `dir` (the file's directory).
    pub fn merged(base: &str, rev: &Revision, dir: &Path) -> Result<(Config, Running), NodeError> {
        let document = rev.document.clone();
        let merged = document::merge(base, &document).map_err(NodeError::Document)?;
        let mut config = gatehouse_config::compile_value(merged).map_err(NodeError::Revision)?;
        config.resolve_paths(dir);
        Ok((config, Running { number: rev.meta.number, hash: rev.meta.hash.clone(), document }))
    }

    /// Records a successful apply; returns the job that keeps a copy for restarts, for the caller
    /// to run off the control loop (a large revision takes milliseconds to serialise and sync).
    pub fn applied(&mut self, rev: Revision, running: Running) -> impl FnOnce() + Send + 'static {
        self.running = Some(running);
        self.failed = None;
        self.checked_seq = None;
        let cache = self.cache.clone();
        move || {
            let Ok(bytes) = serde_json::to_vec(&rev) else { return };
            if let Some(dir) = cache.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            if let Err(e) = gatehouse_files::write_private(&cache, &bytes) {
                tracing::warn!(path = %cache.display(), error = %e, "cannot keep the applied revision for restarts");
            }
        }
    }

    /// Records a refused revision.
    pub fn refused(&mut self, revision: u64, error: &NodeError) {
        let errors = error.to_string().lines().map(str::to_string).collect();
        self.failed = Some(ApplyError { revision, at: now_secs(), errors });
    }

    /// The revision applied before the last stop, for a start while the store is away.
    pub fn cached(&self) -> Option<Revision> {
        serde_json::from_slice(&std::fs::read(&self.cache).ok()?).ok()
    }

    /// What this node says about itself.
    pub fn report(&self, generation: u64) -> NodeReport {
        let on_target = self.target.is_none() || self.running.as_ref().map(|r| r.number) == self.target;
        NodeReport {
            id: self.id.clone(),
            labels: self.labels.clone(),
            revision: self.running.as_ref().map(|r| r.number),
            hash: self.running.as_ref().map(|r| r.hash.clone()),
            target: self.target,
            generation,
            last_error: self.failed.clone(),
            health: if self.store_ok && on_target { Health::Ok } else { Health::Degraded },
            version: env!("CARGO_PKG_VERSION").into(),
            started: self.started,
            updated: now_secs(),
        }
    }

    /// Sends the report to the store.
    pub async fn send_report(&mut self, generation: u64) {
        let Some(store) = self.store.clone() else { return };
        if let Err(e) = store.report(&self.report(generation)).await {
            self.warn("cannot report to the revision store", &e);
        }
    }

    /// The part of `/status` about revisions.
    pub fn status(&self) -> ControlStatus {
        ControlStatus {
            node: self.id.clone(),
            labels: self.labels.clone(),
            store: self.store.as_ref().map(|s| match s {
                Store::Local(_) => StoreKind::Local,
                Store::Redis(_) => StoreKind::Redis,
            }),
            revision: self.running.as_ref().map(|r| r.number),
            target: self.target,
            last_error: self.failed.clone(),
        }
    }
}
