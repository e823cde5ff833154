//! The command line: `check`, `convert` and `version`.

use gatehouse_testkit::TempDir;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_gatehouse");

#[test]
fn check_accepts_the_basic_example() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/basic.yaml");
    let out = Command::new(BIN).args(["check", example]).output().expect("run gatehouse check");
    assert!(out.status.success(), "check {example} failed: {}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
}

#[test]
fn check_lists_every_error_with_its_path() {
    let dir = TempDir::new();
    let file = dir.join("broken.yaml");
    let yaml = r#"
listeners:
  http: {bind: "127.0.0.1:0"}
upstreams:
  api:
    targets: [{address: "127.0.0.1:9001", weight: 0}]
sites:
  x:
    hosts: ["x.test"]
    routes: [{path: /, upstream: nowhere}]
tiemouts: 5s
"#;
    std::fs::write(&file, yaml).expect("write the broken configuration");
    let out = Command::new(BIN).arg("check").arg(&file).output().expect("run gatehouse check");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "check accepted a broken file; stderr:\n{stderr}");
    for path in ["upstreams.api.targets[0].weight", "sites.x.routes[0].upstream", "tiemouts"] {
        assert!(stderr.lines().any(|l| l.contains(&format!("{path}: "))), "error for `{path}` missing from:\n{stderr}");
    }
}

/// `check` reads every file `run` reads and says what `run` would: the gateway example names a
/// cluster secret under /etc/gatehouse, which `check` reports as `run` does; with a secret of
/// its own the example passes.
#[test]
fn check_reads_jwt_keys_and_the_files_run_reads_and_accepts_the_gateway_example() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/gateway.yaml");
    let dir = TempDir::new();
    let text = std::fs::read_to_string(example).expect("read the example");
    let secret = "/etc/gatehouse/cluster.secret";
    assert!(text.contains(secret), "the example names {secret}");
    if !std::path::Path::new(secret).exists() {
        let out = Command::new(BIN).args(["check", example]).output().expect("run gatehouse check");
        let check = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "check accepted a missing redis.secret_file");
        let out = Command::new(BIN).args(["run", "--config", example]).output().expect("run gatehouse run");
        let run = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "run started without its secret: {run}");
        let line = check.lines().find(|l| l.contains("redis.secret_file")).unwrap_or_else(|| panic!("{check}"));
        // Each names the place and the problem the same way (check puts the file name first).
        let said = line.find("redis.secret_file").map_or(line, |at| &line[at..]).trim();
        assert!(said.contains(secret) && run.contains(said), "check said {said:?}; run said:\n{run}");
    }
    std::fs::write(dir.join("cluster.secret"), "0123456789abcdef0123456789abcdef-example\n").expect("write a secret");
    let own = dir.join("gateway.yaml");
    std::fs::write(&own, text.replace(secret, &dir.join("cluster.secret").display().to_string()))
        .expect("write the example with its secret");
    let out = Command::new(BIN).arg("check").arg(&own).output().expect("run gatehouse check");
    assert!(out.status.success(), "check {} failed: {}", own.display(), String::from_utf8_lossy(&out.stderr));
    std::fs::write(dir.join("cluster.secret"), "short\n").expect("write a short secret");
    let out = Command::new(BIN).arg("check").arg(&own).output().expect("run gatehouse check");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("the cluster secret has 5 bytes; at least 32 are needed"), "{stderr}");

    std::fs::write(dir.join("not-a-key.pem"), "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
        .expect("write a bad key");
    let file = dir.join("gateway.yaml");
    let yaml = format!(
        "listeners: {{ http: {{ bind: \"127.0.0.1:0\" }} }}\nupstreams: {{ u: {{ targets: [\"127.0.0.1:9\"] }} }}\nservices: {{ s: {{ path: /s, upstream: u, auth: jwt }} }}\napps: {{ a: {{ jwt_keys: [{{ alg: ES256, public_key: \"{}\" }}], grants: {{ s: ~ }} }} }}\n",
        dir.join("not-a-key.pem").display()
    );
    std::fs::write(&file, yaml).expect("write the configuration");
    let out = Command::new(BIN).arg("check").arg(&file).output().expect("run gatehouse check");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "check accepted an unreadable key; stderr:\n{stderr}");
    assert!(stderr.contains("apps.a.jwt_keys[0]"), "{stderr}");
}

/// The files only `run` used to read are read by `check` too, in one run: an empty admin token
/// file, the admin listener's missing certificate, a cluster secret too short, Redis' missing
/// password file (the first of Redis' files that fails, as for `run`).
#[test]
fn check_reads_the_admin_and_redis_files_run_reads() {
    let dir = TempDir::new();
    std::fs::write(dir.join("token"), "\n").expect("write an empty token file");
    std::fs::write(dir.join("secret"), "too short\n").expect("write a secret");
    let file = dir.join("gatehouse.yaml");
    let missing = |name: &str| dir.join(name).display().to_string();
    let yaml = format!(
        "listeners: {{ http: {{ bind: \"127.0.0.1:0\" }} }}\nadmin: {{ bind: \"127.0.0.1:0\", token_file: {{ path: \"{}\" }}, tls: {{ cert: \"{}\", key: \"{}\" }} }}\nredis: {{ url: \"rediss://127.0.0.1:1\", secret_file: \"{}\", password_file: \"{}\", tls: {{ ca: \"{}\" }} }}\n",
        dir.join("token").display(),
        missing("admin.pem"),
        missing("admin.key"),
        dir.join("secret").display(),
        missing("redis-password"),
        missing("redis-ca.pem"),
    );
    std::fs::write(&file, yaml).expect("write the configuration");
    let out = Command::new(BIN).arg("check").arg(&file).output().expect("run gatehouse check");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "check accepted them; stderr:\n{stderr}");
    for expected in
        ["admin.token_file", "is empty", "admin.tls.cert", "the cluster secret has 9 bytes", "redis.password_file"]
    {
        assert!(stderr.contains(expected), "{expected:?} missing from:\n{stderr}");
    }
}

#[test]
fn version_prints_the_version() {
    let out = Command::new(BIN).arg("version").output().expect("run gatehouse version");
    assert!(out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(env!("CARGO_PKG_VERSION")), "version output: {stdout:?}");
}

#[test]
fn a_converted_hyperapi_file_with_https_and_named_targets_passes_check() {
    let dir = TempDir::new();
    let input = dir.join("hyperapi.yaml");
    std::fs::write(
        &input,
        r#"
listen: "127.0.0.1:0"
services:
  - service_id: pay
    path: /pay
    auth: { type: None }
    upstreams: [{ target: "https://pay.internal" }, { target: "https://10.0.0.9:8443" }]
  - service_id: web
    path: /web
    auth: { type: None }
    upstreams: [{ target: "http://web.internal:8080" }]
"#,
    )
    .expect("write");
    let output = dir.join("gatehouse.yaml");
    let out = Command::new(BIN)
        .args(["convert", "--from", "hyperapi"])
        .arg(&input)
        .arg("-o")
        .arg(&output)
        .output()
        .expect("run gatehouse convert");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let converted = std::fs::read_to_string(&output).expect("read the output");
    assert!(converted.contains("pay.internal:443") && converted.contains("web.internal:8080"), "{converted}");
    assert!(converted.contains("tls: {}"), "{converted}");
    assert!(!converted.contains("192.0.2."), "no placeholder: {converted}");
    // `check` resolves no name.
    let out = Command::new(BIN).arg("check").arg(&output).output().expect("run gatehouse check");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
