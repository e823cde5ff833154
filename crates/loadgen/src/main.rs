//! `gatehouse-loadgen`: a benchmark client for TLS handshakes.
//!
//! Every request goes on a new TCP + TLS connection: connect, a full handshake (no session is
//! offered), one `GET` with `Connection: close`, the response and the stream read to their end,
//! close_notify, close. With `--resume`, each connection offers a session from an earlier one:
//! the latest TLS 1.2 session (ticket or id), or an unused TLS 1.3 ticket (each is offered once);
//! the report counts the handshakes the server resumed. With `--origin-port`, each measured
//! connection is preceded in its slot by one to that port (node A) that offers no session, and
//! offers the session A gave: sessions made on one node, resumed on another. With
//! `--sni-pattern`, each connection sends a name drawn at random (seeded) from a pattern, for a
//! server holding many certificates; `--check-name` fails a connection whose certificate does not
//! carry the name sent. `-c` connections are in flight at once
//! on one thread, `-n` connections in all, bounded by `--max-seconds`.
//!
//! Why it exists: a handshake costs a client about as much CPU as a server, and `ab` (OpenSSL 3)
//! spends several times more than that per connection, so on a two-core machine one `ab` core
//! keeps the server core under half busy and "handshakes per server CPU-second" then measures
//! an idle server's wake-ups as much as its handshakes. This client spends what the protocol
//! needs and little more, so one client core can saturate one server core.
//!
//! Like `ab`, it does not verify the server: neither the certificate nor the handshake signature
//! is checked. It is a load generator for loopback benchmarks, never a client to trust.
//!
//! What it offers, matching what `ab -f TLS1.x` offers through OpenSSL 3 so that the server does
//! the same work for either client: the key share X25519 (groups X25519, P-256, P-384); TLS 1.3
//! suites in OpenSSL's order (AES-256-GCM, ChaCha20-Poly1305, AES-128-GCM); for TLS 1.2 the
//! ECDHE AES-128-GCM suites (those `bench/tls.sh` names with `ab -Z`); signature schemes in
//! OpenSSL's order; no SNI for an IP address unless `--sni` names one.
//!
//! Output: one JSON line on stdout, the fields of `bench/lib/tls_load.py` (connections, ok,
//! errors, error_kinds, resumed, elapsed_s, conn_per_s, mean/p50/p90/p99 latency and p50
//! handshake time in ms, versions: here version and suite, as `ab` names them; with
//! `--origin-port` the same figures for the A connections under "origin"); the first cause
//! of each kind of failure on stderr. Exit code 0 when every connection succeeded.

use clap::Parser;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{Resumption, Tls12Resumption};
use rustls::crypto::aws_lc_rs::{cipher_suite, kx_group};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Parser)]
#[command(version, about = "Full TLS handshakes, one request per connection, for benchmarks")]
struct Args {
    /// Server address.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// Server port.
    #[arg(long)]
    port: u16,
    /// Path of the one GET on each connection.
    #[arg(long, default_value = "/")]
    path: String,
    /// Connections in all.
    #[arg(short = 'n', default_value_t = 1000)]
    n: u64,
    /// Connections in flight at once.
    #[arg(short = 'c', default_value_t = 50)]
    c: usize,
    /// The one TLS version to offer (1.2 or 1.3); both when absent.
    #[arg(long, value_parser = ["1.2", "1.3"])]
    tls: Option<String>,
    /// Server name to send (and the Host header); by default none (the address is an IP).
    #[arg(long, conflicts_with = "sni_pattern")]
    sni: Option<String>,
    /// A server name per connection: the pattern with `{}` replaced by a number drawn at random
    /// in 0..`--sni-count` (the same numbers in the same order for the same `--seed`).
    #[arg(long, requires = "sni_count")]
    sni_pattern: Option<String>,
    /// How many names `--sni-pattern` draws from.
    #[arg(long)]
    sni_count: Option<u64>,
    /// Seed of the draws of `--sni-pattern`.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Fail a connection (wrong_certificate) whose certificate does not carry the name sent.
    #[arg(long)]
    check_name: bool,
    /// No connection starts after this many seconds.
    #[arg(long, default_value_t = 60.0)]
    max_seconds: f64,
    /// Offer sessions from earlier connections (the first ones have none to offer).
    #[arg(long, conflicts_with = "origin_port")]
    resume: bool,
    /// Cross-node resumption: before each measured connection, a connection to this port (node
    /// A) that offers no session; the measured one (node B, `--port`) offers the session A gave.
    #[arg(long)]
    origin_port: Option<u16>,
    /// Seconds one connection may take before it counts as a timeout.
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
}

