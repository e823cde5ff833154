//! The docs name only source paths that exist: a path in backquotes in `README.md` or
//! `docs/*.md` (`listener/src/h1/mod.rs`, `proxy/forward.rs`, `bench/proxy.sh`, `crates/node/`),
//! and the file names a crate's row lists in a table (`| `upstream` (`gatehouse-upstream`) | ... |
//! `pool.rs` |`).
//! A path may be written from the repository's root, from `crates/`, with `src/` left out after
//! the crate (`proxy/forward.rs`), or as the end of a longer path (`h1/mod.rs`).
//!
//! The docs also name the crates as they are: the "Who imports whom" block of
//! `docs/architecture.md` is every crate's normal dependencies on the others, as its `Cargo.toml`
//! says, and the table of where things live in `README.md` names each directory under `crates/`
//! once and nothing else there.

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

// The crates: docs/architecture.md's "Who imports whom" block against crates/*/Cargo.toml, and
// README.md's table of where things live against crates/*.

use std::collections::{BTreeMap, BTreeSet};

/// Crates the "Who imports whom" block leaves out, with why: tools for tests and benchmarks, not
/// stages of the gateway. No crate the block covers may depend on one (checked).
const TOOLS: [(&str, &str); 4] = [
    ("testkit", "test helpers, used only as a dev-dependency"),
    ("loadgen", "the TLS benchmark client of bench/tls.sh"),
    ("h2-floor", "the reference forwarder of bench/grpc.sh"),
    ("redisbench", "the Redis benchmark of bench/redis.sh"),
];

/// The directories under `crates/`, sorted.
fn crate_dirs(root: &Path) -> Vec<String> {
    let mut dirs: Vec<String> = std::fs::read_dir(root.join("crates"))
        .expect("crates/")
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with('.'))
        .collect();
    dirs.sort();
    dirs
}

/// The package name and the normal dependencies of a `Cargo.toml`, read line by line (the `toml`
/// crate is not in the tree): keys of `[dependencies]` and `[target.….dependencies]`
/// (`gatehouse-x.workspace = true`, `gatehouse-x = { … }`, a `package = "…"` rename) and
/// `[dependencies.gatehouse-x]` tables. Dev- and build-dependencies are not read.
fn read_manifest(text: &str) -> (String, Vec<String>) {
    let normal = |section: &str| {
        section == "dependencies" || (section.starts_with("target.") && section.ends_with(".dependencies"))
    };
    let unquote = |s: &str| s.trim().trim_matches(['"', '\'']).to_string();
    let (mut package, mut deps) = (String::new(), Vec::new());
    let mut section = String::new();
    // The dependency whose own table (`[dependencies.x]`) is being read.
    let mut table: Option<usize> = None;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            let header = line.split('#').next().unwrap_or("").trim();
            section = header.trim_matches(['[', ']']).trim().to_string();
            table = None;
            if let Some((parent, dep)) = section.rsplit_once('.') {
                if normal(parent) {
                    deps.push(unquote(dep));
                    table = Some(deps.len() - 1);
                }
            }
            continue;
        }
        let Some((key, value)) = line.split_once('=') else { continue };
        let key = unquote(key);
        match table {
            Some(i) if key == "package" => deps[i] = unquote(value),
            Some(_) => {}
            None if section == "package" && key == "name" => package = unquote(value),
            None if normal(&section) && !key.starts_with('#') => {
                let renamed = value.split_once("package").and_then(|(_, rest)| rest.trim_start().strip_prefix('='));
                deps.push(match renamed {
                    Some(rest) => unquote(rest.split([',', '}']).next().unwrap_or("")),
                    None => unquote(key.split('.').next().unwrap_or("")),
                });
            }
            None => {}
        }
    }
    (package, deps)
}

/// Every crate under `crates/` (by directory) with the workspace crates among its normal
/// dependencies (by directory too: `gatehouse-path` is `path`, the binary `gatehouse` is
/// `gatehouse`).
fn workspace_imports(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let manifests: Vec<(String, String, Vec<String>)> = crate_dirs(root)
        .into_iter()
        .filter_map(|dir| {
            let text = std::fs::read_to_string(root.join("crates").join(&dir).join("Cargo.toml")).ok()?;
            let (package, deps) = read_manifest(&text);
            Some((dir, package, deps))
        })
        .collect();
    let dir_of: BTreeMap<&str, &str> =
        manifests.iter().map(|(dir, package, _)| (package.as_str(), dir.as_str())).collect();
    manifests
        .iter()
        .map(|(dir, _, deps)| {
            let ours = deps.iter().filter_map(|d| dir_of.get(d.as_str())).map(|d| d.to_string()).collect();
            (dir.clone(), ours)
        })
        .collect()
}

