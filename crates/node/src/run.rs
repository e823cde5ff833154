//! Wiring and the control loop: start workers and listeners from a configuration, then apply
//! reloads (SIGHUP or file change), hand over to a new binary on SIGUSR2 ([`crate::upgrade`]) and
//! drain on SIGTERM/SIGINT. Runs on the main thread's own runtime; traffic runs on the workers.

pub(crate) mod admin;
mod apply;

use crate::compiler::Compiler;
use crate::error::{NodeError, UpgradeError};
use crate::events::Events;
use crate::follow::Follower;
use crate::listeners::ListenerSet;
use crate::tls::TlsRuntime;
use crate::upgrade::{self, Inherited};
use apply::Builders;
use gatehouse_admin::StatusDoc;
use gatehouse_config::{AccessLog as AccessLogConfig, Config, Workers as WorkerCount};
use gatehouse_discovery::Discovery;
use gatehouse_listener::{ServeContext, Workers};
use gatehouse_plugins::Registry as PluginRegistry;
use gatehouse_proxy::{RouteStatsRegistry, Shared, Snapshot};
use gatehouse_telemetry::access_log::AccessLog;
use gatehouse_upstream::Registry;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::signal::unix::{signal, Signal, SignalKind};
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
    /// Writes the files the node keeps, beside the compile thread (see [`Compiler`]).
    writer: Compiler,
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
    /// Resolves named upstream targets and publishes their answers.
    discovery: Arc<Discovery>,
    discovery_task: Option<JoinHandle<()>>,
    /// The tracer (`tracing:`) and its counters.
    traces: crate::traces::Traces,
}

/// The configuration file's text (or the quick start's) and what to call it in errors.
fn read_base(path: Option<&Path>) -> Result<(String, String), NodeError> {
    match path {
        Some(p) => Ok((
            std::fs::read_to_string(p).map_err(|source| NodeError::File {
                setting: None,
                action: "read",
                path: p.to_path_buf(),
                source,
            })?,
            p.display().to_string(),
        )),
        None => Ok((gatehouse_config::QUICKSTART.to_string(), "the built-in quick start".to_string())),
    }
}

/// Compiles the file's text (or the quick start's), its relative paths resolved against `dir`.
fn compile_text(text: &str, source: &str, dir: &Path) -> Result<Config, NodeError> {
    let mut config = gatehouse_config::compile(text).map_err(|errors| NodeError::Config {
        file: source.to_string(),
        revision: None,
        errors,
    })?;
    config.resolve_paths(dir);
    Ok(config)
}

/// The directory the relative paths of the configuration at `path` resolve against; none (the
/// working directory) for the quick start.
pub(crate) fn file_dir(path: Option<&Path>) -> PathBuf {
    path.map(gatehouse_config::config_dir).unwrap_or_default()
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
pub fn run(path: Option<PathBuf>, status_json: bool, inherited: Inherited) -> Result<(), NodeError> {
    let (base, source) = read_base(path.as_deref())?;
    let config = compile_text(&base, &source, &file_dir(path.as_deref()))?;
    gatehouse_telemetry::process_log::init(&config.log).map_err(NodeError::Log)?;
    start(path, base, config, Events::stdout(status_json), inherited, None)
}

/// [`run`] with the events sent where `events` says, and stopped (drained as on SIGTERM) also
/// when `stop` is told or dropped: a node run inside another program or a test, which keeps its
/// own process log (`log:` is not set up).
pub fn run_with(
    path: Option<PathBuf>,
    events: Events,
    inherited: Inherited,
    stop: Option<tokio::sync::oneshot::Receiver<()>>,
) -> Result<(), NodeError> {
    let (base, source) = read_base(path.as_deref())?;
    let config = compile_text(&base, &source, &file_dir(path.as_deref()))?;
    start(path, base, config, events, inherited, stop)
}

fn start(
    path: Option<PathBuf>,
    base: String,
    config: Config,
    events: Events,
    inherited: Inherited,
    stop: Option<tokio::sync::oneshot::Receiver<()>>,
) -> Result<(), NodeError> {
    raise_open_files_limit();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| NodeError::Start { what: "start runtime", source })?;
    rt.block_on(serve(path, base, config, events, inherited, stop))
}

/// A socket for `addr`: the one handed down under `key`, else newly bound; with a copy kept for
/// handing it over in turn.
fn other_socket(
    inherited: &mut Inherited,
    key: &str,
    addr: std::net::SocketAddr,
    kept: &mut Vec<(String, String, std::net::TcpListener)>,
) -> Result<tokio::net::TcpListener, NodeError> {
    let bind = addr.to_string();
    let failed = |addr, source| NodeError::Socket { key: key.to_string(), addr, source };
    let socket = match inherited.take_one(key, &bind) {
        Some(s) => s,
        None => std::net::TcpListener::bind(addr).map_err(|e| failed(Some(addr), e))?,
    };
    let copy = socket.try_clone().and_then(|c| socket.set_nonblocking(true).map(|()| c));
    let copy = copy.map_err(|e| failed(None, e))?;
    kept.push((key.to_string(), bind, copy));
    tokio::net::TcpListener::from_std(socket).map_err(|e| failed(None, e))
}

