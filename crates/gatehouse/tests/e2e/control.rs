//! The control plane on one node: the admin API's tokens, the draft guarded by If-Match,
//! validation naming the field, revisions, release, rollback and diffs, secrets that never come
//! back out, certificates through the API, the audit log, and a restart on the released revision.

use crate::common::{start, targets, APPLY_WAIT, HOST};
use crate::tls::{eventually, s_client, serial, Pki};
use gatehouse_admin::client::AdminClient;
use gatehouse_control::document::sha256_hex;
use gatehouse_testkit::{http_get, http_request, Backend, Gateway, Response, TempDir};
use gatehouse_tls::issue::Algorithm;
use serde_json::{json, Value};
use std::net::SocketAddr;

pub(crate) const TOKEN: &str = "ops-token-7d1c0a";
pub(crate) const READ_TOKEN: &str = "viewer-token-55aa";

/// The `admin:` section with a write token `ops` and a read token `viewer`.
pub(crate) fn admin_section(extra: &str) -> String {
    format!(
        "admin:\n  bind: \"127.0.0.1:0\"\n  tokens:\n    - {{name: ops, sha256: \"{}\"}}\n    - {{name: viewer, sha256: \"{}\", role: read}}\n{extra}",
        sha256_hex(TOKEN.as_bytes()),
        sha256_hex(READ_TOKEN.as_bytes())
    )
}

/// An API client for one admin listener.
pub(crate) struct Api {
    pub(crate) addr: SocketAddr,
    pub(crate) token: String,
}

impl Api {
    pub(crate) fn new(gw: &Gateway) -> Api {
        Api { addr: gw.admin(), token: TOKEN.into() }
    }

