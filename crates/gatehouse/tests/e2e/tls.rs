//! HTTPS listeners with real clients (curl, openssl s_client): ALPN, certificate choice by SNI
//! (exact, wildcard, default, unknown), key type by client capability, the directory store
//! changing under a running gateway, and session resumption.

use crate::common::{settled, start, targets, SETTLE};
use gatehouse_testkit::{curl, metric_value, Backend, Gateway, TempDir};
use gatehouse_tls::issue::{Algorithm, Authority};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A CA and the files a test writes for it.
pub(crate) struct Pki {
    pub(crate) ca: Authority,
    pub(crate) dir: TempDir,
}

impl Pki {
    pub(crate) fn new() -> Pki {
        let pki = Pki { ca: Authority::new("Gatehouse Test CA").expect("make CA"), dir: TempDir::new() };
        std::fs::write(pki.ca_file(), pki.ca.cert_pem()).expect("write CA");
        pki
    }

    pub(crate) fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// Issues a bundle for `names` into `file` (in `dir`, or the PKI's own directory).
    pub(crate) fn issue(&self, names: &[&str], alg: Algorithm, file: &str, dir: Option<&Path>) -> PathBuf {
        let path = dir.unwrap_or(self.dir.path()).join(file);
        let pem = self.ca.issue(names, alg, 30).expect("issue");
        // Written beside, then renamed: a scanner never sees half a file.
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, pem).expect("write bundle");
        std::fs::rename(&tmp, &path).expect("rename bundle");
        path
    }
}

/// The `tls.certificates` line for bundle files.
pub(crate) fn certificates(files: &[&Path]) -> String {
    let list: Vec<String> = files.iter().map(|f| format!("{{cert: \"{}\"}}", f.display())).collect();
    format!("  certificates: [{}]", list.join(", "))
}

/// A gateway with one TLS listener `https` in front of `backend`; `tls` is the body of the
/// top-level `tls:` section, `listener` extra listener settings.
fn gateway(backend: &Backend, tls: &str, listener: &str) -> Gateway {
    start(&format!(
        "workers: 2\nadmin: {{bind: \"127.0.0.1:0\"}}\ntls:\n{tls}\nlisteners:\n  https: {{bind: \"127.0.0.1:0\", tls: {{{listener}}}}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n  s: {{hosts: [\"*\"], routes: [{{path: /, upstream: u}}]}}\n",
        targets(&[backend])
    ))
}

/// What `openssl s_client` saw: its whole output, and whether the handshake succeeded.
pub(crate) struct Handshake {
    pub(crate) ok: bool,
    pub(crate) out: String,
}

impl Handshake {
    pub(crate) fn subject_cn(&self) -> Option<String> {
        let line = self.out.lines().find(|l| l.starts_with("subject="))?;
        Some(line.rsplit("CN = ").next()?.trim().to_string())
    }
    pub(crate) fn has(&self, text: &str) -> bool {
        self.out.contains(text)
    }
}

/// Runs `openssl s_client` against `port` with `args` and no input.
pub(crate) fn s_client(port: u16, args: &[&str]) -> Handshake {
    s_client_with(port, args, None)
}

