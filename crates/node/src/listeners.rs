//! The running traffic listeners and how a reload changes them: a listener whose address is kept
//! keeps its sockets (so queued and open connections are never dropped) and only restarts its accept
//! tasks when its settings changed — a new TLS acceptor (certificates, client authentication) is
//! swapped in under running tasks; new addresses are bound before anything else changes, so a bind
//! failure rejects the reload whole. At start after a binary upgrade, a listener takes over the
//! sockets the previous process handed down under its name instead of binding.

use crate::error::NodeError;
use crate::upgrade::Inherited;
use gatehouse_config::Config;
use gatehouse_http3::{adopt_udp, bind_udp, quic_loop, QuicLink, QuicSocket};
use gatehouse_listener::{
    accept_loop, adopt_listener, bind_listener, AcceptorCell, BindError, BoundListener, PerIpLimit, ServeContext,
    Workers,
};
use gatehouse_tls::TlsAcceptor;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::task::AbortHandle;

struct Running {
    bound: BoundListener,
    tasks: Vec<AbortHandle>,
    tls: Option<AcceptorCell>,
    /// With `http3`: the UDP sockets QUIC is served on, on the same port.
    udp: Vec<QuicSocket>,
    /// The QUIC endpoints' tasks (HTTP/3) and where a reload sends them new settings: unlike
    /// the TCP accept tasks, they are never restarted for a change of settings, as their open
    /// connections live in them.
    quic: Option<QuicTasks>,
}

/// A listener's QUIC endpoint tasks, and the sender of its settings to them.
type QuicTasks = (Vec<AbortHandle>, tokio::sync::watch::Sender<Arc<gatehouse_config::Listener>>);

/// Listeners by name.
#[derive(Default)]
pub struct ListenerSet {
    running: BTreeMap<String, Running>,
}

/// A wanted listener: its name, its settings, and the name of the running listener it keeps.
type Wanted<'c> = (&'c String, &'c gatehouse_config::Listener, Option<String>);

/// A reload's first phase, done before any running listener is touched.
struct Plan<'c> {
    /// Every wanted listener, in the configuration's order.
    listeners: Vec<Wanted<'c>>,
    /// The sockets bound (or taken over) for the wanted listeners that keep none.
    fresh: BTreeMap<String, (BoundListener, Vec<QuicSocket>)>,
}

/// What a reload starts listeners' tasks with.
struct Launcher<'a> {
    workers: &'a Workers,
    ctx: &'a ServeContext,
    /// The running process's setting (it changes only on restart).
    reuse_port: bool,
}

impl ListenerSet {
    /// Makes the running listeners match `config`. New addresses are bound first; if any bind
    /// fails, nothing running is touched and the error is returned. `reuse_port` is the running
    /// process's setting (it changes only on restart).
    pub fn apply(
        &mut self,
        config: &Config,
        workers: &Workers,
        ctx: &ServeContext,
        reuse_port: bool,
        tls: &BTreeMap<String, Arc<TlsAcceptor>>,
        inherited: &mut Inherited,
    ) -> Result<(), NodeError> {
        let Plan { listeners, mut fresh } = self.plan(config, workers.workers.len(), reuse_port, inherited)?;
        // Phase 2: commit.
        let launcher = Launcher { workers, ctx, reuse_port };
        let mut old = std::mem::take(&mut self.running);
        for (name, cfg, keep) in listeners {
            let acceptor = tls.get(name);
            let running = match keep.and_then(|k| old.remove(&k)) {
                Some(r) if r.unchanged(name, cfg, acceptor.is_some()) => r.with_acceptor(acceptor),
                Some(r) => launcher.restart(r, name, cfg, acceptor),
                None => {
                    let Some((bound, udp)) = fresh.remove(name) else { continue };
                    launcher.launch(name, bound, udp, acceptor)
                }
            };
            self.running.insert(name.clone(), running);
        }
        // Listeners no longer wanted stop accepting and close.
        for (name, r) in old {
            tracing::info!(listener = %name, addr = %r.bound.addr, "listener removed");
            r.stop();
        }
        Ok(())
    }