    pub(crate) fn raw(&self, method: &str, path: &str, if_match: Option<u64>, body: &str) -> Response {
        let auth = format!("Bearer {}", self.token);
        let tag = if_match.map(|v| format!("\"{v}\""));
        let mut headers = vec![("authorization", auth.as_str()), ("content-type", "application/json")];
        if let Some(t) = &tag {
            headers.push(("if-match", t.as_str()));
        }
        http_request(self.addr, method, "127.0.0.1", &format!("/api/v1{path}"), &headers, body.as_bytes())
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// Status and JSON body, through the client `gatehouse admin` uses.
    pub(crate) fn call(&self, method: &str, path: &str, if_match: Option<u64>, body: Value) -> (u16, Value) {
        let client = AdminClient::new(&format!("http://{}", self.addr), Some(self.token.clone()))
            .unwrap_or_else(|e| panic!("{e}"));
        let body = (!body.is_null()).then_some(&body);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        let answer =
            rt.block_on(client.call(method, path, if_match, body)).unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        (answer.status, answer.body)
    }

    pub(crate) fn version(&self) -> u64 {
        let (s, d) = self.call("GET", "/draft", None, Value::Null);
        assert_eq!(s, 200, "{d}");
        d["version"].as_u64().expect("version")
    }

    /// Commits the draft; returns the revision number.
    pub(crate) fn commit(&self, message: &str) -> u64 {
        let (s, r) = self.call("POST", "/revisions", None, json!({ "message": message }));
        assert_eq!(s, 201, "{r}");
        r["number"].as_u64().expect("number")
    }
}

fn backend_of(gw: &Gateway, path: &str) -> String {
    let r = http_get(gw.addr("http"), HOST, path, &[]);
    assert_eq!(r.status, 200, "{path}: {}", r.text());
    r.header("x-backend").unwrap_or("-").to_string()
}

/// One node with a local revision store in `dir`; `extra` adds top-level settings and listeners
/// after the `http` one (a `tls:` section must come before them, so it is given as `tls`).
fn config(dir: &TempDir, a: &Backend, tls: &str, listeners: &str) -> String {
    format!(
        "workers: 2\n{}{tls}control: {{dir: \"{}\", poll_interval: 1s}}\nnode: {{id: solo}}\nlisteners:\n  http: {{bind: \"127.0.0.1:0\"}}\n{listeners}upstreams:\n  u: {{targets: {}}}\nsites:\n  main:\n    hosts: [\"{HOST}\"]\n    routes: [{{path: /, upstream: u}}]\n",
        admin_section(""),
        dir.join("control").display(),
        targets(&[a])
    )
}

#[test]
fn drafts_become_revisions_that_release_roll_back_and_survive_a_restart() {
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let dir = TempDir::new();
    let yaml = config(&dir, &a, "", "");
    let mut gw = start(&yaml);
    let api = Api::new(&gw);

    // Tokens: none, unknown, read-only.
    let r = http_request(gw.admin(), "GET", "127.0.0.1", "/api/v1/draft", &[], b"").expect("request");
    assert_eq!((r.status, r.header("www-authenticate")), (401, Some("Bearer realm=\"gatehouse\"")));
    assert_eq!(
        Api { addr: gw.admin(), token: "ops-token-7d1c0b".into() }.call("GET", "/draft", None, Value::Null).0,
        401
    );
    let viewer = Api { addr: gw.admin(), token: READ_TOKEN.into() };
    assert_eq!(viewer.call("GET", "/draft", None, Value::Null).0, 200);
    assert_eq!(viewer.call("PUT", "/draft/upstreams/x", Some(0), json!({})).0, 403);

    // The first draft starts from the file.
    let (s, d) = api.call("GET", "/draft", None, Value::Null);
    assert_eq!((s, d["version"].as_u64()), (200, Some(0)));
    assert_eq!(d["document"]["upstreams"]["u"]["targets"][0], json!(a.addr().to_string()));

    // Writes name the version they read.
    let u2 = json!({ "targets": [{ "address": b.addr().to_string() }] });
    assert_eq!(api.call("PUT", "/draft/upstreams/u2", None, u2.clone()).0, 428);
    let r = api.raw("PUT", "/draft/upstreams/u2", Some(0), &u2.to_string());
    assert_eq!((r.status, r.header("etag")), (200, Some("\"1\"")), "{}", r.text());
    let (s, e) = api.call("PUT", "/draft/upstreams/u3", Some(0), u2.clone());
    assert_eq!((s, e["version"].as_u64()), (412, Some(1)), "a stale version is refused: {e}");

    // Every error names its field, and the draft stays as it was.
    let (s, e) = api.call("POST", "/draft/sites/main/routes", Some(1), json!({ "path": "/b", "upstream": "nope" }));
    assert_eq!(s, 422, "{e}");
    assert_eq!(e["errors"][0]["path"], json!("sites.main.routes[1].upstream"), "{e}");
    let (s, e) = api.call(
        "PUT",
        "/draft/upstreams/bad",
        Some(1),
        json!({ "targets": [{ "address": "x" }], "balance": "magic" }),
    );
    assert_eq!(s, 422, "{e}");
    let paths: Vec<&str> = e["errors"].as_array().expect("errors").iter().filter_map(|x| x["path"].as_str()).collect();
    assert!(paths.iter().any(|p| p.starts_with("upstreams.bad")), "{e}");
    // Bodies are read as the document types them: an unknown field, a section that is none, a
    // target moved by its PUT, a body that is not JSON.
    for (method, path, body, field) in [
        ("POST", "/draft/upstreams/u2/targets", json!({ "address": "127.0.0.1:9", "wieght": 3 }), "wieght"),
        ("PUT", "/draft", json!({ "upstreams": {}, "sitez": {} }), "sitez"),
        ("POST", "/revisions", json!({ "message": "why", "author": "me" }), "author"),
    ] {
        let (s, e) = api.call(method, path, Some(1), body);
        assert_eq!((s, e["errors"][0]["path"].as_str()), (422, Some("body")), "{path}: {e}");
        assert!(e["detail"].as_str().is_some_and(|d| d.contains(&format!("unknown field `{field}`"))), "{e}");
    }
    let moved = format!("/draft/upstreams/u2/targets/{}", b.addr());
    let (s, e) = api.call("PUT", &moved, Some(1), json!({ "address": "127.0.0.1:9", "weight": 2 }));
    assert_eq!((s, e["errors"][0]["path"].as_str()), (422, Some("address")), "{e}");
    assert_eq!(api.raw("POST", "/draft/upstreams/u2/targets", Some(1), "{address").status, 400);
    assert_eq!(api.version(), 1);

    let (s, _) = api.call("POST", "/draft/sites/main/routes", Some(1), json!({ "path": "/b", "upstream": "u2" }));
    assert_eq!(s, 201);
    let r1 = api.commit("route /b to u2");
    let (s, e) = api.call("POST", "/revisions", None, json!({ "message": "same again" }));
    assert_eq!(s, 409, "an unchanged draft makes no revision: {e}");
    assert_eq!(api.call("POST", "/revisions", None, json!({})).0, 422, "a revision needs a message");

    // Nothing runs a revision until it is released.
    assert_eq!(backend_of(&gw, "/b"), "a");
    assert_eq!(api.call("POST", &format!("/revisions/{r1}/release"), None, Value::Null).0, 200);
    let ev = gw.wait_event("applied", APPLY_WAIT);
    assert_eq!(ev["revision"].as_u64(), Some(r1));
    assert_eq!(backend_of(&gw, "/b"), "b");

    let (s, _) = api.call("DELETE", "/draft/sites/main/routes/1", Some(2), Value::Null);
    assert_eq!(s, 200);
    let r2 = api.commit("drop /b");
    let (s, d) = api.call("GET", &format!("/revisions/{r1}/diff/{r2}"), None, Value::Null);
    assert_eq!(s, 200);
    assert!(d["unified"].as_str().expect("unified").contains("-    - path: /b\n"), "{d}");
    assert!(d["rows"].as_array().expect("rows").iter().any(|r| r["kind"] == "removed"), "{d}");
    assert_eq!(api.call("POST", &format!("/revisions/{r2}/release"), None, Value::Null).0, 200);
    assert_eq!(gw.wait_event("applied", APPLY_WAIT)["revision"].as_u64(), Some(r2));
    assert_eq!(backend_of(&gw, "/b"), "a");

    // Roll back to the earlier revision; "rolling back" to a later one is refused.
    assert_eq!(api.call("POST", &format!("/revisions/{r2}/rollback"), None, Value::Null).0, 409);
    assert_eq!(api.call("POST", &format!("/revisions/{r1}/rollback"), None, Value::Null).0, 200);
    assert_eq!(gw.wait_event("applied", APPLY_WAIT)["revision"].as_u64(), Some(r1));
    assert_eq!(backend_of(&gw, "/b"), "b");

    let (_, nodes) = api.call("GET", "/nodes", None, Value::Null);
    assert_eq!(nodes["nodes"][0]["id"], json!("solo"));
    assert_eq!(nodes["nodes"][0]["revision"].as_u64(), Some(r1), "{nodes}");
    let (_, rel) = api.call("GET", "/releases", None, Value::Null);
    let actions: Vec<&str> =
        rel["history"].as_array().expect("history").iter().filter_map(|e| e["action"].as_str()).collect();
    assert_eq!(actions, ["rollback", "release", "release"], "{rel}");

    // Who did what: changes and refused attempts alike.
    let audit = std::fs::read_to_string(dir.join("control").join("audit.log")).expect("audit log");
    let lines: Vec<Value> = audit.lines().map(|l| serde_json::from_str(l).expect("json line")).collect();
    assert!(lines.iter().any(|l| l["who"] == "ops"
        && l["path"] == json!(format!("/api/v1/revisions/{r1}/rollback"))
        && l["status"] == 200));
    assert!(lines.iter().any(|l| l["who"] == "viewer" && l["status"] == 403));
    assert!(lines.iter().any(|l| l["who"] == "ops" && l["status"] == 422));

    // A restart comes up on the released revision, not on the file.
    gw.terminate();
    let gw = start(&yaml);
    assert_eq!(backend_of(&gw, "/b"), "b");
}

#[test]
fn app_keys_are_kept_hashed_and_secrets_never_come_back_out() {
    let a = Backend::start("a");
    let dir = TempDir::new();
    let gw = start(&config(&dir, &a, "", ""));
    let api = Api::new(&gw);
    let app = json!({ "key": "plain-app-key-1234", "secret": "hmac-secret-zzz", "jwt_keys": [{ "kid": "k1", "alg": "HS256", "secret": "jwt-secret-yyy" }] });
    let (s, d) = api.call("PUT", "/draft/apps/shop", Some(0), app);
    assert_eq!(s, 200, "{d}");
    let shown = d.to_string();
    assert_eq!(d["document"]["apps"]["shop"]["key_sha256"], json!(sha256_hex(b"plain-app-key-1234")));
    assert_eq!(d["document"]["apps"]["shop"]["secret"], json!("(redacted)"));
    // The redacted view sent back keeps the secrets; a changed one shows as changed in a diff.
    let (_, view) = api.call("GET", "/draft/apps/shop", None, Value::Null);
    assert_eq!(api.call("PUT", "/draft/apps/shop", Some(1), view).0, 200);
    let r1 = api.commit("shop");
    let mut changed = json!({ "key_sha256": sha256_hex(b"plain-app-key-1234"), "secret": "hmac-secret-new" });
    changed["jwt_keys"] = json!([{ "kid": "k1", "alg": "HS256", "secret": "(redacted)" }]);
    assert_eq!(api.call("PUT", "/draft/apps/shop", Some(2), changed).0, 200);
    let r2 = api.commit("rotate the shop's secret");
    let (_, diff) = api.call("GET", &format!("/revisions/{r1}/diff/{r2}"), None, Value::Null);
    assert!(
        diff["unified"]
            .as_str()
            .expect("unified")
            .contains("-    secret: (redacted)\n+    secret: (redacted, changed)\n"),
        "{diff}"
    );
    let (_, rev) = api.call("GET", &format!("/revisions/{r2}"), None, Value::Null);
    for text in [shown, diff.to_string(), rev.to_string(), api.raw("GET", "/draft", None, "").text()] {
        for secret in ["plain-app-key-1234", "hmac-secret-zzz", "hmac-secret-new", "jwt-secret-yyy"] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
    }
}

#[test]
fn certificates_uploaded_through_the_api_serve_at_once_and_bad_ones_are_refused() {
    let pki = Pki::new();
    let (a, dir, store) = (Backend::start("a"), TempDir::new(), TempDir::new());
    let tls = format!(
        "tls:\n  store: {{dir: \"{}\", scan_interval: 100ms}}\n  negative_cache_ttl: 100ms\n",
        store.path().display()
    );
    let yaml = config(&dir, &a, &tls, "  https: {bind: \"127.0.0.1:0\", tls: {}}\n");
    let gw = start(&yaml);
    let api = Api::new(&gw);
    let port = gw.addr("https").port();

    let pem = pki.ca.issue(&["api.test"], Algorithm::EcdsaP256, 30).expect("issue");
    let r = api.raw("POST", "/certificates", None, &pem);
    assert_eq!(r.status, 201, "{}", r.text());
    let facts: Value = serde_json::from_slice(&r.body).expect("json");
    assert_eq!(facts["names"], json!(["api.test"]));
    assert_eq!(facts["key_type"], json!("ecdsa"));
    assert!(facts["days_left"].as_i64().is_some_and(|d| d >= 29), "{facts}");
    eventually("the uploaded certificate serves", || s_client(port, &["-servername", "api.test"]).ok);
    let before = serial(&s_client(port, &["-servername", "api.test"])).expect("serial");

    // A bundle whose key belongs to another certificate is refused; the old one keeps serving.
    let other = pki.ca.issue(&["api.test"], Algorithm::EcdsaP256, 30).expect("issue");
    let key_at = |p: &str| p.find("-----BEGIN PRIVATE KEY").expect("key");
    let mismatched = format!("{}{}", &other[..key_at(&other)], &pem[key_at(&pem)..]);
    let (s, e) = api.call("POST", "/certificates", None, json!({ "pem": mismatched }));
    assert_eq!(s, 422, "{e}");
    assert_eq!(e["errors"][0]["path"], json!("pem"));
    assert_eq!(serial(&s_client(port, &["-servername", "api.test"])).as_deref(), Some(before.as_str()));

    let (s, list) = api.call("GET", "/certificates", None, Value::Null);
    assert_eq!(s, 200);
    assert_eq!(list["certificates"].as_array().map(Vec::len), Some(1), "{list}");
    assert!(!list.to_string().contains("PRIVATE KEY"));
    let (s, _) = api.call("DELETE", "/certificates/api.test", None, Value::Null);
    assert_eq!(s, 200);
    eventually("the removed certificate stops serving", || {
        s_client(port, &["-servername", "api.test"]).has("unrecognized name")
    });
}

/// Runs `gatehouse admin ARGS` against `gw`; returns success, stdout and stderr.
pub(crate) fn admin_cli(gw: &Gateway, args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"))
        .arg("admin")
        .args(args)
        .env("GATEHOUSE_ADMIN_URL", format!("http://{}", gw.admin()))
        .env("GATEHOUSE_TOKEN", TOKEN)
        .output()
        .expect("run gatehouse admin");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_admin_cli_applies_a_file_diffs_releases_and_rolls_back() {
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let dir = TempDir::new();
    let mut gw = start(&config(&dir, &a, "", ""));
    let (ok, out, err) = admin_cli(&gw, &["commit", "-m", "baseline"]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "revision 1");

    let file = dir.join("next.yaml");
    let next = format!(
        "upstreams:\n  u: {{targets: [\"{}\"]}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}]}}\n",
        b.addr()
    );
    std::fs::write(&file, next).expect("write");
    let (ok, out, err) = admin_cli(&gw, &["apply", file.to_str().expect("path"), "-m", "to b"]);
    assert!(ok, "{err}");
    // What changes is shown before it is applied, then the revision made.
    assert!(out.starts_with("--- draft\n+++ "), "{out}");
    assert!(out.contains(&format!("-    - {}\n+    - {}\n", a.addr(), b.addr())), "{out}");
    assert_eq!(out.lines().last(), Some("revision 2"), "{out}");
    let (ok, out, _) = admin_cli(&gw, &["diff", "1", "2"]);
    assert!(ok && out.contains(&format!("-    - {}\n+    - {}\n", a.addr(), b.addr())), "{out}");

    assert!(admin_cli(&gw, &["release", "2"]).0);
    assert_eq!(gw.wait_event("applied", APPLY_WAIT)["revision"].as_u64(), Some(2));
    assert_eq!(backend_of(&gw, "/"), "b");
    let (ok, out, _) = admin_cli(&gw, &["revisions"]);
    assert!(ok && out.lines().nth(1).is_some_and(|l| l.starts_with("2\t") && l.ends_with("released")), "{out}");
    assert!(admin_cli(&gw, &["rollback", "1"]).0);
    assert_eq!(gw.wait_event("applied", APPLY_WAIT)["revision"].as_u64(), Some(1));
    assert_eq!(backend_of(&gw, "/"), "a");
    let (ok, out, _) = admin_cli(&gw, &["nodes"]);
    assert!(ok && out.starts_with("solo\trevision 1\ttarget 1\tok"), "{out}");

    // Releases are dated; JSON on demand.
    let (ok, out, _) = admin_cli(&gw, &["releases"]);
    let dated = out.lines().nth(1).and_then(|l| l.split('\t').next()).unwrap_or_default();
    assert!(ok && dated.len() == 23 && dated.ends_with(" UTC") && dated.starts_with("20"), "{out}");
    let (ok, out, _) = admin_cli(&gw, &["--output", "json", "releases"]);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert!(ok && v["history"][0]["at"].is_u64(), "{out}");

    // A file without a section the draft has is refused, the draft untouched, unless --replace.
    std::fs::write(&file, format!("upstreams:\n  u: {{targets: [\"{}\"]}}\n", a.addr())).expect("write");
    let (_, before, _) = admin_cli(&gw, &["diff"]);
    let (ok, _, err) = admin_cli(&gw, &["apply", file.to_str().expect("path")]);
    assert!(!ok && err.contains("has no `sites` that the draft has") && err.contains("--replace"), "{err}");
    assert_eq!(admin_cli(&gw, &["diff"]).1, before, "the draft changed");
    let (ok, out, err) = admin_cli(&gw, &["apply", file.to_str().expect("path"), "--replace"]);
    assert!(ok && out.contains("-sites:"), "{out}{err}");

    // Errors come back with their fields, and the command fails.
    std::fs::write(&file, "upstreams:\n  u: {targets: []}\n").expect("write");
    let (ok, _, err) = admin_cli(&gw, &["apply", file.to_str().expect("path")]);
    assert!(!ok);
    assert!(err.contains("upstreams.u.targets"), "{err}");
}

/// Tried as a new user would: the admin listener given as `host:port`, the token found in the
/// quick start's `.gatehouse/admin-token`, a wrong token called wrong, no token explained, no
/// revisions said.
#[test]
fn the_admin_cli_takes_host_port_finds_the_quick_start_token_and_names_a_wrong_one() {
    let a = Backend::start("a");
    let dir = TempDir::new();
    let gw = start(&config(&dir, &a, "", ""));
    let here = TempDir::new();
    let run = |token: Option<&str>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"));
        cmd.args(["admin", "--url", &gw.admin().to_string(), "revisions"])
            .current_dir(here.path())
            .env_remove("GATEHOUSE_ADMIN_URL")
            .env_remove("GATEHOUSE_TOKEN");
        if let Some(t) = token {
            cmd.env("GATEHOUSE_TOKEN", t);
        }
        let out = cmd.output().expect("run gatehouse admin");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, _, err) = run(None);
    assert!(!ok && err.contains("no admin token") && err.contains(".gatehouse/admin-token"), "{err}");
    let (ok, _, err) = run(Some("not-the-token"));
    assert!(!ok && err.contains("401") && err.contains("not accepted"), "{err}");
    std::fs::create_dir_all(here.join(".gatehouse")).expect("mkdir");
    std::fs::write(here.join(".gatehouse/admin-token"), format!("{TOKEN}\n")).expect("write token");
    let (ok, out, err) = run(None);
    assert!(ok, "{err}");
    assert!(out.starts_with("no revisions yet"), "{out}");
    std::fs::write(here.join(".gatehouse/admin-token"), "\n").expect("write an empty token");
    let (ok, _, err) = run(None);
    assert!(!ok && err.contains("the token file .gatehouse/admin-token is empty"), "{err}");
    // The API's own answers: none presented, and a wrong one (RFC 6750 `invalid_token`).
    let none = http_request(gw.admin(), "GET", "127.0.0.1", "/api/v1/revisions", &[], b"").expect("answer");
    assert_eq!(none.status, 401);
    assert!(none.text().contains("a bearer token is required"), "{}", none.text());
    let wrong =
        http_request(gw.admin(), "GET", "127.0.0.1", "/api/v1/revisions", &[("authorization", "Bearer nope")], b"")
            .expect("answer");
    assert_eq!(wrong.status, 401);
    assert!(wrong.text().contains("was not accepted"), "{}", wrong.text());
    assert_eq!(wrong.header("www-authenticate"), Some("Bearer realm=\"gatehouse\", error=\"invalid_token\""));
}

/// The console in Debian's Chromium driven by Playwright (`tests/console/console.test.mjs`). CI
/// installs both; elsewhere the test says it was skipped, unless `CI` is set.
#[test]
fn the_console_works_in_a_real_browser() {
    let Some(here) = crate::common::browser_tests("the_console_works_in_a_real_browser") else { return };
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let (dir, store) = (TempDir::new(), TempDir::new());
    // An ACME name beside the uploaded certificate, issued by Pebble through tls-alpn-01 on a TLS
    // listener at Pebble's validation port.
    let tls_port = gatehouse_testkit::free_port();
    let pebble = gatehouse_testkit::Pebble::start(&gatehouse_testkit::PebbleOptions::new(
        gatehouse_testkit::free_port(),
        tls_port,
    ));
    let acme_name = "console-acme.example.com";
    let tls = format!(
        "tls:\n  store: {{dir: \"{}\", scan_interval: 100ms}}\n{}",
        store.path().display(),
        crate::acme::acme_section(&pebble, &[acme_name.to_string()], "[tls-alpn-01]")
    );
    let listeners = format!("  https: {{bind: \"127.0.0.1:{tls_port}\", tls: {{}}}}\n");
    let gw = start(&config(&dir, &a, &tls, &listeners));
    let issued = gatehouse_testkit::wait_until(crate::acme::ISSUED, || (pebble.issued() == 1).then_some(()));
    assert!(issued.is_some(), "{acme_name} not issued\n{}", gw.stderr());
    let load = gatehouse_testkit::Load::start(gw.addr("http"), HOST, "/", 2, 1_000_000);
    let pki = Pki::new();
    let bundle = pki.issue(&["console.test"], Algorithm::EcdsaP256, "console.pem", None);
    let shots = TempDir::new();
    let out = std::process::Command::new("node")
        .arg(here.join("console.test.mjs"))
        .env("CONSOLE_URL", format!("http://{}", gw.admin()))
        .env("TOKEN", TOKEN)
        .env("BUNDLE", &bundle)
        .env("TARGET", b.addr().to_string())
        .env("OUT", shots.path())
        .env("ACME_NAME", acme_name)
        .output()
        .expect("run node");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "console test failed\n{stdout}\n{stderr}\n--- gateway ---\n{}", gw.stderr());
    assert!(stdout.contains("{\"ok\":true}"), "{stdout}");
    let png = std::fs::read(shots.join("dashboard.png")).expect("dashboard screenshot");
    assert_eq!(&png[1..4], b"PNG");
    let report = load.stop();
    assert_eq!(report.failed, 0, "{report:?}");
    // What the browser did is what the API holds.
    let api = Api::new(&gw);
    let (_, rel) = api.call("GET", "/releases", None, Value::Null);
    assert_eq!(rel["released"].as_u64(), Some(1), "{rel}");
    assert_eq!(rel["staged"]["canary"].as_u64(), Some(2), "{rel}");
    let (_, certs) = api.call("GET", "/certificates", None, Value::Null);
    let names: Vec<&Value> = certs["certificates"].as_array().into_iter().flatten().map(|c| &c["names"]).collect();
    assert!(names.contains(&&json!(["console.test"])), "{certs}");
    // "Renew now" renewed the ACME name.
    let renewed = gatehouse_testkit::wait_until(crate::acme::ISSUED, || (pebble.issued() == 2).then_some(()));
    assert!(renewed.is_some(), "{acme_name} not renewed\n{}", gw.stderr());
}

