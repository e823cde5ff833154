//! Worker threads: each runs a current-thread tokio runtime, so a connection's tasks never move
//! between cores and per-worker state needs no shared lock.

use std::sync::mpsc;
use std::thread::JoinHandle;
use tokio::runtime::Handle;
use tokio::sync::watch;

/// One worker.
#[derive(Debug)]
pub struct Worker {
    /// Index, 0-based.
    pub index: usize,
    /// Spawns tasks onto the worker's runtime from any thread.
    pub handle: Handle,
}

/// The worker threads.
#[derive(Debug)]
pub struct Workers {
    /// The workers, by index.
    pub workers: Vec<Worker>,
    threads: Vec<JoinHandle<()>>,
    stop: watch::Sender<bool>,
}

impl Workers {
    /// Starts `n` workers, pinning worker `i` to core `i` when `pin` is set; `on_start` runs first on
    /// each worker thread.
    pub fn start(
        n: usize,
        pin: bool,
        on_start: impl Fn(usize) + Send + Sync + Clone + 'static,
    ) -> std::io::Result<Workers> {
        let cores = if pin { core_affinity::get_core_ids().unwrap_or_default() } else { Vec::new() };
        let (stop, _) = watch::channel(false);
        let (tx, rx) = mpsc::channel();
        let mut threads = Vec::with_capacity(n);
        for index in 0..n {
            let tx = tx.clone();
            let mut stop_rx = stop.subscribe();
            let core = (!cores.is_empty()).then(|| cores[index % cores.len()]);
            let on_start = on_start.clone();
            let thread = std::thread::Builder::new().name(format!("worker-{index}")).spawn(move || {
                if let Some(core) = core {
                    if !core_affinity::set_for_current(core) {
                        tracing::warn!(worker = index, "could not pin worker to its core");
                    }
                }
                on_start(index);
                let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(rt) => rt,
                    Err(e) => {
                        tracing::error!(worker = index, error = %e, "cannot start worker runtime");
                        return;
                    }
                };
                let _ = tx.send((index, rt.handle().clone()));
                drop(tx);
                rt.block_on(async move {
                    let _ = stop_rx.wait_for(|stopped| *stopped).await;
                });
            })?;
            threads.push(thread);
        }
        drop(tx);
        let mut workers: Vec<Worker> = rx.iter().take(n).map(|(index, handle)| Worker { index, handle }).collect();
        if workers.len() != n {
            return Err(std::io::Error::other("a worker failed to start"));
        }
        workers.sort_by_key(|w| w.index);
        Ok(Workers { workers, threads, stop })
    }

    /// Stops every worker (dropping their remaining tasks) and waits for the threads.
    pub fn stop(self) {
        let _ = self.stop.send(true);
        for t in self.threads {
            let _ = t.join();
        }
    }
}
