//! Wiring and the control loop: start workers and listeners from a configuration, then apply
//! reloads (SIGHUP or file change), hand over to a new binary on SIGUSR2 ([`crate::upgrade`]) and
//! drain on SIGTERM/SIGINT. Runs on the main thread's own runtime; traffic runs on the workers.

mod apply;

use crate::compiler::Compiler;
use crate::events::Events;
use crate::follow::Follower;
use crate::listeners::ListenerSet;
use crate::tls::TlsRuntime;
use crate::upgrade::{self, Inherited};
use apply::Builders;
use gatehouse_admin::{self as admin, AdminState, Api, Audit, CertStore, StatusDoc, Tokens};
use gatehouse_config::{AccessLog as AccessLogConfig, Config, Workers as WorkerCount};
use gatehouse_listener::{ServeContext, Workers};
use gatehouse_plugins::Registry as PluginRegistry;
use gatehouse_proxy::{RouteStatsRegistry, Shared, Snapshot};
use gatehouse_telemetry::access_log::AccessLog;
use gatehouse_upstream::Registry;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How often `watch: true` looks at the file, and workers flush logs and sweep idle connections.
const TICK: Duration = Duration::from_secs(1);

struct Control {
    path: Option<PathBuf>,
    events: Events,
    workers: Workers,
    builders: Builders,
    compiler: Compiler,
    shared: Arc<Shared>,
    listeners: ListenerSet,
    ctx: ServeContext,
    access_log: Option<(AccessLogConfig, AccessLog)>,
    health: Vec<JoinHandle<()>>,
    status: StatusDoc,
    generation: u64,
    file_stamp: Option<(SystemTime, u64)>,
    started_with: Config,
    tls: TlsRuntime,
    /// The node's file (or the quick start), into which published revisions are merged.
    base: Arc<Mutex<String>>,
    follower: Follower,
    admin_addr: Option<std::net::SocketAddr>,
    /// The tasks accepting on `other_sockets`.
    other_tasks: Vec<JoinHandle<()>>,
    /// Sockets other than the listeners' handed to a new binary (admin, demo backend): key,
    /// configured address, a copy of the socket.
    other_sockets: Vec<(String, String, std::net::TcpListener)>,
    retired: Option<Arc<Snapshot>>,
}

/// The configuration file's text (or the quick start's) and what to call it in errors.
fn read_base(path: Option<&Path>) -> Result<(String, String), String> {
    match path {
        Some(p) => Ok((
            std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?,
            p.display().to_string(),
        )),
        None => Ok((gatehouse_config::QUICKSTART.to_string(), "the built-in quick start".to_string())),
    }
}

fn compile_text(text: &str, source: &str) -> Result<Config, String> {
    gatehouse_config::compile(text).map_err(|e| format!("invalid configuration in {source}:\n{e}"))
}

/// Raises the soft limit on open files to the hard limit, as nginx's `worker_rlimit_nofile` does:
/// every connection and pooled upstream connection is a descriptor, and many systems start
/// processes with a soft limit of 1024.
fn raise_open_files_limit() {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => tracing::info!(limit, "open files limit"),
        Err(e) => tracing::warn!(error = %e, "could not raise the open files limit"),
    }
}

fn stamp(path: Option<&Path>) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path?).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

/// Runs the gateway until SIGTERM or SIGINT, or until a new binary took over; `inherited` holds
/// the sockets handed down when this process is that new binary.
pub fn run(path: Option<PathBuf>, status_json: bool, inherited: Inherited) -> Result<(), String> {
    let (base, source) = read_base(path.as_deref())?;
    let config = compile_text(&base, &source)?;
    raise_open_files_limit();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start runtime: {e}"))?;
    rt.block_on(serve(path, base, config, Events::new(status_json), inherited))
}

/// A socket for `addr`: the one handed down under `key`, else newly bound; with a copy kept for
/// handing it over in turn.
fn other_socket(
    inherited: &mut Inherited,
    key: &str,
    addr: std::net::SocketAddr,
    kept: &mut Vec<(String, String, std::net::TcpListener)>,
) -> Result<tokio::net::TcpListener, String> {
    let bind = addr.to_string();
    let socket = match inherited.take_one(key, &bind) {
        Some(s) => s,
        None => std::net::TcpListener::bind(addr).map_err(|e| format!("{key}: cannot bind {addr}: {e}"))?,
    };
    let copy = socket.try_clone().and_then(|c| socket.set_nonblocking(true).map(|()| c));
    let copy = copy.map_err(|e| format!("{key}: {e}"))?;
    kept.push((key.to_string(), bind, copy));
    tokio::net::TcpListener::from_std(socket).map_err(|e| format!("{key}: {e}"))
}