#[test]
fn the_admin_listener_can_require_client_certificates() {
    let pki = Pki::new();
    let clients = gatehouse_tls::issue::Authority::new("Operators CA").expect("client CA");
    std::fs::write(pki.dir.join("operators.pem"), clients.cert_pem()).expect("write");
    let server = pki.issue(&["admin.test", "127.0.0.1"], Algorithm::EcdsaP256, "admin.pem", None);
    let operator = pki.dir.join("operator.pem");
    std::fs::write(&operator, clients.issue(&["alice.ops"], Algorithm::EcdsaP256, 30).expect("issue")).expect("write");
    let (a, dir) = (Backend::start("a"), TempDir::new());
    let tls = format!(
        "  hosts: [admin.test]\n  tls: {{cert: \"{0}\", key: \"{0}\", client_ca: \"{1}\"}}\n",
        server.display(),
        pki.dir.join("operators.pem").display()
    );
    let gw = start(&config(&dir, &a, "", "").replacen("admin:\n", &format!("admin:\n{tls}"), 1));
    let port = gw.admin().port();
    let resolve = format!("admin.test:{port}:127.0.0.1");
    let url = format!("https://admin.test:{port}/api/v1/status");
    let auth = format!("Authorization: Bearer {TOKEN}");
    let ca = pki.ca_file();
    let base = ["--cacert", ca.to_str().unwrap_or_default(), "--resolve", &resolve, "-H", &auth];
    let mut with_cert = base.to_vec();
    with_cert.extend(["--cert", operator.to_str().unwrap_or_default(), &url]);
    let ok = gatehouse_testkit::curl(&with_cert);
    assert_eq!(ok.status, 200, "{ok:?}");
    assert!(ok.text().contains("\"node\":\"solo\""), "{}", ok.text());

    // Without a client certificate there is no API, token or not.
    let out = std::process::Command::new("curl")
        .args(["-sS", "--noproxy", "*", "--max-time", "10"])
        .args(base)
        .arg(&url)
        .output()
        .expect("run curl");
    assert!(!out.status.success(), "answered without a client certificate: {}", String::from_utf8_lossy(&out.stdout));

    // `gatehouse admin` over TLS: the listener verified against --ca, the operator's certificate
    // shown; without the CA the listener is not trusted, and http:// is no TLS.
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gatehouse"))
            .arg("admin")
            .args(args)
            .arg("status")
            .env_remove("GATEHOUSE_ADMIN_URL")
            .env("GATEHOUSE_TOKEN", TOKEN)
            .output()
            .expect("run gatehouse admin");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.success(), text)
    };
    let https = format!("https://127.0.0.1:{port}");
    let (ca, op) = (ca.to_str().unwrap_or_default(), operator.to_str().unwrap_or_default());
    let (ok, text) = cli(&["--url", &https, "--ca", ca, "--cert", op, "--key", op]);
    assert!(ok && text.contains("\"node\": \"solo\""), "{text}");
    let (ok, text) = cli(&["--url", &https, "--cert", op, "--key", op]);
    assert!(!ok && text.contains("cannot reach") && text.contains("UnknownIssuer"), "{text}");
    let (ok, text) = cli(&["--url", &format!("127.0.0.1:{port}"), "--ca", ca]);
    assert!(!ok && text.contains("need an https:// URL"), "{text}");
}