    /// Phase 1, no side effects on running listeners: pairs each wanted listener with the running
    /// one it keeps (same address; same name too for port 0), and binds the others.
    fn plan<'c>(
        &self,
        config: &'c Config,
        workers: usize,
        reuse_port: bool,
        inherited: &mut Inherited,
    ) -> Result<Plan<'c>, NodeError> {
        let mut plan = Plan { listeners: Vec::new(), fresh: BTreeMap::new() };
        for (name, cfg) in &config.listeners {
            let keep = self.kept_by(name, cfg, &plan.listeners);
            if keep.is_none() {
                plan.fresh.insert(name.clone(), bind_or_adopt(name, cfg, inherited, workers, reuse_port)?);
            }
            plan.listeners.push((name, cfg, keep));
        }
        Ok(plan)
    }

    /// The name of the running listener that wanted listener `name` keeps: one that no listener
    /// `planned` before keeps, on the same address (for port 0, also of the same name).
    fn kept_by(&self, name: &String, cfg: &gatehouse_config::Listener, planned: &[Wanted<'_>]) -> Option<String> {
        self.running
            .iter()
            .find(|(old_name, r)| {
                let taken = planned.iter().any(|(_, _, k)| k.as_deref() == Some(old_name.as_str()));
                !taken
                    && if cfg.bind.port() == 0 {
                        *old_name == name && r.bound.config.bind == cfg.bind
                    } else {
                        r.bound.addr == cfg.bind || r.bound.config.bind == cfg.bind
                    }
            })
            .map(|(k, _)| k.clone())
    }

    /// Bound addresses by listener name.
    pub fn addrs(&self) -> BTreeMap<String, SocketAddr> {
        self.running.iter().map(|(k, r)| (k.clone(), r.bound.addr)).collect()
    }

    /// Stops accepting everywhere and closes the sockets.
    pub fn close(&mut self) {
        for (_, r) in std::mem::take(&mut self.running) {
            r.stop();
        }
    }
}

impl Running {
    /// Whether the kept listener already runs with `cfg` under `name`, with TLS (`tls`) or not.
    fn unchanged(&self, name: &String, cfg: &gatehouse_config::Listener, tls: bool) -> bool {
        self.bound.config == *cfg && self.bound.name == *name && self.tls.is_some() == tls
    }

    /// Unchanged settings: the tasks keep running; a TLS listener gets the new acceptor (its
    /// certificates may have changed) swapped in.
    fn with_acceptor(self, acceptor: Option<&Arc<TlsAcceptor>>) -> Running {
        if let (Some(cell), Some(acceptor)) = (&self.tls, acceptor) {
            cell.store(acceptor.clone());
        }
        self
    }

    /// Stops the accept tasks and the QUIC endpoints; the sockets close with `self`.
    fn stop(mut self) {
        abort(&mut self.tasks);
        if let Some((mut handles, _)) = self.quic.take() {
            abort(&mut handles);
        }
    }
}

