//! The real `gatehouse` binary as a child process: configuration in a temporary directory, listeners
//! and admin on port 0, lifecycle followed through the `--status-json` events on stdout. The process
//! is killed when the [`Gateway`] is dropped; if the test is failing, its stderr is printed.

use crate::client::http_get;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the gateway may take to become ready, reload or stop.
const LIFECYCLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Environment variable naming the binary, for [`Gateway::start`].
const BIN_ENV: &str = "GATEHOUSE_BIN";
/// How much of stderr is printed when a test fails.
const STDERR_TAIL: usize = 12_000;

/// A directory under the system temp dir, removed when dropped.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates a fresh, empty directory.
    pub fn new() -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let path = std::env::temp_dir().join(format!(
            "gatehouse-test-{}-{}-{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, SeqCst)
        ));
        std::fs::create_dir_all(&path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
        TempDir { path }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A path inside the directory.
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

impl Default for TempDir {
    fn default() -> Self {
        TempDir::new()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A running gateway process.
#[derive(Debug)]
pub struct Gateway {
    child: Child,
    pid: u32,
    dir: TempDir,
    config: PathBuf,
    events: Receiver<Value>,
    stderr: Arc<Mutex<String>>,
    stderr_thread: Option<JoinHandle<()>>,
    listeners: BTreeMap<String, SocketAddr>,
    admin: Option<SocketAddr>,
    generation: u64,
    exit: Option<ExitStatus>,
    /// Set once a binary upgrade handed over: `pid` is then a process started by the gateway, not
    /// `child`, and is killed by pid on drop.
    taken_over: bool,
}

fn parse_listeners(v: &Value) -> BTreeMap<String, SocketAddr> {
    v.as_object()
        .map(|m| m.iter().filter_map(|(k, a)| Some((k.clone(), a.as_str()?.parse().ok()?))).collect())
        .unwrap_or_default()
}

/// `yaml` with `/metrics` and `/status` answered without a token (`admin.public`), as the tests
/// read them, unless it says what is public itself; as it is when it is not YAML with an
/// `admin` map.
fn metrics_public(yaml: &str) -> String {
    let Ok(mut doc) = serde_yaml::from_str::<serde_yaml::Value>(yaml) else { return yaml.to_string() };
    let Some(admin) = doc.get_mut("admin").and_then(serde_yaml::Value::as_mapping_mut) else {
        return yaml.to_string();
    };
    if admin.contains_key("public") {
        return yaml.to_string();
    }
    admin.insert(
        "public".into(),
        serde_yaml::Value::Sequence(vec!["/healthz".into(), "/metrics".into(), "/status".into()]),
    );
    serde_yaml::to_string(&doc).unwrap_or_else(|_| yaml.to_string())
}

impl Gateway {
    /// Starts the binary named by `$GATEHOUSE_BIN` (or `gatehouse` next to the test executable's
    /// `deps` directory) with `yaml` as its configuration. See [`Gateway::start_with`].
    pub fn start(yaml: &str) -> Gateway {
        let bin = std::env::var_os(BIN_ENV).map(PathBuf::from).unwrap_or_else(|| {
            let exe = std::env::current_exe().expect("the test executable's path");
            let dir = exe.parent().and_then(Path::parent).expect("target directory");
            dir.join("gatehouse")
        });
        Gateway::start_with(&bin, yaml)
    }

    /// Starts `bin run --config FILE --status-json` with `yaml` written to FILE, and waits up to
    /// 30 s for its `ready` event. Panics (with the process's stderr) if it does not get ready.
    pub fn start_with(bin: impl AsRef<Path>, yaml: &str) -> Gateway {
        Gateway::start_with_env(bin, yaml, &[])
    }

    /// As [`Gateway::start_with`], with `env` added to the process's environment.
    pub fn start_with_env(bin: impl AsRef<Path>, yaml: &str, env: &[(&str, &str)]) -> Gateway {
        Gateway::start_under(&[], bin, yaml, env)
    }

    /// As [`Gateway::start_with_env`], run by `wrapper` (a program and its arguments, given the
    /// gateway's command line after them, such as `systemd-socket-activate -l ADDR`), which must
    /// exec the gateway in its own process.
    pub fn start_under(wrapper: &[&str], bin: impl AsRef<Path>, yaml: &str, env: &[(&str, &str)]) -> Gateway {
        let bin = bin.as_ref();
        let dir = TempDir::new();
        let config = dir.join("gatehouse.yaml");
        std::fs::write(&config, metrics_public(yaml)).expect("write the configuration");
        let mut command = match wrapper.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        let mut child = command
            .arg("run")
            .arg("--config")
            .arg(&config)
            .arg("--status-json")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
        let pid = child.id();

        let (tx, events) = channel();
        let stdout = child.stdout.take().expect("piped stdout");
        std::thread::Builder::new()
            .name(format!("gatehouse-{pid}-stdout"))
            .spawn(move || {
                // Lines that are not events (an access log on stdout) are skipped.
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    let Ok(v) = serde_json::from_str::<Value>(&line) else { continue };
                    if v.get("event").is_some() && tx.send(v).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn the stdout reader");
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err_pipe = child.stderr.take().expect("piped stderr");
        let sink = stderr.clone();
        let stderr_thread = std::thread::Builder::new()
            .name(format!("gatehouse-{pid}-stderr"))
            .spawn(move || {
                let mut chunk = [0u8; 8192];
                loop {
                    match err_pipe.read(&mut chunk) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if let Ok(mut s) = sink.lock() {
                                s.push_str(&String::from_utf8_lossy(&chunk[..n]));
                            }
                        }
                    }
                }
            })
            .expect("spawn the stderr reader");

        let mut gw = Gateway {
            child,
            pid,
            dir,
            config,
            events,
            stderr,
            stderr_thread: Some(stderr_thread),
            listeners: BTreeMap::new(),
            admin: None,
            generation: 0,
            exit: None,
            taken_over: false,
        };
        let ready = gw.next_event(LIFECYCLE_TIMEOUT);
        match ready {
            Some(ev) if ev["event"] == "ready" => {
                gw.listeners = parse_listeners(&ev["listeners"]);
                gw.admin = ev["admin"].as_str().and_then(|a| a.parse().ok());
                gw.generation = ev["generation"].as_u64().unwrap_or(1);
            }
            other => {
                let _ = gw.child.kill();
                let status = gw.child.wait().ok();
                let stderr = gw.join_stderr();
                panic!(
                    "gatehouse did not get ready (event: {other:?}, exit: {status:?})\n--- config ---\n{yaml}\n--- stderr ---\n{stderr}"
                );
            }
        }
        gw
    }

    /// The address of listener `name`.
    pub fn addr(&self, name: &str) -> SocketAddr {
        *self.listeners.get(name).unwrap_or_else(|| panic!("no listener `{name}` in {:?}", self.listeners))
    }

    /// Listeners by name, as of the last `ready` or `reloaded` event.
    pub fn listeners(&self) -> &BTreeMap<String, SocketAddr> {
        &self.listeners
    }

    /// The admin listener's address; panics if the configuration has none.
    pub fn admin(&self) -> SocketAddr {
        self.admin.expect("the configuration has no admin listener")
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// CPU time and memory of the process now; panics if `/proc` cannot tell (the process is gone).
    pub fn proc_stats(&self) -> crate::ProcStats {
        crate::ProcStats::of(self.pid).unwrap_or_else(|| panic!("no /proc stats for gatehouse {}", self.pid))
    }

    /// The generation of the configuration in force, as of the last event.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The temporary directory holding the configuration (free for other files of the test).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Replaces the configuration file (takes effect on [`Gateway::reload`]).
    pub fn write_config(&self, yaml: &str) {
        std::fs::write(&self.config, metrics_public(yaml)).expect("write the configuration");
    }

    /// Sends `signal` (`HUP`, `TERM`, ...) with `kill`.
    pub fn signal(&self, signal: &str) {
        let status =
            Command::new("kill").arg(format!("-{signal}")).arg(self.pid.to_string()).status().expect("run kill");
        assert!(status.success(), "kill -{signal} {} failed: {status}", self.pid);
    }

    /// The next lifecycle event, if one comes within `timeout`.
    pub fn next_event(&mut self, timeout: Duration) -> Option<Value> {
        self.events.recv_timeout(timeout).ok()
    }

    /// Waits for the event called `name`, skipping others; panics (with stderr) if it does not come.
    pub fn wait_event(&mut self, name: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_event(left) {
                Some(ev) if ev["event"] == name => return ev,
                Some(_) => continue,
                None => panic!(
                    "no `{name}` event within {timeout:?} ({})\n--- stderr ---\n{}",
                    self.state(),
                    self.stderr_tail()
                ),
            }
        }
    }

    /// Sends SIGHUP and returns the `reloaded` or `reload_failed` event that answers it.
    pub fn reload(&mut self) -> Value {
        let sent = Instant::now();
        self.signal("HUP");
        let deadline = Instant::now() + LIFECYCLE_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_event(left) {
                Some(ev) if ev["event"] == "reloaded" => {
                    self.listeners = parse_listeners(&ev["listeners"]);
                    self.generation = ev["generation"].as_u64().unwrap_or(self.generation);
                    return ev;
                }
                Some(ev) if ev["event"] == "reload_failed" => return ev,
                Some(_) => continue,
                None => panic!(
                    "no reload event {:?} after SIGHUP ({})\n--- stderr ---\n{}",
                    sent.elapsed(),
                    self.state(),
                    self.stderr_tail()
                ),
            }
        }
    }

    /// Sends SIGUSR2 (binary upgrade) and returns the `upgraded` or `upgrade_failed` event that
    /// answers it. After `upgraded`, waits for the old process to drain and exit (panics if it does
    /// not in time), then follows the new one: [`Gateway::pid`], [`Gateway::signal`], the listeners
    /// and [`Gateway::terminate`] are the new process's, which is killed when the `Gateway` drops.
    pub fn upgrade(&mut self) -> Value {
        let old = self.pid;
        self.signal("USR2");
        let deadline = Instant::now() + LIFECYCLE_TIMEOUT;
        let mut ready = None;
        let upgraded = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_event(left) {
                // The new process says it is ready before the old one hears it.
                Some(ev) if ev["event"] == "ready" => ready = Some(ev),
                Some(ev) if ev["event"] == "upgrade_failed" => return ev,
                Some(ev) if ev["event"] == "upgraded" => break ev,
                Some(_) => continue,
                None => {
                    panic!("no upgrade event after SIGUSR2 ({})\n--- stderr ---\n{}", self.state(), self.stderr_tail())
                }
            }
        };
        let ready = ready.unwrap_or_else(|| panic!("`upgraded` came without the new process's `ready`: {upgraded}"));
        assert_eq!(ready["pid"], upgraded["pid"], "ready: {ready}, upgraded: {upgraded}");
        self.wait_event("stopped", LIFECYCLE_TIMEOUT);
        let gone = crate::wait_until(LIFECYCLE_TIMEOUT, || self.exited(old).then_some(()));
        assert!(gone.is_some(), "the old process {old} did not exit after draining");
        self.pid = ready["pid"].as_u64().and_then(|p| u32::try_from(p).ok()).expect("the new process's pid");
        self.listeners = parse_listeners(&ready["listeners"]);
        self.admin = ready["admin"].as_str().and_then(|a| a.parse().ok());
        self.generation = ready["generation"].as_u64().unwrap_or(1);
        self.taken_over = true;
        upgraded
    }

    /// Whether process `pid` (this gateway's child, or a process it started) has exited.
    fn exited(&mut self, pid: u32) -> bool {
        if pid == self.child.id() {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.exit = Some(status);
            }
            return self.exit.is_some();
        }
        // Not our child: gone, or a zombie waiting for whoever inherited it.
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')),
            Err(_) => true,
        }
    }

    /// Waits for the process to exit, at most `timeout`; `None` if it is still running. After an
    /// upgrade the new process is not this one's child and its exit status is unknown here: it
    /// reads as success once the process is gone.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        if self.taken_over {
            use std::os::unix::process::ExitStatusExt;
            let pid = self.pid;
            crate::wait_until(timeout, || self.exited(pid).then_some(()))?;
            return Some(ExitStatus::from_raw(0));
        }
        if let Some(s) = self.exit {
            return Some(s);
        }
        let child = &mut self.child;
        let status = crate::wait_until(timeout, || child.try_wait().ok().flatten());
        self.exit = status;
        status
    }

    /// Every event still queued or emitted until stdout closes (call after the process exited).
    pub fn remaining_events(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(ev) = self.next_event(Duration::from_secs(5)) {
            out.push(ev);
        }
        out
    }

    /// Sends SIGTERM, waits for the process to exit and returns its status and the events it
    /// emitted from then on (`draining`, `stopped`).
    pub fn terminate(&mut self) -> (ExitStatus, Vec<Value>) {
        self.signal("TERM");
        let Some(status) = self.wait_exit(LIFECYCLE_TIMEOUT) else {
            panic!("gatehouse did not exit within {LIFECYCLE_TIMEOUT:?} of SIGTERM\n{}", self.stderr_tail());
        };
        (status, self.remaining_events())
    }

    /// The admin `/metrics` text.
    pub fn metrics(&self) -> String {
        let resp = http_get(self.admin(), "127.0.0.1", "/metrics", &[]);
        assert_eq!(resp.status, 200, "GET /metrics");
        resp.text()
    }

    /// Polls `/metrics` until `pred` holds, at most `timeout`; returns the text that satisfied it, or
    /// panics with the last text seen.
    pub fn wait_metric(&self, timeout: Duration, mut pred: impl FnMut(&str) -> bool) -> String {
        let mut last = String::new();
        let found = crate::wait_until(timeout, || {
            last = self.metrics();
            pred(&last).then(|| last.clone())
        });
        found.unwrap_or_else(|| panic!("metrics condition not met within {timeout:?}; last /metrics:\n{last}"))
    }

    /// Whether the process still runs, or how it ended, for failure messages.
    fn state(&mut self) -> String {
        // A process that just died closes its pipes a moment before it can be reaped.
        let child = &mut self.child;
        let exited =
            self.exit.or_else(|| crate::wait_until(Duration::from_secs(2), || child.try_wait().ok().flatten()));
        match exited {
            Some(status) => {
                self.exit = Some(status);
                format!("the process has exited: {status}")
            }
            None => "the process is still running".to_string(),
        }
    }

    /// What the process wrote to stderr so far (its log).
    pub fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn stderr_tail(&self) -> String {
        let s = self.stderr();
        let start = s.len().saturating_sub(STDERR_TAIL);
        let start = (start..s.len()).find(|&i| s.is_char_boundary(i)).unwrap_or(s.len());
        s[start..].to_string()
    }

    fn join_stderr(&mut self) -> String {
        if let Some(t) = self.stderr_thread.take() {
            let _ = t.join();
        }
        self.stderr_tail()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if self.exit.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if self.taken_over {
            let _ = Command::new("kill").arg("-KILL").arg(self.pid.to_string()).stderr(Stdio::null()).status();
        }
        let stderr = self.join_stderr();
        if std::thread::panicking() {
            let config = std::fs::read_to_string(&self.config).unwrap_or_default();
            eprintln!(
                "--- gatehouse {} config ---\n{config}\n--- gatehouse {} stderr ---\n{stderr}",
                self.pid, self.pid
            );
        }
    }
}

/// The value of one Prometheus series, e.g.
/// `metric_value(text, r#"gatehouse_requests_total{route="main:/",status="2xx"}"#)`.
pub fn metric_value(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}