/// Accepts any server: a benchmark client, as `ab` (which verifies nothing either).
#[derive(Debug)]
struct NoVerification;

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verify_tls12_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        // OpenSSL 3's default order, less the schemes rustls does not sign or verify.
        vec![
            SignatureScheme::ECDSA_NISTP256_SHA256,
            SignatureScheme::ECDSA_NISTP384_SHA384,
            SignatureScheme::ECDSA_NISTP521_SHA512,
            SignatureScheme::ED25519,
            SignatureScheme::RSA_PSS_SHA256,
            SignatureScheme::RSA_PSS_SHA384,
            SignatureScheme::RSA_PSS_SHA512,
            SignatureScheme::RSA_PKCS1_SHA256,
            SignatureScheme::RSA_PKCS1_SHA384,
            SignatureScheme::RSA_PKCS1_SHA512,
        ]
    }
}

fn client_config(tls: Option<&str>) -> Result<Arc<ClientConfig>, rustls::Error> {
    let provider = CryptoProvider {
        cipher_suites: vec![
            cipher_suite::TLS13_AES_256_GCM_SHA384,
            cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
            cipher_suite::TLS13_AES_128_GCM_SHA256,
            cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            cipher_suite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        ],
        // OpenSSL's order less X448 and P-521 (rustls has neither): the TLS 1.3 key share is
        // X25519's alone, and P-256 must be listed for a TLS 1.2 server with a P-256 certificate.
        kx_groups: vec![kx_group::X25519, kx_group::SECP256R1, kx_group::SECP384R1],
        ..rustls::crypto::aws_lc_rs::default_provider()
    };
    let versions: &[&rustls::SupportedProtocolVersion] = match tls {
        Some("1.2") => &[&rustls::version::TLS12],
        Some(_) => &[&rustls::version::TLS13],
        None => rustls::ALL_VERSIONS,
    };
    let mut config = ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(versions)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(NoVerification))
        .with_no_client_auth();
    config.resumption = Resumption::disabled(); // with --resume, see `for_one_slot`
    Ok(Arc::new(config))
}

/// The configuration of one connection slot: with `resume`, a session store of its own, so each
/// connection offers what the slot's previous connection got (the latest TLS 1.2 session, or a
/// TLS 1.3 ticket not offered before), as `tls_load.py --resume` does; a store shared by every
/// slot would drop tickets beyond its 8 per server while 50 connections wait for one.
fn for_one_slot(config: &Arc<ClientConfig>, resume: bool) -> Arc<ClientConfig> {
    if !resume {
        return config.clone();
    }
    let mut own = (**config).clone();
    own.resumption = Resumption::in_memory_sessions(1).tls12_resumption(Tls12Resumption::SessionIdOrTickets);
    Arc::new(own)
}

/// Why a connection failed: a kind to count it under, and the first words of the cause.
struct Failure {
    kind: &'static str,
    detail: String,
}

fn fail<E: std::fmt::Display>(kind: &'static str) -> impl FnOnce(E) -> Failure {
    move |e| Failure { kind, detail: e.to_string() }
}

impl From<&'static str> for Failure {
    fn from(kind: &'static str) -> Self {
        Failure { kind, detail: String::new() }
    }
}

/// What one connection came to.
struct Done {
    latency: Duration,
    handshake: Duration,
    version: &'static str,
    resumed: bool,
}

/// Reads the response head for its status and `Content-Length`, then counts body bytes.
#[derive(Default)]
struct Response {
    head: Vec<u8>,
    /// Body bytes still owed, once the head is read and says how many.
    remaining: Option<u64>,
    status_ok: bool,
    head_done: bool,
}