/// The configuration to start with: the revision this node should run if the store says so
/// (or, with the store away, the one it ran last), else the file.
async fn initial_config(follower: &mut Follower, base: &str, file: Config) -> Config {
    let wait = file.redis.as_ref().map_or(Duration::from_secs(2), |r| r.connect_timeout.0 * 2);
    let rev = match tokio::time::timeout(wait, follower.pending()).await {
        Ok(Some(rev)) => rev,
        Ok(None) if follower.store_ok => return file,
        _ => match follower.cached().filter(|_| follower.follow) {
            Some(rev) => {
                tracing::warn!(
                    revision = rev.meta.number,
                    "revision store away; starting on the revision applied last"
                );
                rev
            }
            None => return file,
        },
    };
    let number = rev.meta.number;
    match Follower::merged(base, &rev) {
        Ok((config, running)) => {
            tracing::info!(revision = number, "starting on published revision");
            follower.applied(rev, running)();
            config
        }
        Err(e) => {
            tracing::error!(revision = number, "published revision refused, starting on the file:\n{e}");
            follower.refused(number, &e);
            file
        }
    }
}

async fn serve(
    path: Option<PathBuf>,
    base: String,
    file_config: Config,
    events: Events,
    mut inherited: Inherited,
) -> Result<(), String> {
    let config = &file_config;
    let mut other_sockets = Vec::new();
    let mut other_tasks = Vec::new();
    let n = match config.workers {
        WorkerCount::Auto => std::thread::available_parallelism().map_or(1, |n| n.get()),
        WorkerCount::Count(n) => n,
    };
    if let Some(addr) = config.demo_backend {
        let l = other_socket(&mut inherited, "demo", addr, &mut other_sockets)?;
        other_tasks.push(tokio::spawn(crate::demo::serve(l)));
    }
    // Signals are watched before anything is announced, so a signal sent right after "ready" is
    // handled rather than killing the process.
    let mut hup = signal(SignalKind::hangup()).map_err(|e| format!("cannot watch SIGHUP: {e}"))?;
    let mut term = signal(SignalKind::terminate()).map_err(|e| format!("cannot watch SIGTERM: {e}"))?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| format!("cannot watch SIGINT: {e}"))?;
    let mut usr2 = signal(SignalKind::user_defined2()).map_err(|e| format!("cannot watch SIGUSR2: {e}"))?;
    let workers = Workers::start(
        n,
        config.cpu_affinity == gatehouse_config::CpuAffinity::Auto,
        gatehouse_clock::set_worker_index,
    )
    .map_err(|e| format!("cannot start workers: {e}"))?;
    let registry = Registry::new(n);
    let route_stats = RouteStatsRegistry::default();
    let access_log = open_log(&config.access_log)?;
    let tls = TlsRuntime::new(config).await?;
    let mut follower = Follower::new(config, tls.cluster())?;
    let config = initial_config(&mut follower, &base, file_config.clone()).await;
    let plugins = PluginRegistry::new(tls.cluster().cloned());
    let snapshot = Snapshot::build(
        Arc::new(config.clone()),
        1,
        &registry,
        &route_stats,
        &plugins,
        access_log.as_ref().map(|(_, l)| l.clone()),
    )?;
    let shared = Shared::new(snapshot);
    let acceptors = tls.acceptors(&config, tls.certs())?;
    let (drain_tx, drain_rx) = watch::channel(false);
    let ctx = ServeContext { shared: shared.clone(), drain: drain_rx };
    let mut control = Control {
        file_stamp: stamp(path.as_deref()),
        path,
        events,
        workers,
        builders: Builders {
            registry: Arc::new(registry),
            route_stats: Arc::new(route_stats),
            plugins: Arc::new(plugins),
        },
        compiler: Compiler::start()?,
        shared: shared.clone(),
        listeners: ListenerSet::default(),
        ctx,
        access_log,
        health: Vec::new(),
        status: Arc::new(Mutex::new(json!({}))),
        generation: 1,
        started_with: config.clone(),
        tls,
        base: Arc::new(Mutex::new(base)),
        follower,
        admin_addr: None,
        other_tasks,
        other_sockets,
        retired: None,
    };
    control.listeners.apply(&config, &control.workers, &control.ctx, config.reuse_port, &acceptors, &mut inherited)?;
    control.restart_health_checks();
    for w in &control.workers.workers {
        w.handle.spawn(worker_maintenance(shared.clone()));
    }
    let admin_addr = match &config.admin {
        Some(a) => {
            let l = other_socket(&mut inherited, "admin", a.bind, &mut control.other_sockets)?;
            let addr = l.local_addr().ok();
            let state = AdminState {
                shared: shared.clone(),
                tls: control.tls.stats().clone(),
                status: control.status.clone(),
                api: admin_api(a, &config, &control)?,
            };
            let tls = a.tls.as_ref().map(crate::tls::admin_server_config).transpose()?;
            control.other_tasks.push(tokio::spawn(admin::serve(l, Arc::new(state), tls)));
            addr
        }
        None => None,
    };
    control.admin_addr = admin_addr;
    control.update_status();
    control.follower.send_report(control.generation).await;
    let addrs = control.listeners.addrs();
    tracing::info!(workers = n, listeners = ?addrs, admin = ?admin_addr, "gatehouse ready");
    control.events.emit(
        "ready",
        json!({ "listeners": addrs, "admin": admin_addr, "pid": std::process::id(), "workers": n, "generation": 1 }),
    );
    if inherited.is_upgrade() {
        tracing::info!("took over the listeners from the previous process");
    }
    inherited.ready();

    let mut tick = tokio::time::interval(TICK);
    let mut ticks = 0u64;
    let mut poll = tokio::time::interval(config.control.poll_interval.0);
    let mut changes = match &control.follower.store {
        Some(store) => Some(store.changes()?),
        None => None,
    };
    let mut upgrading: Option<JoinHandle<Result<u32, String>>> = None;
    loop {
        tokio::select! {
            _ = hup.recv() => control.reload("SIGHUP").await,
            _ = usr2.recv() => {
                if upgrading.is_some() {
                    tracing::warn!("SIGUSR2: an upgrade is already under way");
                } else {
                    upgrading = control.start_upgrade();
                }
            }
            done = async {
                match upgrading.as_mut() {
                    Some(h) => h.await.unwrap_or_else(|e| Err(e.to_string())),
                    None => std::future::pending().await,
                }
            } => {
                upgrading = None;
                match done {
                    Ok(pid) => {
                        tracing::info!(pid, "the new process is ready; this one stops accepting and drains");
                        control.events.emit("upgraded", json!({ "pid": pid }));
                        break;
                    }
                    Err(e) => {
                        tracing::error!("upgrade failed, this process goes on serving: {e}");
                        control.events.emit("upgrade_failed", json!({ "error": e }));
                    }
                }
            }
            more = async {
                match changes.as_mut() {
                    Some(c) => c.changed().await,
                    None => std::future::pending().await,
                }
            } => {
                if !more {
                    changes = None;
                }
                control.follow().await;
            }
            _ = poll.tick() => control.follow().await,
            _ = tick.tick() => {
                ticks += 1;
                if ticks % 30 == 1 {
                    control.tls.refresh_expiring();
                }
                let now = stamp(control.path.as_deref());
                if control.shared.snapshot.load().config.watch && now.is_some() && now != control.file_stamp {
                    control.file_stamp = now;
                    control.reload("file change").await;
                }
            }
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    control.stop(drain_tx).await;
    Ok(())
}

fn open_log(cfg: &AccessLogConfig) -> Result<Option<(AccessLogConfig, AccessLog)>, String> {
    if cfg.path == "off" {
        return Ok(None);
    }
    AccessLog::open(&cfg.path, cfg.format)
        .map(|l| Some((cfg.clone(), l)))
        .map_err(|e| format!("access log: cannot open {}: {e}", cfg.path))
}

/// Per-worker housekeeping: hand buffered log lines to the writer, close expired idle connections.
async fn worker_maintenance(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(TICK);
    loop {
        tick.tick().await;
        let snap = shared.snapshot.load();
        if let Some(log) = &snap.access_log {
            log.flush_local();
        }
        for u in snap.upstreams.values() {
            u.sweep_idle();
        }
    }
}

/// The token in `path`, made (32 random bytes, hex, mode 600) when the file is missing.
fn token_from_file(path: &Path, bind: std::net::SocketAddr) -> Result<String, String> {
    match std::fs::read_to_string(path) {
        Ok(t) if !t.trim().is_empty() => return Ok(t.trim().to_string()),
        Ok(_) => return Err(format!("admin.token_file: {} is empty", path.display())),
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(format!("admin.token_file: cannot read {}: {e}", path.display()))
        }
        Err(_) => {}
    }
    let mut bytes = [0u8; 32];
    aws_lc_rs::rand::fill(&mut bytes).map_err(|_| "admin.token_file: no system randomness")?;
    let token = gatehouse_tls::ticket::hex(&bytes);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("admin.token_file: cannot create {}: {e}", dir.display()))?;
    }
    gatehouse_tls::issue::write_private(path, token.as_bytes())
        .map_err(|e| format!("admin.token_file: cannot write {}: {e}", path.display()))?;
    tracing::info!(console = %format!("http://{bind}/console/"), token_file = %path.display(), "admin token made");
    Ok(token)
}

