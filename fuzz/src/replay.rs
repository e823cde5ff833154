//! Replays a target's committed inputs: every file of `fuzz/corpus/<target>/` and
//! `fuzz/regressions/<target>/` (the inputs that once crashed it), as `cargo test` does on stable.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

/// Runs `check` on every committed input of `target` and panics naming each input that panicked.
/// Returns how many inputs ran; the corpus must not be empty, so a moved directory cannot make the
/// replay pass without running anything.
pub fn replay(target: &str, check: fn(&[u8])) -> usize {
    let root = fuzz_dir();
    let mut files = inputs(&root.join("corpus").join(target));
    assert!(!files.is_empty(), "no corpus for `{target}` under {}", root.display());
    files.extend(inputs(&root.join("regressions").join(target)));
    let failed: Vec<String> = files
        .iter()
        .filter_map(|path| {
            let data = std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
            catch_unwind(AssertUnwindSafe(|| check(&data))).err().map(|_| path.display().to_string())
        })
        .collect();
    assert!(failed.is_empty(), "`{target}` panicked on:\n{}", failed.join("\n"));
    files.len()
}

/// The fuzz project: `fuzz/` in the repository holding the crate that includes this file.
fn fuzz_dir() -> PathBuf {
    let start = Path::new(env!("CARGO_MANIFEST_DIR"));
    start
        .ancestors()
        .map(|dir| dir.join("fuzz"))
        .find(|dir| dir.join("corpus").is_dir())
        .unwrap_or_else(|| panic!("no fuzz/corpus above {}", start.display()))
}

/// The files of `dir`, sorted; none when it does not exist (a target without regressions).
fn inputs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_file()).collect();
    files.sort();
    files
}
