//! PROXY protocol on listeners: real HAProxy (`send-proxy`, `send-proxy-v2`) in front of a plain
//! and a TLS listener, with the client on another loopback address than HAProxy's; raw clients for
//! what HAProxy never sends (a header split over writes, garbage, `LOCAL`, `UNKNOWN`, a late
//! header, forged client addresses for the per-address limits); and peers that are not trusted.

use crate::common::{start, targets, HOST};
use crate::h2c::find_in_path;
use crate::tls::{certificates, Pki};
use gatehouse_testkit::{curl, metric_value, wait_until, Backend, Gateway, RawConn, TempDir};
use gatehouse_tls::issue::Algorithm;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The client's own address, other than HAProxy's (127.0.0.1), so the two cannot be confused.
const CLIENT: &str = "127.0.0.2";
/// How long a test waits for what normally takes milliseconds.
const PATIENCE: Duration = Duration::from_secs(10);
const SIGNATURE: &[u8] = b"\r\n\r\n\0\r\nQUIT\n";

/// A v2 header: `command` 0 (LOCAL) or 1 (PROXY), `family` byte, address block.
fn v2(command: u8, family: u8, addresses: &[u8]) -> Vec<u8> {
    let len = u16::try_from(addresses.len()).expect("short").to_be_bytes();
    [SIGNATURE, &[0x20 | command, family], &len, addresses].concat()
}

/// A v2 PROXY header for a TCP client at `source` (either family) connected to `destination`.
fn v2_proxy(source: SocketAddr, destination: SocketAddr) -> Vec<u8> {
    let ip = |a: SocketAddr| match a.ip() {
        IpAddr::V4(v4) => v4.octets().to_vec(),
        IpAddr::V6(v6) => v6.octets().to_vec(),
    };
    let family = if source.is_ipv4() { 0x11 } else { 0x21 };
    let ports = [source.port().to_be_bytes(), destination.port().to_be_bytes()].concat();
    v2(1, family, &[ip(source), ip(destination), ports].concat())
}

fn request(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n")
}

/// A gateway whose listeners each have `settings` (flow-map entries, `proxy_protocol` among them),
/// a TLS listener `https` when `pki` is given, a JSON access log in `log_dir`, and `extra` YAML
/// sections after the upstream `u` on `backend` served for [`HOST`].
fn gateway(backend: &Backend, settings: &str, pki: Option<&Pki>, log_dir: &TempDir, extra: &str) -> Gateway {
    let tls = pki.map_or(String::new(), |pki| {
        let cert = pki.issue(&[HOST], Algorithm::EcdsaP256, "app.pem", None);
        format!("tls:\n{}\n", certificates(&[&cert]))
    });
    let https = pki.map_or(String::new(), |_| format!("  https: {{bind: \"127.0.0.1:0\", tls: {{}}, {settings}}}\n"));
    start(&format!(
        "workers: 2\nadmin: {{bind: \"127.0.0.1:0\"}}\naccess_log: {{path: \"{}\", format: json}}\n{tls}listeners:\n  http: {{bind: \"127.0.0.1:0\", {settings}}}\n{https}upstreams:\n  u: {{targets: {}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}]}}\n{extra}",
        log_dir.join("access.log").display(),
        targets(&[backend])
    ))
}

/// The value of `series` in the gateway's metrics (0 when absent).
fn metric(gw: &Gateway, series: &str) -> f64 {
    metric_value(&gw.metrics(), series).unwrap_or(0.0)
}

fn refused(gw: &Gateway, reason: &str) -> f64 {
    metric(gw, &format!("gatehouse_proxy_protocol_refused_total{{reason=\"{reason}\"}}"))
}

fn headers(gw: &Gateway, version: u8) -> f64 {
    metric(gw, &format!("gatehouse_proxy_protocol_headers_total{{version=\"{version}\"}}"))
}

