//! The admin API as an attacker with a token, or without one, would try it: files named in a
//! draft (devices, files outside the roots, files that exist or not), and what an unauthenticated
//! caller can make the node write (docs/security.md, "Admin API exposure").

use crate::common::{start, targets};
use crate::control::{admin_section, Api};
use gatehouse_jwt::sign::SigningKey;
use gatehouse_jwt::Algorithm;
use gatehouse_testkit::{http_request, Backend, Gateway, TempDir};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn node(dir: &TempDir, backend: &Backend, admin_extra: &str) -> Gateway {
    start(&format!(
        "workers: 1\n{}control: {{dir: \"{}\"}}\nnode: {{id: solo}}\nlisteners:\n  http: {{bind: \"127.0.0.1:0\"}}\nupstreams:\n  u: {{targets: {}}}\nservices:\n  api: {{path: /api, upstream: u, auth: jwt}}\n",
        admin_section(admin_extra),
        dir.join("control").display(),
        targets(&[backend])
    ))
}

/// `PUT /draft/apps/a2` with one ES256 key at `public_key`: status and body.
fn put_key(api: &Api, public_key: &str) -> (u16, Value) {
    let app = json!({ "jwt_keys": [{ "alg": "ES256", "public_key": public_key }], "grants": { "api": null } });
    api.call("PUT", "/draft/apps/a2", Some(api.version()), app)
}

#[test]
fn a_draft_reads_no_file_outside_the_roots_and_says_nothing_of_what_exists() {
    let (backend, dir) = (Backend::start("b"), TempDir::new());
    let gw = node(&dir, &backend, "");
    let api = Api::new(&gw);
    let (_, public) = SigningKey::generate(Algorithm::Es256).expect("EC key");
    // Outside the roots (the configuration's directory and control.dir): a device, a secret
    // that exists, a file that does not, a directory; each refused at once, with one message.
    let outside = TempDir::new();
    let elsewhere = outside.join("key.pem");
    std::fs::write(&elsewhere, &public).expect("write");
    let started = Instant::now();
    let mut messages = Vec::new();
    for path in ["/dev/zero", "/etc/shadow", "/etc/no-such-file.pem", "/etc", &elsewhere.display().to_string()] {
        let (status, body) = put_key(&api, path);
        assert_eq!(status, 422, "{path}: {body}");
        let errors = body["errors"].as_array().expect("errors");
        assert_eq!(errors.len(), 1, "{path}: {body}");
        assert_eq!(errors[0]["path"], "apps.a2.jwt_keys[0].public_key", "{body}");
        messages.push(errors[0]["message"].as_str().expect("message").to_string());
    }
    // A key set's CA file is held to the same rule, in a list of issuers too.
    let service = json!({ "path": "/idp", "upstream": "u", "auth": "jwt", "jwt": [
        { "issuer": "https://id.example.com", "discovery": true, "jwks": { "ca": "/etc/shadow" } }
    ]});
    let (status, body) = api.call("PUT", "/draft/services/idp", Some(api.version()), service);
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["errors"][0]["path"], "services.idp.jwt[0].jwks.ca", "{body}");
    messages.push(body["errors"][0]["message"].as_str().expect("message").to_string());
    assert!(messages.windows(2).all(|w| w[0] == w[1]), "the refusals differ: {messages:?}");
    assert!(started.elapsed() < Duration::from_secs(10), "refusals took {:?}", started.elapsed());
    let r = http_request(gw.admin(), "GET", "127.0.0.1", "/healthz", &[], b"").expect("healthz");
    assert_eq!(r.status, 200);
    // Under the configuration's directory: read.
    let inside = gw.dir().join("a2.pem");
    std::fs::write(&inside, &public).expect("write");
    let (status, body) = put_key(&api, &inside.display().to_string());
    assert_eq!(status, 200, "{body}");
    // PEM given inline: taken as it is, and shown back.
    let (status, body) = put_key(&api, &public);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["document"]["apps"]["a2"]["jwt_keys"][0]["public_key"], public.as_str());
    // Inline PEM that is not a public key is refused without echoing it.
    let (status, body) = put_key(&api, "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
    assert_eq!(status, 422, "{body}");
    assert!(!body.to_string().contains("AAAA"), "{body}");
}

