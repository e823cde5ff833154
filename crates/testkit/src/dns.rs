//! A real DNS server (dnsmasq) on a free loopback port, answering from a hosts file the test
//! rewrites ([`DnsServer::set`]) and from SRV records given at start; killed on drop. Answers carry
//! a TTL of one second.

use crate::TempDir;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One dnsmasq process.
#[derive(Debug)]
pub struct DnsServer {
    child: Option<Child>,
    dir: TempDir,
    addr: SocketAddr,
}

fn hosts_text(hosts: &[(&str, IpAddr)]) -> String {
    hosts.iter().map(|(name, ip)| format!("{ip} {name}\n")).collect()
}

impl DnsServer {
    /// Starts dnsmasq answering `hosts` (name, address; a name may appear several times) and the
    /// SRV records `srv` (`_http._tcp.api.test,a.api.test,8080,0,5`: name, target, port,
    /// priority, weight), and nothing else (no upstream servers, no `/etc/hosts`).
    pub fn start(hosts: &[(&str, IpAddr)], srv: &[&str]) -> DnsServer {
        let mut last = String::new();
        // The port is free when picked, but another test may bind it (for TCP, or for QUIC)
        // before dnsmasq does: then another.
        for _ in 0..10 {
            match DnsServer::spawn(hosts, srv) {
                Ok(d) => return d,
                Err(e) => last = e,
            }
        }
        panic!("{last}");
    }

    fn spawn(hosts: &[(&str, IpAddr)], srv: &[&str]) -> Result<DnsServer, String> {
        let dir = TempDir::new();
        // A port free for both UDP and TCP.
        let udp = UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        let addr = udp.local_addr().map_err(|e| e.to_string())?;
        let tcp_free = TcpListener::bind(addr).is_ok();
        drop(udp);
        if !tcp_free {
            return Err(format!("port {} is taken for TCP", addr.port()));
        }
        std::fs::write(dir.join("hosts"), hosts_text(hosts)).map_err(|e| e.to_string())?;
        let mut cmd = Command::new(dnsmasq_binary());
        cmd.arg("--keep-in-foreground")
            .arg("--conf-file=/dev/null")
            .arg("--no-resolv")
            .arg("--no-hosts")
            .arg("--bind-interfaces")
            .arg("--listen-address=127.0.0.1")
            .arg(format!("--port={}", addr.port()))
            .arg(format!("--addn-hosts={}", dir.join("hosts").display()))
            .arg("--local-ttl=1")
            .arg("--neg-ttl=1")
            .arg(format!("--pid-file={}", dir.join("dnsmasq.pid").display()))
            .arg(format!("--log-facility={}", dir.join("dnsmasq.log").display()));
        if crate::is_root() {
            cmd.arg("--user=root");
        }
        for r in srv {
            cmd.arg(format!("--srv-host={r}"));
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run dnsmasq (is it installed?): {e}"))?;
        let mut d = DnsServer { child: Some(child), dir, addr };
        let probe = hosts.first().map_or("probe.invalid", |(n, _)| n);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(Ok(Some(status))) = d.child.as_mut().map(Child::try_wait) {
                let mut err = String::new();
                if let Some(mut e) = d.child.take().and_then(|mut c| c.stderr.take()) {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                return Err(format!("dnsmasq exited at start ({status}): {err}"));
            }
            if d.query(probe).is_some() {
                return Ok(d);
            }
            if Instant::now() >= deadline {
                return Err("dnsmasq not answering in 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Its address (`127.0.0.1:port`), for `resolver.nameservers`.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Replaces the hosts the server answers, and waits until it answers `hosts[0]`'s name with
    /// the new addresses.
    pub fn set(&self, hosts: &[(&str, IpAddr)]) {
        let tmp = self.dir.join("hosts.tmp");
        std::fs::write(&tmp, hosts_text(hosts)).expect("write hosts");
        std::fs::rename(&tmp, self.dir.join("hosts")).expect("replace hosts");
        let pid = self.child.as_ref().map(Child::id).expect("dnsmasq runs");
        let _ = Command::new("kill").arg("-HUP").arg(pid.to_string()).status();
        let Some((name, _)) = hosts.first() else { return };
        let mut want: Vec<IpAddr> = hosts.iter().filter(|(n, _)| n == name).map(|(_, ip)| *ip).collect();
        want.sort();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            let mut got: Vec<IpAddr> = self.query(name).unwrap_or_default().into_iter().map(IpAddr::V4).collect();
            got.sort();
            if got == want {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("dnsmasq does not answer {name} with {want:?}");
    }

    /// Stops the server: lookups then time out.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Asks for `name`'s A records over UDP: the addresses, or `None` when no answer came.
    pub fn query(&self, name: &str) -> Option<Vec<Ipv4Addr>> {
        let sock = UdpSocket::bind("127.0.0.1:0").ok()?;
        sock.set_read_timeout(Some(Duration::from_millis(200))).ok()?;
        let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for label in name.split('.') {
            q.push(label.len() as u8);
            q.extend_from_slice(label.as_bytes());
        }
        q.extend_from_slice(&[0, 0, 1, 0, 1]);
        sock.send_to(&q, self.addr).ok()?;
        let mut buf = [0u8; 512];
        let n = sock.recv(&mut buf).ok()?;
        parse_a_records(&buf[..n], q.len())
    }
}

/// The A records of a response to a one-question query whose question is `question_len` bytes
/// long (header included); names in answers are compression pointers, as dnsmasq writes them.
fn parse_a_records(msg: &[u8], question_len: usize) -> Option<Vec<Ipv4Addr>> {
    let answers = u16::from_be_bytes([*msg.get(6)?, *msg.get(7)?]);
    let mut at = question_len;
    let mut out = Vec::new();
    for _ in 0..answers {
        at += 2; // name (pointer)
        let kind = u16::from_be_bytes([*msg.get(at)?, *msg.get(at + 1)?]);
        let len = usize::from(u16::from_be_bytes([*msg.get(at + 8)?, *msg.get(at + 9)?]));
        at += 10;
        if kind == 1 && len == 4 {
            out.push(Ipv4Addr::new(*msg.get(at)?, msg[at + 1], msg[at + 2], msg[at + 3]));
        }
        at += len;
    }
    Some(out)
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn dnsmasq_binary() -> &'static str {
    if std::path::Path::new("/usr/sbin/dnsmasq").exists() {
        "/usr/sbin/dnsmasq"
    } else {
        "dnsmasq"
    }
}
