//! Applying a configuration: a reloaded file or a published revision is compiled and its
//! snapshot built on the compile thread (low priority, see `compiler.rs`), then installed here on
//! the control thread — certificates, listeners, the atomic swap — so that whatever fails leaves
//! the running configuration whole.

use super::{compile_text, open_log, read_base, stamp, Control};
use crate::error::NodeError;
use crate::follow::Follower;
use crate::upgrade::Inherited;
use gatehouse_config::{AccessLog as AccessLogConfig, Config};
use gatehouse_plugins::Registry as PluginRegistry;
use gatehouse_proxy::{RouteStatsRegistry, Snapshot};
use gatehouse_telemetry::access_log::AccessLog;
use gatehouse_upstream::{Answers, Registry};
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;

/// State that survives reloads, which building a snapshot reads.
#[derive(Clone)]
pub(super) struct Builders {
    pub(super) registry: Arc<Registry>,
    pub(super) route_stats: Arc<RouteStatsRegistry>,
    pub(super) plugins: Arc<PluginRegistry>,
}

/// A configuration compiled on the compile thread, waiting for its names to be resolved before
/// its snapshot is built.
type Compiled<T> = Result<(Config, T), NodeError>;

/// A compiled configuration with its snapshot, ready to install.
pub(super) struct Built {
    config: Config,
    snapshot: Snapshot,
    log: Option<(AccessLogConfig, AccessLog)>,
}

impl Builders {
    /// Builds the snapshot of `config` (generation `generation`), keeping the access log when its
    /// settings did not change.
    pub(super) fn build(
        &self,
        config: Config,
        generation: u64,
        log: Option<(AccessLogConfig, AccessLog)>,
        answers: &Answers,
    ) -> Result<Built, NodeError> {
        let log = match log {
            Some((cfg, log)) if cfg == config.access_log => Some((cfg, log)),
            _ => open_log(&config.access_log)?,
        };
        let snapshot = Snapshot::build(
            Arc::new(config.clone()),
            generation,
            &self.registry,
            &self.route_stats,
            &self.plugins,
            log.as_ref().map(|(_, l)| l.clone()),
            answers,
        )
        .map_err(NodeError::Snapshot)?;
        Ok(Built { config, snapshot, log })
    }
}

impl Control {
    pub(super) async fn reload(&mut self, why: &str) {
        self.file_stamp = stamp(self.path.as_deref());
        let started = Instant::now();
        crate::systemd::reloading();
        let result = self.try_reload().await;
        crate::systemd::reloaded(result.is_ok());
        match result {
            Ok(()) => {
                self.shared.stats.reloads.inc();
                self.update_status();
                tracing::info!(trigger = why, generation = self.generation, took = ?started.elapsed(), "configuration reloaded");
                self.events
                    .emit("reloaded", json!({ "generation": self.generation, "listeners": self.listeners.addrs() }));
            }
            Err(e) => {
                self.shared.stats.reload_failures.inc();
                tracing::error!(trigger = why, "reload rejected, keeping the running configuration:\n{e}");
                self.events.emit(
                    "reload_failed",
                    json!({ "errors": e.to_string().lines().collect::<Vec<_>>(), "generation": self.generation }),
                );
            }
        }
    }

    /// Re-reads the file, merges the running revision into it, and applies the result.
    async fn try_reload(&mut self) -> Result<(), NodeError> {
        let (base, source) = read_base(self.path.as_deref())?;
        let running = self.follower.running.as_ref().map(|r| (r.number, r.document.clone()));
        let text = base.clone();
        let dir = self.follower.dir.clone();
        let config =
            self.compiler
                .run(move || match running {
                    Some((number, document)) => {
                        let merged =
                            gatehouse_control::document::merge(&text, &document).map_err(NodeError::Document)?;
                        let mut config = gatehouse_config::compile_value(merged)
                            .map_err(|errors| NodeError::Config { file: source, revision: Some(number), errors })?;
                        config.resolve_paths(&dir);
                        Ok(config)
                    }
                    None => compile_text(&text, &source, &dir),
                })
                .await??;
        let built = self.build(config).await?;
        self.install(built)?;
        *self.base.lock().unwrap_or_else(|p| p.into_inner()) = base;
        // The new file may be what a refused revision needed.
        self.follower.failed = None;
        Ok(())
    }

    /// Resolves the new names of `config`, then builds its snapshot on the compile thread.
    async fn build(&mut self, config: Config) -> Result<Built, NodeError> {
        self.discovery.configure(&config.resolver);
        self.discovery.prime(&config).await;
        let answers = self.discovery.answers();
        let (builders, generation, log) = (self.builders.clone(), self.generation + 1, self.access_log.clone());
        self.compiler.run(move || builders.build(config, generation, log, &answers)).await?
    }