#[test]
fn strangers_cannot_grow_the_audit_log_and_it_stays_bounded_and_paged() {
    let (backend, dir) = (Backend::start("b"), TempDir::new());
    let gw = node(&dir, &backend, "  audit_max_size: 4k\n");
    let api = Api::new(&gw);
    let log = dir.join("control").join("audit.log");
    let long = format!("/api/v1/draft/apps/{}", "x".repeat(60_000));
    for _ in 0..500 {
        let r = http_request(gw.admin(), "DELETE", "127.0.0.1", &long, &[], b"").expect("delete");
        assert_eq!(r.status, 401);
    }
    assert!(!log.exists() || std::fs::metadata(&log).expect("log").len() == 0, "calls without a token were audited");
    let metrics = http_request(gw.admin(), "GET", "127.0.0.1", "/metrics", &[], b"").expect("metrics").text();
    assert!(metrics.contains("gatehouse_admin_unauthenticated_total 500"), "{metrics}");

    // A token holder's attempts are audited (no entry can have so long a name: 404), each path
    // cut to 256 characters, the file moved aside before it passes 4 KiB.
    for i in 0..40 {
        let (status, _) =
            api.call("DELETE", &format!("/draft/apps/a{i:02}{}", "y".repeat(400)), Some(999), Value::Null);
        assert_eq!(status, 404);
    }
    let len = std::fs::metadata(&log).expect("log").len();
    assert!(len <= 4096, "audit.log is {len} bytes");
    let rotated = std::fs::read_to_string(format!("{}.1", log.display())).expect("audit.log.1");
    assert!(rotated.lines().all(|l| l.len() < 600), "an entry kept a long path");

    // Paged from the end: newest first, each page before the last one's `next`.
    let (status, first) = api.call("GET", "/audit?limit=3", None, Value::Null);
    assert_eq!(status, 200, "{first}");
    let shown = |page: &Value| -> Vec<String> {
        page["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .map(|e| e["path"].as_str().unwrap_or("").to_string())
            .collect()
    };
    let newest = shown(&first);
    assert_eq!(newest.len(), 3);
    let index = |p: &str| p.strip_prefix("/api/v1/draft/apps/a").and_then(|r| r.get(..2)).map(str::to_string);
    let indexes: Vec<_> = newest.iter().filter_map(|p| index(p)).collect();
    assert_eq!(indexes, ["39", "38", "37"], "{newest:?}");
    let next = first["next"].as_u64().expect("next");
    let (_, second) = api.call("GET", &format!("/audit?limit=3&before={next}"), None, Value::Null);
    let older = shown(&second);
    assert_eq!(older.len(), 3, "{second}");
    let indexes: Vec<_> = older.iter().filter_map(|p| index(p)).collect();
    assert_eq!(indexes, ["36", "35", "34"], "{older:?}");
}

#[test]
fn the_admin_listener_answers_its_own_names_and_shows_little_without_a_token() {
    let (backend, dir) = (Backend::start("b"), TempDir::new());
    // `public` written out, so the test kit leaves it as configured (the default).
    let gw = node(&dir, &backend, "  public: [/healthz]\n  hosts: [gatehouse-admin.internal]\n");
    let get = |host: &str, path: &str, token: Option<&str>| {
        let auth = token.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", a.as_str())).collect();
        http_request(gw.admin(), "GET", host, path, &headers, b"").expect("request")
    };
    // DNS rebinding: a page on attacker.example whose name now resolves to 127.0.0.1 sends its
    // own name as Host.
    for host in ["attacker.example", "attacker.example:9080", "localhost.attacker.example"] {
        for path in ["/healthz", "/metrics", "/api/v1/draft", "/console/"] {
            let r = get(host, path, Some(crate::control::TOKEN));
            assert_eq!(r.status, 421, "{host} {path}: {}", r.text());
        }
    }
    let port = gw.admin().port();
    for host in [
        "127.0.0.1".to_string(),
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "[::1]:9".into(),
        "gatehouse-admin.internal".into(),
    ] {
        assert_eq!(get(&host, "/healthz", None).status, 200, "{host}");
    }
    // Only /healthz without a token; /metrics and /status with one of either role.
    for path in ["/metrics", "/status", "/api/v1/openapi.json"] {
        let r = get("127.0.0.1", path, None);
        assert_eq!((r.status, r.header("www-authenticate")), (401, Some("Bearer realm=\"gatehouse\"")), "{path}");
        assert_eq!(get("127.0.0.1", path, Some(crate::control::TOKEN)).status, 200, "{path}");
    }
    assert!(get("127.0.0.1", "/metrics", Some(crate::control::TOKEN))
        .text()
        .contains("gatehouse_admin_unauthenticated_total 3"));
}

#[test]
fn the_api_and_the_file_check_refuse_the_same_names_and_keys_alike() {
    let (backend, dir) = (Backend::start("b"), TempDir::new());
    let gw = node(&dir, &backend, "");
    let api = Api::new(&gw);
    let upstream = json!({ "targets": ["127.0.0.1:1"] });
    let long = "a".repeat(129);
    for (name, why) in [
        ("..", "a name needs a letter, digit, `-` or `_`"),
        (long.as_str(), "names are 1 to 128 characters long"),
        ("a%20b", "names may use letters, digits, `-`, `_` and `.` only"),
    ] {
        let (status, body) =
            api.call("PUT", &format!("/draft/upstreams/{name}"), Some(api.version()), upstream.clone());
        assert_eq!(status, 422, "{name}: {body}");
        assert_eq!(body["errors"][0]["message"], why, "{name}: {body}");
        // The file check says the same of the same name.
        let (ok, stderr) = crate::common::check(&format!(
            "listeners: {{http: {{bind: \"127.0.0.1:0\"}}}}\nupstreams: {{\"{}\": {{targets: [\"127.0.0.1:1\"]}}}}\n",
            name.replace("%20", " ")
        ));
        assert!(!ok && stderr.contains(if name == "a%20b" { "names may use letters" } else { why }), "{stderr}");
    }
    // An app key the file check refuses is refused before the API keeps only its hash.
    let app = json!({ "key": "with space", "grants": { "api": null } });
    let (status, body) = api.call("PUT", "/draft/apps/spaced", Some(api.version()), app);
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["errors"][0]["path"], "apps.spaced.key", "{body}");
    assert_eq!(body["errors"][0]["message"], "letters, digits and `-._~+=!$'()*,;:@` only", "{body}");
    assert!(!body.to_string().contains("with space"), "the key came back: {body}");
}

