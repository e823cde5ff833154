//! A real HAProxy on free loopback ports, started from a configuration a test writes (a TLS
//! backend that verifies client certificates, a `mode tcp` balancer sending PROXY protocol),
//! killed on drop.

use crate::TempDir;
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One HAProxy process.
#[derive(Debug)]
pub struct Haproxy {
    child: Option<Child>,
    _dir: TempDir,
    ports: Vec<u16>,
}

impl Haproxy {
    /// Starts HAProxy with `sections` after its `global` and `defaults` (timeouts set), where
    /// `{port0}`, `{port1}`, ... stand for free ports; waits until every port accepts.
    pub fn start(sections: &str) -> Haproxy {
        let mut last = String::new();
        for _ in 0..3 {
            match Haproxy::spawn(sections) {
                Ok(h) => return h,
                Err(e) => last = e,
            }
        }
        panic!("{last}");
    }

    fn spawn(sections: &str) -> Result<Haproxy, String> {
        let dir = TempDir::new();
        let mut body = sections.to_string();
        let mut ports = Vec::new();
        while body.contains(&format!("{{port{}}}", ports.len())) {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .map_err(|e| format!("pick a free port: {e}"))?;
            body = body.replace(&format!("{{port{}}}", ports.len()), &port.to_string());
            ports.push(port);
        }
        let conf = format!(
            "global\n  nbthread 1\n\ndefaults\n  timeout connect 5s\n  timeout client 30s\n  timeout server 30s\n\n{body}\n"
        );
        let path = dir.join("haproxy.cfg");
        std::fs::write(&path, conf).map_err(|e| format!("write haproxy.cfg: {e}"))?;
        let child = Command::new("haproxy")
            .arg("-db")
            .arg("-f")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run haproxy (is it installed?): {e}"))?;
        let mut h = Haproxy { child: Some(child), _dir: dir, ports };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(Ok(Some(status))) = h.child.as_mut().map(Child::try_wait) {
                let mut err = String::new();
                if let Some(mut e) = h.child.take().and_then(|mut c| c.stderr.take()) {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                return Err(format!("haproxy exited at start ({status}): {err}"));
            }
            if h.ports.iter().all(|p| TcpStream::connect(("127.0.0.1", *p)).is_ok()) {
                return Ok(h);
            }
            if Instant::now() >= deadline {
                return Err("haproxy not ready in 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The `i`th port.
    pub fn port(&self, i: usize) -> u16 {
        self.ports[i]
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
