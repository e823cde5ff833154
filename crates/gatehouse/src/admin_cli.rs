//! `gatehouse admin …`: the admin API from the command line, so the console is never the only
//! way. The API's address comes from `--url` or `GATEHOUSE_ADMIN_URL`, the token from
//! `--token-file`, `GATEHOUSE_TOKEN` or the quick start's `.gatehouse/admin-token`.

use clap::{Args, Subcommand};
use gatehouse_admin::client::{AdminClient, ClientError};
use gatehouse_control::document;
use serde_json::{json, Value};
use std::path::PathBuf;

/// Where the API is and who calls it.
#[derive(Args)]
pub struct Target {
    /// Admin listener, `http://127.0.0.1:9080`, `https://admin.example.com:9443` or
    /// `127.0.0.1:9080` (default: `$GATEHOUSE_ADMIN_URL`, else `127.0.0.1:9080`).
    #[arg(long)]
    url: Option<String>,
    /// PEM CA certificates an `https://` listener's certificate must chain to (default: the
    /// system's roots).
    #[arg(long)]
    ca: Option<PathBuf>,
    /// Client certificate (PEM chain) for an `https://` listener that asks for one.
    #[arg(long, requires = "key")]
    cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, requires = "cert")]
    key: Option<PathBuf>,
    /// File holding the bearer token (default: `$GATEHOUSE_TOKEN`, else `.gatehouse/admin-token`
    /// when it is in the current directory).
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// `json`: print the API's JSON answers as they are; `text` (default): tables and messages.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    output: Output,
    /// Same as `--output json`.
    #[arg(long)]
    json: bool,
}

/// How answers are printed.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Tables and messages.
    Text,
    /// The API's JSON.
    Json,
}

impl Target {
    fn json(&self) -> bool {
        self.json || self.output == Output::Json
    }
}

/// What to do.
#[derive(Subcommand)]
pub enum AdminCommand {
    /// This node's status.
    Status,
    /// Revisions, with what is released and staged.
    Revisions,
    /// Nodes and the revision each runs.
    Nodes,
    /// Release history.
    Releases,
    /// Stored certificates.
    Certificates,
    /// Replace the draft with the published sections (upstreams, sites, services, apps, plans) of
    /// a YAML file, showing the change; with `-m`, also make a revision of it. A section the
    /// draft has and the file lacks is kept out of the way: the command refuses unless
    /// `--replace` says to remove it.
    Apply {
        /// Configuration file (YAML).
        file: PathBuf,
        /// Make a revision with this message.
        #[arg(long, short)]
        message: Option<String>,
        /// Remove the draft's sections the file does not have.
        #[arg(long)]
        replace: bool,
    },
    /// Make a revision of the draft.
    Commit {
        /// Why.
        #[arg(long, short)]
        message: String,
    },
    /// Unified diff: two revisions, or a revision (default: the released one) and the draft.
    Diff {
        /// Old side: a revision number.
        from: Option<u64>,
        /// New side: a revision number (default: the draft).
        to: Option<u64>,
    },
    /// Release a revision to every node.
    Release {
        /// Revision number.
        revision: u64,
    },
    /// Stage a revision to the nodes with a label.
    Stage {
        /// Revision number.
        revision: u64,
        /// Node label.
        #[arg(long)]
        label: String,
    },
    /// Remove a label's stage; its nodes follow the release again.
    Unstage {
        /// Node label.
        label: String,
    },
    /// Release an earlier revision again.
    Rollback {
        /// Revision number.
        revision: u64,
    },
    /// The draft: whole, one section (`upstreams`, `sites`, `services`, `apps`, `plans`), or one
    /// entry; secrets redacted.
    Draft {
        /// Section.
        section: Option<String>,
        /// Entry name.
        name: Option<String>,
    },
    /// Put one entry into the draft, from a YAML or JSON file holding the entry alone.
    Put {
        /// Section.
        section: String,
        /// Entry name.
        name: String,
        /// The entry (YAML or JSON).
        file: PathBuf,
    },
    /// Remove one entry from the draft.
    Delete {
        /// Section.
        section: String,
        /// Entry name.
        name: String,
    },
    /// An upstream's targets in the draft.
    Target {
        #[command(subcommand)]
        action: TargetAction,
    },
    /// A site's routes in the draft, by index from 0.
    Route {
        #[command(subcommand)]
        action: RouteAction,
    },
    /// One revision with its document, secrets redacted.
    Show {
        /// Revision number.
        revision: u64,
    },
    /// One certificate of the store: import a PEM bundle, show or delete the ones for a name.
    Certificate {
        #[command(subcommand)]
        action: CertificateAction,
    },
    /// The names ACME keeps and their state, or renew one now.
    Acme {
        /// Renew this name now.
        #[arg(long)]
        renew: Option<String>,
    },
    /// The process log's level on this node, or put one in force (until the next change).
    LogLevel {
        /// A level, or `level,target=level` directives.
        level: Option<String>,
    },
    /// A page of this node's audit log, newest first.
    Audit {
        /// Entries (1 to 1000).
        #[arg(long)]
        limit: Option<u64>,
        /// The `next` of the page after the one wanted.
        #[arg(long)]
        before: Option<u64>,
    },
    /// This node's counters, as the console's charts read them.
    Stats,
    /// The API's OpenAPI document.
    Openapi,
    /// Make a new app key: 256 random bits, base64url (43 characters), printed once. With
    /// `--app`, also give it to that app in the draft (creating the app), where only its hash is
    /// kept; without, nothing is sent anywhere.
    NewKey {
        /// The app to give the key to.
        #[arg(long)]
        app: Option<String>,
    },
}