/// Signals the node answers, watched before anything is announced so that a signal sent right
/// after "ready" is handled rather than killing the process.
struct Signals {
    hup: Signal,
    term: Signal,
    int: Signal,
    usr1: Signal,
    usr2: Signal,
}

impl Signals {
    fn watch() -> Result<Self, NodeError> {
        let watch =
            |kind: SignalKind, what: &'static str| signal(kind).map_err(|source| NodeError::Start { what, source });
        Ok(Signals {
            hup: watch(SignalKind::hangup(), "watch SIGHUP")?,
            term: watch(SignalKind::terminate(), "watch SIGTERM")?,
            int: watch(SignalKind::interrupt(), "watch SIGINT")?,
            usr1: watch(SignalKind::user_defined1(), "watch SIGUSR1")?,
            usr2: watch(SignalKind::user_defined2(), "watch SIGUSR2")?,
        })
    }
}

/// Starts the node, serves until it is told to stop or a new binary took over, then drains.
async fn serve(
    path: Option<PathBuf>,
    base: String,
    file_config: Config,
    events: Events,
    mut inherited: Inherited,
    stop: Option<tokio::sync::oneshot::Receiver<()>>,
) -> Result<(), NodeError> {
    let mut other_sockets = Vec::new();
    let mut other_tasks = Vec::new();
    if let Some(addr) = file_config.demo_backend {
        let l = other_socket(&mut inherited, "demo", addr, &mut other_sockets)?;
        other_tasks.push(tokio::spawn(crate::demo::serve(l)));
    }
    let signals = Signals::watch()?;
    let (mut control, config, drain_tx) =
        Control::start(path, base, file_config, events, (other_sockets, other_tasks), &mut inherited).await?;
    control.admin_addr = admin::start(&mut control, &config, &mut inherited)?;
    control.announce(&mut inherited).await;
    control.serve(signals, stop, &config).await?;
    control.stop(drain_tx).await;
    Ok(())
}

/// What the control loop keeps of the other sockets (admin, demo backend) it started with.
type Others = (Vec<(String, String, std::net::TcpListener)>, Vec<JoinHandle<()>>);

impl Control {
    /// Starts the workers, the TLS runtime, the revision follower and the listeners of the
    /// configuration to start with (the file, or the released revision this node should run).
    async fn start(
        path: Option<PathBuf>,
        base: String,
        file_config: Config,
        events: Events,
        (other_sockets, other_tasks): Others,
        inherited: &mut Inherited,
    ) -> Result<(Self, Config, watch::Sender<bool>), NodeError> {
        let config = &file_config;
        let n = match config.workers {
            WorkerCount::Auto => std::thread::available_parallelism().map_or(1, |n| n.get()),
            WorkerCount::Count(n) => n,
        };
        let workers = Workers::start(
            n,
            config.cpu_affinity == gatehouse_config::CpuAffinity::Auto,
            gatehouse_clock::set_worker_index,
        )
        .map_err(|source| NodeError::Start { what: "start workers", source })?;
        let registry = Arc::new(Registry::new(n));
        let route_stats = RouteStatsRegistry::default();
        let access_log = open_log(&config.access_log)?;
        let mut tls = TlsRuntime::new(config).await?;
        let mut follower = Follower::new(config, tls.cluster(), file_dir(path.as_deref()))?;
        let config = follower.initial_config(&base, file_config.clone()).await;
        let plugins = PluginRegistry::new(tls.cluster().cloned());
        let discovery = Discovery::new(&config.resolver, registry.clone());
        discovery.prime(&config).await;
        let mut traces = crate::traces::Traces::default();
        let tracer = traces.for_config(&config)?;
        let snapshot = Snapshot::build(
            Arc::new(config.clone()),
            1,
            &registry,
            &route_stats,
            &plugins,
            access_log.as_ref().map(|(_, l)| l.clone()),
            &discovery.answers(),
        )
        .map_err(NodeError::Snapshot)?;
        let mut snapshot = snapshot;
        snapshot.acme = tls.http01(&config);
        snapshot.tracer = tracer.clone();
        traces.install(tracer);
        tls.follow_acme(&config)?;
        let shared = Shared::new(snapshot);
        let acceptors = tls.acceptors(&config, tls.certs())?;
        let (drain_tx, drain_rx) = watch::channel(false);
        let ctx = ServeContext { shared: shared.clone(), drain: drain_rx };
        let mut control = Control {
            file_stamp: stamp(path.as_deref()),
            path,
            events,
            workers,
            builders: Builders { registry, route_stats: Arc::new(route_stats), plugins: Arc::new(plugins) },
            compiler: Compiler::start("gatehouse-compile")?,
            writer: Compiler::start("gatehouse-write")?,
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
            discovery_task: Some(tokio::spawn(discovery.clone().run())),
            discovery,
            traces,
        };
        control.listeners.apply(&config, &control.workers, &control.ctx, config.reuse_port, &acceptors, inherited)?;
        control.discovery.watch(shared.snapshot.load().upstreams.values().cloned());
        control.restart_health_checks();
        for w in &control.workers.workers {
            w.handle.spawn(worker_maintenance(shared.clone()));
        }
        Ok((control, config, drain_tx))
    }