impl Launcher<'_> {
    /// A kept listener whose settings changed: its accept tasks restart on the same sockets.
    fn restart(
        &self,
        mut r: Running,
        name: &String,
        cfg: &gatehouse_config::Listener,
        acceptor: Option<&Arc<TlsAcceptor>>,
    ) -> Running {
        abort(&mut r.tasks);
        r.bound.config = cfg.clone();
        r.bound.name = name.clone();
        if let Err(e) = r.bound.apply_socket_options() {
            tracing::warn!(listener = %name, error = %e, "could not apply defer_accept to the kept sockets");
        }
        tracing::info!(listener = %name, addr = %r.bound.addr, "listener settings changed; sockets kept");
        let cell = acceptor_cell(acceptor, r.tls.take());
        let tasks = start(&r.bound, self.workers, self.ctx, cell.as_ref());
        let quic = self.restart_quic(&r.bound, &mut r.udp, r.quic.take(), cell.as_ref());
        Running { bound: r.bound, tasks, tls: cell, udp: r.udp, quic }
    }

    /// The QUIC endpoints of a listener whose settings (`bound.config`) changed: running ones are
    /// sent the new settings, and stop if HTTP/3 is off now; where none ran, they start.
    fn restart_quic(
        &self,
        bound: &BoundListener,
        udp: &mut Vec<QuicSocket>,
        quic: Option<QuicTasks>,
        cell: Option<&AcceptorCell>,
    ) -> Option<QuicTasks> {
        let cfg = &bound.config;
        match (quic, cfg.http3) {
            (Some((handles, settings)), true) => {
                settings.send_replace(Arc::new(cfg.clone()));
                Some((handles, settings))
            }
            (Some((handles, settings)), false) => {
                // Told, each endpoint stops taking connections and ends with its last.
                settings.send_replace(Arc::new(cfg.clone()));
                drop(handles);
                udp.clear();
                None
            }
            (None, http3) => {
                if !http3 {
                    udp.clear();
                } else if let Err(e) = bind_udp(udp, bound.addr, self.workers.workers.len(), self.reuse_port) {
                    tracing::error!(listener = %bound.name, error = %e, "cannot bind the UDP sockets for HTTP/3");
                }
                start_quic(bound, udp, self.workers, self.ctx, cell)
            }
        }
    }

    /// A new listener: its tasks start on the sockets just bound (or taken over).
    fn launch(
        &self,
        name: &String,
        bound: BoundListener,
        udp: Vec<QuicSocket>,
        acceptor: Option<&Arc<TlsAcceptor>>,
    ) -> Running {
        let (reuse_port, workers) = (self.reuse_port, self.workers.workers.len());
        tracing::info!(listener = %name, addr = %bound.addr, reuse_port, workers, "listening");
        let cell = acceptor.map(|a| Arc::new(arc_swap::ArcSwap::new(a.clone())));
        let tasks = start(&bound, self.workers, self.ctx, cell.as_ref());
        let quic = start_quic(&bound, &udp, self.workers, self.ctx, cell.as_ref());
        Running { bound, tasks, tls: cell, udp, quic }
    }
}

/// The acceptor cell of a restarted listener: the same cell when there was one (the QUIC
/// endpoints read it too), holding the new acceptor.
fn acceptor_cell(acceptor: Option<&Arc<TlsAcceptor>>, old: Option<AcceptorCell>) -> Option<AcceptorCell> {
    match (acceptor, old) {
        (Some(a), Some(cell)) => {
            cell.store(a.clone());
            Some(cell)
        }
        (Some(a), None) => Some(Arc::new(arc_swap::ArcSwap::new(a.clone()))),
        (None, _) => None,
    }
}

/// A listener's sockets, bound or taken over from the process this one replaces (its TCP
/// sockets, and with `http3` its UDP ones with their pairs to the old process); with `http3`,
/// UDP sockets are bound on the listener's port where none were handed down.
fn bind_or_adopt(
    name: &str,
    cfg: &gatehouse_config::Listener,
    inherited: &mut Inherited,
    workers: usize,
    reuse_port: bool,
) -> Result<(BoundListener, Vec<QuicSocket>), NodeError> {
    let bind = cfg.bind.to_string();
    let bound = match inherited.take(&format!("listener:{name}"), &bind) {
        Some(sockets) => adopt_listener(name, cfg, sockets, workers, reuse_port).map_err(NodeError::Listener)?,
        None => bind_listener(name, cfg, workers, reuse_port).map_err(NodeError::Listener)?,
    };
    let handed = inherited.take_udp(&format!("udp:{name}"), &bind);
    let mut udp = match cfg.http3 {
        true => adopt_udp(handed, bound.addr)
            .map_err(|source| BindError::Adopt { listener: name.into(), addr: cfg.bind, source })
            .map_err(NodeError::Listener)?,
        false => Vec::new(),
    };
    if cfg.http3 {
        bind_udp(&mut udp, bound.addr, workers, reuse_port)
            .map_err(|source| BindError::Bind { listener: name.into(), addr: cfg.bind, source })
            .map_err(NodeError::Listener)?;
    }
    Ok((bound, udp))
}