impl Response {
    /// Takes response bytes; errs on a head that is not HTTP or is too large.
    fn feed(&mut self, data: &[u8]) -> Result<(), &'static str> {
        if self.head_done {
            if let Some(r) = self.remaining.as_mut() {
                *r = r.saturating_sub(data.len() as u64);
            }
            return Ok(());
        }
        self.head.extend_from_slice(data);
        let Some(end) = self.head.windows(4).position(|w| w == b"\r\n\r\n") else {
            return if self.head.len() > 64 * 1024 { Err("bad_response") } else { Ok(()) };
        };
        let head = std::str::from_utf8(&self.head[..end]).map_err(|_| "bad_response")?;
        let mut lines = head.split("\r\n");
        let status = lines.next().unwrap_or_default();
        if !status.starts_with("HTTP/1.") {
            return Err("bad_response");
        }
        self.status_ok = status.split(' ').nth(1).is_some_and(|code| code.starts_with('2'));
        let length = lines.find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.trim().eq_ignore_ascii_case("content-length").then(|| value.trim().parse::<u64>().ok())?
        });
        let body_so_far = (self.head.len() - end - 4) as u64;
        self.remaining = length.map(|l| l.saturating_sub(body_so_far));
        self.head_done = true;
        Ok(())
    }
    /// Whether the stream ending here ends a whole response: the head read, and every body byte
    /// its `Content-Length` announced (without one, the end of the stream ends the body).
    fn complete(&self) -> bool {
        self.head_done && !matches!(self.remaining, Some(r) if r > 0)
    }
}

/// Buffers one worker reuses for each of its connections.
struct Buffers {
    net: Vec<u8>,
    plain: Vec<u8>,
    out: Vec<u8>,
}

/// The name a connection sends and the request it makes.
struct Target {
    name: ServerName<'static>,
    request: Vec<u8>,
    /// With `--check-name`: bytes the served leaf certificate must contain.
    check: Option<Vec<u8>>,
}

async fn connection(
    addr: SocketAddr,
    config: &Arc<ClientConfig>,
    target: &Target,
    bufs: &mut Buffers,
) -> Result<Done, Failure> {
    let t0 = Instant::now();
    let mut tcp = TcpStream::connect(addr).await.map_err(fail("connect"))?;
    tcp.set_nodelay(true).map_err(fail("connect"))?;
    let mut tls = ClientConnection::new(config.clone(), target.name.clone()).map_err(fail("tls"))?;
    // Buffered by rustls until the handshake completes, then sent with the client's Finished.
    tls.writer().write_all(&target.request).map_err(fail("tls"))?;
    let mut handshake = None;
    let mut response = Response::default();
    let mut eof = false;
    loop {
        if tls.wants_write() {
            bufs.out.clear();
            while tls.wants_write() {
                tls.write_tls(&mut bufs.out).map_err(fail("tls"))?;
            }
            tcp.write_all(&bufs.out).await.map_err(fail("io"))?;
        }
        if handshake.is_none() && !tls.is_handshaking() {
            handshake = Some(t0.elapsed());
            if let Some(name) = &target.check {
                let leaf = tls.peer_certificates().and_then(|c| c.first()).map(|c| c.as_ref()).unwrap_or_default();
                if !leaf.windows(name.len()).any(|w| w == name.as_slice()) {
                    return Err("wrong_certificate".into());
                }
            }
        }
        loop {
            match tls.reader().read(&mut bufs.plain) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => response.feed(&bufs.plain[..n])?,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    eof = true;
                    break;
                }
                Err(e) => return Err(fail("tls")(e)),
            }
        }
        // As ab without keep-alive: read to the end of the stream, which the server ends after
        // the response (Connection: close), so a TLS 1.3 ticket sent after it is kept too.
        if eof {
            break;
        }
        let n = tcp.read(&mut bufs.net).await.map_err(fail("io"))?;
        let mut data = &bufs.net[..n];
        // n == 0 tells rustls of the end of the stream.
        tls.read_tls(&mut data).map_err(fail("tls"))?;
        let kind = if handshake.is_none() { "handshake" } else { "tls" };
        tls.process_new_packets().map_err(fail(kind))?;
    }
    let Some(handshake) = handshake else {
        return Err("handshake".into());
    };
    if !response.complete() {
        return Err("short_response".into());
    }
    if !response.status_ok {
        return Err("status".into());
    }
    // As ab: close_notify, then close, without waiting for the server's.
    tls.send_close_notify();
    bufs.out.clear();
    if tls.write_tls(&mut bufs.out).is_ok() {
        let _ = tcp.try_write(&bufs.out);
    }
    let version = negotiated(&tls);
    let resumed = matches!(tls.handshake_kind(), Some(rustls::HandshakeKind::Resumed));
    Ok(Done { latency: t0.elapsed(), handshake, version, resumed })
}

