//! Every example configuration in `examples/` must compile without errors.

use std::fs;
use std::path::{Path, PathBuf};

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");

fn example_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(EXAMPLES)
        .expect("examples/ directory is readable")
        .map(|entry| entry.expect("examples/ entry is readable").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    files
}

fn name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

#[test]
fn there_are_at_least_four_examples() {
    let files = example_files();
    assert!(files.len() >= 4, "expected at least 4 examples in {EXAMPLES}, found {files:?}");
}

#[test]
fn every_example_compiles() {
    let mut failures = Vec::new();
    for path in example_files() {
        let text = fs::read_to_string(&path).expect("example file is readable UTF-8");
        if let Err(errors) = gatehouse_config::compile(&text) {
            failures.push(format!("{}:\n{errors}", name(&path)));
        }
    }
    assert!(failures.is_empty(), "invalid example configurations:\n{}", failures.join("\n\n"));
}

#[test]
fn every_example_opens_with_a_comment() {
    for path in example_files() {
        let text = fs::read_to_string(&path).expect("example file is readable UTF-8");
        assert!(text.starts_with("# "), "{} must open with a `# ...` comment line", name(&path));
    }
}
