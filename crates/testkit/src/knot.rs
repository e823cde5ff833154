//! A real authoritative DNS server taking RFC 2136 updates: Knot DNS (`knotd`, Debian's `knot`)
//! on a free loopback port, serving one zone in which every name has an A record 127.0.0.1 and
//! which takes updates signed with one TSIG key (hmac-sha256); killed on drop.

use crate::free_port;
use crate::gateway::TempDir;
use crate::wait::wait_until;
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running `knotd`.
pub struct Knot {
    child: Child,
    dir: TempDir,
    addr: SocketAddr,
    zone: String,
}

/// The TSIG key's name.
pub const KNOT_KEY_NAME: &str = "gatehouse";

impl Knot {
    /// Starts `knotd` serving `zone`.
    pub fn start(zone: &str) -> Knot {
        let dir = TempDir::new();
        let port = free_port();
        let secret = data_encoding::BASE64.encode(b"gatehouse-test-tsig-secret-32byt");
        std::fs::write(
            dir.join("tsig.key"),
            format!("key \"{KNOT_KEY_NAME}\" {{\n\talgorithm hmac-sha256;\n\tsecret \"{secret}\";\n}};\n"),
        )
        .expect("write tsig.key");
        let zone_file = format!(
            "$ORIGIN {zone}.\n$TTL 60\n@ SOA ns.{zone}. admin.{zone}. 1 3600 900 604800 60\n@ NS ns.{zone}.\n@ A 127.0.0.1\nns A 127.0.0.1\n* A 127.0.0.1\n"
        );
        std::fs::write(dir.join(&format!("{zone}.zone")), zone_file).expect("write the zone");
        let d = dir.path().display();
        let conf = format!(
            "server:\n    rundir: \"{d}\"\n    listen: 127.0.0.1@{port}\n\
             database:\n    storage: \"{d}\"\n\
             log:\n  - target: stderr\n    any: info\n\
             key:\n  - id: {KNOT_KEY_NAME}\n    algorithm: hmac-sha256\n    secret: {secret}\n\
             acl:\n  - id: update\n    key: {KNOT_KEY_NAME}\n    action: update\n\
             template:\n  - id: default\n    storage: \"{d}\"\n    file: \"%s.zone\"\n    zonefile-sync: -1\n    journal-content: none\n\
             zone:\n  - domain: {zone}\n    acl: update\n"
        );
        std::fs::write(dir.join("knot.conf"), conf).expect("write knot.conf");
        let log = std::fs::File::create(dir.join("knot.log")).expect("knot.log");
        let child = Command::new("knotd")
            .arg("-c")
            .arg(dir.join("knot.conf"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start knotd (apt-get install knot)");
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let knot = Knot { child, dir, addr, zone: zone.to_string() };
        let up = wait_until(Duration::from_secs(20), || knot.soa_answers().then_some(()));
        assert!(up.is_some(), "knotd did not answer on {addr}\n{}", knot.log());
        knot
    }

    /// Whether the server answers the zone's SOA (a raw DNS query over UDP).
    fn soa_answers(&self) -> bool {
        let Ok(sock) = UdpSocket::bind("127.0.0.1:0") else { return false };
        let _ = sock.set_read_timeout(Some(Duration::from_millis(200)));
        let mut query = vec![0x12, 0x34, 0x00, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0, 0];
        for label in self.zone.split('.') {
            query.push(label.len() as u8);
            query.extend_from_slice(label.as_bytes());
        }
        query.extend_from_slice(&[0, 0x00, 0x06, 0x00, 0x01]);
        if sock.send_to(&query, self.addr).is_err() {
            return false;
        }
        let mut buf = [0u8; 512];
        // An answer with the query's id and at least one answer record.
        matches!(sock.recv(&mut buf), Ok(n) if n > 12 && buf[0..2] == [0x12, 0x34] && buf[7] > 0)
    }

    /// Its address (`-dnsserver` for Pebble, `dns01.rfc2136.server`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The TSIG key file, as BIND's `tsig-keygen` writes it.
    pub fn key_file(&self) -> PathBuf {
        self.dir.join("tsig.key")
    }

    /// The TXT values of `name`, as `kdig` reads them from this server.
    pub fn txt(&self, name: &str) -> Vec<String> {
        let out = Command::new("kdig")
            .arg(format!("@{}", self.addr.ip()))
            .args(["-p", &self.addr.port().to_string(), "+short", name, "TXT"])
            .output()
            .expect("run kdig (apt-get install knot-dnsutils)");
        String::from_utf8_lossy(&out.stdout).lines().map(|l| l.trim_matches('"').to_string()).collect()
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("knot.log")).unwrap_or_default()
    }
}

impl Drop for Knot {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
