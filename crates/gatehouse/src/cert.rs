//! `gatehouse cert import|list|remove|show|copy`: the certificate store of a configuration, from the
//! command line. Private keys are read on import and never printed.

use clap::Subcommand;
use gatehouse_control::now_secs;
use gatehouse_tls::bundle::Facts;
use gatehouse_tls::catalog::{Catalog, Imported};
use gatehouse_tls::index::normalise;
use std::path::{Path, PathBuf};

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
    /// List stored certificates: names, key type, expiry, issuer, serial, where it is stored, and
    /// its source (`acme` or `on-demand` with the next renewal and the last failure, or
    /// `imported`).
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
    /// Copy every stored certificate into the store of another configuration (another Redis, a
    /// Redis Cluster, a directory), each checked and imported as by `import`; the source is left
    /// as it is.
    Copy {
        /// Configuration file (YAML) naming the store to copy into.
        #[arg(long)]
        to: PathBuf,
    },
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
    let config = compile(config_path)?;
    let target = match &command {
        CertCommand::Copy { to } => Some(compile(to)?),
        _ => None,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start runtime: {e}"))?;
    rt.block_on(async move {
        let store = open_store(&config).await?;
        match command {
            CertCommand::Import { files } => import(&store, &files).await,
            CertCommand::List => list(&store).await,
            CertCommand::Remove { name } => remove(&store, &name).await,
            CertCommand::Show { name } => show_name(&store, &name).await,
            CertCommand::Copy { .. } => match &target {
                Some(target) => copy(&store, &open_store(target).await?).await,
                None => Ok(()),
            },
        }
    })
}

/// The compiled configuration in `path`.
fn compile(path: &Path) -> Result<gatehouse_config::Config, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut config =
        gatehouse_config::compile(&text).map_err(|e| format!("invalid configuration {}:\n{e}", path.display()))?;
    config.resolve_paths(&gatehouse_config::config_dir(path));
    Ok(config)
}

/// The certificate store a configuration names, connected when it is in Redis.
async fn open_store(config: &gatehouse_config::Config) -> Result<Catalog, String> {
    let store = gatehouse_node::cert_catalog(config).map_err(|e| e.to_string())?;
    if let Catalog::Redis(r) = &store {
        r.cluster().connected().await.map_err(|e| e.to_string())?;
    }
    Ok(store)
}

async fn copy(from: &Catalog, to: &Catalog) -> Result<(), String> {
    let bundles = from.export().await.map_err(|e| e.to_string())?;
    let mut failed = 0;
    for (place, pem) in &bundles {
        match to.import(pem, now_secs()).await {
            Ok(Imported { facts, warnings, place: new_place }) => {
                for w in warnings {
                    eprintln!("warning: {place}: {w}");
                }
                println!("copied {} (from {place})", line(&facts, &new_place));
            }
            Err(e) => {
                failed += 1;
                eprintln!("refused {place}: {e}");
            }
        }
    }
    eprintln!("{} of {} certificate(s) copied", bundles.len() - failed, bundles.len());
    if failed > 0 {
        return Err(format!("{failed} bundle(s) refused by the target store"));
    }
    Ok(())
}

async fn import(store: &Catalog, files: &[PathBuf]) -> Result<(), String> {
    let mut failed = 0;
    for file in files {
        let pem = std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        match store.import(&pem, now_secs()).await {
            Ok(Imported { facts, warnings, place }) => {
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

async fn list(store: &Catalog) -> Result<(), String> {
    let all = store.list(now_secs()).await.map_err(|e| e.to_string())?;
    for (place, e) in &all.unusable {
        eprintln!("unusable {place}: {e}");
    }
    // Where each came from: ACME (a configured name or on demand, with its next renewal and last
    // failure), else imported.
    let acme = gatehouse_acme::account::Keep::of(store).statuses().await.unwrap_or_default();
    for (facts, place) in &all.bundles {
        let source = match facts.names.iter().find_map(|n| acme.get(n)) {
            Some(s) => {
                let next = s.next_renewal.map_or("-".to_string(), date);
                let error = s.last_error.as_deref().map_or(String::new(), |e| format!("\tlast error: {e}"));
                format!("{}\trenews {next}{error}", s.source)
            }
            None => "imported".to_string(),
        };
        println!("{}\t{source}", line(facts, place));
    }
    eprintln!("{} certificate(s)", all.bundles.len());
    Ok(())
}

async fn remove(store: &Catalog, name: &str) -> Result<(), String> {
    let removed = store.remove(name, now_secs()).await.map_err(|e| e.to_string())?;
    if removed.is_empty() {
        return Err(format!("no stored certificate names {}", normalise(name).unwrap_or_default()));
    }
    for (facts, place) in removed {
        println!("removed {}", line(&facts, &place));
    }
    Ok(())
}

async fn show_name(store: &Catalog, name: &str) -> Result<(), String> {
    let found = store.serving(name, now_secs()).await.map_err(|e| e.to_string())?;
    if found.is_empty() {
        return Err(format!("no stored certificate serves {}", normalise(name).unwrap_or_default()));
    }
    for (facts, place) in &found {
        println!("{}", show(facts, place));
    }
    Ok(())
}