fn abort(tasks: &mut Vec<AbortHandle>) {
    for t in tasks.drain(..) {
        t.abort();
    }
}

fn start(bound: &BoundListener, workers: &Workers, ctx: &ServeContext, tls: Option<&AcceptorCell>) -> Vec<AbortHandle> {
    let cfg = Arc::new(bound.config.clone());
    let n = workers.workers.len();
    // One table for the listener's workers, sized for every connection they may hold.
    let per_ip = (cfg.max_connections_per_ip > 0)
        .then(|| Arc::new(PerIpLimit::new(cfg.max_connections_per_ip, (n * cfg.max_connections).min(1 << 20))));
    match bound.assignments(n) {
        Ok(sockets) => sockets
            .into_iter()
            .map(|(w, socket)| {
                let task = accept_loop(socket, cfg.clone(), tls.cloned(), per_ip.clone(), ctx.clone());
                workers.workers[w].handle.spawn(task).abort_handle()
            })
            .collect(),
        Err(e) => {
            tracing::error!(listener = %bound.name, error = %e, "cannot share listener socket");
            Vec::new()
        }
    }
}

/// HTTP/3: one QUIC endpoint per UDP socket, socket `i` on worker `i`; their tasks and where new
/// settings go.
fn start_quic(
    bound: &BoundListener,
    udp: &[QuicSocket],
    workers: &Workers,
    ctx: &ServeContext,
    tls: Option<&AcceptorCell>,
) -> Option<QuicTasks> {
    let tls = tls.filter(|_| !udp.is_empty())?;
    let n = workers.workers.len().max(1);
    let (settings, _) = tokio::sync::watch::channel(Arc::new(bound.config.clone()));
    let mut tasks = Vec::new();
    let links: Arc<[Arc<QuicLink>]> = udp.iter().map(|q| q.link.clone()).collect();
    for (i, q) in udp.iter().enumerate() {
        match q.socket.try_clone() {
            Ok(socket) => {
                let task = quic_loop(socket, i, links.clone(), settings.subscribe(), tls.clone(), ctx.clone());
                tasks.push(workers.workers[i % n].handle.spawn(task).abort_handle());
            }
            Err(e) => tracing::error!(listener = %bound.name, error = %e, "cannot share the QUIC socket"),
        }
    }
    Some((tasks, settings))
}

impl ListenerSet {
    /// The QUIC sockets, by hand-over key, for a process that takes over, each with the end of a
    /// new pair on which that process sends the packets of this one's connections.
    pub fn udp_handover(&self) -> std::io::Result<Vec<crate::upgrade::UdpHandover<'_>>> {
        let mut out = Vec::new();
        for (name, r) in &self.running {
            let sockets = r
                .udp
                .iter()
                .map(|q| Ok((&q.socket, q.link.pair_for_successor()?)))
                .collect::<std::io::Result<Vec<_>>>()?;
            if !sockets.is_empty() {
                out.push((format!("udp:{name}"), r.bound.config.bind.to_string(), sockets));
            }
        }
        Ok(out)
    }

    /// The successor reads the QUIC sockets now (or, `ok` false, never will).
    pub fn quic_handed_over(&self, ok: bool) {
        for q in self.running.values().flat_map(|r| r.udp.iter()) {
            if ok {
                q.link.handed_over();
            } else {
                q.link.upgrade_failed();
            }
        }
    }

    /// The listening sockets, by hand-over key, for a process that takes over.
    pub fn handover(&self) -> Vec<(String, String, Vec<&std::net::TcpListener>)> {
        self.running
            .iter()
            .map(|(name, r)| {
                (format!("listener:{name}"), r.bound.config.bind.to_string(), r.bound.sockets.iter().collect())
            })
            .collect()
    }
}