#[test]
fn a_token_file_is_made_once_and_opens_the_api() {
    let (a, dir) = (Backend::start("a"), TempDir::new());
    let token_path = dir.join("state").join("admin-token");
    let yaml = format!(
        "workers: 1\nadmin:\n  bind: \"127.0.0.1:0\"\n  token_file: {{path: \"{}\"}}\ncontrol: {{dir: \"{}\"}}\nlisteners:\n  http: {{bind: \"127.0.0.1:0\"}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}]}}\n",
        token_path.display(),
        dir.join("control").display(),
        targets(&[&a])
    );
    let token = {
        let gw = start(&yaml);
        let token = std::fs::read_to_string(&token_path).expect("the token file is made");
        assert_eq!(token.len(), 64);
        assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
        let mode =
            std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&token_path).expect("meta").permissions());
        assert_eq!(mode & 0o777, 0o600);
        let (s, d) = Api { addr: gw.admin(), token: token.clone() }.call("GET", "/draft", None, Value::Null);
        assert_eq!((s, d["version"].as_u64()), (200, Some(0)), "{d}");
        assert_eq!(Api { addr: gw.admin(), token: "guess".into() }.call("GET", "/draft", None, Value::Null).0, 401);
        token
    };
    let gw = start(&yaml);
    assert_eq!(std::fs::read_to_string(&token_path).expect("kept"), token, "made once, then kept");
    assert_eq!(Api { addr: gw.admin(), token }.call("GET", "/status", None, Value::Null).0, 200);
}

