//! The revision store of a single node: files in a directory (mode 700), written whole and
//! renamed into place so a crash leaves the old file or the new one.
//!
//! ```text
//! draft.json            the draft (holds app secrets: mode 600)
//! revisions/<n>.json    revision n (mode 600)
//! revisions.jsonl       one metadata line per revision
//! releases.json         released and staged revisions
//! history.jsonl         release events, oldest first
//! ```

use crate::store::StoreError;
use crate::types::{Action, Draft, Event, NodeReport, Releases, Revision, RevisionMeta};
use gatehouse_files::write_private;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use tokio::sync::watch;

/// The directory store.
#[derive(Debug)]
pub struct LocalStore {
    dir: PathBuf,
    /// Serialises writers within the process (the API and the node share one store).
    lock: Mutex<()>,
    nodes: Mutex<BTreeMap<String, NodeReport>>,
    changes: watch::Sender<u64>,
}

fn unavailable(action: &'static str, path: &Path, source: std::io::Error) -> StoreError {
    StoreError::Io { action, path: path.to_path_buf(), source }
}

fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, StoreError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| StoreError::Json { path: Some(path.to_path_buf()), source }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(unavailable("read", path, e)),
    }
}

fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), StoreError> {
    let bytes = serde_json::to_vec(value).map_err(|source| StoreError::Json { path: None, source })?;
    write_private(path, &bytes).map_err(|e| unavailable("write", path, e))
}

fn append_line<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), StoreError> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut line = serde_json::to_vec(value).map_err(|source| StoreError::Json { path: None, source })?;
    line.push(b'\n');
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| unavailable("open", path, e))?;
    f.write_all(&line).map_err(|e| unavailable("write", path, e))
}

fn read_lines<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>, StoreError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(unavailable("read", path, e)),
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).map_err(|source| StoreError::Json { path: Some(path.to_path_buf()), source }))
        .collect()
}

impl LocalStore {
    pub(crate) fn open(dir: PathBuf) -> Result<Self, StoreError> {
        use std::os::unix::fs::DirBuilderExt;
        let revisions = dir.join("revisions");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&revisions)
            .map_err(|source| StoreError::CreateDir { path: revisions, source })?;
        let seq = read_json::<Releases>(&dir.join("releases.json"))?.map_or(0, |r| r.seq);
        Ok(LocalStore { dir, lock: Mutex::new(()), nodes: Mutex::new(BTreeMap::new()), changes: watch::channel(seq).0 })
    }

    fn guard(&self) -> std::sync::MutexGuard<'_, ()> {
        self.lock.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn draft(&self) -> Result<Option<Draft>, StoreError> {
        read_json(&self.dir.join("draft.json"))
    }

    pub(crate) fn put_draft(&self, expected: u64, draft: Draft) -> Result<Draft, StoreError> {
        let _g = self.guard();
        let current = self.draft()?.map_or(0, |d| d.version);
        if current != expected {
            return Err(StoreError::Conflict { current });
        }
        write_json(&self.dir.join("draft.json"), &draft)?;
        Ok(draft)
    }

    pub(crate) fn commit(&self, mut revision: Revision) -> Result<Revision, StoreError> {
        let _g = self.guard();
        revision.meta.number = self.revisions()?.last().map_or(0, |m| m.number) + 1;
        write_json(&self.revision_path(revision.meta.number), &revision)?;
        append_line(&self.dir.join("revisions.jsonl"), &revision.meta)?;
        Ok(revision)
    }

    fn revision_path(&self, number: u64) -> PathBuf {
        self.dir.join("revisions").join(format!("{number}.json"))
    }

    pub(crate) fn revision(&self, number: u64) -> Result<Option<Revision>, StoreError> {
        read_json(&self.revision_path(number))
    }

    pub(crate) fn revisions(&self) -> Result<Vec<RevisionMeta>, StoreError> {
        read_lines(&self.dir.join("revisions.jsonl"))
    }

    pub(crate) fn releases(&self) -> Result<Releases, StoreError> {
        Ok(read_json(&self.dir.join("releases.json"))?.unwrap_or_default())
    }

    pub(crate) fn record(&self, event: Event) -> Result<Releases, StoreError> {
        let _g = self.guard();
        let mut r = self.releases()?;
        apply(&mut r, &event);
        r.seq += 1;
        write_json(&self.dir.join("releases.json"), &r)?;
        append_line(&self.dir.join("history.jsonl"), &event)?;
        self.changes.send_replace(r.seq);
        Ok(r)
    }

    pub(crate) fn history(&self, limit: usize) -> Result<Vec<Event>, StoreError> {
        let mut all: Vec<Event> = read_lines(&self.dir.join("history.jsonl"))?;
        all.reverse();
        all.truncate(limit);
        Ok(all)
    }

    pub(crate) fn report(&self, report: &NodeReport) -> Result<(), StoreError> {
        self.nodes.lock().unwrap_or_else(|p| p.into_inner()).insert(report.id.clone(), report.clone());
        Ok(())
    }

    pub(crate) fn nodes(&self) -> Result<Vec<NodeReport>, StoreError> {
        Ok(self.nodes.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect())
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }
}

/// What an event does to the releases.
pub(crate) fn apply(r: &mut Releases, e: &Event) {
    match (e.action, &e.label) {
        (Action::Release | Action::Rollback, _) => r.released = Some(e.revision),
        (Action::Stage, Some(label)) => {
            r.staged.insert(label.clone(), e.revision);
        }
        (Action::Unstage, Some(label)) => {
            r.staged.remove(label);
        }
        (Action::Stage | Action::Unstage, None) => {}
    }
}

#[cfg(test)]
mod tests {
    use crate::store::{Store, StoreError};
    use crate::types::{Action, Event};
    use serde_json::json;

    fn event(action: Action, revision: u64, label: Option<&str>) -> Event {
        Event { at: 0, who: "ops".into(), action, revision, label: label.map(str::to_string) }
    }

    #[tokio::test]
    async fn drafts_revisions_and_releases_survive_reopening() {
        let dir = std::env::temp_dir().join(format!("gatehouse-control-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = Store::local(dir.clone()).expect("open");
        let d1 = store.put_draft(0, json!({"sites": {}}), "ops").await.expect("first draft");
        assert_eq!(d1.version, 1);
        let conflict = store.put_draft(0, json!({}), "bob").await;
        assert!(matches!(conflict, Err(StoreError::Conflict { current: 1 })), "{conflict:?}");
        let r1 = store.commit(json!({"sites": {}}), "ops", "first").await.expect("commit");
        let r2 = store.commit(json!({"sites": {"a": {}}}), "ops", "second").await.expect("commit");
        assert_eq!((r1.meta.number, r2.meta.number), (1, 2));
        let mut changes = store.changes().expect("changes");
        store.record(event(Action::Release, 2, None)).await.expect("release");
        assert!(changes.changed().await);
        store.record(event(Action::Stage, 1, Some("canary"))).await.expect("stage");
        drop(store);

        let store = Store::local(dir.clone()).expect("reopen");
        let r = store.releases().await.expect("releases");
        assert_eq!((r.released, r.staged.get("canary").copied(), r.seq), (Some(2), Some(1), 2));
        assert_eq!(store.revisions().await.expect("list").len(), 2);
        assert_eq!(store.revision(2).await.expect("get").map(|r| r.meta.message), Some("second".into()));
        assert_eq!(store.draft().await.expect("draft").map(|d| d.version), Some(1));
        let h = store.history(10).await.expect("history");
        assert_eq!(h[0].action, Action::Stage, "newest first");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