    /// Installs a built configuration: certificates, listeners, the snapshot, health checks. On
    /// error the running configuration stays whole.
    pub(super) fn install(&mut self, built: Built) -> Result<(), NodeError> {
        let Built { config, mut snapshot, log } = built;
        snapshot.acme = self.tls.http01(&config);
        for (field, changed) in [
            ("workers", config.workers != self.started_with.workers),
            ("reuse_port", config.reuse_port != self.started_with.reuse_port),
            ("cpu_affinity", config.cpu_affinity != self.started_with.cpu_affinity),
            ("admin", config.admin != self.started_with.admin),
            ("node", config.node != self.started_with.node),
            ("control", config.control != self.started_with.control),
            ("demo_backend", config.demo_backend != self.started_with.demo_backend),
            ("redis", config.redis != self.started_with.redis),
            ("tls.tickets", config.tls.tickets != self.started_with.tls.tickets),
            ("tls.session_cache", config.tls.session_cache != self.started_with.tls.session_cache),
        ] {
            if changed {
                tracing::warn!(field, "this setting changes only on restart; the running value stays");
            }
        }
        let tracer = self.traces.for_config(&config)?;
        snapshot.tracer = tracer.clone();
        let staged = self.tls.stage(&config)?;
        let acceptors = self.tls.acceptors(&config, staged.certs())?;
        self.listeners.apply(
            &config,
            &self.workers,
            &self.ctx,
            self.started_with.reuse_port,
            &acceptors,
            &mut Inherited::default(),
        )?;
        if let Err(e) = self.tls.commit(staged, &config) {
            // Read and checked in stage: only a file changed since can bring this here.
            tracing::error!(error = %e, "ACME not restarted");
        }
        gatehouse_telemetry::process_log::apply(&config.log);
        self.traces.install(tracer);
        self.generation = snapshot.generation;
        // The replaced snapshot is kept until the next apply and then freed on the compile thread,
        // not by a worker finishing the last request that held it: freeing 10,000 routes takes
        // milliseconds of CPU.
        let old = self.retired.replace(self.shared.snapshot.swap(Arc::new(snapshot)));
        self.compiler.spawn(move || drop(old));
        self.access_log = log;
        self.discovery.watch(self.shared.snapshot.load().upstreams.values().cloned());
        self.restart_health_checks();
        Ok(())
    }

    /// Applies the revision this node should run, if it changed, and reports to the store.
    pub(super) async fn follow(&mut self) {
        if let Some(rev) = self.follower.pending().await {
            let started = Instant::now();
            let number = rev.meta.number;
            let base = self.base.lock().map(|b| b.clone()).unwrap_or_default();
            let dir = self.follower.dir.clone();
            // The revision goes to the compile thread and comes back with the result, rather than
            // being copied here (a 10,000-route document is megabytes).
            let outcome = self
                .compiler
                .run(move || {
                    let merged: Compiled<_> = Follower::merged(&base, &rev, &dir);
                    (rev, merged)
                })
                .await;
            let result = match outcome {
                Err(e) => Err(e),
                Ok((rev, merged)) => match merged {
                    Err(e) => Err(e),
                    Ok((config, running)) => self.build(config).await.map(|built| (rev, built, running)),
                },
            };
            let compiled = started.elapsed();
            let result = result.and_then(|(rev, built, running)| self.install(built).map(|()| (rev, running)));
            match result {
                Ok((rev, running)) => {
                    let keep_copy = self.follower.applied(rev, running);
                    self.writer.spawn(keep_copy);
                    self.shared.stats.reloads.inc();
                    let took = started.elapsed();
                    tracing::info!(
                        revision = number,
                        generation = self.generation,
                        took = ?took,
                        compile = ?compiled,
                        install = ?took.saturating_sub(compiled),
                        "revision applied"
                    );
                    self.events.emit(
                        "applied",
                        json!({ "revision": number, "generation": self.generation, "took_ms": took.as_secs_f64() * 1e3 }),
                    );
                }
                Err(e) => {
                    self.follower.refused(number, &e);
                    self.shared.stats.reload_failures.inc();
                    let took = started.elapsed();
                    tracing::error!(
                        revision = number,
                        took = ?took,
                        compile = ?compiled,
                        "revision refused, keeping the running configuration:\n{e}"
                    );
                    self.events.emit(
                        "apply_failed",
                        json!({ "revision": number, "errors": e.to_string().lines().collect::<Vec<_>>(), "generation": self.generation }),
                    );
                }
            }
        }
        self.follower.send_report(self.generation).await;
        self.update_status();
    }
}