/// One line of the import block: the crates on its left, and what each of them imports.
type Arrows = (Vec<String>, BTreeSet<String>);

/// The lines of the ```text block after "Who imports whom" in `text`, as (crates on the left,
/// crates on the right). A line without `→` continues the one before; text in parentheses is a
/// comment (`gatehouse (CLI)`), so `(none of ours)` names nothing.
fn import_block(text: &str) -> Result<Vec<Arrows>, String> {
    let after = text.split_once("Who imports whom").ok_or("no \"Who imports whom\" in the text")?.1;
    let block = after.split_once("```text\n").ok_or("no ```text block after \"Who imports whom\"")?.1;
    let block = block.split_once("```").ok_or("the ```text block does not end")?.0;
    let mut lines: Vec<String> = Vec::new();
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        match lines.last_mut() {
            Some(last) if !line.contains('→') => last.push_str(line),
            _ => lines.push(line.to_string()),
        }
    }
    let names = |s: &str| -> Vec<String> {
        let mut plain = String::new();
        let mut depth = 0usize;
        for c in s.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth = depth.saturating_sub(1),
                _ if depth == 0 => plain.push(c),
                _ => {}
            }
        }
        plain.split(',').map(str::trim).filter(|n| !n.is_empty()).map(String::from).collect()
    };
    lines
        .iter()
        .map(|line| match line.split_once('→') {
            Some((left, right)) => Ok((names(left), names(right).into_iter().collect())),
            None => Err(format!("a line without `→`: {line:?}")),
        })
        .collect()
}

/// What differs between the block and the crates' dependencies, one line each.
fn import_differences(crates: &BTreeMap<String, BTreeSet<String>>, block: &[Arrows]) -> Vec<String> {
    let mut out = Vec::new();
    let tool = |name: &str| TOOLS.iter().find(|(t, _)| *t == name).map(|(_, why)| *why);
    for (name, why) in TOOLS {
        if !crates.contains_key(name) {
            out.push(format!("`{name}` is left out ({why}), but crates/{name} does not exist: update TOOLS"));
        }
    }
    let covered: BTreeMap<&String, &BTreeSet<String>> = crates.iter().filter(|(k, _)| tool(k).is_none()).collect();
    for (krate, deps) in &covered {
        for (dep, why) in deps.iter().filter_map(|d| tool(d).map(|why| (d, why))) {
            out.push(format!(
                "`{krate}` depends on `{dep}`, which the block leaves out ({why}): list it, or cut the edge"
            ));
        }
    }
    let mut listed: BTreeMap<&str, &BTreeSet<String>> = BTreeMap::new();
    for (left, right) in block {
        for name in left {
            if listed.insert(name, right).is_some() {
                out.push(format!("`{name}` is on the left of more than one line"));
            }
        }
    }
    for (name, right) in &listed {
        let Some(deps) = covered.get(&name.to_string()) else {
            match tool(name) {
                Some(why) => out.push(format!("`{name}` is listed, but the block leaves it out ({why})")),
                None => out.push(format!("`{name}` is listed, but there is no crates/{name}")),
            }
            continue;
        };
        for dep in deps.difference(right) {
            out.push(format!("missing arrow: {name} → {dep} (crates/{name}/Cargo.toml depends on it)"));
        }
        for dep in right.difference(deps) {
            out.push(format!("extra arrow: {name} → {dep} (not a dependency in crates/{name}/Cargo.toml)"));
        }
    }
    for (krate, deps) in &covered {
        if !listed.contains_key(krate.as_str()) {
            let deps: Vec<&str> = deps.iter().map(String::as_str).collect();
            let deps = if deps.is_empty() { "(none of ours)".to_string() } else { deps.join(", ") };
            out.push(format!("crate not listed: {krate} → {deps}"));
        }
    }
    out
}

#[test]
fn the_import_block_is_what_the_manifests_say() {
    let root = root();
    let text = std::fs::read_to_string(root.join("docs/architecture.md")).expect("docs/architecture.md");
    let block = import_block(&text).unwrap_or_else(|e| panic!("docs/architecture.md, \"Who imports whom\": {e}"));
    let differences = import_differences(&workspace_imports(&root), &block);
    assert!(
        differences.is_empty(),
        "docs/architecture.md's \"Who imports whom\" is not what the [dependencies] of crates/*/Cargo.toml say:\n{}",
        differences.join("\n")
    );
}

