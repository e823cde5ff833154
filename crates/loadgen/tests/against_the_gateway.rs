//! gatehouse-loadgen against the real gateway binary (built beside this test, as by
//! `cargo test --workspace`): every connection a full handshake and one proxied request, or with
//! `--resume` or `--origin-port` a resumed one; the name served checked; and a failed run
//! reported as such.

use gatehouse_testkit::{metric_value, Backend, Gateway, TempDir};
use gatehouse_tls::issue::{Algorithm, Authority};
use serde_json::Value;
use std::process::Command;

/// Runs the load generator with `args`; its exit success and its JSON report.
fn loadgen(args: &[&str]) -> (bool, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_gatehouse-loadgen")).args(args).output().expect("run gatehouse-loadgen");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    let report = serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("no JSON report ({e}): {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    (out.status.success(), report)
}

fn handshakes(gw: &Gateway, version: &str, kind: &str, mechanism: &str) -> f64 {
    let series =
        format!("gatehouse_tls_handshakes_total{{version=\"{version}\",kind=\"{kind}\",mechanism=\"{mechanism}\"}}");
    metric_value(&gw.metrics(), &series).unwrap_or(0.0)
}

#[test]
fn every_connection_is_a_full_handshake_and_one_request() {
    let backend = Backend::start("b");
    let dir = TempDir::new();
    let ca = Authority::new("Loadgen Test CA").expect("CA");
    let bundle = dir.join("bench.pem");
    std::fs::write(&bundle, ca.issue(&["bench.test"], Algorithm::EcdsaP256, 30).expect("issue")).expect("write");
    // Tickets and the session cache on: a client that offered a session would resume.
    let gw = Gateway::start(&format!(
        "workers: 1\nadmin: {{bind: \"127.0.0.1:0\"}}\ntls:\n  certificates: [{{cert: \"{}\"}}]\n  default_certificate: bench.test\n  tickets: local\n  session_cache: local\nlisteners:\n  https: {{bind: \"127.0.0.1:0\", tls: {{}}}}\nupstreams:\n  u: {{targets: [\"{}\"]}}\nsites:\n  s: {{hosts: [\"*\"], routes: [{{path: /, upstream: u}}]}}\n",
        bundle.display(),
        backend.addr()
    ));
    let port = gw.addr("https").port().to_string();
    for (tls, version, suite) in
        [("1.3", "1.3", "TLSv1.3 TLS_AES_128_GCM_SHA256"), ("1.2", "1.2", "TLSv1.2 ECDHE-ECDSA-AES128-GCM-SHA256")]
    {
        let (full0, resumed0) =
            (handshakes(&gw, version, "full", "none"), handshakes(&gw, version, "resumed", "ticket"));
        let requests0 = backend.request_count();
        let (ok, report) = loadgen(&["--port", &port, "--path", "/x", "-n", "40", "-c", "4", "--tls", tls]);
        assert!(ok, "TLS {tls}: {report}");
        assert_eq!(report["ok"], 40, "TLS {tls}: {report}");
        assert_eq!(report["errors"], 0, "TLS {tls}: {report}");
        assert_eq!(report["resumed"], 0, "TLS {tls}: {report}");
        assert_eq!(report["versions"], serde_json::json!([suite]), "TLS {tls}: {report}");
        assert_eq!(handshakes(&gw, version, "full", "none") - full0, 40.0, "TLS {tls}: full handshakes");
        assert_eq!(handshakes(&gw, version, "resumed", "ticket") - resumed0, 0.0, "TLS {tls}: resumed");
        assert_eq!(backend.request_count() - requests0, 40, "TLS {tls}: requests proxied");
    }
    // --resume: each of the 4 slots offers what its previous connection got; only the first
    // connection of each slot is full.
    for (tls, mechanism) in [("1.3", "ticket"), ("1.2", "ticket")] {
        let (full0, resumed0) = (handshakes(&gw, tls, "full", "none"), handshakes(&gw, tls, "resumed", mechanism));
        let (ok, report) = loadgen(&["--port", &port, "-n", "40", "-c", "4", "--tls", tls, "--resume"]);
        assert!(ok, "TLS {tls} --resume: {report}");
        assert_eq!(report["resumed"], 36, "TLS {tls} --resume: {report}");
        assert_eq!(handshakes(&gw, tls, "full", "none") - full0, 4.0, "TLS {tls} --resume: full handshakes");
        assert_eq!(handshakes(&gw, tls, "resumed", mechanism) - resumed0, 36.0, "TLS {tls} --resume: resumed");
    }
    // --origin-port (here node A is the same node): each A connection offers nothing and makes a
    // full handshake, each B connection offers the session its A connection got.
    for tls in ["1.3", "1.2"] {
        let (full0, resumed0) = (handshakes(&gw, tls, "full", "none"), handshakes(&gw, tls, "resumed", "ticket"));
        let (ok, report) = loadgen(&["--port", &port, "--origin-port", &port, "-n", "20", "-c", "4", "--tls", tls]);
        assert!(ok, "TLS {tls} --origin-port: {report}");
        assert_eq!((&report["ok"], &report["resumed"]), (&20.into(), &20.into()), "TLS {tls}: {report}");
        let origin = &report["origin"];
        assert_eq!((&origin["ok"], &origin["resumed"]), (&20.into(), &0.into()), "TLS {tls}: {report}");
        assert_eq!(handshakes(&gw, tls, "full", "none") - full0, 20.0, "TLS {tls} --origin-port: full handshakes");
        assert_eq!(handshakes(&gw, tls, "resumed", "ticket") - resumed0, 20.0, "TLS {tls} --origin-port: resumed");
    }
    // --check-name: the certificate served must carry the name sent. bench.test does; the names
    // drawn from n{}.bench.test get the default certificate, which carries none of them.
    let (ok, report) = loadgen(&["--port", &port, "-n", "6", "-c", "2", "--sni", "bench.test", "--check-name"]);
    assert!(ok, "{report}");
    let drawn = ["--port", &port, "-n", "6", "-c", "2", "--sni-pattern", "n{}.bench.test", "--sni-count", "100"];
    let (ok, report) = loadgen(&[&drawn[..], &["--check-name"]].concat());
    assert!(!ok, "{report}");
    assert_eq!((&report["error_kinds"]["wrong_certificate"], &report["names"]), (&6.into(), &100.into()), "{report}");
    let (ok, report) = loadgen(&drawn);
    assert!(ok, "without --check-name: {report}");
    // A status other than 2xx counts as a failure, and fails the run.
    backend.set_status(503);
    let (ok, report) = loadgen(&["--port", &port, "-n", "5", "-c", "2"]);
    assert!(!ok, "{report}");
    assert_eq!(report["error_kinds"]["status"], 5, "{report}");
}

#[test]
fn a_server_that_is_not_there_fails_the_run() {
    let port = Backend::closed_port().port().to_string();
    let (ok, report) = loadgen(&["--port", &port, "-n", "3", "-c", "2"]);
    assert!(!ok, "{report}");
    assert_eq!(report["ok"], 0, "{report}");
    assert_eq!(report["error_kinds"]["connect"], 3, "{report}");
}