    /// Tells the world the node is ready: the status document, the revision report, the log, the
    /// `ready` event, and the process that handed its sockets down, if any.
    async fn announce(&mut self, inherited: &mut Inherited) {
        self.update_status();
        self.follower.send_report(self.generation).await;
        let addrs = self.listeners.addrs();
        let workers = self.workers.workers.len();
        tracing::info!(workers, listeners = ?addrs, admin = ?self.admin_addr, "gatehouse ready");
        self.events.emit(
            "ready",
            json!({ "listeners": addrs, "admin": self.admin_addr, "pid": std::process::id(), "workers": workers, "generation": 1 }),
        );
        if inherited.is_upgrade() {
            tracing::info!("took over the listeners from the previous process");
        }
        crate::systemd::ready(inherited.is_upgrade());
        crate::systemd::watchdog();
        inherited.ready();
    }

    /// The control loop: reloads, released revisions, the file watch and upgrades, until a stop
    /// signal or a new binary that took over.
    async fn serve(
        &mut self,
        mut signals: Signals,
        stop: Option<tokio::sync::oneshot::Receiver<()>>,
        config: &Config,
    ) -> Result<(), NodeError> {
        let stop = async {
            match stop {
                Some(rx) => drop(rx.await),
                None => std::future::pending().await,
            }
        };
        tokio::pin!(stop);
        let mut tick = tokio::time::interval(TICK);
        let mut ticks = 0u64;
        let mut poll = tokio::time::interval(config.control.poll_interval.0);
        let mut changes = match &self.follower.store {
            Some(store) => Some(store.changes().map_err(NodeError::Store)?),
            None => None,
        };
        let mut upgrading: Option<JoinHandle<Result<u32, UpgradeError>>> = None;
        loop {
            tokio::select! {
                _ = signals.hup.recv() => self.reload("SIGHUP").await,
                _ = signals.usr1.recv() => self.reopen_logs().await,
                _ = signals.usr2.recv() => {
                    if upgrading.is_some() {
                        tracing::warn!("SIGUSR2: an upgrade is already under way");
                    } else {
                        upgrading = self.start_upgrade();
                    }
                }
                done = async {
                    match upgrading.as_mut() {
                        Some(h) => h.await.unwrap_or_else(|e| Err(UpgradeError::Task(e))),
                        None => std::future::pending().await,
                    }
                } => {
                    upgrading = None;
                    if self.upgraded(done) {
                        return Ok(());
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
                    self.follow().await;
                }
                _ = poll.tick() => self.follow().await,
                _ = tick.tick() => {
                    ticks += 1;
                    self.on_tick(ticks).await;
                }
                _ = signals.term.recv() => return Ok(()),
                _ = signals.int.recv() => return Ok(()),
                () = &mut stop => return Ok(()),
            }
        }
    }

    /// What a finished upgrade means: `true` when the new process is serving and this one stops.
    fn upgraded(&mut self, done: Result<u32, UpgradeError>) -> bool {
        match done {
            Ok(pid) => {
                tracing::info!(pid, "the new process is ready; this one stops accepting and drains");
                // It reads the QUIC sockets now, and sends this process its connections' packets.
                self.listeners.quic_handed_over(true);
                self.events.emit("upgraded", json!({ "pid": pid }));
                true
            }
            Err(e) => {
                tracing::error!("upgrade failed, this process goes on serving: {e}");
                self.listeners.quic_handed_over(false);
                self.events.emit("upgrade_failed", json!({ "error": e.to_string() }));
                false
            }
        }
    }

    /// Once a second: certificate expiry now and then, and the file watch.
    async fn on_tick(&mut self, ticks: u64) {
        if ticks % 30 == 1 {
            self.tls.refresh_expiring();
        }
        let now = stamp(self.path.as_deref());
        if self.shared.snapshot.load().config.watch && now.is_some() && now != self.file_stamp {
            self.file_stamp = now;
            self.reload("file change").await;
        }
    }
}

fn open_log(cfg: &AccessLogConfig) -> Result<Option<(AccessLogConfig, AccessLog)>, NodeError> {
    if cfg.path == "off" {
        return Ok(None);
    }
    AccessLog::open(&cfg.path, cfg.format).map(|l| Some((cfg.clone(), l))).map_err(|source| NodeError::File {
        setting: Some("access log"),
        action: "open",
        path: PathBuf::from(&cfg.path),
        source,
    })
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

impl Control {
    /// Starts the binary again with every listening socket inherited (SIGUSR2); the handle
    /// answers the new process's id once it is ready.
    fn start_upgrade(&mut self) -> Option<JoinHandle<Result<u32, UpgradeError>>> {
        let mut sockets = self.listeners.handover();
        sockets.extend(self.other_sockets.iter().map(|(k, b, s)| (k.clone(), b.clone(), vec![s])));
        let udp = match self.listeners.udp_handover() {
            Ok(udp) => udp,
            Err(e) => {
                // Without the pairs the new process would take the old one's QUIC packets.
                tracing::error!(
                    "SIGUSR2: upgrade failed, this process goes on serving: cannot pair the QUIC sockets: {e}"
                );
                self.events.emit("upgrade_failed", json!({ "error": e.to_string() }));
                self.listeners.quic_handed_over(false);
                return None;
            }
        };
        match upgrade::start(sockets, udp) {
            Ok(starting) => {
                tracing::info!(pid = starting.pid, "SIGUSR2: started a new process to take over the listeners");
                self.events.emit("upgrading", json!({ "pid": starting.pid }));
                Some(tokio::spawn(starting.ready()))
            }
            Err(e) => {
                tracing::error!("SIGUSR2: upgrade failed, this process goes on serving: {e}");
                self.events.emit("upgrade_failed", json!({ "error": e.to_string() }));
                self.listeners.quic_handed_over(false);
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
            *s = json!(gatehouse_admin::bodies::NodeStatus {
                version: env!("CARGO_PKG_VERSION"),
                pid: std::process::id(),
                generation: self.generation,
                workers: self.workers.workers.len(),
                listeners: self.listeners.addrs(),
                admin,
                control: self.follower.status(),
            });
        }
    }

    /// Each worker hands the access-log lines it buffered to the writer, one worker after the
    /// other, before the caller reopens or syncs the log.
    async fn hand_over_access_lines(&self, log: &AccessLog) {
        for w in &self.workers.workers {
            let log = log.clone();
            let _ = w.handle.spawn(async move { log.flush_local() }).await;
        }
    }

    /// Opens the access log and the process log files again at their paths (SIGUSR1, after
    /// logrotate moved them): lines written before go to the moved files, lines after to new ones.
    async fn reopen_logs(&mut self) {
        if let Some((cfg, log)) = &self.access_log {
            // What the workers buffered lands in the moved file.
            self.hand_over_access_lines(log).await;
            let log = log.clone();
            let reopened = tokio::task::spawn_blocking(move || log.reopen(Duration::from_secs(5))).await;
            match reopened {
                Ok(Ok(())) => tracing::info!(path = cfg.path, "SIGUSR1: access log reopened"),
                Ok(Err(e)) => {
                    tracing::error!(path = cfg.path, error = %e, "SIGUSR1: access log not reopened; still writing to the old file")
                }
                Err(e) => tracing::error!(error = %e, "SIGUSR1: access log not reopened"),
            }
        }
        match gatehouse_telemetry::process_log::reopen() {
            Ok(true) => tracing::info!("SIGUSR1: process log reopened"),
            Ok(false) => {}
            Err(e) => tracing::error!(error = %e, "SIGUSR1: process log not reopened; still writing to the old file"),
        }
    }

    /// Stops accepting, lets open requests finish within the grace period, then stops.
    async fn stop(mut self, drain: watch::Sender<bool>) {
        let grace = self.shared.snapshot.load().config.shutdown_grace.0;
        tracing::info!(grace = ?grace, "shutting down: no new connections, draining open ones");
        crate::systemd::stopping();
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
        // The spans the workers batched, then the exporter sends what it has.
        for w in &self.workers.workers {
            let _ = w.handle.spawn(async { gatehouse_otel::flush_local() }).await;
        }
        self.traces.flush();
        if let Some(t) = self.discovery_task.take() {
            t.abort();
        }
        if let Some((_, log)) = &self.access_log {
            // The workers' buffered lines, then the writer confirms they are out.
            self.hand_over_access_lines(log).await;
            log.sync(Duration::from_secs(5));
        }
        self.workers.stop();
        tracing::info!("stopped");
        self.events.emit("stopped", json!({ "unfinished_connections": left }));
    }
}
