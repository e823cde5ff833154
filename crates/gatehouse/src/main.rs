//! The `gatehouse` binary: the command line. `run` hands over to the running node
//! ([`gatehouse_node`]); `check`, `cert`, `admin` and `convert` call into the libraries.

#![forbid(unsafe_code)]

mod admin_cli;
mod cert;
mod convert;

use clap::{Parser, Subcommand};

use std::path::PathBuf;
use std::process::ExitCode;

/// Gatehouse: HTTPS access layer and API gateway.
#[derive(Parser)]
#[command(name = "gatehouse", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the gateway (with no --config, the built-in quick-start configuration).
    Run {
        /// Configuration file (YAML).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Print machine-readable events (ready, reloaded, stopped) as JSON lines on stdout.
        #[arg(long)]
        status_json: bool,
    },
    /// Validate a configuration file and list every error, like `nginx -t`.
    Check {
        /// Configuration file (YAML).
        file: PathBuf,
    },
    /// Manage the certificate store of a configuration (`tls.store`).
    Cert {
        /// Configuration file (YAML) naming the store.
        #[arg(long, short)]
        config: PathBuf,
        #[command(subcommand)]
        command: cert::CertCommand,
    },
    /// Drive a node's admin API: drafts, revisions, releases, nodes.
    Admin {
        #[command(flatten)]
        target: admin_cli::Target,
        #[command(subcommand)]
        command: admin_cli::AdminCommand,
    },
    /// Convert another gateway's configuration into a Gatehouse configuration.
    Convert {
        /// Format of FILE; only `hyperapi` is supported.
        #[arg(long)]
        from: String,
        /// Configuration file to convert.
        file: PathBuf,
        /// Where to write the result (default: standard output); public keys go beside it in `keys/`.
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Print the version.
    Version,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Version => {
            println!("gatehouse {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Command::Check { file } => check(&file),
        Command::Admin { target, command } => match admin_cli::run(&target, command) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("gatehouse: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Convert { from, file, output } => convert::run(&from, &file, output.as_deref()),
        Command::Cert { config, command } => match cert::run(&config, command) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("gatehouse: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Run { config, status_json } => {
            // First: descriptors handed down by an upgrade are taken over before any other is opened.
            let inherited = gatehouse_node::Inherited::from_env();
            let ran = inherited
                .map_err(gatehouse_node::NodeError::from)
                .and_then(|inherited| gatehouse_node::run(config, status_json, inherited));
            match ran {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("gatehouse: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

fn check(file: &std::path::Path) -> ExitCode {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("gatehouse: cannot read {}: {e}", file.display());
            return ExitCode::FAILURE;
        }
    };
    let errors = gatehouse_node::check(&text, &gatehouse_config::config_dir(file));
    if errors.is_empty() {
        println!("gatehouse: configuration {} is valid", file.display());
        return ExitCode::SUCCESS;
    }
    for e in &errors {
        eprintln!("{}: {e}", file.display());
    }
    eprintln!("gatehouse: configuration {} has {} error(s)", file.display(), errors.len());
    ExitCode::FAILURE
}
