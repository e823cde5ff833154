//! A real `redis-server` on a free loopback port, killed on drop; it can be stopped and started
//! again on the same port to test what the gateway does while Redis is away.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One `redis-server` process.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("pick a free port")
}

fn answers_ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 16];
    matches!(s.read(&mut buf), Ok(n) if n > 0 && buf[..n].starts_with(b"+PONG"))
}

impl RedisServer {
    /// Starts a server (no persistence) on a free port and waits until it answers.
    pub fn start() -> RedisServer {
        let mut last = String::new();
        // The free port may be taken by someone else before the server binds it: try another.
        for _ in 0..3 {
            let mut server = RedisServer { child: None, port: free_port() };
            match server.spawn() {
                Ok(()) => return server,
                Err(e) => last = e,
            }
        }
        panic!("{last}");
    }

    fn spawn(&mut self) -> Result<(), String> {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run redis-server (is it installed?): {e}"))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                self.child = None;
                return Err(format!("redis-server on port {} exited at start: {status}", self.port));
            }
            if answers_ping(self.port) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                self.stop();
                return Err(format!("redis-server on port {} not ready in 10 s", self.port));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills the server (its data is gone).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port.
    pub fn restart(&mut self) {
        self.stop();
        if let Err(e) = self.spawn() {
            panic!("{e}");
        }
    }

    /// Runs one command with `redis-cli` and returns its output.
    pub fn cli(&self, args: &[&str]) -> String {
        let out =
            Command::new("redis-cli").args(["-p", &self.port.to_string()]).args(args).output().expect("run redis-cli");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}