/// Version and suite in OpenSSL's words, as `ab` prints them ("TLSv1.3 TLS_AES_128_GCM_SHA256").
fn negotiated(tls: &ClientConnection) -> &'static str {
    use rustls::CipherSuite as S;
    match tls.negotiated_cipher_suite().map(|s| s.suite()) {
        Some(S::TLS13_AES_256_GCM_SHA384) => "TLSv1.3 TLS_AES_256_GCM_SHA384",
        Some(S::TLS13_CHACHA20_POLY1305_SHA256) => "TLSv1.3 TLS_CHACHA20_POLY1305_SHA256",
        Some(S::TLS13_AES_128_GCM_SHA256) => "TLSv1.3 TLS_AES_128_GCM_SHA256",
        Some(S::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256) => "TLSv1.2 ECDHE-ECDSA-AES128-GCM-SHA256",
        Some(S::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256) => "TLSv1.2 ECDHE-RSA-AES128-GCM-SHA256",
        _ => "other",
    }
}

/// What one kind of connection (measured, or made on the origin node) came to.
#[derive(Default)]
struct Tally {
    started: u64,
    ok: u64,
    resumed: u64,
    errors: BTreeMap<&'static str, u64>,
    /// The first cause seen of each kind, for stderr.
    first_causes: BTreeMap<&'static str, String>,
    latencies_us: Vec<u64>,
    handshakes_us: Vec<u64>,
    versions: BTreeMap<&'static str, u64>,
}

impl Tally {
    fn record(&mut self, result: Result<Result<Done, Failure>, tokio::time::error::Elapsed>) -> bool {
        match result {
            Ok(Ok(done)) => {
                self.ok += 1;
                self.resumed += u64::from(done.resumed);
                self.latencies_us.push(done.latency.as_micros() as u64);
                self.handshakes_us.push(done.handshake.as_micros() as u64);
                *self.versions.entry(done.version).or_default() += 1;
                return true;
            }
            Ok(Err(f)) => {
                *self.errors.entry(f.kind).or_default() += 1;
                self.first_causes.entry(f.kind).or_insert(f.detail);
            }
            Err(_) => *self.errors.entry("timeout").or_default() += 1,
        }
        false
    }

    fn errors(&self) -> u64 {
        self.errors.values().sum()
    }

    /// The report's JSON fields (without braces); the first cause of each kind of failure to
    /// stderr, under `label`.
    fn report(&mut self, elapsed: f64, label: &str) -> String {
        self.latencies_us.sort_unstable();
        self.handshakes_us.sort_unstable();
        for (kind, cause) in &self.first_causes {
            let n = self.errors.get(kind).copied().unwrap_or(0);
            eprintln!("gatehouse-loadgen: {label}{n} {kind} failures, the first: {cause}");
        }
        let mean_ms = if self.latencies_us.is_empty() {
            0.0
        } else {
            self.latencies_us.iter().sum::<u64>() as f64 / self.latencies_us.len() as f64 / 1000.0
        };
        let kinds: Vec<String> = self.errors.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
        let versions: Vec<String> = self.versions.keys().map(|v| format!("\"{v}\"")).collect();
        format!(
            "\"connections\":{},\"ok\":{},\"errors\":{},\"error_kinds\":{{{}}},\"resumed\":{},\"elapsed_s\":{elapsed:.3},\"conn_per_s\":{:.1},\"mean_ms\":{mean_ms:.3},\"p50_ms\":{:.3},\"p90_ms\":{:.3},\"p99_ms\":{:.3},\"handshake_p50_ms\":{:.3},\"versions\":[{}]",
            self.started,
            self.ok,
            self.errors(),
            kinds.join(","),
            self.resumed,
            self.ok as f64 / elapsed.max(1e-9),
            percentile_ms(&self.latencies_us, 0.5),
            percentile_ms(&self.latencies_us, 0.9),
            percentile_ms(&self.latencies_us, 0.99),
            percentile_ms(&self.handshakes_us, 0.5),
            versions.join(","),
        )
    }
}

