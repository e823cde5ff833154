//! The docs name only source paths that exist: a path in backquotes in `README.md` or
//! `docs/*.md` (`listener/src/h1/mod.rs`, `proxy/forward.rs`, `bench/proxy.sh`, `crates/node/`),
//! and the file names a crate's row lists in a table (`| `upstream` (`gatehouse-upstream`) | ... |
//! `pool.rs` |`).
//! A path may be written from the repository's root, from `crates/`, with `src/` left out after
//! the crate (`proxy/forward.rs`), or as the end of a longer path (`h1/mod.rs`).

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every file and directory of the repository, relative to its root, `/`-separated (directories
/// end in `/`).
fn tree(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || name == "target" || name == "node_modules" {
                continue;
            }
            let path = e.path();
            let rel = path.strip_prefix(root).unwrap_or(&path).to_string_lossy().replace('\\', "/");
            if path.is_dir() {
                out.push(format!("{rel}/"));
                dirs.push(path);
            } else {
                out.push(rel);
            }
        }
    }
    out
}

/// `a/{b,c}.rs` → `a/b.rs`, `a/c.rs`.
fn expand(token: &str) -> Vec<String> {
    match (token.find('{'), token.find('}')) {
        (Some(open), Some(close)) if open < close => token[open + 1..close]
            .split(',')
            .flat_map(|alt| expand(&format!("{}{alt}{}", &token[..open], &token[close + 1..])))
            .collect(),
        _ => vec![token.to_string()],
    }
}

const SOURCE_ENDINGS: [&str; 10] = [".rs", ".sh", ".py", ".yaml", ".toml", ".js", ".mjs", ".html", ".css", "/"];

fn looks_like_source(token: &str) -> bool {
    token.contains('/')
        && SOURCE_ENDINGS.iter().any(|e| token.ends_with(e))
        && !token.contains(char::is_whitespace)
        && !token.contains("://")
        && !token.starts_with(['/', '~', '.', '$', '-'])
        && !token.contains(['*', '<', '>', '=', ':'])
        // A placeholder such as `fuzz/src/TARGET.rs`.
        && !token.split(['/', '.']).any(|seg| seg.len() > 1 && seg.chars().all(|c| c.is_ascii_uppercase()))
}

fn exists(tree: &[String], token: &str) -> bool {
    let token = token.trim_start_matches("./");
    let mut candidates = vec![token.to_string(), format!("crates/{token}")];
    if let Some((krate, rest)) = token.split_once('/') {
        candidates.push(format!("crates/{krate}/src/{rest}"));
    }
    tree.iter().any(|f| candidates.iter().any(|c| f == c || f.ends_with(&format!("/{c}"))))
}

/// Backquoted tokens of `text`.
fn quoted(text: &str) -> impl Iterator<Item = &str> {
    text.split('`').skip(1).step_by(2)
}

#[test]
fn docs_name_only_paths_that_exist() {
    let root = root();
    let tree = tree(&root);
    let mut docs = vec![root.join("README.md")];
    let mut listed: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    listed.sort();
    docs.extend(listed);
    let mut missing = Vec::new();
    for doc in &docs {
        let text = std::fs::read_to_string(doc).expect("readable doc");
        let name = doc.strip_prefix(&root).unwrap_or(doc).display().to_string();
        for (n, line) in text.lines().enumerate() {
            for token in quoted(line).flat_map(expand).filter(|t| looks_like_source(t)) {
                if !exists(&tree, &token) {
                    missing.push(format!("{name}:{}: `{token}`", n + 1));
                }
            }
            // A crate's row: `| `name` (`gatehouse-name`) | ... | `file.rs`, `dir/` |`.
            let first_cell = line.split('|').nth(1).unwrap_or("");
            if !first_cell.contains("(`gatehouse") && !first_cell.contains("(binary)") {
                continue;
            }
            let Some(krate) = line.strip_prefix("| `").and_then(|r| r.split('`').next()) else { continue };
            let src = format!("crates/{krate}/src/");
            if !tree.contains(&src) {
                continue;
            }
            let Some(files) = line.trim_end().trim_end_matches('|').rsplit('|').next() else { continue };
            for token in quoted(files).flat_map(expand) {
                let file = format!("{src}{token}");
                if !token.contains(' ') && !tree.contains(&file) {
                    missing.push(format!("{name}:{}: `{token}` (in {src})", n + 1));
                }
            }
        }
    }
    assert!(missing.is_empty(), "the docs name paths that do not exist:\n{}", missing.join("\n"));
}

#[test]
fn the_check_finds_a_path_that_does_not_exist() {
    let tree = vec!["crates/".into(), "crates/proxy/".into(), "crates/proxy/src/forward.rs".into()];
    assert!(exists(&tree, "proxy/forward.rs"));
    assert!(exists(&tree, "crates/proxy/src/forward.rs"));
    assert!(exists(&tree, "crates/proxy/"));
    assert!(!exists(&tree, "proxy/upgrade.rs"));
    assert!(!exists(&tree, "gatehouse/src/admin.rs"));
    assert_eq!(expand("rate_limit/{gcra,local}.rs"), ["rate_limit/gcra.rs", "rate_limit/local.rs"]);
}
