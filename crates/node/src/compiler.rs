//! Where configurations are compiled: a thread of its own at the lowest CPU priority (nice 19).
//! Compiling a revision of 10,000 routes and building its snapshot is tens of milliseconds of CPU;
//! on the control thread at normal priority it took that time from the traffic workers sharing the
//! core, and their p99 latency tripled while revisions were applied. At nice 19 the kernel runs it
//! in the workers' idle moments, and still within the second even when every core is busy
//! (measured in bench/control.sh). Files the node keeps (the copy of the revision it runs, written
//! and flushed to disk) are written by a second such thread, so that a slow disk never holds up
//! the next revision's compile.

use crate::error::NodeError;
use std::sync::mpsc;

type Job = Box<dyn FnOnce() + Send>;

/// A handle to the compile thread.
pub struct Compiler {
    jobs: mpsc::Sender<Job>,
}

impl Compiler {
    /// Starts the thread, named `name`.
    pub fn start(name: &str) -> Result<Compiler, NodeError> {
        let (jobs, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                // Linux keeps a nice value per thread: this one alone is lowered.
                if let Err(e) = rustix::process::setpriority_process(Some(rustix::thread::gettid()), 19) {
                    tracing::warn!(error = %e, "cannot lower a compile thread's priority");
                }
                while let Ok(job) = rx.recv() {
                    job();
                }
            })
            .map_err(|source| NodeError::Start { what: "start a compile thread", source })?;
        Ok(Compiler { jobs })
    }

    /// Runs `f` on the compile thread without waiting for it: freeing a replaced snapshot,
    /// writing a large file.
    pub fn spawn(&self, f: impl FnOnce() + Send + 'static) {
        if let Err(job) = self.jobs.send(Box::new(f)) {
            // The thread is gone (only at exit): do it here.
            (job.0)();
        }
    }

    /// Runs `f` on the compile thread and waits for its result without blocking the caller's
    /// runtime.
    pub async fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> Result<T, NodeError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.jobs
            .send(Box::new(move || {
                let _ = tx.send(f());
            }))
            .map_err(|_| NodeError::CompileThread { stopped: true })?;
        rx.await.map_err(|_| NodeError::CompileThread { stopped: false })
    }
}
