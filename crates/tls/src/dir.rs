//! A directory of PEM bundles (chain and key in one `*.pem` file, an optional DER OCSP response
//! beside it as `*.ocsp`), watched by rescanning.
//!
//! A scan reads only each new or changed file's leaf names, so the index costs a few bytes per
//! name and the files themselves are loaded when a handshake first asks for one of their names.
//! A file that changes after the first scan is checked whole before it replaces the old one: a
//! broken replacement is logged and refused, and the old bundle keeps serving if it was loaded.

use crate::bundle::{self, Bundle, BundleError};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

/// How recent a directory's modification time may be and still be trusted to show the next
/// change. File systems stamp times from a coarse clock (a kernel tick, or whole seconds on some
/// network and FAT file systems), so two renames in one tick leave the same time: a scan that
/// looked between them would never look again. A time this close to the scan is not remembered,
/// and the next scan lists the directory (as git does with its racily clean index entries).
const STAMP_SETTLE: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    /// A file renamed in is a new inode even when its time and length match the old one's.
    inode: u64,
}

#[derive(Debug, Default)]
struct State {
    files: HashMap<PathBuf, (Stamp, Vec<String>)>,
    names: HashMap<String, Vec<PathBuf>>,
    /// The directory's modification time at the last full scan.
    dir_stamp: Option<SystemTime>,
}

/// Names whose certificates changed in a scan.
#[derive(Debug, Default)]
pub struct Changes {
    /// Index keys (`name` or `*.parent`) that gained, lost or changed a bundle.
    pub names: HashSet<String>,
    /// Files refused, with the reason.
    pub refused: Vec<(PathBuf, BundleError)>,
}

/// The directory store.
#[derive(Debug)]
pub struct DirStore {
    dir: PathBuf,
    state: Mutex<State>,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    meta.is_file().then(|| Stamp {
        modified: meta.modified().ok(),
        len: meta.len(),
        inode: std::os::unix::fs::MetadataExt::ino(&meta),
    })
}

fn ocsp_path(pem: &Path) -> PathBuf {
    pem.with_extension("ocsp")
}

impl DirStore {
    /// A store over `dir`; nothing is read until [`DirStore::scan`].
    pub fn new(dir: PathBuf) -> Self {
        DirStore { dir, state: Mutex::new(State::default()) }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Bundle files in the directory: `*.pem`, not hidden.
    pub fn list(&self) -> std::io::Result<Vec<PathBuf>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            let path = entry?.path();
            let hidden = path.file_name().and_then(|n| n.to_str()).is_none_or(|n| n.starts_with('.'));
            if !hidden && path.extension().is_some_and(|e| e == "pem") {
                out.push(path);
            }
        }
        out.sort();
        Ok(out)
    }

    /// Reads new and changed files and forgets removed ones. `check` decides whether a changed
    /// file is loaded whole before it is accepted (every scan but the first). Unless `full`, the
    /// files are looked at only when the directory itself changed (a file added, removed or
    /// renamed in): one `stat` instead of one per file.
    pub fn scan(&self, check: bool, full: bool) -> std::io::Result<Changes> {
        let mut changes = Changes::default();
        let started = SystemTime::now();
        // Read before listing: a change during the listing moves it, and the next scan looks.
        let dir_stamp = std::fs::metadata(&self.dir)?.modified().ok();
        if !full && dir_stamp.is_some() && self.lock().dir_stamp == dir_stamp {
            return Ok(changes);
        }
        let files = self.list()?;
        let present: HashSet<&PathBuf> = files.iter().collect();
        let mut updates = Vec::new();
        {
            let st = self.lock();
            for path in &files {
                let Some(now) = stamp(path) else { continue };
                if st.files.get(path).is_some_and(|(old, _)| *old == now) {
                    continue;
                }
                updates.push((path.clone(), now));
            }
        }
        // Files are read without the lock: lookups go on during a scan.
        let mut read = Vec::new();
        for (path, st) in updates {
            let names = std::fs::read(&path)
                .map_err(|source| BundleError::Io { action: "read", path: None, source })
                .and_then(|pem| {
                    if check {
                        bundle::parse(&pem, None, 0).map(|(b, _)| b.facts.names)
                    } else {
                        bundle::pem_names(&pem)
                    }
                });
            match names {
                Ok(names) => read.push((path, st, names)),
                Err(e) => {
                    tracing::error!(file = %path.display(), error = %e, "certificate file refused; the previous one stays");
                    changes.refused.push((path, e));
                }
            }
        }
        let mut st = self.lock();
        // A time within STAMP_SETTLE of the scan (or in its future) may still be shared by a
        // change to come.
        st.dir_stamp = dir_stamp.filter(|t| started.duration_since(*t).is_ok_and(|age| age >= STAMP_SETTLE));
        let removed: Vec<PathBuf> = st.files.keys().filter(|p| !present.contains(p)).cloned().collect();
        for path in removed {
            if let Some((_, names)) = st.files.remove(&path) {
                unlink(&mut st.names, &path, &names, &mut changes.names);
            }
        }
        for (path, stamp, names) in read {
            if let Some((_, old)) = st.files.remove(&path) {
                unlink(&mut st.names, &path, &old, &mut changes.names);
            }
            for n in &names {
                st.names.entry(n.clone()).or_default().push(path.clone());
                changes.names.insert(n.clone());
            }
            st.files.insert(path, (stamp, names));
        }
        Ok(changes)
    }

    /// Files holding a certificate for the index key `key`.
    pub fn files_for(&self, key: &str) -> Vec<PathBuf> {
        self.lock().names.get(key).cloned().unwrap_or_default()
    }

    /// Number of files indexed.
    pub fn len(&self) -> usize {
        self.lock().files.len()
    }

    /// Whether no file is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Loads and checks one bundle file (blocking).
    pub fn load(path: &Path, now: i64) -> Result<Arc<Bundle>, BundleError> {
        let pem = std::fs::read(path).map_err(|source| BundleError::Io {
            action: "read",
            path: Some(path.to_path_buf()),
            source,
        })?;
        let ocsp = std::fs::read(ocsp_path(path)).ok();
        let (b, warnings) = bundle::parse(&pem, ocsp, now)?;
        for w in warnings {
            tracing::warn!(file = %path.display(), "{w}");
        }
        Ok(Arc::new(b))
    }
}

