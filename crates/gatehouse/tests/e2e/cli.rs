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

/// `check` reads the gateway example's files where `run` reads them, beside the file: a copy of
/// the example without its `secrets/` is refused by both alike; with a short secret, `check`
/// says so; with the example's own secret it passes. An unreadable JWT key is named.
#[test]
fn check_reads_jwt_keys_and_the_files_run_reads_and_accepts_the_gateway_example() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/gateway.yaml");
    let dir = TempDir::new();
    let own = dir.join("gateway.yaml");
    std::fs::copy(example, &own).expect("copy the example");
    let (check, run) = check_and_run(&own);
    let line = check.lines().find(|l| l.contains("redis.secret_file")).unwrap_or_else(|| panic!("{check}"));
    // Each names the place and the problem the same way (check puts the file name first).
    let said = line.find("redis.secret_file").map_or(line, |at| &line[at..]).trim();
    let secret = dir.join("secrets/cluster.secret").display().to_string();
    assert!(said.contains(&secret) && run.contains(said), "check said {said:?}; run said:\n{run}");
    std::fs::create_dir(dir.join("secrets")).expect("secrets/");
    std::fs::write(dir.join("secrets/cluster.secret"), "short\n").expect("write a short secret");
    let out = Command::new(BIN).arg("check").arg(&own).output().expect("run gatehouse check");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("the cluster secret has 5 bytes; at least 32 are needed"), "{stderr}");
    let out = Command::new(BIN).arg("check").arg(example).output().expect("run gatehouse check");
    assert!(out.status.success(), "check {example} failed: {}", String::from_utf8_lossy(&out.stderr));

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

#[test]
fn a_conversion_written_into_a_directory_names_its_key_files_relative_to_itself() {
    let dir = TempDir::new();
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/hyperapi/hyperapi.yaml");
    let out = Command::new(BIN)
        .current_dir(dir.path())
        .args(["convert", "--from", "hyperapi", example, "-o", "site/gatehouse.yaml"])
        .output()
        .expect("run gatehouse convert");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let converted = std::fs::read_to_string(dir.join("site/gatehouse.yaml")).expect("read the output");
    let key = converted.lines().find_map(|l| l.trim().strip_prefix("public_key: ")).expect("a public key file");
    assert!(key.starts_with("keys/"), "written relative to the output file: {key}");
    assert!(dir.join("site").join(key).is_file(), "{key} beside the output");
    // Read from anywhere: the key path resolves against the file's directory.
    for cwd in [dir.path(), dir.join("site").as_path(), std::path::Path::new("/")] {
        let out = Command::new(BIN)
            .current_dir(cwd)
            .arg("check")
            .arg(dir.join("site/gatehouse.yaml"))
            .output()
            .expect("run gatehouse check");
        assert!(out.status.success(), "from {}: {}", cwd.display(), String::from_utf8_lossy(&out.stderr));
    }
}

/// `gatehouse check` and `gatehouse run` on `file`, which `run` must refuse at start: what each
/// printed on stderr.
fn check_and_run(file: &std::path::Path) -> (String, String) {
    let out = Command::new(BIN).arg("check").arg(file).current_dir("/").output().expect("run gatehouse check");
    let check = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "check accepted {}", file.display());
    let out = Command::new(BIN)
        .args(["run", "--config"])
        .arg(file)
        .current_dir("/")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run gatehouse run");
    let run = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "run started on {}: {run}", file.display());
    (check, run)
}

/// For each kind of file a configuration names, missing (a relative path, beside the file):
/// `check` refuses it, `run` refuses to start, and both say the same about it.
#[test]
fn check_and_run_refuse_each_kind_of_missing_file_alike() {
    const HEAD: &str = "listeners: { http: { bind: \"127.0.0.1:0\" } }\n";
    let cases: &[(&str, &str)] = &[
        ("tls.certificates[0].cert", "tls: { certificates: [{ cert: missing.pem }] }\n"),
        ("tls.certificates[0].key", "tls: { certificates: [{ cert: present.pem, key: missing.key }] }\n"),
        ("tls.certificates[0].ocsp", "tls: { certificates: [{ cert: present.pem, ocsp: missing.ocsp }] }\n"),
        ("sites.s.client_auth", "tls: { certificates: [{ cert: present.pem }] }\nsites: { s: { hosts: [a.test], routes: [{ path: /, upstream: u }], client_auth: { ca: missing-ca.pem } } }\nupstreams: { u: { targets: [\"127.0.0.1:9\"] } }\n"),
        ("upstreams.u", "upstreams: { u: { targets: [\"127.0.0.1:9\"], tls: { ca: missing-ca.pem } } }\n"),
        ("apps.a.jwt_keys[0]", "upstreams: { u: { targets: [\"127.0.0.1:9\"] } }\nservices: { s: { path: /s, upstream: u, auth: jwt } }\napps: { a: { jwt_keys: [{ alg: ES256, public_key: missing.pem }], grants: { s: ~ } } }\n"),
        ("redis.secret_file", "redis: { url: \"redis://127.0.0.1:1\", secret_file: missing.secret }\n"),
        ("redis.password_file", "redis: { url: \"redis://127.0.0.1:1\", secret_file: present.secret, username: u, password_file: missing.pass }\n"),
        ("redis.tls", "redis: { url: \"rediss://127.0.0.1:1\", secret_file: present.secret, tls: { ca: missing-ca.pem } }\n"),
        ("admin.tls.cert", "admin: { bind: \"127.0.0.1:0\", tls: { cert: missing.pem, key: present.pem } }\n"),
        ("tracing", "tracing: { otlp: { endpoint: \"https://127.0.0.1:1\", ca: missing-ca.pem } }\n"),
        ("tls.acme.ca", "tls: { store: { dir: store }, acme: { directory: \"https://127.0.0.1:1/dir\", ca: missing-ca.pem, names: [a.test] } }\n"),
        ("tls.acme.eab.hmac_key_file", "tls: { store: { dir: store }, acme: { directory: \"https://127.0.0.1:1/dir\", eab: { kid: k, hmac_key_file: missing.key }, names: [a.test] } }\n"),
        ("tls.acme.dns01.rfc2136.key_file", "tls: { store: { dir: store }, acme: { directory: \"https://127.0.0.1:1/dir\", challenges: [dns-01], dns01: { rfc2136: { server: \"127.0.0.1:53\", zone: a.test, key_name: k, key_file: missing.tsig } }, names: [a.test] } }\n"),
    ];
    let dir = TempDir::new();
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/tls/www.example.com.pem");
    std::fs::copy(example, dir.join("present.pem")).expect("copy a certificate and its key");
    std::fs::write(dir.join("present.secret"), "0123456789abcdef0123456789abcdef-example\n").expect("write a secret");
    for (place, yaml) in cases {
        let file = dir.join("gatehouse.yaml");
        std::fs::write(&file, format!("{HEAD}{yaml}")).expect("write the configuration");
        let (check, run) = check_and_run(&file);
        let line = check.lines().find(|l| l.contains(place)).unwrap_or_else(|| panic!("{place}: check said:\n{check}"));
        let said = line.find(place).map_or(line, |at| &line[at..]).trim();
        assert!(said.contains(&dir.path().display().to_string()), "{place}: the path beside the file: {said}");
        assert!(run.contains(said), "{place}: check said {said:?}; run said:\n{run}");
    }
}