/// The admin API, when tokens are configured.
fn admin_api(a: &gatehouse_config::Admin, config: &Config, control: &Control) -> Result<Option<Arc<Api>>, String> {
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
    let store = control.follower.store.clone().ok_or("the admin API needs a revision store")?;
    let audit = match a.audit_log.as_deref() {
        Some("off") => None,
        Some(p) => Some(PathBuf::from(p)),
        None => Some(config.control.dir.join("audit.log")),
    };
    if let Some(dir) = audit.as_ref().and_then(|p| p.parent()).filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("admin.audit_log: cannot create {}: {e}", dir.display()))?;
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
        audit: Audit::new(audit),
        certs,
        poll_interval: config.control.poll_interval.0,
    })))
}

impl Control {
    /// Starts the binary again with every listening socket inherited (SIGUSR2); the handle
    /// answers the new process's id once it is ready.
    fn start_upgrade(&mut self) -> Option<JoinHandle<Result<u32, String>>> {
        let mut sockets = self.listeners.handover();
        sockets.extend(self.other_sockets.iter().map(|(k, b, s)| (k.clone(), b.clone(), vec![s])));
        match upgrade::start(sockets) {
            Ok(starting) => {
                tracing::info!(pid = starting.pid, "SIGUSR2: started a new process to take over the listeners");
                self.events.emit("upgrading", json!({ "pid": starting.pid }));
                Some(tokio::spawn(starting.ready()))
            }
            Err(e) => {
                tracing::error!("SIGUSR2: upgrade failed, this process goes on serving: {e}");
                self.events.emit("upgrade_failed", json!({ "error": e }));
                None
            }
        }
    }

