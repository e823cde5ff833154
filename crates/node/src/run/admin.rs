//! The admin listener of the node: its socket (kept across upgrades), the API's tokens and audit
//! log, and the certificate store it manages; the listener itself is gatehouse-admin.

use super::{other_socket, Control};
use crate::error::{NodeError, Setting};
use crate::upgrade::Inherited;
use gatehouse_admin::{self as admin, AdminState, Api, Audit, CertStore, Tokens};
use gatehouse_config::Config;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Starts the admin listener when the configuration has one; its address.
pub(super) fn start(
    control: &mut Control,
    config: &Config,
    inherited: &mut Inherited,
) -> Result<Option<std::net::SocketAddr>, NodeError> {
    let Some(a) = &config.admin else { return Ok(None) };
    let l = other_socket(inherited, "admin", a.bind, &mut control.other_sockets)?;
    let addr = l.local_addr().ok();
    let state = AdminState {
        shared: control.shared.clone(),
        tls: control.tls.stats().clone(),
        acme: control.tls.acme_stats().clone(),
        dns: control.discovery.stats(),
        traces: control.traces.stats.clone(),
        status: control.status.clone(),
        api: admin_api(a, config, control)?,
        exposure: admin::Exposure {
            hosts: a.hosts.iter().map(|h| h.to_ascii_lowercase()).collect(),
            public: a.public.clone(),
        },
    };
    let tls = a.tls.as_ref().map(crate::tls::admin_server_config).transpose()?;
    control.other_tasks.push(tokio::spawn(admin::serve(l, Arc::new(state), tls)));
    Ok(addr)
}

/// The token in `path` when the file exists (`None` when it is missing, to be made); an
/// unreadable or empty file is an error, for `run` and `check` alike.
pub(crate) fn existing_token(path: &Path) -> Result<Option<String>, NodeError> {
    match std::fs::read_to_string(path) {
        Ok(t) if !t.trim().is_empty() => Ok(Some(t.trim().to_string())),
        Ok(_) => {
            Err(NodeError::Settings(vec![Setting::new("admin.token_file", format!("{} is empty", path.display()))]))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => {
            Err(NodeError::File { setting: Some("admin.token_file"), action: "read", path: path.to_path_buf(), source })
        }
    }
}

/// The token in `path`, made (32 random bytes, hex, mode 600) when the file is missing.
fn token_from_file(path: &Path, bind: std::net::SocketAddr) -> Result<String, NodeError> {
    let failed = |action, path: &Path, source| NodeError::File {
        setting: Some("admin.token_file"),
        action,
        path: path.to_path_buf(),
        source,
    };
    if let Some(token) = existing_token(path)? {
        return Ok(token);
    }
    let mut bytes = [0u8; 32];
    aws_lc_rs::rand::fill(&mut bytes).map_err(|_| NodeError::NoRandomness("admin.token_file"))?;
    let token = data_encoding::HEXLOWER.encode(&bytes);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| failed("create", dir, e))?;
    }
    gatehouse_files::write_private(path, token.as_bytes()).map_err(|e| failed("write", path, e))?;
    tracing::info!(console = %format!("http://{bind}/console/"), token_file = %path.display(), "admin token made");
    Ok(token)
}

/// `admin.file_roots`, or by default the configuration file's directory and `control.dir`.
fn file_roots(a: &gatehouse_config::Admin, config: &Config, file: Option<&Path>) -> Vec<PathBuf> {
    if !a.file_roots.is_empty() {
        return a.file_roots.clone();
    }
    let file_dir = file.map(|f| match f.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    });
    file_dir.into_iter().chain([config.control.dir.clone()]).collect()
}

/// The admin API, when tokens are configured.
fn admin_api(a: &gatehouse_config::Admin, config: &Config, control: &Control) -> Result<Option<Arc<Api>>, NodeError> {
    if !a.api_on() {
        return Ok(None);
    }
    let mut tokens = a.tokens.clone();
    if let Some(f) = &a.token_file {
        tokens.push(gatehouse_config::AdminToken {
            name: f.name.clone(),
            sha256: gatehouse_control::document::sha256_hex(token_from_file(&f.path, a.bind)?.as_bytes()),
            role: gatehouse_config::AdminRole::Write,
        });
    }
    let store = control.follower.store.clone().ok_or(NodeError::NoRevisionStore)?;
    let audit = match a.audit_log.as_deref() {
        Some("off") => None,
        Some(p) => Some(PathBuf::from(p)),
        None => Some(config.control.dir.join("audit.log")),
    };
    if let Some(dir) = audit.as_ref().and_then(|p| p.parent()).filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| NodeError::File {
            setting: Some("admin.audit_log"),
            action: "create",
            path: dir.to_path_buf(),
            source,
        })?;
    }
    let certs = match &config.tls.store {
        Some(_) => Some(CertStore(crate::cert_catalog(config)?)),
        None => None,
    };
    Ok(Some(Arc::new(Api {
        tokens: Tokens::new(&tokens),
        max_body: usize::try_from(a.max_body.0).unwrap_or(usize::MAX),
        store,
        base: control.base.clone(),
        audit: Audit::new(audit, a.audit_max_size.0),
        certs,
        acme: control.tls.acme_slot().clone(),
        poll_interval: config.control.poll_interval.0,
        file_roots: file_roots(a, config, control.path.as_deref()),
        config_dir: crate::run::file_dir(control.path.as_deref()),
        refused: Default::default(),
        app_key_mac: match (a.app_keys, control.tls.cluster()) {
            (gatehouse_config::AppKeyDigest::Hmac, Some(c)) => {
                let c = c.clone();
                Some(Arc::new(move |key: &[u8]| data_encoding::HEXLOWER.encode(&c.app_key_mac(key))))
            }
            _ => None,
        },
    })))
}