#[test]
fn check_lists_the_document_s_and_the_files_errors_in_one_run() {
    let (ok, stderr) = crate::common::check(
        "listeners:\n  http: {bind: \"127.0.0.1:0\", backlg: 5}\n  h2: {bind: \"127.0.0.1:0\"}\n\
         upstreams:\n  u: {targets: [\"127.0.0.1:1\"], balance: fastest}\n  v: {targets: [\"127.0.0.1:2\"], tls: {ca: /nonexistent/ca.pem}}\n\
         sites:\n  s: {hosts: [\"*\"], client_auth: {ca: /nonexistent/client-ca.pem}, routes: [{path: api, upstream: u}, {path: /v, upstream: v}]}\n",
    );
    assert!(!ok);
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(lines.last().is_some_and(|l| l.ends_with("has 5 error(s)")), "{stderr}");
    for want in [
        "listeners.http.backlg: unknown field",
        "upstreams.u.balance: unknown variant",
        "sites.s.routes[0].path: must start with `/`",
        "sites.s.client_auth.ca: cannot read /nonexistent/client-ca.pem",
        "upstreams.v.tls.ca: cannot read /nonexistent/ca.pem",
    ] {
        assert!(stderr.contains(want), "missing {want:?}: {stderr}");
    }
    assert!(!stderr.contains("unknown upstream") && !stderr.contains("at least one listener"), "{stderr}");
}