/// Runs `openssl s_client`; with `request`, sends it and reads until the server closes (so a TLS
/// 1.3 session ticket, sent after the handshake, is always received before the client exits).
pub(crate) fn s_client_with(port: u16, args: &[&str], request: Option<&str>) -> Handshake {
    use std::io::Write;
    let mut child = Command::new("openssl")
        .args(["s_client", "-connect", &format!("127.0.0.1:{port}")])
        .args(args)
        .args(if request.is_some() { &["-ign_eof"][..] } else { &[][..] })
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run openssl s_client");
    if let (Some(req), Some(mut stdin)) = (request, child.stdin.take()) {
        let _ = stdin.write_all(req.as_bytes());
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().expect("wait for openssl s_client");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Handshake {
        ok: out.status.success() && text.contains("Verify return code") && text.contains("Cipher is"),
        out: text,
    }
}

fn curl_https(port: u16, pki: &Pki, host: &str, extra: &[&str]) -> gatehouse_testkit::Response {
    let resolve = format!("{host}:{port}:127.0.0.1");
    let url = format!("https://{host}:{port}/hello");
    let ca = pki.ca_file();
    let mut args = vec!["--cacert", ca.to_str().unwrap_or_default(), "--resolve", &resolve];
    args.extend_from_slice(extra);
    args.push(&url);
    curl(&args)
}

#[test]
fn alpn_chooses_http2_or_http11_and_the_backend_sees_https() {
    let pki = Pki::new();
    let cert = pki.issue(&["site.test"], Algorithm::EcdsaP256, "site.pem", None);
    let b = Backend::start("b");
    let gw = gateway(&b, &certificates(&[&cert]), "");
    let port = gw.addr("https").port();
    let h2 = curl_https(port, &pki, "site.test", &["--http2"]);
    assert_eq!((h2.status, h2.version.as_str()), (200, "HTTP/2"), "{h2:?}");
    let h1 = curl_https(port, &pki, "site.test", &["--http1.1"]);
    assert_eq!((h1.status, h1.version.as_str()), (200, "HTTP/1.1"), "{h1:?}");
    let seen = b.requests();
    assert_eq!(seen.len(), 2);
    for r in &seen {
        assert_eq!(r.header("x-forwarded-proto"), Some("https"), "{r:?}");
        assert_eq!(r.header("host"), Some(format!("site.test:{port}").as_str()));
    }
}

#[test]
fn sni_picks_exact_then_wildcard_and_unknown_names_are_refused() {
    let pki = Pki::new();
    let wild = pki.issue(&["*.wild.test"], Algorithm::EcdsaP256, "wild.pem", None);
    let exact = pki.issue(&["api.wild.test"], Algorithm::EcdsaP256, "api.pem", None);
    let b = Backend::start("b");
    let gw = gateway(&b, &certificates(&[&wild, &exact]), "");
    let port = gw.addr("https").port();
    let api = s_client(port, &["-servername", "api.wild.test"]);
    assert!(api.ok, "{}", api.out);
    assert_eq!(api.subject_cn().as_deref(), Some("api.wild.test"));
    let www = s_client(port, &["-servername", "WWW.Wild.Test"]);
    assert_eq!(www.subject_cn().as_deref(), Some("*.wild.test"), "{}", www.out);
    // One label deep only, never another site's certificate.
    for name in ["a.b.wild.test", "wild.test", "other.test"] {
        let h = s_client(port, &["-servername", name]);
        assert!(!h.ok && h.has("unrecognized name"), "{name}: {}", h.out);
    }
    let none = s_client(port, &["-noservername"]);
    assert!(!none.ok && none.has("unrecognized name"), "{}", none.out);
    let m = gw.metrics();
    assert_eq!(metric_value(&m, "gatehouse_tls_handshake_failures_total{reason=\"unknown_name\"}"), Some(4.0), "{m}");
}

/// With one configured certificate and nothing else to serve, a client that sends no name (Go's
/// and others' for an IP address) gets that certificate instead of `unrecognized_name`; a
/// wildcard one too.
#[test]
fn the_only_certificate_serves_clients_without_a_name() {
    let pki = Pki::new();
    let b = Backend::start("b");
    for (names, cn) in [(["only.test"], "only.test"), (["*.only.test"], "*.only.test")] {
        let cert = pki.issue(&names, Algorithm::EcdsaP256, "only.pem", None);
        let gw = gateway(&b, &certificates(&[&cert]), "");
        let port = gw.addr("https").port();
        let none = s_client(port, &["-noservername"]);
        assert_eq!(none.subject_cn().as_deref(), Some(cn), "{}", none.out);
        let r = curl(&[
            "--cacert",
            pki.ca_file().to_str().unwrap_or_default(),
            "-k",
            &format!("https://127.0.0.1:{port}/"),
        ]);
        assert_eq!(r.status, 200);
    }
}

#[test]
fn clients_without_a_name_or_with_an_unknown_one_get_the_default_certificate() {
    let pki = Pki::new();
    let main = pki.issue(&["main.test"], Algorithm::EcdsaP256, "main.pem", None);
    let other = pki.issue(&["other.test"], Algorithm::EcdsaP256, "other.pem", None);
    let b = Backend::start("b");
    let gw = gateway(&b, &format!("  default_certificate: main.test\n{}", certificates(&[&main, &other])), "");
    let port = gw.addr("https").port();
    assert_eq!(s_client(port, &["-noservername"]).subject_cn().as_deref(), Some("main.test"));
    assert_eq!(s_client(port, &["-servername", "nobody.test"]).subject_cn().as_deref(), Some("main.test"));
    assert_eq!(s_client(port, &["-servername", "other.test"]).subject_cn().as_deref(), Some("other.test"));
    // An IP address is not a server name (RFC 6066): curl sends none, and gets the default.
    let r =
        curl(&["--cacert", pki.ca_file().to_str().unwrap_or_default(), "-k", &format!("https://127.0.0.1:{port}/")]);
    assert_eq!(r.status, 200);
}

#[test]
fn ecdsa_goes_to_clients_that_can_verify_it_rsa_to_the_others() {
    let pki = Pki::new();
    let e = pki.issue(&["dual.test"], Algorithm::EcdsaP256, "dual-ecdsa.pem", None);
    let r = pki.issue(&["dual.test"], Algorithm::Rsa2048, "dual-rsa.pem", None);
    let b = Backend::start("b");
    let gw = gateway(&b, &certificates(&[&e, &r]), "");
    let port = gw.addr("https").port();
    let ecdsa = s_client(port, &["-servername", "dual.test"]);
    assert!(ecdsa.has("Peer signature type: ECDSA"), "{}", ecdsa.out);
    for version in ["-tls1_2", "-tls1_3"] {
        let rsa = s_client(port, &["-servername", "dual.test", version, "-sigalgs", "RSA-PSS+SHA256:RSA+SHA256"]);
        assert!(rsa.ok && rsa.has("Peer signature type: RSA-PSS"), "{version}: {}", rsa.out);
    }
}

#[test]
fn versions_and_cipher_suites_are_per_listener() {
    let pki = Pki::new();
    let cert = pki.issue(&["v.test"], Algorithm::EcdsaP256, "v.pem", None);
    let b = Backend::start("b");
    let gw = gateway(&b, &certificates(&[&cert]), "versions: [tls1.3], ciphers: [TLS13_CHACHA20_POLY1305_SHA256]");
    let port = gw.addr("https").port();
    let ok = s_client(port, &["-servername", "v.test"]);
    assert!(ok.has("TLSv1.3, Cipher is TLS_CHACHA20_POLY1305_SHA256"), "{}", ok.out);
    let old = s_client(port, &["-servername", "v.test", "-tls1_2"]);
    assert!(!old.ok, "{}", old.out);
    let m = gw.metrics();
    assert_eq!(metric_value(&m, "gatehouse_tls_handshake_failures_total{reason=\"protocol\"}"), Some(1.0), "{m}");
}

#[test]
fn the_listener_order_picks_the_cipher_suite_unless_the_client_puts_chacha20_first() {
    let pki = Pki::new();
    let cert = pki.issue(&["o.test"], Algorithm::EcdsaP256, "o.pem", None);
    let b = Backend::start("b");
    let gw = gateway(&b, &certificates(&[&cert]), "");
    let port = gw.addr("https").port();
    // OpenSSL's clients put AES-256-GCM first; the listener prefers AES-128-GCM.
    let tls13 = s_client(port, &["-servername", "o.test"]);
    assert!(tls13.has("TLSv1.3, Cipher is TLS_AES_128_GCM_SHA256"), "{}", tls13.out);
    let tls12 = s_client(port, &["-servername", "o.test", "-tls1_2"]);
    assert!(tls12.has("Cipher is ECDHE-ECDSA-AES128-GCM-SHA256"), "{}", tls12.out);
    // A client without AES hardware puts ChaCha20 first, and gets it.
    let chacha13 = s_client(
        port,
        &["-servername", "o.test", "-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256"],
    );
    assert!(chacha13.has("TLSv1.3, Cipher is TLS_CHACHA20_POLY1305_SHA256"), "{}", chacha13.out);
    let chacha12 = s_client(
        port,
        &["-servername", "o.test", "-tls1_2", "-cipher", "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-SHA256"],
    );
    assert!(chacha12.has("Cipher is ECDHE-ECDSA-CHACHA20-POLY1305"), "{}", chacha12.out);
    // And ChaCha20 listed second by the client is not its first choice.
    let second = s_client(
        port,
        &["-servername", "o.test", "-ciphersuites", "TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"],
    );
    assert!(second.has("TLSv1.3, Cipher is TLS_AES_256_GCM_SHA384"), "{}", second.out);

    // `ciphers` is the listener's order; `prefer_server_ciphers: false` hands the choice to the client.
    let ordered = gateway(
        &b,
        &certificates(&[&cert]),
        "ciphers: [TLS13_AES_256_GCM_SHA384, TLS13_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]",
    );
    let h = s_client(
        ordered.addr("https").port(),
        &["-servername", "o.test", "-ciphersuites", "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384"],
    );
    assert!(h.has("TLSv1.3, Cipher is TLS_AES_256_GCM_SHA384"), "{}", h.out);
    let client = gateway(&b, &certificates(&[&cert]), "prefer_server_ciphers: false");
    let h = s_client(client.addr("https").port(), &["-servername", "o.test"]);
    assert!(h.has("TLSv1.3, Cipher is TLS_AES_256_GCM_SHA384"), "{}", h.out);
}

/// Polls `f` until it holds, for at most [`SETTLE`] (the store is rescanned every 100 ms here).
pub(crate) fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + SETTLE;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub(crate) fn serial(h: &Handshake) -> Option<String> {
    // `-showcerts` is not needed: the serial is read from the leaf printed by x509.
    let pem_start = h.out.find("-----BEGIN CERTIFICATE-----")?;
    let pem_end = h.out[pem_start..].find("-----END CERTIFICATE-----")? + pem_start + 25;
    let mut child = Command::new("openssl")
        .args(["x509", "-noout", "-serial"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .ok()?;
    use std::io::Write;
    child.stdin.take()?.write_all(&h.out.as_bytes()[pem_start..pem_end]).ok()?;
    let out = child.wait_with_output().ok()?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[test]
fn the_directory_store_adds_replaces_and_removes_certificates_while_running() {
    let pki = Pki::new();
    let store = TempDir::new();
    let b = Backend::start("b");
    let gw = gateway(
        &b,
        &format!("  store: {{dir: \"{}\", scan_interval: 100ms}}\n  negative_cache_ttl: 100ms", store.path().display()),
        "",
    );
    let port = gw.addr("https").port();
    assert!(s_client(port, &["-servername", "new.test"]).has("unrecognized name"));

    let path = pki.issue(&["new.test"], Algorithm::EcdsaP256, "new.pem", Some(store.path()));
    eventually("the added certificate serves", || s_client(port, &["-servername", "new.test"]).ok);
    let first = serial(&s_client(port, &["-servername", "new.test"])).expect("serial");

    pki.issue(&["new.test"], Algorithm::EcdsaP256, "new.pem", Some(store.path()));
    eventually("the replacement serves", || {
        serial(&s_client(port, &["-servername", "new.test"])).is_some_and(|s| s != first)
    });
    let second = serial(&s_client(port, &["-servername", "new.test"])).expect("serial");

    // A broken replacement is refused; the loaded one keeps serving.
    let pem = std::fs::read_to_string(&path).expect("read");
    let key_start = pem.find("-----BEGIN PRIVATE KEY").expect("key in bundle");
    let other = pki.ca.issue(&["new.test"], Algorithm::EcdsaP256, 30).expect("issue");
    let other_key = &other[other.find("-----BEGIN PRIVATE KEY").expect("key")..];
    std::fs::write(store.join("new.tmp"), format!("{}{}", &pem[..key_start], other_key)).expect("write");
    std::fs::rename(store.join("new.tmp"), &path).expect("rename");
    eventually("the broken file is reported", || gw.stderr().contains("certificate file refused"));
    let h = s_client(port, &["-servername", "new.test"]);
    assert!(h.ok, "{}", h.out);
    assert_eq!(serial(&h).as_deref(), Some(second.as_str()));

    std::fs::remove_file(&path).expect("remove");
    eventually("the removed certificate stops serving", || {
        s_client(port, &["-servername", "new.test"]).has("unrecognized name")
    });
}

#[test]
fn sessions_resume_by_ticket_and_by_session_id() {
    let pki = Pki::new();
    let cert = pki.issue(&["resume.test"], Algorithm::EcdsaP256, "r.pem", None);
    let certs = certificates(&[&cert]);
    let b = Backend::start("b");
    let cases: [(&str, &str, &[&str]); 3] = [
        ("tickets, TLS 1.3", "", &["-tls1_3"]),
        ("tickets, TLS 1.2", "", &["-tls1_2"]),
        ("session ids, TLS 1.2", "\n  tickets: off", &["-tls1_2", "-no_ticket"]),
    ];
    for (what, extra, args) in cases {
        let gw = gateway(&b, &format!("{certs}{extra}"), "");
        settled(&gw);
        let port = gw.addr("https").port();
        let sess = gw.dir().join("session.pem");
        let sess = sess.to_str().unwrap_or_default();
        let mut first_args = vec!["-servername", "resume.test", "-sess_out", sess];
        first_args.extend_from_slice(args);
        let request = "GET / HTTP/1.1\r\nHost: resume.test\r\nConnection: close\r\n\r\n";
        let first = s_client_with(port, &first_args, Some(request));
        assert!(first.ok && first.has("New, TLS"), "{what}: {}", first.out);
        // The response's last bytes and close_notify leave in one write: the response comes
        // whole, and the clean end lets s_client exit with success (`ok`).
        assert!(first.has("HTTP/1.1 200 OK"), "{what}: {}", first.out);
        let mut again = vec!["-servername", "resume.test", "-sess_in", sess];
        again.extend_from_slice(args);
        let second = s_client(port, &again);
        assert!(second.has("Reused, TLS"), "{what}: {}", second.out);
        // Sessions are bound to their name.
        let mut other = vec!["-servername", "RESUME.other", "-sess_in", sess];
        other.extend_from_slice(args);
        assert!(!s_client(port, &other).has("Reused"), "{what}: resumed under another name");
        let m = gw.metrics();
        let resumed: f64 = m
            .lines()
            .filter(|l| l.starts_with("gatehouse_tls_handshakes_total") && l.contains("kind=\"resumed\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        assert_eq!(resumed, 1.0, "{what}: {m}");
    }
}

/// The server keeps a TLS 1.3 session ticket queued after the handshake so that it leaves with
/// the first response; a client that sends nothing must still get it, before the server waits for
/// a request. s_client here sends no request and waits for the server to close (the header timeout
/// of 1 s), then saves what it got; the next connection resumes with it.
#[test]
fn a_tls13_ticket_reaches_a_client_that_sends_no_request() {
    let pki = Pki::new();
    let cert = pki.issue(&["quiet.test"], Algorithm::EcdsaP256, "q.pem", None);
    let b = Backend::start("b");
    let gw = start(&format!(
        "workers: 1\nadmin: {{bind: \"127.0.0.1:0\"}}\ntls:\n{}\nlisteners:\n  https: {{bind: \"127.0.0.1:0\", tls: {{}}, header_read_timeout: 1s}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n  s: {{hosts: [\"*\"], routes: [{{path: /, upstream: u}}]}}\n",
        certificates(&[&cert]),
        targets(&[&b])
    ));
    settled(&gw);
    let port = gw.addr("https").port();
    let sess = gw.dir().join("quiet.pem");
    let sess = sess.to_str().unwrap_or_default();
    let first = s_client_with(port, &["-servername", "quiet.test", "-sess_out", sess, "-tls1_3"], Some(""));
    // The server closes at its header timeout without close_notify (as nginx does on a timeout), so
    // s_client's exit status reports an unexpected end: the session is what counts.
    assert!(first.has("New, TLSv1.3") && first.has("New Session Ticket arrived"), "{}", first.out);
    let again = s_client_with(port, &["-servername", "quiet.test", "-sess_in", sess, "-tls1_3"], Some(""));
    assert!(again.has("Reused, TLS"), "the ticket never reached the client: {}", again.out);
}

#[test]
fn the_quick_start_serves_https_with_a_self_signed_certificate_kept_across_restarts() {
    let state = TempDir::new();
    let b = Backend::start("b");
    let tls = format!("  self_signed: {{dir: \"{}\", names: [localhost, 127.0.0.1]}}", state.join("state").display());
    let first_serial = {
        let gw = gateway(&b, &tls, "");
        let h = s_client(gw.addr("https").port(), &["-servername", "localhost"]);
        assert_eq!(h.subject_cn().as_deref(), Some("localhost"), "{}", h.out);
        let r = curl(&["-k", &format!("https://127.0.0.1:{}/", gw.addr("https").port())]);
        assert_eq!(r.status, 200);
        serial(&h).expect("serial")
    };
    let file = state.join("state").join("self-signed.pem");
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&file).expect("kept").permissions());
    assert_eq!(mode & 0o777, 0o600);
    let pem = std::fs::read(&file).expect("read the certificate");
    let (kept, _) = gatehouse_tls::bundle::parse(&pem, None, 0).expect("a valid bundle");
    let days = (kept.facts.not_after - kept.facts.not_before) / 86_400;
    assert_eq!(days, gatehouse_tls::issue::SELF_SIGNED_DAYS, "at most 366 days, as Mozilla's intermediate profile");
    let gw = gateway(&b, &tls, "");
    let h = s_client(gw.addr("https").port(), &["-servername", "localhost"]);
    assert_eq!(serial(&h), Some(first_serial), "the certificate is made once and kept");
}

#[test]
fn a_bad_certificate_in_the_configuration_is_refused_with_its_path() {
    let pki = Pki::new();
    let good = pki.issue(&["good.test"], Algorithm::EcdsaP256, "good.pem", None);
    let bad = pki.dir.join("bad.pem");
    std::fs::write(&bad, "not a certificate").expect("write");
    let b = Backend::start("b");
    let mut gw = gateway(&b, &certificates(&[&good]), "");
    settled(&gw);
    let port = gw.addr("https").port();
    let config = std::fs::read_to_string(gw.dir().join("gatehouse.yaml")).expect("config");
    gw.write_config(&config.replace(good.to_str().unwrap_or_default(), bad.to_str().unwrap_or_default()));
    gw.signal("HUP");
    let failed = gw.wait_event("reload_failed", SETTLE);
    assert!(failed.to_string().contains("tls.certificates[0]"), "{failed}");
    assert!(failed.to_string().contains("no CERTIFICATE block found"), "{failed}");
    assert!(s_client(port, &["-servername", "good.test"]).ok, "the old certificate keeps serving");
}

/// RFC 9113 conformance over TLS (ALPN h2), checked by h2spec. CI installs it; elsewhere the test
/// says it was skipped, unless `CI` is set.
#[test]
fn h2spec_passes_on_the_tls_listener() {
    let Some(h2spec) = crate::h2c::find_in_path("h2spec") else {
        assert!(std::env::var_os("CI").is_none(), "h2spec is not installed but CI is set");
        eprintln!("h2spec_passes_on_the_tls_listener: skipped, h2spec not on PATH");
        return;
    };
    let pki = Pki::new();
    let cert = pki.issue(&["localhost"], Algorithm::EcdsaP256, "h2spec.pem", None);
    // h2spec skips its flow-control cases unless responses carry some body.
    let b = Backend::start(&"h2spec-backend-".repeat(16));
    let gw = gateway(
        &b,
        &format!("  default_certificate: localhost\n  certificates: [{{cert: \"{}\"}}]", cert.display()),
        "",
    );
    let port = gw.addr("https").port().to_string();
    crate::h2c::run_h2spec(&h2spec, &gw, &["-t", "-k", "-h", "127.0.0.1", "-p", &port], "TLS");
}

#[test]
fn check_lists_every_broken_certificate_file() {
    let dir = TempDir::new();
    std::fs::write(dir.join("bad.pem"), "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
        .expect("write");
    let config = dir.join("gatehouse.yaml");
    std::fs::write(
        &config,
        format!(
            "tls:\n  certificates: [{{cert: \"{0}/missing.pem\"}}, {{cert: \"{0}/bad.pem\"}}]\nlisteners:\n  https: {{bind: \"127.0.0.1:0\", tls: {{}}}}\n",
            dir.path().display()
        ),
    )
    .expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_gatehouse")).arg("check").arg(&config).output().expect("run check");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("tls.certificates[0].cert: cannot read"), "{stderr}");
    assert!(stderr.contains("tls.certificates[1]:") && stderr.contains("unparsable PEM"), "{stderr}");
    assert!(stderr.contains("has 2 error(s)"), "{stderr}");
}

/// Full TLS handshakes in a loop on a thread of its own, as a client trusting `ca_pem` would make
/// them, until `stop` is set (or 20,000 handshakes, or 60 s). Returns the handshakes made and the
/// errors seen.
pub(crate) fn handshake_loop(
    port: u16,
    name: &str,
    ca_pem: &str,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<(u64, Vec<String>)> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.expect("CA PEM")).expect("add CA");
    }
    let config = std::sync::Arc::new(
        rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth(),
    );
    let server_name = ServerName::try_from(name.to_string()).expect("server name");
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        let (mut ok, mut errors) = (0u64, Vec::new());
        while !stop.load(std::sync::atomic::Ordering::SeqCst) && ok < 20_000 && Instant::now() < deadline {
            let result = (|| -> Result<(), String> {
                let mut tcp = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
                tcp.set_read_timeout(Some(Duration::from_secs(5))).map_err(|e| e.to_string())?;
                let mut conn =
                    rustls::ClientConnection::new(config.clone(), server_name.clone()).map_err(|e| e.to_string())?;
                while conn.is_handshaking() {
                    conn.complete_io(&mut tcp).map_err(|e| e.to_string())?;
                }
                conn.send_close_notify();
                let _ = conn.complete_io(&mut tcp);
                Ok(())
            })();
            match result {
                Ok(()) => ok += 1,
                Err(e) => errors.push(e),
            }
        }
        (ok, errors)
    })
}

#[test]
fn certificates_replaced_under_continuous_handshakes_fail_none() {
    let pki = Pki::new();
    let store = TempDir::new();
    pki.issue(&["busy.test"], Algorithm::EcdsaP256, "busy.pem", Some(store.path()));
    let b = Backend::start("b");
    let gw = gateway(&b, &format!("  store: {{dir: \"{}\", scan_interval: 50ms}}", store.path().display()), "");
    let port = gw.addr("https").port();
    eventually("the stored certificate serves", || s_client(port, &["-servername", "busy.test"]).ok);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = handshake_loop(port, "busy.test", &pki.ca.cert_pem(), stop.clone());
    let mut last = serial(&s_client(port, &["-servername", "busy.test"])).expect("serial");
    for _ in 0..10 {
        pki.issue(&["busy.test"], Algorithm::EcdsaP256, "busy.pem", Some(store.path()));
        eventually("the replacement serves", || match serial(&s_client(port, &["-servername", "busy.test"])) {
            Some(s) if s != last => {
                last = s;
                true
            }
            _ => false,
        });
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let (ok, errors) = load.join().expect("load thread");
    eprintln!("{ok} handshakes while the certificate was replaced 10 times; {} failed", errors.len());
    assert!(ok > 100, "the load ran: {ok}");
    assert!(errors.is_empty(), "{} failed handshakes, first: {:?}", errors.len(), errors.first());
}

/// A gateway with a plain listener `http` and a TLS listener `https`, sites given as YAML.
fn two_listeners(pki: &Pki, backend: &Backend, names: &[&str], sites: &str) -> Gateway {
    let cert = pki.issue(names, Algorithm::EcdsaP256, "two.pem", None);
    start(&format!(
        "workers: 2\nadmin: {{bind: \"127.0.0.1:0\"}}\ntls:\n{}\nlisteners:\n  http: {{bind: \"127.0.0.1:0\"}}\n  https: {{bind: \"127.0.0.1:0\", tls: {{}}}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n{sites}",
        certificates(&[&cert]),
        targets(&[backend])
    ))
}

#[test]
fn plain_http_is_redirected_to_https_for_sites_that_ask() {
    let pki = Pki::new();
    let b = Backend::start("b");
    let gw = two_listeners(
        &pki,
        &b,
        &["secure.test", "plain.test"],
        "  secure: {hosts: [secure.test], https_redirect: true, https_port: 8443, routes: [{path: /, upstream: u}]}\n  plain: {hosts: [plain.test], routes: [{path: /, upstream: u}]}\n",
    );
    let http = gw.addr("http");
    let r = gatehouse_testkit::http_get(http, "secure.test:8080", "/a/b?c=d", &[]);
    assert_eq!(r.status, 308, "{r:?}");
    assert_eq!(r.header("location"), Some("https://secure.test:8443/a/b?c=d"));
    assert_eq!(gatehouse_testkit::http_get(http, "plain.test", "/", &[]).status, 200);
    let https = curl_https(gw.addr("https").port(), &pki, "secure.test", &[]);
    assert_eq!(https.status, 200, "{https:?}");
    assert_eq!(b.request_count(), 2, "the redirect is never forwarded");
}

#[test]
fn hsts_is_sent_over_tls_only_the_sites_before_the_listeners() {
    let pki = Pki::new();
    let b = Backend::start("b");
    let cert = pki.issue(&["strict.test", "other.test"], Algorithm::EcdsaP256, "hsts.pem", None);
    let gw = start(&format!(
        "workers: 2\nadmin: {{bind: \"127.0.0.1:0\"}}\ntls:\n{}\nlisteners:\n  http: {{bind: \"127.0.0.1:0\"}}\n  https: {{bind: \"127.0.0.1:0\", tls: {{}}, hsts: {{max_age: 2h}}}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n  strict: {{hosts: [strict.test], hsts: {{include_subdomains: true, preload: true}}, routes: [{{path: /, upstream: u}}]}}\n  other: {{hosts: [other.test], routes: [{{path: /, upstream: u}}]}}\n",
        certificates(&[&cert]),
        targets(&[&b])
    ));
    let port = gw.addr("https").port();
    let strict = "max-age=31536000; includeSubDomains; preload";
    // HTTP/2 and HTTP/1.1 over TLS: the site's policy, else the listener's.
    for version in ["--http2", "--http1.1"] {
        let r = curl_https(port, &pki, "strict.test", &[version]);
        assert_eq!((r.status, r.header("strict-transport-security")), (200, Some(strict)), "{version}: {r:?}");
        let r = curl_https(port, &pki, "other.test", &[version]);
        assert_eq!((r.status, r.header("strict-transport-security")), (200, Some("max-age=7200")), "{version}: {r:?}");
    }
    // The gateway's own answers carry it too: a host no site serves (404) on the TLS listener.
    let r = curl_https(port, &pki, "strict.test", &["-H", "Host: nowhere.test"]);
    assert_eq!((r.status, r.header("strict-transport-security")), (404, Some("max-age=7200")), "{r:?}");
    // Never over plain HTTP (RFC 6797 §7.2), not even for the site that has it.
    let r = gatehouse_testkit::http_get(gw.addr("http"), "strict.test", "/", &[]);
    assert_eq!((r.status, r.header("strict-transport-security")), (200, None), "{r:?}");
}

#[test]
fn hsts_that_cannot_hold_is_refused_by_check() {
    let (passed, text) = crate::common::check(
        "listeners:\n  http: {bind: \"127.0.0.1:0\", hsts: {max_age: 1d}}\nupstreams:\n  u: {targets: [\"127.0.0.1:9\"]}\nsites:\n  s: {hosts: [s.test], hsts: {max_age: 30d, preload: true}, routes: [{path: /, upstream: u}]}\n",
    );
    assert!(!passed, "{text}");
    assert!(text.contains("listeners.http.hsts: a listener without `tls` cannot send it"), "{text}");
    assert!(
        text.contains("sites.s.hsts.preload: needs `include_subdomains: true` and a `max_age` of at least 365d"),
        "{text}"
    );
}

#[test]
fn sites_with_client_auth_require_a_verified_certificate_for_that_site() {
    let pki = Pki::new();
    let clients = Authority::new("Client CA").expect("client CA");
    std::fs::write(pki.dir.join("clients.pem"), clients.cert_pem()).expect("write");
    let client = pki.dir.join("client.pem");
    std::fs::write(&client, clients.issue(&["alice.client"], Algorithm::EcdsaP256, 30).expect("issue")).expect("write");
    let stranger = pki.dir.join("stranger.pem");
    std::fs::write(&stranger, pki.ca.issue(&["mallory.client"], Algorithm::EcdsaP256, 30).expect("issue"))
        .expect("write");
    let b = Backend::start("b");
    let gw = two_listeners(
        &pki,
        &b,
        &["secure.test", "open.test"],
        &format!(
            "  secure: {{hosts: [secure.test], client_auth: {{ca: \"{}\"}}, routes: [{{path: /, upstream: u}}]}}\n  open: {{hosts: [open.test], routes: [{{path: /, upstream: u}}]}}\n",
            pki.dir.join("clients.pem").display()
        ),
    );
    let port = gw.addr("https").port();
    let cert_arg = client.to_str().unwrap_or_default();
    let ok = curl_https(port, &pki, "secure.test", &["--cert", cert_arg, "-H", "X-Client-Verify: FORGED"]);
    assert_eq!(ok.status, 200, "{ok:?}");
    let seen = b.requests();
    let last = seen.last().expect("forwarded");
    assert_eq!(last.header("x-client-verify"), Some("SUCCESS"));
    assert_eq!(last.header("x-client-cert-subject"), Some("CN=alice.client"));

    // No certificate, or one from another CA: the handshake is refused.
    // (TLS 1.3 clients learn it after their Finished, so a request is sent and the alert read.)
    let request = Some("GET / HTTP/1.1\r\nHost: secure.test\r\nConnection: close\r\n\r\n");
    let none = s_client_with(port, &["-servername", "secure.test"], request);
    let wrong =
        s_client_with(port, &["-servername", "secure.test", "-cert", stranger.to_str().unwrap_or_default()], request);
    for h in [&none, &wrong] {
        assert!(h.has("alert") && !h.has("HTTP/1.1 200"), "{}", h.out);
    }
    let m = gw.metrics();
    assert!(
        metric_value(&m, "gatehouse_tls_handshake_failures_total{reason=\"certificate\"}").unwrap_or(0.0) >= 1.0,
        "{m}"
    );

    // A connection made for the open site cannot reach the secure one by its Host header.
    let resolve = format!("open.test:{port}:127.0.0.1");
    let ca = pki.ca_file();
    let r = curl(&[
        "--cacert",
        ca.to_str().unwrap_or_default(),
        "--resolve",
        &resolve,
        "-H",
        "Host: secure.test",
        &format!("https://open.test:{port}/"),
    ]);
    assert_eq!(r.status, 421, "{r:?}");
    // Plain HTTP to the secure site is refused.
    assert_eq!(gatehouse_testkit::http_get(gw.addr("http"), "secure.test", "/", &[]).status, 403);
    assert_eq!(b.request_count(), 1);
}

/// Runs `gatehouse cert --config CONFIG ARGS…`: (success, stdout, stderr).
pub(crate) fn cert_cli(config: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .args(["cert", "--config", config.to_str().unwrap_or_default()])
        .args(args)
        .output()
        .expect("run gatehouse cert");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `openssl` with `args` in `dir`, panicking with its output if it fails.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl").args(args).current_dir(dir).output().expect("run openssl");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn an_ocsp_response_from_a_file_is_stapled_and_a_separate_key_file_is_read() {
    // Made with the openssl command line, as an operator would: CA, leaf, key in its own file,
    // and an OCSP response signed by the CA.
    let dir = TempDir::new();
    let d = dir.path();
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    openssl(
        d,
        &[&["req", "-x509"][..], &ec, &["-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=OCSP CA", "-days", "3"]]
            .concat(),
    );
    openssl(
        d,
        &[
            &["req"][..],
            &ec,
            &[
                "-keyout",
                "leaf.key",
                "-out",
                "leaf.csr",
                "-subj",
                "/CN=ocsp.test",
                "-addext",
                "subjectAltName=DNS:ocsp.test",
            ],
        ]
        .concat(),
    );
    openssl(
        d,
        &[
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "leaf.pem",
            "-days",
            "2",
            "-copy_extensions",
            "copy",
        ],
    );
    std::fs::write(d.join("index.txt"), "").expect("write");
    openssl(
        d,
        &[
            "ocsp",
            "-index",
            "index.txt",
            "-rsigner",
            "ca.pem",
            "-rkey",
            "ca.key",
            "-CA",
            "ca.pem",
            "-issuer",
            "ca.pem",
            "-cert",
            "leaf.pem",
            "-respout",
            "resp.der",
            "-ndays",
            "1",
        ],
    );
    let b = Backend::start("b");
    let gw = gateway(
        &b,
        &format!(
            "  certificates: [{{cert: \"{0}/leaf.pem\", key: \"{0}/leaf.key\", ocsp: \"{0}/resp.der\"}}]",
            d.display()
        ),
        "",
    );
    let h = s_client(gw.addr("https").port(), &["-servername", "ocsp.test", "-status"]);
    assert!(h.ok, "{}", h.out);
    assert!(h.has("OCSP Response Status: successful"), "{}", h.out);
    assert!(h.has("Responder Id: CN = OCSP CA"), "{}", h.out);
}

#[test]
fn the_cert_command_manages_a_directory_store_under_a_running_gateway() {
    let pki = Pki::new();
    let store = TempDir::new();
    let b = Backend::start("b");
    let gw = gateway(&b, &format!("  store: {{dir: \"{}\", scan_interval: 100ms}}", store.path().display()), "");
    let port = gw.addr("https").port();
    let config = gw.dir().join("gatehouse.yaml");
    let cert = |args: &[&str]| cert_cli(&config, args);
    let ecdsa = pki.issue(&["dir.test"], Algorithm::EcdsaP256, "dir-e.pem", None);
    let rsa = pki.issue(&["dir.test"], Algorithm::Rsa2048, "dir-r.pem", None);
    let (ok, out, err) = cert(&["import", ecdsa.to_str().unwrap_or_default(), rsa.to_str().unwrap_or_default()]);
    assert!(ok, "{out}{err}");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(store.join("dir.test.ecdsa.pem")).expect("stored").permissions(),
    );
    assert_eq!(mode & 0o777, 0o600, "bundles hold keys");
    assert!(store.join("dir.test.rsa.pem").exists());
    // The two files are renamed in one after the other; a scan may fall between them.
    eventually("the imported pair serves", || {
        s_client(port, &["-servername", "dir.test"]).ok
            && s_client(port, &["-servername", "dir.test", "-sigalgs", "RSA-PSS+SHA256"])
                .has("Peer signature type: RSA-PSS")
    });

    let (ok, out, _) = cert(&["list"]);
    assert!(ok && out.lines().count() == 2, "{out}");
    let (ok, out, _) = cert(&["show", "dir.test"]);
    assert!(ok && out.contains("key:        ecdsa") && out.contains("key:        rsa"), "{out}");
    assert!(!out.contains("PRIVATE"), "{out}");

    let (ok, _, err) = cert(&["import", pki.ca_file().to_str().unwrap_or_default()]);
    assert!(!ok && err.contains("no PRIVATE KEY block found"), "{err}");

    let (ok, out, _) = cert(&["remove", "dir.test"]);
    assert!(ok && out.matches("removed").count() == 2, "{out}");
    eventually("the removed names stop serving", || {
        s_client(port, &["-servername", "dir.test"]).has("unrecognized name")
    });
}