#[test]
fn the_import_check_reports_each_difference() {
    let manifest = "[package]\nname = \"gatehouse-a\"\n\n[dependencies]\ngatehouse-b.workspace = true\n\
                    gatehouse-c = { path = \"../c\" }\nrenamed = { package = \"gatehouse-d\", path = \"../d\" }\n\
                    tokio.workspace = true\n\n[dependencies.gatehouse-e]\nworkspace = true\n\n\
                    [dev-dependencies]\ngatehouse-testkit.workspace = true\n";
    let (package, deps) = read_manifest(manifest);
    assert_eq!(package, "gatehouse-a");
    assert_eq!(deps, ["gatehouse-b", "gatehouse-c", "gatehouse-d", "tokio", "gatehouse-e"]);

    let text =
        "Who imports whom:\n\n```text\na (CLI) → b, c (a\n           comment)\nb, c → d\nd → (none of ours)\n```\n";
    let block = import_block(text).expect("a block");
    let set = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<BTreeSet<String>>();
    assert_eq!(block[0], (vec!["a".to_string()], set(&["b", "c"])));
    assert_eq!(block[1], (vec!["b".to_string(), "c".to_string()], set(&["d"])));
    assert_eq!(block[2], (vec!["d".to_string()], set(&[])));

    let mut crates: BTreeMap<String, BTreeSet<String>> = TOOLS.iter().map(|(t, _)| (t.to_string(), set(&[]))).collect();
    crates.insert("a".into(), set(&["b", "c"]));
    crates.insert("b".into(), set(&["d"]));
    crates.insert("c".into(), set(&["d"]));
    crates.insert("d".into(), set(&[]));
    assert!(import_differences(&crates, &block).is_empty());
    crates.insert("a".into(), set(&["b", "e", "testkit"]));
    crates.insert("e".into(), set(&[]));
    let block = [block, vec![(vec!["x".to_string(), "loadgen".to_string()], set(&[]))]].concat();
    assert_eq!(
        import_differences(&crates, &block),
        [
            "`a` depends on `testkit`, which the block leaves out (test helpers, used only as a dev-dependency): list it, or cut the edge",
            "missing arrow: a → e (crates/a/Cargo.toml depends on it)",
            "missing arrow: a → testkit (crates/a/Cargo.toml depends on it)",
            "extra arrow: a → c (not a dependency in crates/a/Cargo.toml)",
            "`loadgen` is listed, but the block leaves it out (the TLS benchmark client of bench/tls.sh)",
            "`x` is listed, but there is no crates/x",
            "crate not listed: e → (none of ours)",
        ]
    );
}

/// The crate directories (`crates/NAME` or `crates/NAME/`) named in the last cell of the table
/// rows of README.md's section on where things live, as often as they are named.
fn readme_crates(readme: &str) -> Result<Vec<String>, &'static str> {
    const SECTION: &str = "## What is in the box";
    let section = readme.split_once(SECTION).ok_or("README.md has no section \"What is in the box\"")?.1;
    let section = section.split("\n## ").next().unwrap_or(section);
    let named: Vec<String> = section
        .lines()
        .filter(|l| l.starts_with('|'))
        .filter_map(|row| row.trim_end().trim_end_matches('|').rsplit('|').next())
        .flat_map(quoted)
        .filter_map(|token| token.strip_prefix("crates/"))
        .map(|name| name.trim_end_matches('/'))
        .filter(|name| !name.is_empty() && !name.contains('/'))
        .map(String::from)
        .collect();
    if named.is_empty() {
        return Err("README.md's \"What is in the box\" names no `crates/…` in its table");
    }
    Ok(named)
}

#[test]
fn the_readme_names_every_crate_once() {
    let root = root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let named = readme_crates(&readme).unwrap_or_else(|e| panic!("{e}"));
    let dirs = crate_dirs(&root);
    let mut wrong = Vec::new();
    for dir in &dirs {
        match named.iter().filter(|n| *n == dir).count() {
            0 => wrong.push(format!("crates/{dir} is in no row")),
            1 => {}
            n => wrong.push(format!("crates/{dir} is named {n} times")),
        }
    }
    for name in named.iter().collect::<BTreeSet<_>>() {
        if !dirs.contains(name) {
            wrong.push(format!("crates/{name} does not exist"));
        }
    }
    assert!(wrong.is_empty(), "README.md's table of where things live:\n{}", wrong.join("\n"));
}