/// The published sections `old` has (not empty) that `new` lacks or has empty.
fn dropped_sections(old: &Value, new: &Value) -> Vec<&'static str> {
    let has =
        |doc: &Value, s: &str| doc.get(s).is_some_and(|v| v.as_object().is_none_or(|m| !m.is_empty()) && !v.is_null());
    gatehouse_config::PUBLISHED_SECTIONS.iter().copied().filter(|s| has(old, s) && !has(new, s)).collect()
}

/// `2026-11-29 12:38:59 UTC` for seconds since the epoch.
fn date(secs: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    let iso = gatehouse_telemetry::rfc3339_time(t);
    format!("{} {} UTC", &iso[..10], &iso[11..19])
}

/// `gatehouse admin target ...`.
#[derive(Subcommand)]
pub enum TargetAction {
    /// Every target of an upstream.
    List {
        /// Upstream.
        upstream: String,
    },
    /// One target.
    Get {
        /// Upstream.
        upstream: String,
        /// `host:port`.
        address: String,
    },
    /// Add a target.
    Add {
        /// Upstream.
        upstream: String,
        /// `host:port`.
        address: String,
        /// Its weight.
        #[arg(long)]
        weight: Option<u64>,
    },
    /// Replace a target's settings, from a YAML or JSON file.
    Set {
        /// Upstream.
        upstream: String,
        /// `host:port`.
        address: String,
        /// The target's settings.
        file: PathBuf,
    },
    /// Remove a target.
    Remove {
        /// Upstream.
        upstream: String,
        /// `host:port`.
        address: String,
    },
}

/// `gatehouse admin route ...`.
#[derive(Subcommand)]
pub enum RouteAction {
    /// Every route of a site, in order.
    List {
        /// Site.
        site: String,
    },
    /// One route.
    Get {
        /// Site.
        site: String,
        /// Index from 0.
        index: u64,
    },
    /// Add a route at the end, from a YAML or JSON file (`{path: /api, upstream: api}`).
    Add {
        /// Site.
        site: String,
        /// The route.
        file: PathBuf,
    },
    /// Replace a route, from a YAML or JSON file.
    Set {
        /// Site.
        site: String,
        /// Index from 0.
        index: u64,
        /// The route.
        file: PathBuf,
    },
    /// Remove a route.
    Remove {
        /// Site.
        site: String,
        /// Index from 0.
        index: u64,
    },
}

/// `gatehouse admin certificate ...`.
#[derive(Subcommand)]
pub enum CertificateAction {
    /// Import a PEM bundle (chain and key) into the store.
    Import {
        /// PEM file.
        file: PathBuf,
    },
    /// The stored certificates serving a name.
    Show {
        /// Host name.
        name: String,
    },
    /// Delete the stored certificates naming a name.
    Delete {
        /// Host name.
        name: String,
    },
}

/// A path segment, `%`-escaped but for unreserved characters and `:` (an address's port).
fn seg(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b':' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A YAML (or JSON) file as the JSON value the API takes.
fn value_of(file: &std::path::Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    serde_yaml::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))
}

/// Prints an answer as JSON.
fn print_json(v: &Value) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

