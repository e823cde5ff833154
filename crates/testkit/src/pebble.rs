//! A real ACME CA for tests: Let's Encrypt's Pebble with pebble-challtestsrv as its DNS server
//! (every name resolves to 127.0.0.1), on free loopback ports, killed on drop. Both come from
//! `go install github.com/letsencrypt/pebble/v2/cmd/{pebble,pebble-challtestsrv}@v2.10.3`; the
//! module's `test/` directory gives Pebble's own TLS certificate and the CA that signed it.

use crate::free_port;
use crate::gateway::TempDir;
use crate::wait::wait_until;
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The Pebble release the tests are written against.
pub const PEBBLE_VERSION: &str = "v2.10.3";

/// How long Pebble may take to listen.
const READY: Duration = Duration::from_secs(20);

/// Where `go install` put a program: `$GOBIN`, `$GOPATH/bin`, `~/go/bin`, else `PATH`.
fn go_program(name: &str) -> PathBuf {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(d) = std::env::var_os("GOBIN") {
        dirs.push(d.into());
    }
    if let Some(d) = std::env::var_os("GOPATH") {
        dirs.push(PathBuf::from(d).join("bin"));
    }
    if let Some(h) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(h).join("go/bin"));
    }
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.exists()).unwrap_or_else(|| PathBuf::from(name))
}

/// The Pebble module's `test/` directory in the Go module cache.
fn module_test_dir() -> PathBuf {
    let cache = Command::new("go")
        .args(["env", "GOMODCACHE"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join("go/pkg/mod")))
        .expect("the Go module cache");
    let dir = cache.join(format!("github.com/letsencrypt/pebble/v2@{PEBBLE_VERSION}/test"));
    assert!(
        dir.exists(),
        "{} missing: go install github.com/letsencrypt/pebble/v2/cmd/pebble@{PEBBLE_VERSION}",
        dir.display()
    );
    dir
}

/// What a Pebble is started with.
#[derive(Debug, Clone)]
pub struct PebbleOptions {
    /// The port its validator connects to for HTTP-01.
    pub http_port: u16,
    /// The port its validator connects to for TLS-ALPN-01.
    pub tls_port: u16,
    /// The DNS server Pebble resolves names with; `None`: a pebble-challtestsrv of its own (every
    /// name 127.0.0.1).
    pub dns: Option<std::net::SocketAddr>,
    /// External account bindings required, with these key ids and MAC keys (base64url).
    pub eab: Vec<(String, String)>,
    /// Share of nonces refused with `badNonce` (Pebble's default is 5).
    pub nonce_reject_percent: u8,
    /// Validity of the certificates of its `default` profile, seconds (90 days).
    pub validity: u64,
    /// Validity of the certificates of its `shortlived` profile, seconds (6 days). An order that
    /// names no profile gets one of the two at random, as Pebble chooses.
    pub short_validity: u64,
}

impl PebbleOptions {
    /// Validation at `http_port` and `tls_port`, Pebble's defaults otherwise.
    pub fn new(http_port: u16, tls_port: u16) -> Self {
        PebbleOptions {
            http_port,
            tls_port,
            dns: None,
            eab: Vec::new(),
            nonce_reject_percent: 5,
            validity: 90 * 86_400,
            short_validity: 518_400,
        }
    }
}

/// A running Pebble and its DNS server.
pub struct Pebble {
    pebble: Child,
    challtestsrv: Child,
    dir: TempDir,
    listen: u16,
    management: u16,
    ca: PathBuf,
}

fn wait_listening(port: u16, what: &str) {
    let up = wait_until(READY, || TcpStream::connect(("127.0.0.1", port)).ok());
    assert!(up.is_some(), "{what} did not listen on 127.0.0.1:{port}");
}

impl Pebble {
    /// Starts pebble-challtestsrv and Pebble with `options`; Pebble validates at once.
    pub fn start(options: &PebbleOptions) -> Pebble {
        Self::launch(options, true)
    }

    /// As [`Pebble::start`], but Pebble waits a random 0 to 15 s before each validation (its
    /// default), so an order stays under way for a while.
    pub fn start_slow(options: &PebbleOptions) -> Pebble {
        Self::launch(options, false)
    }

