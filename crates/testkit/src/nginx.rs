//! A real nginx on free loopback ports, as a backend a test configures (HTTPS, HTTP/2, client
//! certificates, PROXY protocol), killed on drop. Its access log is what the backend saw.

use crate::free_port;
use crate::TempDir;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One nginx master process (one worker).
#[derive(Debug)]
pub struct Nginx {
    child: Option<Child>,
    dir: TempDir,
    ports: Vec<u16>,
}

impl Nginx {
    /// Starts nginx with `servers` as the body of its `http` block, where `{port0}`, `{port1}`, ...
    /// stand for `ports` free ports and `{dir}` for its directory; waits until every port accepts.
    /// The log format `test` is defined for `access_log {dir}/access.log test;`: remote address,
    /// protocol, TLS protocol, session reuse (`r` or `.`), client certificate subject, `Host`,
    /// user agent, request line, connection serial number (`c=`), PROXY protocol client address
    /// (`pp=`), TLS cipher suite in OpenSSL's naming (`cipher=`).
    pub fn start(servers: &str, ports: usize) -> Nginx {
        let mut last = String::new();
        // A free port may be taken before nginx binds it: try other ones.
        for _ in 0..3 {
            match Nginx::spawn(servers, ports) {
                Ok(n) => return n,
                Err(e) => last = e,
            }
        }
        panic!("{last}");
    }

    fn spawn(servers: &str, ports: usize) -> Result<Nginx, String> {
        let dir = TempDir::new();
        let ports: Vec<u16> = (0..ports).map(|_| free_port()).collect();
        let mut body = servers.replace("{dir}", &dir.path().display().to_string());
        for (i, p) in ports.iter().enumerate() {
            body = body.replace(&format!("{{port{i}}}"), &p.to_string());
        }
        let d = dir.path().display();
        let user = if crate::is_root() { "user root;" } else { "" };
        let conf = format!(
            "{user}\ndaemon off;\nmaster_process on;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log info;\n\
             events {{ worker_connections 1024; }}\nhttp {{\n\
             client_body_temp_path {d}/client_body;\nproxy_temp_path {d}/proxy;\nfastcgi_temp_path {d}/fastcgi;\n\
             uwsgi_temp_path {d}/uwsgi;\nscgi_temp_path {d}/scgi;\n\
             log_format test '$remote_addr $server_protocol ${{ssl_protocol}}- ${{ssl_session_reused}}- [$ssl_client_s_dn] $http_host \"$http_user_agent\" \"$request\" c=$connection pp=$proxy_protocol_addr cipher=$ssl_cipher';\n\
             {body}\n}}\n"
        );
        std::fs::write(dir.join("nginx.conf"), conf).map_err(|e| format!("write nginx.conf: {e}"))?;
        let error_log = dir.join("error.log");
        let child = Command::new(nginx_binary())
            .arg("-p")
            .arg(dir.path())
            .arg("-e")
            .arg(&error_log)
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run nginx (is it installed?): {e}"))?;
        let mut n = Nginx { child: Some(child), dir, ports };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(Ok(Some(status))) = n.child.as_mut().map(Child::try_wait) {
                n.child = None;
                return Err(format!("nginx exited at start ({status}): {}", n.error_log()));
            }
            if n.ports.iter().all(|p| TcpStream::connect(("127.0.0.1", *p)).is_ok()) {
                return Ok(n);
            }
            if Instant::now() >= deadline {
                return Err(format!("nginx not ready in 10 s: {}", n.error_log()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The `i`th port.
    pub fn port(&self, i: usize) -> u16 {
        self.ports[i]
    }

    /// Its directory (configuration, logs).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A file in its directory.
    pub fn join(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The lines of `access.log` so far.
    pub fn access_log(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.join("access.log"))
            .map(|t| t.lines().map(str::to_string).collect())
            .unwrap_or_default()
    }

    /// The error log so far.
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SIGKILL to the master leaves its worker; SIGTERM stops both at once.
            let _ = Command::new("kill").arg("-TERM").arg(c.id().to_string()).status();
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn nginx_binary() -> &'static str {
    if Path::new("/usr/sbin/nginx").exists() {
        "/usr/sbin/nginx"
    } else {
        "nginx"
    }
}
