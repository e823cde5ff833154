//! Shared pieces: starting this crate's binary, and configuration snippets.

use gatehouse_testkit::{wait_until, Backend, Gateway, Load, LoadReport, RedisServer, TempDir};
use std::time::Duration;

/// The host name the test sites answer to.
pub const HOST: &str = "app.test";

/// Generous bound for conditions that normally hold within milliseconds.
pub const SETTLE: Duration = Duration::from_secs(5);

/// How long a node may take to apply (or refuse) a revision: a compile at the lowest CPU priority
/// on a machine whose cores are busy with other tests. A node that follows returns as soon as its
/// event comes; only one that does not waits this long.
pub const APPLY_WAIT: Duration = Duration::from_secs(30);

/// Starts the gateway binary built for this test run.
/// The directory of the browser tests (`tests/console`: Playwright's scripts and its
/// `node_modules`), when Debian's Chromium and `npm ci` there make them runnable; `None` skips
/// `test` and says so, unless `CI` is set.
pub fn browser_tests(test: &str) -> Option<std::path::PathBuf> {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/console");
    if here.join("node_modules/playwright-core").exists() && std::path::Path::new("/usr/bin/chromium").exists() {
        return Some(here);
    }
    assert!(std::env::var_os("CI").is_none(), "{test} needs chromium and `npm ci` in tests/console");
    eprintln!("{test}: skipped; install chromium and run `npm ci --prefix {}`", here.display());
    None
}

pub fn start(yaml: &str) -> Gateway {
    Gateway::start_with(env!("CARGO_BIN_EXE_gatehouse"), yaml)
}

/// A real peer in a process of its own (a grpcio server, a `ws` backend) that serves on a free
/// port and prints it as its first line; stopped when dropped.
pub struct PeerProcess {
    child: std::process::Child,
    _stdin: std::process::ChildStdin,
    pub port: u16,
}

impl PeerProcess {
    /// Runs `cmd` with its stdin held open and reads the port it prints; `what` names it in
    /// failures.
    pub fn spawn(cmd: &mut std::process::Command, what: &str) -> PeerProcess {
        use std::io::BufRead;
        use std::process::Stdio;
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("start {what}: {e}"));
        let stdin = child.stdin.take().expect("stdin");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("read the port");
        let port = line.trim().parse().unwrap_or_else(|_| panic!("{what} printed {line:?}, not its port"));
        PeerProcess { child, _stdin: stdin, port }
    }
}

impl Drop for PeerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The lines of a JSON access log, once there are at least `n`.
pub fn access_log_lines(log: &std::path::Path, n: usize) -> Vec<serde_json::Value> {
    wait_until(SETTLE, || {
        let lines: Vec<serde_json::Value> = std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        (lines.len() >= n).then_some(lines)
    })
    .unwrap_or_else(|| panic!("fewer than {n} access log lines: {:?}", std::fs::read_to_string(log)))
}

/// Global settings and one listener `http` on port 0, plus an admin listener on port 0; `listener`
/// is extra settings for the listener (flow-map entries such as `keepalive_timeout: 300ms`).
pub fn head(listener: &str) -> String {
    let sep = if listener.is_empty() { "" } else { ", " };
    format!(
        "workers: 2\nshutdown_grace: 10s\nadmin: {{bind: \"127.0.0.1:0\"}}\nlisteners:\n  http: {{bind: \"127.0.0.1:0\"{sep}{listener}}}\n"
    )
}

/// A flow list of target addresses: `["127.0.0.1:1", "127.0.0.1:2"]`.
pub fn targets(backends: &[&Backend]) -> String {
    let list: Vec<String> = backends.iter().map(|b| format!("\"{}\"", b.addr())).collect();
    format!("[{}]", list.join(", "))
}

/// A flow list of weighted targets.
pub fn weighted(backends: &[(&Backend, u32)]) -> String {
    let list: Vec<String> =
        backends.iter().map(|(b, w)| format!("{{address: \"{}\", weight: {w}}}", b.addr())).collect();
    format!("[{}]", list.join(", "))
}

/// A whole configuration: upstream `u` with the flow-map body `upstream` (e.g.
/// `targets: [...], balance: random`), served for [`HOST`] on `/` by site `main`.
pub fn simple(upstream: &str) -> String {
    format!(
        "{}upstreams:\n  u: {{{upstream}}}\nsites:\n  main:\n    hosts: [\"{HOST}\"]\n    routes: [{{path: /, upstream: u}}]\n",
        head("")
    )
}

/// Counts how many of `backends` received requests, by name.
pub fn counts(backends: &[&Backend]) -> Vec<usize> {
    backends.iter().map(|b| b.request_count()).collect()
}

