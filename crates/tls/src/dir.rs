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
use std::time::SystemTime;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
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
    meta.is_file().then(|| Stamp { modified: meta.modified().ok(), len: meta.len() })
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
        st.dir_stamp = dir_stamp;
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