    fn restart_health_checks(&mut self) {
        for h in self.health.drain(..) {
            h.abort();
        }
        let snap = self.shared.snapshot.load();
        for u in snap.upstreams.values().filter(|u| u.health_check.is_some()) {
            self.health.push(tokio::spawn(gatehouse_upstream::run_health_checks(u.clone())));
        }
    }

    fn update_status(&self) {
        let admin = self.admin_addr;
        if let Ok(mut s) = self.status.lock() {
            *s = json!({
                "version": env!("CARGO_PKG_VERSION"),
                "pid": std::process::id(),
                "generation": self.generation,
                "workers": self.workers.workers.len(),
                "listeners": self.listeners.addrs(),
                "admin": admin,
                "control": self.follower.status(),
            });
        }
    }

    /// Stops accepting, lets open requests finish within the grace period, then stops.
    async fn stop(mut self, drain: watch::Sender<bool>) {
        let grace = self.shared.snapshot.load().config.shutdown_grace.0;
        tracing::info!(grace = ?grace, "shutting down: no new connections, draining open ones");
        self.events.emit("draining", json!({ "grace_ms": grace.as_millis() as u64 }));
        self.listeners.close();
        for task in self.other_tasks.drain(..) {
            task.abort();
        }
        self.other_sockets.clear();
        let _ = drain.send(true);
        let deadline = Instant::now() + grace;
        let mut poll = tokio::time::interval(Duration::from_millis(20));
        while self.shared.stats.connections_active.get() > 0 && Instant::now() < deadline {
            poll.tick().await;
        }
        let left = self.shared.stats.connections_active.get();
        if left > 0 {
            tracing::warn!(connections = left, "grace period over; closing remaining connections");
        }
        for h in self.health.drain(..) {
            h.abort();
        }
        if let Some((_, log)) = &self.access_log {
            // Each worker hands over its buffered lines, then the writer confirms they are out.
            for w in &self.workers.workers {
                let log = log.clone();
                let _ = w.handle.spawn(async move { log.flush_local() }).await;
            }
            log.sync(Duration::from_secs(5));
        }
        self.workers.stop();
        tracing::info!("stopped");
        self.events.emit("stopped", json!({ "unfinished_connections": left }));
    }
}