#[test]
fn new_app_keys_have_256_bits_and_the_draft_keeps_only_their_hash() {
    let (backend, dir) = (Backend::start("b"), TempDir::new());
    let gw = node(&dir, &backend, "");
    let api = Api::new(&gw);
    let (ok, out, err) = crate::control::admin_cli(&gw, &["new-key", "--app", "shop"]);
    assert!(ok, "{err}");
    let key = out.trim();
    assert_eq!(key.len(), 43, "{key}");
    assert!(key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'), "{key}");
    let (_, shop) = api.call("GET", "/draft/apps/shop", None, Value::Null);
    assert_eq!(shop["key_sha256"], gatehouse_control::document::sha256_hex(key.as_bytes()), "{shop}");
    assert!(!shop.to_string().contains(key), "{shop}");
    // Again: another key replaces it; without --app nothing is sent.
    let (ok, again, _) = crate::control::admin_cli(&gw, &["new-key", "--app", "shop"]);
    assert!(ok && again.trim() != key);
    let version = api.version();
    let (ok, local, _) = crate::control::admin_cli(&gw, &["new-key"]);
    assert!(ok && local.trim().len() == 43 && local.trim() != key);
    assert_eq!(api.version(), version, "new-key without --app changed the draft");
}

#[test]
fn app_keys_can_be_kept_as_hmacs_under_the_cluster_secret() {
    let cluster = crate::common::Cluster::new();
    let gw = start(&format!(
        "workers: 1\n{}{}control: {{dir: \"{}\"}}\nnode: {{id: solo}}\nlisteners:\n  http: {{bind: \"127.0.0.1:0\"}}\nupstreams:\n  u: {{targets: {}}}\nservices:\n  api: {{path: /api, upstream: u, auth: app_key}}\n",
        admin_section("  app_keys: hmac\n"),
        cluster.redis_section(),
        cluster.dir.join("control").display(),
        targets(&[&cluster.backend])
    ));
    let api = Api::new(&gw);
    let (ok, out, err) = crate::control::admin_cli(&gw, &["new-key", "--app", "shop"]);
    assert!(ok, "{err}");
    let key = out.trim().to_string();
    let (_, shop) = api.call("GET", "/draft/apps/shop", None, Value::Null);
    let mac = shop["key_hmac"].as_str().expect("key_hmac").to_string();
    assert_eq!(mac.len(), 64, "{shop}");
    assert!(shop.get("key_sha256").is_none() && shop.get("key").is_none(), "{shop}");
    assert_ne!(mac, gatehouse_control::document::sha256_hex(key.as_bytes()), "a plain SHA-256");
    // Granted, released: the key opens the service; another does not.
    let app = json!({ "key_hmac": mac, "grants": { "api": null } });
    assert_eq!(api.call("PUT", "/draft/apps/shop", Some(api.version()), app).0, 200);
    let n = api.commit("shop gets a key kept as an HMAC");
    assert_eq!(api.call("POST", &format!("/revisions/{n}/release"), None, Value::Null).0, 200);
    let get = |k: &str| gatehouse_testkit::http_get(gw.addr("http"), "app.test", "/api/x", &[("x-app-key", k)]).status;
    gatehouse_testkit::wait_until(std::time::Duration::from_secs(30), || (get(&key) == 200).then_some(()));
    assert_eq!(get("another-key-0123456789"), 401);
}

#[test]
fn check_names_every_unreadable_key_file() {
    let (ok, stderr) = crate::common::check(
        "listeners: {http: {bind: \"127.0.0.1:0\"}}\nupstreams: {u: {targets: [\"127.0.0.1:1\"]}}\n\
         sites: {s: {hosts: [\"*\"], routes: [{path: x, upstream: u}]}}\n\
         services: {api: {path: /api, upstream: u, auth: jwt}}\n\
         apps:\n  a: {jwt_keys: [{alg: ES256, public_key: /nonexistent/a.pem}, {alg: RS256, public_key: /dev/zero}], grants: {api: ~}}\n  b: {jwt_keys: [{alg: ES256, public_key: /nonexistent/b.pem}], grants: {api: ~}}\n",
    );
    assert!(!ok);
    for want in [
        "sites.s.routes[0].path: must start with `/`",
        "apps.a.jwt_keys[0].public_key: cannot read /nonexistent/a.pem",
        "apps.a.jwt_keys[1].public_key: cannot read /dev/zero: not a regular file",
        "apps.b.jwt_keys[0].public_key: cannot read /nonexistent/b.pem",
    ] {
        assert!(stderr.contains(want), "missing {want:?}: {stderr}");
    }
    assert!(stderr.lines().last().is_some_and(|l| l.ends_with("has 4 error(s)")), "{stderr}");
}

/// `HEAD` answers wherever `GET` does, with `GET`'s status, `Content-Length` and `ETag` and no
/// body (RFC 9110 §9.3.2): the probe, the console, the document and the API.
#[test]
fn head_answers_wherever_get_does() {
    let (backend, dir) = (Backend::start("a"), TempDir::new());
    let gw = node(&dir, &backend, "");
    let auth = format!("Authorization: Bearer {}", crate::control::TOKEN);
    let fetch = |method: &str, path: &str| {
        let out = std::process::Command::new("curl")
            .args(["-s", "--noproxy", "*", "--max-time", "10", "-o", "/dev/null", "-D", "-", "-X", method, "-H", &auth])
            .args(if method == "HEAD" { &["--head"][..] } else { &[][..] })
            .arg(format!("http://{}{path}", gw.admin()))
            .output()
            .expect("run curl");
        let head = String::from_utf8_lossy(&out.stdout).to_lowercase();
        let header = |name: &str| head.lines().find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()));
        (head.lines().next().unwrap_or_default().to_string(), header("content-length:"), header("etag:"))
    };
    // (Metrics and status change between two calls; their HEAD is the same code.)
    for path in ["/healthz", "/console/", "/api/v1/openapi.json", "/api/v1/draft", "/api/v1/revisions", "/api/v1/nope"]
    {
        let (get, head) = (fetch("GET", path), fetch("HEAD", path));
        assert!(get.0.starts_with("http/1.1 "), "{path}: {get:?}");
        assert_eq!(head, get, "{path}: HEAD and GET differ");
    }
}