/// The draft's version, for `If-Match`.
async fn version(client: &AdminClient) -> Result<Option<u64>, CliError> {
    Ok(client.ok("GET", "/draft", None, None).await?.1)
}

/// A new app key: 32 bytes from the system's generator, base64url without padding (letters,
/// digits, `-` and `_`: usable in a header, a query string and a path segment alike).
fn new_app_key() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    aws_lc_rs::rand::fill(&mut bytes).map_err(|_| "the system's random generator failed".to_string())?;
    Ok(data_encoding::BASE64URL_NOPAD.encode(&bytes))
}

/// The token file the quick start makes in its working directory.
const QUICK_START_TOKEN: &str = ".gatehouse/admin-token";

/// The client of `t`'s API: `--url`, else `$GATEHOUSE_ADMIN_URL`, else the default listener; the
/// token from `--token-file`, else `$GATEHOUSE_TOKEN`, else the quick start's
/// `.gatehouse/admin-token` when there is one here.
fn client(t: &Target) -> Result<AdminClient, String> {
    let url = t.url.clone().or_else(|| std::env::var("GATEHOUSE_ADMIN_URL").ok());
    let url = url.unwrap_or_else(|| "http://127.0.0.1:9080".into());
    let read = |f: &std::path::Path| match std::fs::read_to_string(f) {
        Ok(t) if t.trim().is_empty() => Err(format!("the token file {} is empty", f.display())),
        Ok(t) => Ok(t),
        Err(e) => Err(format!("cannot read {}: {e}", f.display())),
    };
    let token = match &t.token_file {
        Some(f) => Some(read(f)?),
        None => match std::env::var("GATEHOUSE_TOKEN") {
            Ok(token) => Some(token),
            Err(_) if std::path::Path::new(QUICK_START_TOKEN).is_file() => Some(read(QUICK_START_TOKEN.as_ref())?),
            Err(_) => None,
        },
    };
    let files =
        gatehouse_admin::client::TlsFiles { ca: t.ca.as_deref(), identity: t.cert.as_deref().zip(t.key.as_deref()) };
    AdminClient::with_tls(&url, token, files).map_err(|e| e.to_string())
}

/// A command's failure: the API's, or reading what it sends.
enum CliError {
    Api(ClientError),
    Local(String),
}

impl From<ClientError> for CliError {
    fn from(e: ClientError) -> Self {
        CliError::Api(e)
    }
}

impl From<String> for CliError {
    fn from(e: String) -> Self {
        CliError::Local(e)
    }
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CliError::Api(e) => e.fmt(f),
            CliError::Local(e) => f.write_str(e),
        }
    }
}

fn opt(v: &Value) -> String {
    v.as_u64().map_or_else(|| "-".to_string(), |n| n.to_string())
}

/// Runs one admin command.
pub fn run(target: &Target, command: AdminCommand) -> Result<(), String> {
    let client = client(target)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    rt.block_on(commands(&client, target, command)).map_err(|e| e.to_string())
}

