//! A `redis-server` child process on a free loopback port, killed on drop, and small waiting
//! helpers with deadlines (no fixed sleeps as synchronisation).

use gatehouse_redis::{ClientOptions, Deployment, Event, Subscription};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const REDIS_SERVER: &str = "/usr/bin/redis-server";

/// One `redis-server` process; restartable on the same port.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    args: Vec<String>,
}

impl RedisServer {
    /// A server with default settings.
    pub fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// A server with extra command-line arguments (e.g. `--requirepass x`).
    /// Another process may take the free port before the server binds it: then try another.
    pub fn start_with(args: &[&str]) -> RedisServer {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let mut last_error = String::new();
        for _ in 0..3 {
            let mut server = RedisServer { child: None, port: free_port(), args: args.clone() };
            match server.try_spawn() {
                Ok(()) => return server,
                Err(e) => last_error = e,
            }
        }
        panic!("{last_error}");
    }

    /// Starts a server on a port known to be free but unused so far (see [`free_port`]).
    pub fn start_on(port: u16) -> RedisServer {
        let mut server = RedisServer { child: None, port, args: Vec::new() };
        server.try_spawn().unwrap();
        server
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Options with short timeouts and backoff, so failure tests run fast.
    pub fn options(&self) -> ClientOptions {
        fast_options(self.addr())
    }

    /// SIGKILL, and wait for the process to be gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGSTOP: the server keeps its sockets but answers nothing, like a hung or unreachable host.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// SIGCONT after [`RedisServer::pause`].
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("server running").id().to_string();
        let status = Command::new("kill").args([signal, &pid]).status().expect("run kill");
        assert!(status.success(), "kill {signal} {pid} failed");
    }

    /// Kills the server if running and starts a new one on the same port with the same arguments.
    pub fn restart(&mut self) {
        self.kill();
        self.try_spawn().unwrap();
    }

    fn try_spawn(&mut self) -> Result<(), String> {
        let port = self.port.to_string();
        let dir = std::env::temp_dir();
        let child = Command::new(REDIS_SERVER)
            .args(["--port", &port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        self.wait_ready()
    }

    /// Polls until the server answers a PING (or asks for authentication), for at most 10 s.
    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    return Err(format!("redis-server on port {} exited at start: {status}", self.port));
                }
            }
            if answers_ping(self.port) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                self.kill();
                return Err(format!("redis-server on port {} not ready in time", self.port));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn answers_ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    if stream.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 64];
    match stream.read(&mut buf) {
        Ok(n) => buf[..n].starts_with(b"+PONG") || buf[..n].starts_with(b"-NOAUTH"),
        Err(_) => false,
    }
}

pub use gatehouse_testkit::free_port;

/// Options for `addr` with short timeouts and backoff.
pub fn fast_options(addr: String) -> ClientOptions {
    ClientOptions {
        deployment: Deployment::Standalone { addr },
        connect_timeout: Duration::from_millis(500),
        command_timeout: Duration::from_secs(1),
        reconnect_min: Duration::from_millis(20),
        reconnect_max: Duration::from_millis(200),
        ..ClientOptions::default()
    }
}

/// The next subscription event, failing the test after 5 s.
pub async fn next_event(sub: &mut Subscription) -> Event {
    tokio::time::timeout(Duration::from_secs(5), sub.next())
        .await
        .expect("no subscription event within 5 s")
        .expect("subscription ended")
}

/// Evaluates `check` every 10 ms until it is true, failing the test after `timeout`.
pub async fn eventually<F, Fut>(timeout: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