/// `gatehouse admin` reaches every operation of the API: each `operationId` of the document the
/// node serves is called by one of the commands below, run in turn against the node, each
/// answering as the command says (the document's operations and this list must be the same).
#[test]
fn the_admin_cli_covers_every_operation_of_the_document() {
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let dir = TempDir::new();
    std::fs::create_dir(dir.join("certs")).expect("store dir");
    let gw = start(&config(&dir, &a, &format!("tls: {{store: {{dir: \"{}\"}}}}\n", dir.join("certs").display()), ""));
    let file = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write");
        path.display().to_string()
    };
    let (a_addr, b_addr) = (a.addr().to_string(), b.addr().to_string());
    let entry = file("v.yaml", format!("targets: [\"{b_addr}\"]\n"));
    let weight = file("weight.yaml", "weight: 3\n".into());
    let route = file("route.yaml", "{path: /v, upstream: v}\n".into());
    let route2 = file("route2.yaml", "{path: /w, upstream: v}\n".into());
    let whole = file(
        "next.yaml",
        format!("upstreams:\n  u: {{targets: [\"{b_addr}\"]}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}]}}\n"),
    );
    let pem = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/tls/www.example.com.pem").to_string();
    // (operationId, arguments, succeeds, what the output holds)
    let steps: Vec<(&str, Vec<&str>, bool, String)> = vec![
        ("getOpenapi", vec!["openapi"], true, "\"openapi\": \"3.1.0\"".into()),
        ("getStatus", vec!["status"], true, "solo".into()),
        ("getStats", vec!["stats"], true, "requests".into()),
        ("getDraft", vec!["draft"], true, "upstreams:".into()),
        ("getSection", vec!["draft", "upstreams"], true, "\"u\"".into()),
        ("getEntry", vec!["draft", "upstreams", "u"], true, a_addr.clone()),
        ("putEntry", vec!["put", "upstreams", "v", &entry], true, "draft is now version 1".into()),
        ("listTargets", vec!["target", "list", "v"], true, b_addr.clone()),
        ("addTarget", vec!["target", "add", "v", &a_addr, "--weight", "2"], true, "draft is now version 2".into()),
        ("getTarget", vec!["target", "get", "v", &a_addr], true, "\"weight\": 2".into()),
        ("putTarget", vec!["target", "set", "v", &a_addr, &weight], true, "draft is now version 3".into()),
        ("deleteTarget", vec!["target", "remove", "v", &a_addr], true, "draft is now version 4".into()),
        ("listRoutes", vec!["route", "list", "main"], true, "\"path\": \"/\"".into()),
        ("addRoute", vec!["route", "add", "main", &route], true, "draft is now version 5".into()),
        ("getRoute", vec!["route", "get", "main", "1"], true, "\"/v\"".into()),
        ("putRoute", vec!["route", "set", "main", "1", &route2], true, "draft is now version 6".into()),
        ("deleteRoute", vec!["route", "remove", "main", "1"], true, "draft is now version 7".into()),
        ("deleteEntry", vec!["delete", "upstreams", "v"], true, "draft is now version".into()),
        ("createRevision", vec!["commit", "-m", "one"], true, "revision 1".into()),
        ("putDraft", vec!["apply", &whole, "-m", "two"], true, "revision 2".into()),
        ("listRevisions", vec!["revisions"], true, "two".into()),
        ("getRevision", vec!["show", "2"], true, "# revision 2".into()),
        ("diffDraft", vec!["diff", "1"], true, format!("+    - {b_addr}")),
        ("diffRevisions", vec!["diff", "1", "2"], true, format!("-    - {a_addr}")),
        ("stageRevision", vec!["stage", "2", "--label", "canary"], true, "staged 2 to canary".into()),
        ("unstage", vec!["unstage", "canary"], true, "unstaged canary".into()),
        ("releaseRevision", vec!["release", "2"], true, "released 2".into()),
        ("rollbackRevision", vec!["rollback", "1"], true, "rolled back to 1".into()),
        ("getReleases", vec!["releases"], true, "released: 1".into()),
        ("listNodes", vec!["nodes"], true, "solo".into()),
        ("listCertificates", vec!["certificates"], true, String::new()),
        ("importCertificate", vec!["certificate", "import", &pem], true, "www.example.com".into()),
        ("getCertificates", vec!["certificate", "show", "www.example.com"], true, "www.example.com".into()),
        ("deleteCertificates", vec!["certificate", "delete", "www.example.com"], true, "\"removed\"".into()),
        ("getAcme", vec!["acme"], true, "\"enabled\": false".into()),
        ("renewAcme", vec!["acme", "--renew", "www.example.com"], false, "409".into()),
        ("getLogLevel", vec!["log-level"], true, "(configured: ".into()),
        ("setLogLevel", vec!["log-level", "debug"], true, "debug".into()),
        ("getAudit", vec!["audit", "--limit", "5"], true, "PUT /api/v1/log-level".into()),
    ];
    for (op, args, succeeds, holds) in &steps {
        let (ok, out, err) = admin_cli(&gw, args);
        assert_eq!(ok, *succeeds, "{op}: gatehouse admin {}:\n{out}{err}", args.join(" "));
        assert!(format!("{out}{err}").contains(holds.as_str()), "{op}: {holds:?} not in:\n{out}{err}");
    }
    let doc: Value = serde_json::from_str(&admin_cli(&gw, &["openapi"]).1).expect("the document");
    let documented: std::collections::BTreeSet<&str> = doc["paths"]
        .as_object()
        .into_iter()
        .flatten()
        .flat_map(|(_, item)| item.as_object().into_iter().flatten())
        .filter_map(|(_, op)| op.get("operationId").and_then(Value::as_str))
        .collect();
    let covered: std::collections::BTreeSet<&str> = steps.iter().map(|(op, ..)| *op).collect();
    assert_eq!(documented, covered, "the document's operations and the commands that call them");
}