/// The `X-Forwarded-For` the backend saw on the request for `path`.
fn forwarded_for(backend: &Backend, path: &str) -> Option<String> {
    let seen = backend.requests();
    let r = seen.iter().find(|r| r.path_and_query() == path)?;
    assert_eq!(r.header("x-real-ip"), r.header("x-forwarded-for"), "{path}");
    r.header("x-forwarded-for").map(str::to_string)
}

/// The access log's `client` fields, once the gateway has stopped (and written every line).
fn logged_clients(mut gw: Gateway, log_dir: &TempDir) -> Vec<String> {
    let (status, _) = gw.terminate();
    assert!(status.success(), "exit status {status}");
    let text = std::fs::read_to_string(log_dir.join("access.log")).expect("access log");
    text.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .map(|v| v["client"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// An HAProxy process in TCP mode, one frontend per backend server, killed on drop.
struct HaProxy {
    child: Child,
    ports: Vec<u16>,
    _dir: TempDir,
}

impl HaProxy {
    /// Starts `haproxy -f CFG -db` with a frontend on a free port for each `(send-proxy option,
    /// server address)`; `None` (the test is skipped) when HAProxy is not installed, unless `CI`
    /// is set: then the test fails.
    fn start(servers: &[(&str, SocketAddr)]) -> Option<HaProxy> {
        let Some(bin) = find_in_path("haproxy") else {
            assert!(std::env::var_os("CI").is_none(), "haproxy is not installed but CI is set");
            eprintln!("PROXY protocol through HAProxy: skipped, haproxy not on PATH");
            return None;
        };
        // A free port may be taken before HAProxy binds it: then try other ports.
        let mut last = String::new();
        for _ in 0..3 {
            match HaProxy::spawn(&bin, servers) {
                Ok(h) => return Some(h),
                Err(e) => last = e,
            }
        }
        panic!("{last}");
    }

    fn spawn(bin: &std::path::Path, servers: &[(&str, SocketAddr)]) -> Result<HaProxy, String> {
        let free = || std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port());
        let ports: Vec<u16> = (0..=servers.len()).map(|_| free().expect("a free port")).collect();
        let mut cfg = String::from(
            "global\n  maxconn 200\ndefaults\n  mode tcp\n  timeout connect 5s\n  timeout client 30s\n  timeout server 30s\n",
        );
        for (i, (option, server)) in servers.iter().enumerate() {
            cfg += &format!(
                "frontend f{i}\n  bind 127.0.0.1:{}\n  default_backend b{i}\nbackend b{i}\n  server gatehouse {server} {option}\n",
                ports[i]
            );
        }
        // Answers once every frontend is bound (HAProxy binds them all before it accepts), and
        // reaches no server: a probe of a real frontend would send a header to the gateway.
        let probe = ports[servers.len()];
        cfg += &format!("frontend probe\n  bind 127.0.0.1:{probe}\n  tcp-request connection reject\n");
        let dir = TempDir::new();
        std::fs::write(dir.join("haproxy.cfg"), &cfg).expect("write haproxy.cfg");
        let child = Command::new(bin)
            .arg("-f")
            .arg(dir.join("haproxy.cfg"))
            .arg("-db")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("run haproxy: {e}"))?;
        let mut h = HaProxy { child, ports: ports[..servers.len()].to_vec(), _dir: dir };
        let ready = wait_until(PATIENCE, || {
            if let Ok(Some(status)) = h.child.try_wait() {
                return Some(Err(format!("haproxy exited at start: {status}\n{cfg}")));
            }
            std::net::TcpStream::connect(("127.0.0.1", probe)).ok().map(|_| Ok(()))
        });
        match ready {
            Some(Ok(())) => Ok(h),
            Some(Err(e)) => Err(e),
            None => Err(format!("haproxy not listening within {PATIENCE:?}\n{cfg}")),
        }
    }
}

impl Drop for HaProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn haproxy_send_proxy_v1_and_v2_reach_plain_and_tls_listeners_as_the_client() {
    let backend = Backend::start("b");
    let pki = Pki::new();
    let logs = TempDir::new();
    let gw = gateway(&backend, "proxy_protocol: {trusted: [\"127.0.0.1/32\", \"::1\"]}", Some(&pki), &logs, "");
    let (plain, tls) = (gw.addr("http"), gw.addr("https"));
    let servers = [("send-proxy", plain), ("send-proxy-v2", plain), ("send-proxy", tls), ("send-proxy-v2", tls)];
    let Some(haproxy) = HaProxy::start(&servers) else { return };
    let port = |i: usize| haproxy.ports[i];
    let host = format!("Host: {HOST}");
    let ca = pki.ca_file();
    let ca = ca.to_str().unwrap_or_default();
    let via = |i: usize, path: &str, extra: &[&str]| {
        let url = match i {
            0 | 1 => format!("http://127.0.0.1:{}{path}", port(i)),
            _ => format!("https://{HOST}:{}{path}", port(i)),
        };
        let resolve = format!("{HOST}:{}:127.0.0.1", port(i));
        let mut args = vec!["--interface", CLIENT, "-H", &host, "--cacert", ca, "--resolve", &resolve];
        args.extend_from_slice(extra);
        args.push(&url);
        let r = curl(&args);
        assert_eq!(r.status, 200, "{path}: {r:?}\n{}", gw.stderr());
        r
    };
    via(0, "/v1/plain", &[]);
    assert_eq!(via(1, "/v2/plain/h2", &["--http2-prior-knowledge"]).version, "HTTP/2");
    assert_eq!(via(2, "/v1/tls/h2", &[]).version, "HTTP/2");
    assert_eq!(via(3, "/v2/tls/h1", &["--http1.1"]).version, "HTTP/1.1");
    for path in ["/v1/plain", "/v2/plain/h2", "/v1/tls/h2", "/v2/tls/h1"] {
        assert_eq!(forwarded_for(&backend, path).as_deref(), Some(CLIENT), "{path}");
    }
    assert_eq!((headers(&gw, 1), headers(&gw, 2)), (2.0, 2.0), "{}", gw.metrics());
    for reason in ["untrusted", "bad_header", "timeout", "closed"] {
        assert_eq!(refused(&gw, reason), 0.0, "{reason}");
    }
    drop(haproxy);
    assert_eq!(logged_clients(gw, &logs), [CLIENT; 4]);
}

#[test]
fn peers_that_are_not_trusted_are_closed_unanswered_and_counted() {
    let backend = Backend::start("b");
    let logs = TempDir::new();
    let gw = gateway(&backend, "proxy_protocol: {trusted: [\"10.0.0.0/8\", \"2001:db8::/32\"]}", None, &logs, "");
    for opening in [b"PROXY TCP4 192.0.2.7 198.51.100.1 51000 80\r\n".to_vec(), Vec::new()] {
        let mut c = RawConn::connect(gw.addr("http"));
        c.send(&[opening, request("/spoofed").into_bytes()].concat());
        let (answer, closed) = c.read_to_close(PATIENCE);
        assert!(closed && answer.is_empty(), "answered {answer:?}");
    }
    assert!(wait_until(PATIENCE, || (refused(&gw, "untrusted") == 2.0).then_some(())).is_some(), "{}", gw.metrics());
    assert_eq!(backend.request_count(), 0);
    assert_eq!(metric(&gw, "gatehouse_connections_accepted_total"), 0.0, "refused before it is served");
}

/// Sends `pieces` with a flush each (no Nagle: each is a segment of its own), letting the gateway
/// take the first before the next is sent: the connection is open on a worker once the active
/// count shows it, and an admin round trip separates the later ones.
fn send_in_pieces(gw: &Gateway, write: &mut dyn FnMut(&[u8]), pieces: &[&[u8]]) {
    for (i, piece) in pieces.iter().enumerate() {
        write(piece);
        if i == 0 {
            let open = wait_until(PATIENCE, || (metric(gw, "gatehouse_connections_active") >= 1.0).then_some(()));
            assert!(open.is_some(), "the connection never opened");
        } else {
            let _ = gw.metrics();
        }
    }
}

#[test]
fn a_header_split_over_several_writes_is_read_whole_on_plain_and_tls_listeners() {
    let backend = Backend::start("b");
    let pki = Pki::new();
    let logs = TempDir::new();
    let gw = gateway(&backend, "proxy_protocol: {trusted: [\"127.0.0.0/8\"]}", Some(&pki), &logs, "");

    let header = b"PROXY TCP4 192.0.2.7 198.51.100.1 51000 80\r\n";
    let mut c = RawConn::connect(gw.addr("http"));
    send_in_pieces(&gw, &mut |b| c.send(b), &[&header[..13], &header[13..30], &header[30..]]);
    c.send(request("/split").as_bytes());
    let r = c.read_response(PATIENCE).expect("response");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(forwarded_for(&backend, "/split").as_deref(), Some("192.0.2.7"));

    // TLS: the header (v2, an IPv6 client) in three writes, then a handshake on the same socket.
    let header = v2_proxy("[2001:db8::7]:51000".parse().expect("address"), "[2001:db8::1]:443".parse().expect("a"));
    let mut tcp = std::net::TcpStream::connect(gw.addr("https")).expect("connect");
    tcp.set_nodelay(true).expect("TCP_NODELAY");
    tcp.set_read_timeout(Some(PATIENCE)).expect("timeout");
    send_in_pieces(&gw, &mut |b| tcp.write_all(b).expect("write"), &[&header[..5], &header[5..20], &header[20..]]);
    let answer = tls_get(&mut tcp, &pki, "/split/tls");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(forwarded_for(&backend, "/split/tls").as_deref(), Some("2001:db8::7"));
    assert_eq!((headers(&gw, 1), headers(&gw, 2)), (1.0, 1.0));
}

/// One request over TLS on `tcp` (a client trusting `pki`'s CA), and the answer until the close.
fn tls_get(tcp: &mut std::net::TcpStream, pki: &Pki, path: &str) -> String {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(pki.ca.cert_pem().as_bytes()) {
        roots.add(c.expect("CA PEM")).expect("add CA");
    }
    let config =
        rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
    let name = ServerName::try_from(HOST.to_string()).expect("server name");
    let mut conn = rustls::ClientConnection::new(std::sync::Arc::new(config), name).expect("client");
    let mut stream = rustls::Stream::new(&mut conn, tcp);
    stream.write_all(request(path).as_bytes()).expect("request over TLS");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

#[test]
fn garbage_or_a_late_header_closes_and_local_or_unknown_serve_as_the_socket_peer() {
    let backend = Backend::start("b");
    let logs = TempDir::new();
    let settings = "header_read_timeout: 500ms, proxy_protocol: {trusted: [\"127.0.0.0/8\"]}";
    let gw = gateway(&backend, settings, None, &logs, "");
    let addr = gw.addr("http");
    for opening in [&b"GARBAGE\r\n"[..], b"", b"PROXY TCP4 192.0.2.7 198.51.100.1 51000 80 extra\r\n"] {
        let (answer, closed) = {
            let mut c = RawConn::connect(addr);
            c.send(&[opening, request("/garbage").as_bytes()].concat());
            c.read_to_close(PATIENCE)
        };
        assert!(closed && answer.is_empty(), "{opening:?} answered {answer:?}");
    }
    let mut late = RawConn::connect(addr);
    late.send(b"PROXY TCP4 192.0.2.7 ");
    let took = late.wait_closed(PATIENCE).expect("closed by header_read_timeout");
    assert!(took >= Duration::from_millis(400), "closed after {took:?}");

    for (from, opening, path) in
        [("127.0.0.3", v2(0, 0x00, &[]), "/local"), ("127.0.0.4", b"PROXY UNKNOWN\r\n".to_vec(), "/unknown")]
    {
        let mut c = RawConn::connect_from(addr, from.parse().expect("ip"));
        c.send(&[opening, request(path).into_bytes()].concat());
        assert_eq!(c.read_response(PATIENCE).expect("response").status, 200, "{path}");
        assert_eq!(forwarded_for(&backend, path).as_deref(), Some(from), "{path}");
    }
    assert_eq!(backend.request_count(), 2, "nothing behind a bad header was forwarded");
    assert_eq!((refused(&gw, "bad_header"), refused(&gw, "timeout")), (3.0, 1.0), "{}", gw.metrics());
    assert_eq!((headers(&gw, 1), headers(&gw, 2)), (1.0, 1.0));
    let mut clients = logged_clients(gw, &logs);
    clients.sort();
    assert_eq!(clients, ["127.0.0.3", "127.0.0.4"]);
}

#[test]
fn per_address_limits_and_allow_ips_see_the_address_in_the_header() {
    let backend = Backend::start("b");
    let logs = TempDir::new();
    let apps = "services:\n  api: {path: /api, upstream: u, auth: app_key}\napps:\n  near: {key: K-near, allow_ips: [\"192.0.2.0/24\"], grants: {api: ~}}\n";
    let settings = "max_connections_per_ip: 1, proxy_protocol: {trusted: [\"127.0.0.1\"]}";
    let gw = gateway(&backend, settings, None, &logs, apps);
    let addr = gw.addr("http");
    let from = |client: &str| format!("PROXY TCP4 {client} 198.51.100.1 51000 80\r\n");
    let get = |path: &str| format!("GET {path} HTTP/1.1\r\nHost: {HOST}\r\nX-APP-KEY: K-near\r\n\r\n");

    // Every connection comes from 127.0.0.1; only the headers tell the clients apart.
    let mut first = RawConn::connect(addr);
    first.send(format!("{}{}", from("192.0.2.7"), get("/api/first")).as_bytes());
    assert_eq!(first.read_response(PATIENCE).expect("first").status, 200, "192.0.2.7 is in allow_ips");
    let mut second = RawConn::connect(addr);
    second.send(format!("{}{}", from("192.0.2.7"), get("/api/second")).as_bytes());
    let (answer, closed) = second.read_to_close(PATIENCE);
    assert!(closed && answer.is_empty(), "a second connection of 192.0.2.7 answered {answer:?}");
    assert_eq!(metric(&gw, "gatehouse_connections_over_ip_limit_total"), 1.0);
    let mut other = RawConn::connect(addr);
    other.send(format!("{}{}", from("192.0.2.8"), get("/api/other")).as_bytes());
    assert_eq!(other.read_response(PATIENCE).expect("other").status, 200, "another client has its own count");
    let mut outside = RawConn::connect(addr);
    outside.send(format!("{}{}", from("198.51.100.9"), get("/api/outside")).as_bytes());
    assert_eq!(outside.read_response(PATIENCE).expect("outside").status, 403, "198.51.100.9 is not in allow_ips");
    let mut forwarded: Vec<String> =
        backend.requests().iter().filter_map(|r| r.header("x-forwarded-for").map(str::to_string)).collect();
    forwarded.sort();
    assert_eq!(forwarded, ["192.0.2.7", "192.0.2.8"]);
}

#[test]
fn check_lists_every_trusted_entry_that_is_not_a_network() {
    let dir = TempDir::new();
    let file = dir.join("gatehouse.yaml");
    std::fs::write(
        &file,
        "listeners:\n  lb: {bind: \"127.0.0.1:0\", proxy_protocol: {trusted: [\"10.0.0.0/33\", \"127.0.0.1\", \"balancer.internal\"]}}\n  empty: {bind: \"127.0.0.1:0\", proxy_protocol: {trusted: []}}\n",
    )
    .expect("write the configuration");
    let out = Command::new(env!("CARGO_BIN_EXE_gatehouse")).arg("check").arg(&file).output().expect("run check");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "check accepted it:\n{stderr}");
    for path in [
        "listeners.lb.proxy_protocol.trusted[0]: invalid network `10.0.0.0/33`",
        "listeners.lb.proxy_protocol.trusted[2]: invalid network `balancer.internal`",
        "listeners.empty.proxy_protocol.trusted: at least one",
    ] {
        assert!(stderr.contains(path), "`{path}` missing from:\n{stderr}");
    }
    assert!(!stderr.contains("trusted[1]"), "{stderr}");
}