/// Waits until the control loop runs, by asking the admin listener (served on the control thread,
/// which first yields once its signal handlers are installed) for its status. The product emits
/// `ready` before installing them, so a SIGHUP or SIGTERM sent at once can kill the process: a bug
/// covered by `reload::signals_right_after_ready_are_handled`. Tests about other things call this
/// before their first signal so that they test their own subject.
pub fn settled(gw: &Gateway) {
    let status = gatehouse_testkit::http_get(gw.admin(), "127.0.0.1", "/status", &[]);
    assert_eq!(status.status, 200, "admin /status: {status:?}");
}

/// What the nodes of a test cluster share: a real Redis, a directory with the cluster secret, and
/// a backend.
pub struct Cluster {
    /// The cluster's Redis.
    pub redis: RedisServer,
    /// Holds `secret`, and whatever else a test writes.
    pub dir: TempDir,
    /// The backend every node proxies to.
    pub backend: Backend,
}

impl Cluster {
    /// A fresh Redis, secret and backend.
    pub fn new() -> Cluster {
        let dir = TempDir::new();
        std::fs::write(dir.join("secret"), "0123456789abcdef0123456789abcdef-cluster-test\n").expect("write secret");
        Cluster { redis: RedisServer::start(), dir, backend: Backend::start("b") }
    }

    /// A node's settings up to its services: two workers, admin and `http` listeners on port 0,
    /// the cluster's Redis, and upstream `u` holding the backend.
    pub fn node_head(&self) -> String {
        format!(
            "workers: 2\nadmin: {{ bind: \"127.0.0.1:0\" }}\n{}listeners:\n  http: {{ bind: \"127.0.0.1:0\" }}\nupstreams:\n  u: {{ targets: {} }}\n",
            self.redis_section(),
            targets(&[&self.backend])
        )
    }

    /// The `redis:` section of a node's configuration, as one line.
    pub fn redis_section(&self) -> String {
        format!(
            "redis: {{url: \"{}\", secret_file: \"{}\", command_timeout: 300ms}}\n",
            self.redis.url(),
            self.dir.join("secret").display()
        )
    }
}

/// Traffic for tests of changes under load: keep-alive clients, and clients that open a new
/// connection for every request so that connections are accepted throughout.
pub struct Traffic {
    steady: Load,
    churn: Load,
}

impl Traffic {
    /// Starts 8 keep-alive clients and 4 reconnecting ones on `GET /` for [`HOST`], and waits
    /// until both have made progress.
    pub fn start(addr: std::net::SocketAddr) -> Traffic {
        Traffic::start_at(addr, HOST, "/")
    }

    /// As [`Traffic::start`], on `GET path` for `host`.
    pub fn start_at(addr: std::net::SocketAddr, host: &str, path: &str) -> Traffic {
        let t = Traffic {
            steady: Load::start(addr, host, path, 8, 1_000_000),
            churn: Load::start_with_headers(addr, host, path, &[("connection", "close")], 4, 1_000_000),
        };
        t.progress("starting");
        t
    }

    /// Waits until both kinds of client have completed more requests (50 and 10); panics naming
    /// `after` if they stall.
    pub fn progress(&self, after: &str) {
        let (seen, seen_churn) = (self.steady.completed(), self.churn.completed());
        wait_until(SETTLE, || {
            (self.steady.completed() >= seen + 50 && self.churn.completed() >= seen_churn + 10).then_some(())
        })
        .unwrap_or_else(|| panic!("the load stalled after {after}"));
    }

    /// Stops the clients and asserts that every request got a 200; returns the two reports.
    pub fn finish(self, during: &str) -> (LoadReport, LoadReport) {
        let churn = self.churn.stop();
        let steady = self.steady.stop();
        for (what, r) in [("requests", &steady), ("new connections", &churn)] {
            assert_eq!(r.failed, 0, "{what} failed during {during}: {r:?}");
            assert_eq!(r.statuses.keys().collect::<Vec<_>>(), [&200], "only 200s expected during {during}: {r:?}");
        }
        (steady, churn)
    }
}

/// Runs `gatehouse check` on `yaml`: whether it passed, and what it printed on stderr.
pub fn check(yaml: &str) -> (bool, String) {
    let dir = TempDir::new();
    let file = dir.join("gatehouse.yaml");
    std::fs::write(&file, yaml).expect("write the configuration");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .arg("check")
        .arg(&file)
        .output()
        .expect("run gatehouse check");
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Whether `python3` can import `module`; without it (and without `CI`) test `test` is skipped
/// and says so.
pub fn python_has(module: &str, test: &str) -> bool {
    let found = std::process::Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(std::env::var_os("CI").is_none(), "python3 with {module} is needed but CI is set");
        eprintln!("{test}: skipped, python3 cannot import {module}");
    }
    found
}