/// What each command asks the API, and what it prints.
async fn commands(client: &AdminClient, target: &Target, command: AdminCommand) -> Result<(), CliError> {
    {
        let show = |v: &Value| -> Option<()> {
            target.json().then(|| println!("{}", serde_json::to_string_pretty(v).unwrap_or_default()))
        };
        match command {
            AdminCommand::Status => {
                let (v, _) = client.ok("GET", "/status", None, None).await?;
                println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
            }
            AdminCommand::Revisions => {
                let (v, _) = client.ok("GET", "/revisions", None, None).await?;
                if show(&v).is_none() {
                    let released = v["released"].as_u64();
                    if v["revisions"].as_array().is_none_or(|r| r.is_empty()) {
                        println!("no revisions yet: `gatehouse admin commit -m MESSAGE` makes one of the draft");
                    }
                    for r in v["revisions"].as_array().into_iter().flatten() {
                        let n = r["number"].as_u64();
                        let mut marks = Vec::new();
                        if n == released {
                            marks.push("released".to_string());
                        }
                        for (label, s) in v["staged"].as_object().into_iter().flatten() {
                            if s.as_u64() == n {
                                marks.push(format!("staged:{label}"));
                            }
                        }
                        println!(
                            "{}\t{}\t{}\t{}\t{}",
                            opt(&r["number"]),
                            &r["hash"].as_str().unwrap_or("")[..12.min(r["hash"].as_str().unwrap_or("").len())],
                            r["author"].as_str().unwrap_or(""),
                            r["message"].as_str().unwrap_or(""),
                            marks.join(",")
                        );
                    }
                }
            }
            AdminCommand::Nodes => {
                let (v, _) = client.ok("GET", "/nodes", None, None).await?;
                if show(&v).is_none() {
                    for n in v["nodes"].as_array().into_iter().flatten() {
                        let stale = if n["stale"] == true { " (stale)" } else { "" };
                        let err =
                            n["last_error"]["revision"].as_u64().map(|r| format!("refused {r}")).unwrap_or_default();
                        println!(
                            "{}\trevision {}\ttarget {}\t{}{stale}\t{err}",
                            n["id"].as_str().unwrap_or(""),
                            opt(&n["revision"]),
                            opt(&n["target"]),
                            n["health"].as_str().unwrap_or("")
                        );
                    }
                }
            }
            AdminCommand::Releases => {
                let (v, _) = client.ok("GET", "/releases", None, None).await?;
                if show(&v).is_none() {
                    println!("released: {}", opt(&v["released"]));
                    for e in v["history"].as_array().into_iter().flatten() {
                        println!(
                            "{}\t{}\t{}\t{}",
                            e["at"].as_u64().map_or_else(|| "-".to_string(), date),
                            e["who"].as_str().unwrap_or(""),
                            e["action"].as_str().unwrap_or(""),
                            opt(&e["revision"])
                        );
                    }
                }
            }
            AdminCommand::Certificates => {
                let (v, _) = client.ok("GET", "/certificates", None, None).await?;
                if show(&v).is_none() {
                    for c in v["certificates"].as_array().into_iter().flatten() {
                        println!(
                            "{}\t{}\t{} ({}d left)\t{}",
                            c["names"],
                            c["key_type"].as_str().unwrap_or(""),
                            c["not_after"].as_str().unwrap_or(""),
                            c["days_left"],
                            c["issuer"].as_str().unwrap_or("")
                        );
                    }
                }
            }
            AdminCommand::Apply { file, message, replace } => {
                let text =
                    std::fs::read_to_string(&file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
                let doc =
                    gatehouse_control::document::published_of(&text).map_err(|e| format!("{}: {e}", file.display()))?;
                let (draft, version) = client.ok("GET", "/draft", None, None).await?;
                let old = &draft["document"];
                let dropped = dropped_sections(old, &doc);
                if !dropped.is_empty() && !replace {
                    return Err(CliError::Local(format!(
                        "{} has no {} that the draft has: add {} to the file, or give --replace to remove {} from the draft",
                        file.display(),
                        dropped.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", "),
                        if dropped.len() == 1 { "it" } else { "them" },
                        if dropped.len() == 1 { "it" } else { "them" },
                    )));
                }
                if !target.json() {
                    let (a, b) = (
                        document::canonical(&document::redact(old, None)),
                        document::canonical(&document::redact(&doc, Some(old))),
                    );
                    match a == b {
                        true => eprintln!("the draft already is {}", file.display()),
                        false => print!(
                            "{}",
                            gatehouse_control::diff::unified(&a, &b, "draft", &file.display().to_string(), 3)
                        ),
                    }
                }
                let (v, version) = client.ok("PUT", "/draft", Some(version.unwrap_or(0)), Some(&doc)).await?;
                show(&v);
                eprintln!("draft is now version {}", version.unwrap_or(0));
                if let Some(message) = message {
                    let (r, _) = client.ok("POST", "/revisions", version, Some(&json!({ "message": message }))).await?;
                    println!("revision {}", opt(&r["number"]));
                }
            }
            AdminCommand::Commit { message } => {
                let (r, _) = client.ok("POST", "/revisions", None, Some(&json!({ "message": message }))).await?;
                println!("revision {}", opt(&r["number"]));
            }
            AdminCommand::Diff { from, to } => {
                let path = match (from, to) {
                    (Some(a), Some(b)) => format!("/revisions/{a}/diff/{b}"),
                    (Some(a), None) => format!("/draft/diff?against={a}"),
                    (None, _) => "/draft/diff".to_string(),
                };
                let (v, _) = client.ok("GET", &path, None, None).await?;
                if show(&v).is_none() {
                    print!("{}", v["unified"].as_str().unwrap_or(""));
                }
            }
            AdminCommand::Release { revision } => {
                client.ok("POST", &format!("/revisions/{revision}/release"), None, None).await?;
                println!("released {revision}");
            }
            AdminCommand::Rollback { revision } => {
                client.ok("POST", &format!("/revisions/{revision}/rollback"), None, None).await?;
                println!("rolled back to {revision}");
            }
            AdminCommand::Stage { revision, label } => {
                client
                    .ok("POST", &format!("/revisions/{revision}/stage"), None, Some(&json!({ "label": label })))
                    .await?;
                println!("staged {revision} to {label}");
            }
            // Made here, sent nowhere: no admin listener or token needed.
            AdminCommand::NewKey { app: None } => println!("{}", new_app_key()?),
            AdminCommand::NewKey { app: Some(app) } => {
                let key = new_app_key()?;
                let (draft, version) = client.ok("GET", "/draft", None, None).await?;
                let mut entry = draft["document"]["apps"].get(&app).cloned().unwrap_or_else(|| json!({}));
                if let Some(fields) = entry.as_object_mut() {
                    // Whichever digest the app had gives way to the new key's.
                    fields.remove("key_sha256");
                    fields.remove("key_hmac");
                    fields.insert("key".into(), json!(key));
                }
                client.ok("PUT", &format!("/draft/apps/{app}"), version, Some(&entry)).await?;
                // The one time the key is shown: the draft keeps its hash only.
                println!("{key}");
                eprintln!("app `{app}` has a new key in the draft (commit and release to use it)");
            }
            AdminCommand::Draft { section, name } => {
                let path = match (&section, &name) {
                    (None, _) => "/draft".to_string(),
                    (Some(s), None) => format!("/draft/{}", seg(s)),
                    (Some(s), Some(n)) => format!("/draft/{}/{}", seg(s), seg(n)),
                };
                let (v, _) = client.ok("GET", &path, None, None).await?;
                match (section.is_none() && !target.json(), v.get("document")) {
                    (true, Some(doc)) => print!("{}", serde_yaml::to_string(doc).unwrap_or_default()),
                    _ => print_json(&v),
                }
            }
            AdminCommand::Put { section, name, file } => {
                let entry = value_of(&file)?;
                let path = format!("/draft/{}/{}", seg(&section), seg(&name));
                let (v, version) = client.ok("PUT", &path, version(client).await?, Some(&entry)).await?;
                show(&v).unwrap_or_else(|| println!("draft is now version {}", version.unwrap_or(0)));
            }
            AdminCommand::Delete { section, name } => {
                let path = format!("/draft/{}/{}", seg(&section), seg(&name));
                let (v, version) = client.ok("DELETE", &path, version(client).await?, None).await?;
                show(&v).unwrap_or_else(|| println!("draft is now version {}", version.unwrap_or(0)));
            }
            AdminCommand::Target { action } => {
                let base = |u: &str| format!("/draft/upstreams/{}/targets", seg(u));
                let (v, version) = match action {
                    TargetAction::List { upstream } => client.ok("GET", &base(&upstream), None, None).await?,
                    TargetAction::Get { upstream, address } => {
                        client.ok("GET", &format!("{}/{}", base(&upstream), seg(&address)), None, None).await?
                    }
                    TargetAction::Add { upstream, address, weight } => {
                        let mut t = json!({ "address": address });
                        if let Some(w) = weight {
                            t["weight"] = json!(w);
                        }
                        client.ok("POST", &base(&upstream), version(client).await?, Some(&t)).await?
                    }
                    TargetAction::Set { upstream, address, file } => {
                        let t = value_of(&file)?;
                        let path = format!("{}/{}", base(&upstream), seg(&address));
                        client.ok("PUT", &path, version(client).await?, Some(&t)).await?
                    }
                    TargetAction::Remove { upstream, address } => {
                        let path = format!("{}/{}", base(&upstream), seg(&address));
                        client.ok("DELETE", &path, version(client).await?, None).await?
                    }
                };
                // A change answers with the whole draft: said by its version unless asked.
                match (v.get("document").is_some() && !target.json(), version) {
                    (true, Some(n)) => println!("draft is now version {n}"),
                    _ => print_json(&v),
                }
            }
            AdminCommand::Route { action } => {
                let base = |s: &str| format!("/draft/sites/{}/routes", seg(s));
                let (v, version) = match action {
                    RouteAction::List { site } => client.ok("GET", &base(&site), None, None).await?,
                    RouteAction::Get { site, index } => {
                        client.ok("GET", &format!("{}/{index}", base(&site)), None, None).await?
                    }
                    RouteAction::Add { site, file } => {
                        let r = value_of(&file)?;
                        client.ok("POST", &base(&site), version(client).await?, Some(&r)).await?
                    }
                    RouteAction::Set { site, index, file } => {
                        let r = value_of(&file)?;
                        let path = format!("{}/{index}", base(&site));
                        client.ok("PUT", &path, version(client).await?, Some(&r)).await?
                    }
                    RouteAction::Remove { site, index } => {
                        let path = format!("{}/{index}", base(&site));
                        client.ok("DELETE", &path, version(client).await?, None).await?
                    }
                };
                // A change answers with the whole draft: said by its version unless asked.
                match (v.get("document").is_some() && !target.json(), version) {
                    (true, Some(n)) => println!("draft is now version {n}"),
                    _ => print_json(&v),
                }
            }
            AdminCommand::Show { revision } => {
                let (v, _) = client.ok("GET", &format!("/revisions/{revision}"), None, None).await?;
                match (target.json(), v.get("document")) {
                    (false, Some(doc)) => {
                        println!(
                            "# revision {} by {}: {}",
                            opt(&v["number"]),
                            v["author"].as_str().unwrap_or(""),
                            v["message"].as_str().unwrap_or("")
                        );
                        print!("{}", serde_yaml::to_string(doc).unwrap_or_default());
                    }
                    _ => print_json(&v),
                }
            }
            AdminCommand::Certificate { action } => {
                let (v, _) = match action {
                    CertificateAction::Import { file } => {
                        let pem = std::fs::read_to_string(&file)
                            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
                        client.ok("POST", "/certificates", None, Some(&json!({ "pem": pem }))).await?
                    }
                    CertificateAction::Show { name } => {
                        client.ok("GET", &format!("/certificates/{}", seg(&name)), None, None).await?
                    }
                    CertificateAction::Delete { name } => {
                        client.ok("DELETE", &format!("/certificates/{}", seg(&name)), None, None).await?
                    }
                };
                print_json(&v);
            }
            AdminCommand::Acme { renew: None } => print_json(&client.ok("GET", "/acme", None, None).await?.0),
            AdminCommand::Acme { renew: Some(name) } => {
                print_json(&client.ok("POST", &format!("/acme/{}/renew", seg(&name)), None, None).await?.0);
            }
            AdminCommand::LogLevel { level: None } => {
                let (v, _) = client.ok("GET", "/log-level", None, None).await?;
                show(&v).unwrap_or_else(|| {
                    println!(
                        "{} (configured: {})",
                        v["level"].as_str().unwrap_or(""),
                        v["configured"].as_str().unwrap_or("")
                    )
                });
            }
            AdminCommand::LogLevel { level: Some(level) } => {
                let (v, _) = client.ok("PUT", "/log-level", None, Some(&json!({ "level": level }))).await?;
                show(&v).unwrap_or_else(|| println!("{}", v["level"].as_str().unwrap_or("")));
            }
            AdminCommand::Audit { limit, before } => {
                let mut query = Vec::new();
                query.extend(limit.map(|l| format!("limit={l}")));
                query.extend(before.map(|b| format!("before={b}")));
                let path = match query.is_empty() {
                    true => "/audit".to_string(),
                    false => format!("/audit?{}", query.join("&")),
                };
                let (v, _) = client.ok("GET", &path, None, None).await?;
                if show(&v).is_none() {
                    for e in v["entries"].as_array().into_iter().flatten() {
                        println!(
                            "{}\t{}\t{} {}\t{}",
                            e["time"].as_str().unwrap_or(""),
                            e["who"].as_str().unwrap_or(""),
                            e["method"].as_str().unwrap_or(""),
                            e["path"].as_str().unwrap_or(""),
                            e["status"]
                        );
                    }
                    if let Some(next) = v["next"].as_u64() {
                        eprintln!("more: --before {next}");
                    }
                }
            }
            AdminCommand::Stats => print_json(&client.ok("GET", "/stats", None, None).await?.0),
            AdminCommand::Openapi => print_json(&client.ok("GET", "/openapi.json", None, None).await?.0),
            AdminCommand::Unstage { label } => {
                client.ok("DELETE", &format!("/stages/{label}"), None, None).await?;
                println!("unstaged {label}");
            }
        }
        Ok(())
    }
}
