//! Load: N concurrent keep-alive HTTP/1.1 clients in a thread of their own, each sending requests
//! one after another until its budget is spent, a stop flag is raised or a time limit passes.

use crate::client::{exchange, open};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Longest time a load runs, whatever its budget.
const LOAD_TIME_LIMIT: Duration = Duration::from_secs(60);
/// Transport errors kept verbatim in a report.
const ERRORS_KEPT: usize = 20;

/// What a load saw.
#[derive(Clone, Debug, Default)]
pub struct LoadReport {
    /// Responses with a 2xx status.
    pub ok: u64,
    /// Requests that got no response at all (connect, reset, timeout).
    pub failed: u64,
    /// Responses by status.
    pub statuses: BTreeMap<u16, u64>,
    /// Responses by their `x-backend` header (`-` when absent).
    pub by_backend: BTreeMap<String, u64>,
    /// The first transport errors, verbatim.
    pub errors: Vec<String>,
}

impl LoadReport {
    /// Total responses received.
    pub fn responses(&self) -> u64 {
        self.statuses.values().sum()
    }

    fn merge(&mut self, other: LoadReport) {
        self.ok += other.ok;
        self.failed += other.failed;
        for (k, v) in other.statuses {
            *self.statuses.entry(k).or_default() += v;
        }
        for (k, v) in other.by_backend {
            *self.by_backend.entry(k).or_default() += v;
        }
        for e in other.errors {
            if self.errors.len() < ERRORS_KEPT {
                self.errors.push(e);
            }
        }
    }
}

/// A running load.
#[derive(Debug)]
pub struct Load {
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
    thread: Option<JoinHandle<LoadReport>>,
}

#[derive(Clone, Debug)]
struct Spec {
    addr: SocketAddr,
    host: String,
    path: String,
    headers: Vec<(String, String)>,
    per_client: u64,
}

impl Load {
    /// Starts `clients` keep-alive clients sending `GET path` with `Host: host` to `addr`, each at
    /// most `per_client` requests. A client whose connection fails reconnects; every failed attempt
    /// counts against its budget, so a dead target cannot make it spin.
    pub fn start(addr: SocketAddr, host: &str, path: &str, clients: usize, per_client: u64) -> Load {
        Self::start_with_headers(addr, host, path, &[], clients, per_client)
    }

    /// As [`Load::start`], with extra request headers.
    pub fn start_with_headers(
        addr: SocketAddr,
        host: &str,
        path: &str,
        headers: &[(&str, &str)],
        clients: usize,
        per_client: u64,
    ) -> Load {
        let spec = Spec {
            addr,
            host: host.to_string(),
            path: path.to_string(),
            headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            per_client,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicU64::new(0));
        let (stop2, done2) = (stop.clone(), done.clone());
        let thread = std::thread::Builder::new()
            .name("load".into())
            .spawn(move || {
                let rt =
                    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("build the load runtime");
                rt.block_on(run(spec, clients, stop2, done2))
            })
            .expect("spawn the load thread");
        Load { stop, done, thread: Some(thread) }
    }

    /// Requests finished so far (answered or failed).
    pub fn completed(&self) -> u64 {
        self.done.load(SeqCst)
    }

    /// Raises the stop flag and waits for the clients' report.
    pub fn stop(mut self) -> LoadReport {
        self.stop.store(true, SeqCst);
        self.join()
    }

    /// Waits until every client has spent its budget (or the time limit passed).
    pub fn wait(mut self) -> LoadReport {
        self.join()
    }

    fn join(&mut self) -> LoadReport {
        self.thread.take().map(|t| t.join().expect("the load thread panicked")).unwrap_or_default()
    }

    /// Runs a load to completion.
    pub fn run(addr: SocketAddr, host: &str, path: &str, clients: usize, per_client: u64) -> LoadReport {
        Load::start(addr, host, path, clients, per_client).wait()
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn run(spec: Spec, clients: usize, stop: Arc<AtomicBool>, done: Arc<AtomicU64>) -> LoadReport {
    let total = Arc::new(Mutex::new(LoadReport::default()));
    let deadline = Instant::now() + LOAD_TIME_LIMIT;
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let (spec, stop, done, total) = (spec.clone(), stop.clone(), done.clone(), total.clone());
            tokio::spawn(async move {
                let report = client(&spec, &stop, &done, deadline).await;
                if let Ok(mut t) = total.lock() {
                    t.merge(report);
                }
            })
        })
        .collect();
    for t in tasks {
        let _ = t.await;
    }
    let report = total.lock().map(|t| t.clone()).unwrap_or_default();
    report
}

async fn client(spec: &Spec, stop: &AtomicBool, done: &AtomicU64, deadline: Instant) -> LoadReport {
    let mut report = LoadReport::default();
    let headers: Vec<(&str, &str)> = spec.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut sender: Option<hyper::client::conn::http1::SendRequest<_>> = None;
    for _ in 0..spec.per_client {
        if stop.load(SeqCst) || Instant::now() >= deadline {
            break;
        }
        // A connection the server closed after its last response (Connection: close) is replaced
        // before the next request; that is not a failed request.
        if let Some(s) = &mut sender {
            let ready = tokio::time::timeout(crate::IO_TIMEOUT, s.ready()).await;
            if !matches!(ready, Ok(Ok(()))) {
                sender = None;
            }
        }
        let result = match &mut sender {
            Some(s) => exchange(s, "GET", &spec.host, &spec.path, &headers, b"").await,
            None => match open(spec.addr).await {
                Ok(mut s) => {
                    let r = exchange(&mut s, "GET", &spec.host, &spec.path, &headers, b"").await;
                    sender = Some(s);
                    r
                }
                Err(e) => Err(e),
            },
        };
        done.fetch_add(1, SeqCst);
        match result {
            Ok(resp) => {
                if (200..300).contains(&resp.status) {
                    report.ok += 1;
                }
                *report.statuses.entry(resp.status).or_default() += 1;
                let backend = resp.header("x-backend").unwrap_or("-").to_string();
                *report.by_backend.entry(backend).or_default() += 1;
            }
            Err(e) => {
                report.failed += 1;
                if report.errors.len() < ERRORS_KEPT {
                    report.errors.push(e);
                }
                sender = None;
            }
        }
    }
    report
}