fn unlink(names: &mut HashMap<String, Vec<PathBuf>>, path: &Path, of: &[String], changed: &mut HashSet<String>) {
    for n in of {
        if let Some(paths) = names.get_mut(n) {
            paths.retain(|p| p != path);
            if paths.is_empty() {
                names.remove(n);
            }
        }
        changed.insert(n.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::issue::{self_signed, Algorithm};
    use gatehouse_testkit::TempDir;

    fn put(dir: &Path, name: &str) {
        let pem = self_signed(&[name], Algorithm::EcdsaP256, 30).expect("test setup");
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, pem).expect("test setup");
        std::fs::rename(&tmp, dir.join(format!("{name}.pem"))).expect("test setup");
    }

    /// Sets the directory's modification time, as a coarse file-system clock would leave it.
    fn touch_dir(dir: &Path, at: SystemTime) {
        std::fs::File::open(dir).and_then(|f| f.set_modified(at)).expect("test setup");
    }

    #[test]
    fn a_file_added_in_the_same_clock_tick_as_the_last_scan_is_found() {
        let tmp = TempDir::new();
        let store = DirStore::new(tmp.path().to_path_buf());
        let tick = SystemTime::now();
        put(tmp.path(), "a.test");
        touch_dir(tmp.path(), tick);
        store.scan(false, false).expect("scan");
        assert_eq!(store.files_for("a.test").len(), 1);
        put(tmp.path(), "b.test");
        touch_dir(tmp.path(), tick);
        let changes = store.scan(true, false).expect("scan");
        assert!(changes.names.contains("b.test"), "{changes:?}");
        assert_eq!(store.files_for("b.test").len(), 1);
    }

    #[test]
    fn a_settled_directory_is_not_listed_again_until_it_changes() {
        let tmp = TempDir::new();
        let store = DirStore::new(tmp.path().to_path_buf());
        put(tmp.path(), "a.test");
        let old = SystemTime::now() - Duration::from_secs(60);
        touch_dir(tmp.path(), old);
        store.scan(false, false).expect("scan");
        // A file slipped in without moving the directory's time is not looked for...
        put(tmp.path(), "b.test");
        touch_dir(tmp.path(), old);
        assert!(store.scan(true, false).expect("scan").names.is_empty());
        // ...until a full scan.
        assert!(store.scan(true, true).expect("scan").names.contains("b.test"));
    }

    #[test]
    fn a_bundle_renamed_over_another_with_the_same_time_and_length_is_read() {
        let tmp = TempDir::new();
        let store = DirStore::new(tmp.path().to_path_buf());
        let path = tmp.path().join("site.pem");
        let first = self_signed(&["one.test"], Algorithm::EcdsaP256, 30).expect("test setup");
        // ECDSA signatures vary in length by a byte or two: draw until one matches.
        let second = (0..64)
            .map(|_| self_signed(&["two.test"], Algorithm::EcdsaP256, 30).expect("test setup"))
            .find(|s| s.len() == first.len())
            .expect("a bundle of the same length");
        let at = SystemTime::now() - Duration::from_secs(60);
        std::fs::write(&path, &first).expect("test setup");
        std::fs::File::options().write(true).open(&path).and_then(|f| f.set_modified(at)).expect("test setup");
        store.scan(false, true).expect("scan");
        assert_eq!(store.files_for("one.test").len(), 1);
        let tmp_file = tmp.path().join(".site.tmp");
        std::fs::write(&tmp_file, &second).expect("test setup");
        std::fs::File::options().write(true).open(&tmp_file).and_then(|f| f.set_modified(at)).expect("test setup");
        std::fs::rename(&tmp_file, &path).expect("test setup");
        store.scan(true, true).expect("scan");
        assert!(store.files_for("one.test").is_empty());
        assert_eq!(store.files_for("two.test").len(), 1);
    }
}