/// The measured connections, and with `--origin-port` those made on node A.
#[derive(Default)]
struct Stats {
    measured: Tally,
    origin: Tally,
}

fn percentile_ms(sorted_us: &[u64], p: f64) -> f64 {
    if sorted_us.is_empty() {
        return 0.0;
    }
    let i = ((sorted_us.len() - 1) as f64 * p).round() as usize;
    sorted_us[i.min(sorted_us.len() - 1)] as f64 / 1000.0
}

/// Everything a connection slot needs, shared by the slots.
struct Plan {
    addr: SocketAddr,
    origin: Option<SocketAddr>,
    config: Arc<ClientConfig>,
    resume: bool,
    names: Names,
    path: String,
    check_name: bool,
    n: u64,
    stop_starting: Instant,
    timeout: Duration,
}

/// The server names connections send.
enum Names {
    /// One name (or none, for an IP address: `host` is then the Host header).
    One { name: ServerName<'static>, host: String },
    /// `pattern` with `{}` replaced by a number drawn in 0..`count`.
    Drawn { pattern: String, count: u64, state: Cell<u64> },
}

impl Plan {
    /// The target of the next connection.
    fn target(&self) -> Result<Target, Failure> {
        let (name, host) = match &self.names {
            Names::One { name, host } => (name.clone(), host.clone()),
            Names::Drawn { pattern, count, state } => {
                let host = pattern.replacen("{}", &(next_random(state) % count).to_string(), 1);
                (ServerName::try_from(host.clone()).map_err(fail("bad_name"))?, host)
            }
        };
        let request = format!(
            "GET {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: gatehouse-loadgen\r\nConnection: close\r\n\r\n",
            self.path
        );
        let check = self.check_name.then(|| host.into_bytes());
        Ok(Target { name, request: request.into_bytes(), check })
    }
}

/// xorshift64*: the draws of `--sni-pattern`, the same for the same seed.
fn next_random(state: &Cell<u64>) -> u64 {
    let mut x = state.get();
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    state.set(x);
    x.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

/// One connection slot: connections one after another until `n` have begun in all slots.
async fn slot(plan: Rc<Plan>, stats: Rc<RefCell<Stats>>) {
    let mut bufs = Buffers { net: vec![0; 16 * 1024], plain: vec![0; 16 * 1024], out: Vec::with_capacity(4096) };
    let mut config = for_one_slot(&plan.config, plan.resume);
    loop {
        {
            let mut s = stats.borrow_mut();
            if s.measured.started >= plan.n || Instant::now() >= plan.stop_starting {
                return;
            }
            s.measured.started += 1;
        }
        let target = match plan.target() {
            Ok(t) => t,
            Err(f) => {
                stats.borrow_mut().measured.record(Ok(Err(f)));
                continue;
            }
        };
        if let Some(origin) = plan.origin {
            // A fresh store: the A connection offers nothing, and B offers the session A got.
            config = for_one_slot(&plan.config, true);
            stats.borrow_mut().origin.started += 1;
            let a = tokio::time::timeout(plan.timeout, connection(origin, &config, &target, &mut bufs)).await;
            if !stats.borrow_mut().origin.record(a) {
                stats.borrow_mut().measured.record(Ok(Err("origin_failed".into())));
                continue;
            }
        }
        let result = tokio::time::timeout(plan.timeout, connection(plan.addr, &config, &target, &mut bufs)).await;
        stats.borrow_mut().measured.record(result);
    }
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(code) => code,
        Err(usage) => {
            eprintln!("gatehouse-loadgen: {usage}");
            ExitCode::from(2)
        }
    }
}

/// Runs the load; an error is a usage or set-up error (exit code 2), before any connection.
fn run(args: Args) -> Result<ExitCode, String> {
    if args.c == 0 || args.n == 0 {
        return Err("-n and -c must be at least 1".into());
    }
    let config = client_config(args.tls.as_deref()).map_err(|e| e.to_string())?;
    let names = match (&args.sni, &args.sni_pattern, args.sni_count) {
        (_, Some(pattern), Some(count)) if count >= 1 && pattern.contains("{}") => {
            // A zero state would stay zero.
            Names::Drawn { pattern: pattern.clone(), count, state: Cell::new(args.seed.max(1)) }
        }
        (_, Some(_), _) => return Err("--sni-pattern needs a {} and --sni-count at least 1".into()),
        (Some(sni), None, _) => {
            let name = ServerName::try_from(sni.clone()).map_err(|e| format!("--sni {sni}: {e}"))?;
            Names::One { name, host: sni.clone() }
        }
        (None, None, _) => Names::One {
            name: ServerName::IpAddress(args.host.into()),
            host: SocketAddr::new(args.host, args.port).to_string(),
        },
    };
    let names_count = match &names {
        Names::Drawn { count, .. } => *count,
        Names::One { .. } => 1,
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let plan = Rc::new(Plan {
        addr: SocketAddr::new(args.host, args.port),
        origin: args.origin_port.map(|p| SocketAddr::new(args.host, p)),
        config,
        resume: args.resume,
        names,
        path: args.path.clone(),
        check_name: args.check_name,
        n: args.n,
        stop_starting: t0 + Duration::from_secs_f64(args.max_seconds.max(0.0)),
        timeout: Duration::from_secs_f64(args.timeout.max(0.001)),
    });
    let stats = Rc::new(RefCell::new(Stats::default()));
    let local = tokio::task::LocalSet::new();
    for _ in 0..args.c.min(args.n as usize) {
        local.spawn_local(slot(plan.clone(), stats.clone()));
    }
    runtime.block_on(local);
    let elapsed = t0.elapsed().as_secs_f64();
    let mut s = stats.borrow_mut();
    let measured = s.measured.report(elapsed, "");
    let origin = match plan.origin {
        Some(_) => format!(",\"origin\":{{{}}}", s.origin.report(elapsed, "node A: ")),
        None => String::new(),
    };
    println!("{{{measured},\"names\":{names_count}{origin}}}");
    Ok(if s.measured.errors() == 0 && s.measured.ok == args.n { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

#[cfg(test)]
mod tests {
    use super::Response;

    fn fed(parts: &[&[u8]]) -> Result<Response, &'static str> {
        let mut r = Response::default();
        for p in parts {
            r.feed(p)?;
        }
        Ok(r)
    }

    #[test]
    fn a_response_is_complete_at_its_content_length_whatever_the_reads() {
        let whole = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\ncontent-length: 5\r\n\r\nhello";
        for cut in 1..whole.len() {
            let r = fed(&[&whole[..cut], &whole[cut..]]).expect("parses");
            assert!(r.complete() && r.status_ok, "cut at {cut}");
            let r = fed(&[&whole[..cut]]).expect("parses");
            assert!(!r.complete(), "cut at {cut}: complete too early");
        }
    }

    #[test]
    fn status_length_and_garbage() {
        let r = fed(&[b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"]).expect("parses");
        assert!(r.complete() && !r.status_ok);
        // No length: the end of the stream ends the body.
        let r = fed(&[b"HTTP/1.0 200 OK\r\n\r\nbody"]).expect("parses");
        assert!(r.complete() && r.remaining.is_none());
        assert_eq!(fed(&[b"SSH-2.0-OpenSSH\r\n\r\n"]).err(), Some("bad_response"));
        assert_eq!(fed(&[&[b'x'; 70 * 1024]]).err(), Some("bad_response"));
    }
}
