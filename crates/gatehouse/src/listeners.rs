//! The running traffic listeners and how a reload changes them: a listener whose address is kept
//! keeps its sockets (so queued and open connections are never dropped) and only restarts its accept
//! tasks with the new settings; new addresses are bound before anything else changes, so a bind
//! failure rejects the reload whole.

use gatehouse_config::Config;
use gatehouse_listener::{accept_loop, bind_listener, BoundListener, ServeContext, Workers};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::task::AbortHandle;

struct Running {
    bound: BoundListener,
    tasks: Vec<AbortHandle>,
}

/// Listeners by name.
#[derive(Default)]
pub struct ListenerSet {
    running: BTreeMap<String, Running>,
}

impl ListenerSet {
    /// Makes the running listeners match `config`.
    pub fn apply(&mut self, config: &Config, workers: &Workers, ctx: &ServeContext) -> Result<(), String> {
        let n = workers.workers.len();
        let mut old = std::mem::take(&mut self.running);
        // Phase 1: find or bind every wanted listener; on failure put everything back.
        let mut next: BTreeMap<String, (BoundListener, Option<Vec<AbortHandle>>)> = BTreeMap::new();
        for (name, cfg) in &config.listeners {
            let reuse = old
                .iter()
                .find(|(old_name, r)| {
                    if cfg.bind.port() == 0 {
                        *old_name == name && r.bound.config.bind == cfg.bind
                    } else {
                        r.bound.addr == cfg.bind || r.bound.config.bind == cfg.bind
                    }
                })
                .map(|(k, _)| k.clone());
            let entry = match reuse.and_then(|k| old.remove(&k)) {
                Some(mut r) if r.bound.config == *cfg && r.bound.name == *name => {
                    (r.bound, Some(std::mem::take(&mut r.tasks)))
                }
                Some(mut r) => {
                    abort(&mut r.tasks);
                    r.bound.config = cfg.clone();
                    r.bound.name = name.clone();
                    (r.bound, None)
                }
                None => match bind_listener(name, cfg, n, config.reuse_port) {
                    Ok(b) => (b, None),
                    Err(e) => {
                        // Restore: kept listeners go back with their tasks untouched or restarted.
                        for (k, (bound, tasks)) in next {
                            let tasks = tasks.unwrap_or_else(|| start(&bound, workers, ctx));
                            old.insert(k, Running { bound, tasks });
                        }
                        self.running = old;
                        return Err(e);
                    }
                },
            };
            next.insert(name.clone(), entry);
        }
        // Phase 2: listeners no longer wanted stop accepting and close.
        for (name, mut r) in old {
            tracing::info!(listener = %name, addr = %r.bound.addr, "listener removed");
            abort(&mut r.tasks);
        }
        // Phase 3: start accept tasks where needed.
        for (name, (bound, tasks)) in next {
            let tasks = match tasks {
                Some(t) => t,
                None => {
                    tracing::info!(listener = %name, addr = %bound.addr, reuse_port = config.reuse_port, workers = n, "listening");
                    start(&bound, workers, ctx)
                }
            };
            self.running.insert(name, Running { bound, tasks });
        }
        Ok(())
    }

    /// Bound addresses by listener name.
    pub fn addrs(&self) -> BTreeMap<String, SocketAddr> {
        self.running.iter().map(|(k, r)| (k.clone(), r.bound.addr)).collect()
    }

    /// Stops accepting everywhere and closes the sockets.
    pub fn close(&mut self) {
        for (_, mut r) in std::mem::take(&mut self.running) {
            abort(&mut r.tasks);
        }
    }
}

fn abort(tasks: &mut Vec<AbortHandle>) {
    for t in tasks.drain(..) {
        t.abort();
    }
}

fn start(bound: &BoundListener, workers: &Workers, ctx: &ServeContext) -> Vec<AbortHandle> {
    let cfg = Arc::new(bound.config.clone());
    workers
        .workers
        .iter()
        .filter_map(|w| match bound.socket_for(w.index) {
            Ok(socket) => Some(w.handle.spawn(accept_loop(socket, cfg.clone(), ctx.clone())).abort_handle()),
            Err(e) => {
                tracing::error!(listener = %bound.name, worker = w.index, error = %e, "cannot share listener socket");
                None
            }
        })
        .collect()
}
