//! `gatehouse cert import|list|remove|show`: the certificate store of a configuration, from the
//! command line. Private keys are read on import and never printed.

use crate::tls::{cluster, now_secs};
use clap::Subcommand;
use gatehouse_config::Config;
use gatehouse_tls::bundle::{self, Facts, KeyKind};
use gatehouse_tls::dir::DirStore;
use gatehouse_tls::index::{normalise, wildcard_parent};
use gatehouse_tls::redis_store::RedisStore;
use gatehouse_tls::TlsStats;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What to do with the store.
#[derive(Subcommand)]
pub enum CertCommand {
    /// Check bundles (PEM: chain, leaf first, and key) and add them; a bundle replaces the one of
    /// the same key type for each of its names.
    Import {
        /// Bundle files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// List stored certificates: names, key type, expiry, issuer, serial.
    List,
    /// Remove the certificates serving a name (and every other name they serve).
    Remove {
        /// A name or `*.parent`.
        name: String,
    },
    /// Show the certificates that would serve a name.
    Show {
        /// A host name.
        name: String,
    },
}

pub(crate) enum StoreRef {
    Dir(PathBuf),
    Redis(RedisStore),
}

/// `YYYY-MM-DD` of a Unix time (UTC).
fn date(unix: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(u64::try_from(unix).unwrap_or(0));
    gatehouse_telemetry::iso_date(t)
}

fn line(facts: &Facts, place: &str) -> String {
    let now = now_secs();
    let days = (facts.not_after - now).div_euclid(86_400);
    let state = if facts.not_after < now { "EXPIRED".to_string() } else { format!("{days}d left") };
    format!(
        "{}\t{}\t{} ({state})\t{}\t{}\t{place}",
        facts.names.join(","),
        facts.key.as_str(),
        date(facts.not_after),
        facts.issuer,
        facts.serial
    )
}

fn show(facts: &Facts, place: &str) -> String {
    format!(
        "names:      {}\nsubject:    {}\nissuer:     {}\nserial:     {}\nkey:        {}\nvalid from: {}\nvalid to:   {}\nchain:      {} certificate(s)\nstored as:  {place}\n",
        facts.names.join(", "),
        facts.subject,
        facts.issuer,
        facts.serial,
        facts.key.as_str(),
        date(facts.not_before),
        date(facts.not_after),
        facts.chain_len,
    )
}

/// Runs a `cert` command against the store of the configuration in `config`.
pub fn run(config_path: &Path, command: CertCommand) -> Result<(), String> {
    let text =
        std::fs::read_to_string(config_path).map_err(|e| format!("cannot read {}: {e}", config_path.display()))?;
    let config = gatehouse_config::compile(&text).map_err(|e| format!("invalid configuration:\n{e}"))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start runtime: {e}"))?;
    rt.block_on(async move {
        let store = store(&config)?;
        if let StoreRef::Redis(r) = &store {
            r.cluster().connected().await.map_err(|e| e.to_string())?;
        }
        match command {
            CertCommand::Import { files } => import(&store, &files).await,
            CertCommand::List => list(&store).await,
            CertCommand::Remove { name } => remove(&store, &name).await,
            CertCommand::Show { name } => show_name(&store, &name).await,
        }
    })
}

pub(crate) fn store(config: &Config) -> Result<StoreRef, String> {
    let Some(s) = &config.tls.store else {
        return Err("the configuration has no certificate store (tls.store)".into());
    };
    if let Some(dir) = &s.dir {
        return Ok(StoreRef::Dir(dir.clone()));
    }
    let cluster = cluster(config, Arc::new(TlsStats::default()))?.ok_or("tls.store.redis needs the `redis` section")?;
    Ok(StoreRef::Redis(RedisStore::new(cluster)))
}

/// A file name for a bundle in a directory store: its first name and key type.
fn file_name(facts: &Facts) -> String {
    let first = facts.names.first().map_or("bundle", String::as_str).replace('*', "_wildcard");
    let safe: String =
        first.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect();
    format!("{safe}.{}.pem", facts.key.as_str())
}

fn write_private(path: &Path, data: &[u8]) -> Result<(), String> {
    gatehouse_tls::issue::write_private(path, data).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Checks one bundle and adds it to the store: its facts, warnings and where it went.
pub(crate) async fn import_pem(store: &StoreRef, pem: &[u8]) -> Result<(Facts, Vec<String>, String), String> {
    match store {
        StoreRef::Dir(dir) => match bundle::parse(pem, None, now_secs()) {
            Ok((b, warnings)) => {
                let path = dir.join(file_name(&b.facts));
                write_private(&path, pem).map(|()| (b.facts, warnings, path.display().to_string()))
            }
            Err(e) => Err(e.to_string()),
        },
        StoreRef::Redis(r) => {
            r.import(pem, now_secs()).await.map(|(f, w)| (f, w, "redis".to_string())).map_err(|e| e.to_string())
        }
    }
}

async fn import(store: &StoreRef, files: &[PathBuf]) -> Result<(), String> {
    let mut failed = 0;
    for file in files {
        let pem = std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        match import_pem(store, &pem).await {
            Ok((facts, warnings, place)) => {
                for w in warnings {
                    eprintln!("warning: {}: {w}", file.display());
                }
                println!("imported {}", line(&facts, &place));
            }
            Err(e) => {
                failed += 1;
                eprintln!("refused {}: {e}", file.display());
            }
        }
    }
    if failed > 0 {
        return Err(format!("{failed} of {} bundle(s) refused; the store keeps what it had for them", files.len()));
    }
    Ok(())
}

/// Every bundle of the store with where it lives.
pub(crate) async fn all(store: &StoreRef) -> Result<Vec<(Facts, String)>, String> {
    match store {
        StoreRef::Dir(dir) => {
            let d = DirStore::new(dir.clone());
            let mut out = Vec::new();
            for path in d.list().map_err(|e| format!("cannot read {}: {e}", dir.display()))? {
                match DirStore::load(&path, now_secs()) {
                    Ok(b) => out.push((b.facts.clone(), path.display().to_string())),
                    Err(e) => eprintln!("unusable {}: {e}", path.display()),
                }
            }
            Ok(out)
        }
        StoreRef::Redis(r) => {
            Ok(r.list().await?.into_iter().map(|(id, f)| (f, format!("redis bundle {id}"))).collect())
        }
    }
}

async fn list(store: &StoreRef) -> Result<(), String> {
    let all = all(store).await?;
    for (facts, place) in &all {
        println!("{}", line(facts, place));
    }
    eprintln!("{} certificate(s)", all.len());
    Ok(())
}

/// Removes the bundles serving the index key `name` (a name or `*.parent`) from the store.
pub(crate) async fn remove_name(store: &StoreRef, name: &str) -> Result<Vec<(Facts, String)>, String> {
    let key = normalise(name).ok_or("not a name")?;
    Ok(match store {
        StoreRef::Dir(_) => {
            let mut out = Vec::new();
            for (facts, place) in all(store).await? {
                if facts.names.contains(&key) {
                    std::fs::remove_file(&place).map_err(|e| format!("cannot remove {place}: {e}"))?;
                    let _ = std::fs::remove_file(Path::new(&place).with_extension("ocsp"));
                    out.push((facts, place));
                }
            }
            out
        }
        StoreRef::Redis(r) => r.remove(&key).await?.into_iter().map(|f| (f, "redis".to_string())).collect(),
    })
}

async fn remove(store: &StoreRef, name: &str) -> Result<(), String> {
    let removed = remove_name(store, name).await?;
    if removed.is_empty() {
        return Err(format!("no stored certificate names {}", normalise(name).unwrap_or_default()));
    }
    for (facts, place) in removed {
        println!("removed {}", line(&facts, &place));
    }
    Ok(())
}

/// The stored bundles that would serve `name` (exact name first, else its wildcard), ECDSA first.
pub(crate) async fn serving(store: &StoreRef, name: &str) -> Result<Vec<(Facts, String)>, String> {
    let name = normalise(name).ok_or("not a name")?;
    let all = all(store).await?;
    let serving = |key: &str| all.iter().filter(|(f, _)| f.names.iter().any(|n| n == key)).cloned().collect::<Vec<_>>();
    let mut found = serving(&name);
    if found.is_empty() {
        if let Some(parent) = wildcard_parent(&name) {
            found = serving(&format!("*.{parent}"));
        }
    }
    found.sort_by_key(|(f, _)| f.key != KeyKind::Ecdsa);
    Ok(found)
}

async fn show_name(store: &StoreRef, name: &str) -> Result<(), String> {
    let found = serving(store, name).await?;
    if found.is_empty() {
        return Err(format!("no stored certificate serves {}", normalise(name).unwrap_or_default()));
    }
    for (facts, place) in &found {
        println!("{}", show(facts, place));
    }
    Ok(())
}