    fn launch(options: &PebbleOptions, no_sleep: bool) -> Pebble {
        let test = module_test_dir();
        let dir = TempDir::new();
        let (dns, dns_mgmt, listen, management) = (free_port(), free_port(), free_port(), free_port());
        let challtestsrv = Command::new(go_program("pebble-challtestsrv"))
            .args(["-dnsserver", &format!("127.0.0.1:{dns}"), "-management", &format!("127.0.0.1:{dns_mgmt}")])
            .args(["-http01", "", "-https01", "", "-tlsalpn01", "", "-doh", ""])
            .args(["-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start pebble-challtestsrv (go install github.com/letsencrypt/pebble/v2/cmd/pebble-challtestsrv)");
        let config = serde_json::json!({ "pebble": {
            "listenAddress": format!("127.0.0.1:{listen}"),
            "managementListenAddress": format!("127.0.0.1:{management}"),
            "certificate": test.join("certs/localhost/cert.pem"),
            "privateKey": test.join("certs/localhost/key.pem"),
            "httpPort": options.http_port,
            "tlsPort": options.tls_port,
            "ocspResponderURL": "",
            "externalAccountBindingRequired": !options.eab.is_empty(),
            "externalAccountMACKeys": options.eab.iter().cloned().collect::<std::collections::BTreeMap<String, String>>(),
            "retryAfter": { "authz": 1, "order": 1 },
            "keyAlgorithm": "ecdsa",
            "profiles": {
                "default": { "description": "the tests' profile", "validityPeriod": options.validity },
                "shortlived": { "description": "short", "validityPeriod": options.short_validity }
            }
        }});
        let config_path = dir.join("pebble.json");
        std::fs::write(&config_path, config.to_string()).expect("write pebble.json");
        let log = std::fs::File::create(dir.join("pebble.log")).expect("pebble.log");
        let pebble = Command::new(go_program("pebble"))
            .arg("-config")
            .arg(&config_path)
            .args(["-dnsserver", &options.dns.map_or(format!("127.0.0.1:{dns}"), |a| a.to_string())])
            .env("PEBBLE_VA_NOSLEEP", if no_sleep { "1" } else { "0" })
            .env("PEBBLE_WFE_NONCEREJECT", options.nonce_reject_percent.to_string())
            .stdout(log.try_clone().expect("pebble.log"))
            .stderr(log)
            .spawn()
            .expect("start pebble (go install github.com/letsencrypt/pebble/v2/cmd/pebble)");
        let mut p = Pebble { pebble, challtestsrv, dir, listen, management, ca: test.join("certs/pebble.minica.pem") };
        wait_listening(dns_mgmt, "pebble-challtestsrv");
        wait_listening(listen, "pebble");
        wait_listening(management, "pebble's management interface");
        if let Ok(Some(status)) = p.pebble.try_wait() {
            panic!("pebble exited: {status}\n{}", p.log());
        }
        p
    }

    /// The ACME directory URL.
    pub fn directory(&self) -> String {
        format!("https://127.0.0.1:{}/dir", self.listen)
    }

    /// The CA file that Pebble's own TLS certificate chains to (`tls.acme.ca`).
    pub fn directory_ca(&self) -> &std::path::Path {
        &self.ca
    }

    /// Writes the root that Pebble's issued chains end in (made afresh at each start) to a file
    /// in its directory, and gives the path, for clients to verify served certificates with.
    pub fn issuing_root(&self) -> PathBuf {
        let path = self.dir.join("issuing-root.pem");
        let out = Command::new("curl")
            .args(["-sS", "--fail", "--cacert"])
            .arg(&self.ca)
            .arg(format!("https://127.0.0.1:{}/roots/0", self.management))
            .output()
            .expect("run curl");
        assert!(out.status.success(), "fetch pebble's root: {}", String::from_utf8_lossy(&out.stderr));
        std::fs::write(&path, &out.stdout).expect("write the root");
        path
    }

    /// Pebble's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("pebble.log")).unwrap_or_default()
    }

    /// Orders Pebble took, as its log tells (a request refused with `badNonce` made none).
    pub fn orders(&self) -> usize {
        self.log().lines().filter(|l| l.contains("Added order")).count()
    }

    /// Certificates Pebble issued, as its log tells.
    pub fn issued(&self) -> usize {
        self.log().lines().filter(|l| l.contains("Issued certificate serial")).count()
    }

    /// Stops Pebble (its DNS server stays), as a CA that goes away.
    pub fn stop(&mut self) {
        let _ = self.pebble.kill();
        let _ = self.pebble.wait();
    }
}

impl Drop for Pebble {
    fn drop(&mut self) {
        for c in [&mut self.pebble, &mut self.challtestsrv] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
