//! The admin API against its OpenAPI document: every operation the document lists is called,
//! every answer's status must be one it lists for that operation, and every JSON body must match
//! the schema it gives — so the document and the server cannot drift apart.

use crate::common::{start, targets, HOST};
use crate::control::{admin_section, Api};
use crate::tls::Pki;
use gatehouse_testkit::{http_request, Backend, Response, TempDir};
use gatehouse_tls::issue::Algorithm;
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// Follows `$ref`s within the document.
fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let ptr = r.strip_prefix('#').unwrap_or(r);
            resolve(doc, doc.pointer(ptr).unwrap_or_else(|| panic!("dangling $ref {r}")))
        }
        None => v,
    }
}

/// Every way `v` breaks `schema` (the subset of JSON Schema the document uses).
fn violations(doc: &Value, schema: &Value, v: &Value, at: &str, out: &mut Vec<String>) {
    let schema = resolve(doc, schema);
    for part in schema.get("allOf").and_then(Value::as_array).into_iter().flatten() {
        violations(doc, part, v, at, out);
    }
    if let Some(parts) = schema.get("oneOf").and_then(Value::as_array) {
        let found: Vec<Vec<String>> = parts
            .iter()
            .map(|part| {
                let mut found = Vec::new();
                violations(doc, part, v, at, &mut found);
                found
            })
            .collect();
        let n = found.iter().filter(|f| f.is_empty()).count();
        if n != 1 {
            out.push(format!("{at}: {v} fits {n} of the oneOf schemas, not one"));
            // Why it fits none: what each schema found.
            out.extend(found.into_iter().flatten());
        }
    }
    // OpenAPI 3.1: `type` is a name or a list of names (`[integer, "null"]`).
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !types.is_empty() {
        let fits = |t: &&str| match *t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "integer" => v.is_i64() || v.is_u64(),
            "boolean" => v.is_boolean(),
            "number" => v.is_number(),
            "null" => v.is_null(),
            _ => true,
        };
        if !types.iter().any(fits) {
            out.push(format!("{at}: expected {}, got {v}", types.join(" or ")));
            return;
        }
        if v.is_null() {
            return;
        }
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        if !values.contains(v) {
            out.push(format!("{at}: {v} is not one of {values:?}"));
        }
    }
    if let Some(obj) = v.as_object() {
        for r in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
            let r = r.as_str().unwrap_or("");
            if !obj.contains_key(r) {
                out.push(format!("{at}: missing `{r}`"));
            }
        }
        let props = schema.get("properties").and_then(Value::as_object);
        for (k, item) in obj {
            match (props.and_then(|p| p.get(k)), schema.get("additionalProperties")) {
                (Some(s), _) => violations(doc, s, item, &format!("{at}.{k}"), out),
                (None, Some(Value::Bool(false))) => out.push(format!("{at}: unexpected `{k}`")),
                (None, Some(s)) if s.is_object() => violations(doc, s, item, &format!("{at}.{k}"), out),
                _ => {}
            }
        }
    }
    if let (Some(items), Some(list)) = (schema.get("items"), v.as_array()) {
        for (i, item) in list.iter().enumerate() {
            violations(doc, items, item, &format!("{at}[{i}]"), out);
        }
    }
}

/// The document's path template for a request path: the match with the most literal segments.
fn template(doc: &Value, path: &str) -> String {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let mut best: Option<(usize, String)> = None;
    for t in doc["paths"].as_object().expect("paths").keys() {
        let ts: Vec<&str> = t.split('/').filter(|s| !s.is_empty()).collect();
        if ts.len() != segs.len() || !ts.iter().zip(&segs).all(|(t, s)| t.starts_with('{') || t == s) {
            continue;
        }
        let literal = ts.iter().filter(|t| !t.starts_with('{')).count();
        if best.as_ref().is_none_or(|(n, _)| literal > *n) {
            best = Some((literal, t.clone()));
        }
    }
    best.unwrap_or_else(|| panic!("{path} is not in the OpenAPI document")).1
}

struct Contract {
    doc: Value,
    api: Api,
    seen: BTreeSet<(String, String)>,
}

impl Contract {
    /// Calls the API and checks the answer against the document; returns status and body.
    fn call(&mut self, method: &str, path: &str, if_match: Option<u64>, body: &str) -> (u16, Value) {
        let r = self.api.raw(method, path, if_match, body);
        self.check(method, path, &r)
    }

    fn check(&mut self, method: &str, path: &str, r: &Response) -> (u16, Value) {
        let t = template(&self.doc, path.split('?').next().unwrap_or(path));
        let op = &self.doc["paths"][&t][method.to_lowercase()];
        assert!(op.is_object(), "{method} {t} is not in the OpenAPI document");
        self.seen.insert((method.to_string(), t.clone()));
        let status = r.status.to_string();
        let resp = op["responses"].get(&status).map(|s| resolve(&self.doc, s));
        let resp =
            resp.unwrap_or_else(|| panic!("{method} {path} answered {status}, not listed for {t}: {}", r.text()));
        let body: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        if let Some(schema) = resp.pointer("/content/application~1json/schema") {
            let mut out = Vec::new();
            violations(&self.doc, schema, &body, "body", &mut out);
            assert!(out.is_empty(), "{method} {path} ({status}) breaks the schema:\n{}\n{body}", out.join("\n"));
        }
        (r.status, body)
    }

    fn version(&mut self) -> u64 {
        let (_, d) = self.call("GET", "/draft", None, "");
        d["version"].as_u64().expect("version")
    }

    fn write(&mut self, method: &str, path: &str, body: Value) -> (u16, Value) {
        let v = self.version();
        self.call(method, path, Some(v), &body.to_string())
    }
}

#[test]
fn every_operation_answers_as_the_openapi_document_says() {
    let (a, b, c) = (Backend::start("a"), Backend::start("b"), Backend::start("c"));
    let (dir, store) = (TempDir::new(), TempDir::new());
    let gw = start(&format!(
        "workers: 1\n{}tls:\n  store: {{dir: \"{}\"}}\ncontrol: {{dir: \"{}\"}}\nlisteners:\n  http: {{bind: \"127.0.0.1:0\"}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n  main:\n    hosts: [\"{HOST}\"]\n    routes: [{{path: /, upstream: u}}]\n",
        admin_section(""),
        store.path().display(),
        dir.join("control").display(),
        targets(&[&a])
    ));
    let auth = format!("Bearer {}", crate::control::TOKEN);
    let spec = http_request(gw.admin(), "GET", "127.0.0.1", "/api/v1/openapi.json", &[("authorization", &auth)], b"")
        .expect("openapi");
    assert_eq!(spec.status, 200, "served with a token");
    let doc: Value = serde_json::from_slice(&spec.body).expect("the document is JSON");
    let mut k = Contract { doc, api: Api::new(&gw), seen: BTreeSet::new() };
    k.check("GET", "/openapi.json", &spec);

    let (s, _) = k.call("GET", "/status", None, "");
    assert_eq!(s, 200);
    assert_eq!(http_request(gw.addr("http"), "GET", HOST, "/", &[], b"").expect("traffic").status, 200);
    let (s, stats) = k.call("GET", "/stats", None, "");
    assert_eq!((s, stats["requests"]["2xx"].as_u64()), (200, Some(1)), "{stats}");
    let unauth = http_request(gw.admin(), "GET", "127.0.0.1", "/api/v1/status", &[], b"").expect("status");
    assert_eq!(k.check("GET", "/status", &unauth).0, 401);

    let (_, draft) = k.call("GET", "/draft", None, "");
    assert_eq!(k.write("PUT", "/draft", draft["document"].clone()).0, 200);
    assert_eq!(k.call("PUT", "/draft", None, "{}").0, 428);
    assert_eq!(k.call("PUT", "/draft", Some(0), "{}").0, 412);
    assert_eq!(k.write("PUT", "/draft", json!({ "listeners": {} })).0, 422);
    assert_eq!(k.call("GET", "/draft/upstreams", None, "").0, 200);
    assert_eq!(k.call("GET", "/draft/nowhere", None, "").0, 404);
    assert_eq!(k.call("GET", "/draft/upstreams/u", None, "").0, 200);
    let u2 = json!({ "targets": [{ "address": b.addr().to_string() }] });
    assert_eq!(k.write("PUT", "/draft/upstreams/u2", u2.clone()).0, 200);
    assert_eq!(k.write("DELETE", "/draft/upstreams/u2", Value::Null).0, 200);
    assert_eq!(k.write("DELETE", "/draft/upstreams/u", Value::Null).0, 422, "still used by a route");
    assert_eq!(k.write("PUT", "/draft/upstreams/u2", u2).0, 200);

    let base = "/draft/upstreams/u2/targets";
    assert_eq!(k.call("GET", base, None, "").0, 200);
    assert_eq!(k.write("POST", base, json!({ "address": c.addr().to_string(), "weight": 2 })).0, 201);
    assert_eq!(k.write("POST", base, json!({ "address": c.addr().to_string() })).0, 409);
    let one = format!("{base}/{}", c.addr().to_string().replace(':', "%3A"));
    assert_eq!(k.call("GET", &one, None, "").0, 200);
    assert_eq!(k.write("PUT", &one, json!({ "weight": 3 })).0, 200);
    assert_eq!(k.write("PUT", &one, json!({ "weight": 0 })).0, 422);
    assert_eq!(k.write("DELETE", &one, Value::Null).0, 200);

    let routes = "/draft/sites/main/routes";
    assert_eq!(k.call("GET", routes, None, "").0, 200);
    assert_eq!(k.write("POST", routes, json!({ "path": "/x", "upstream": "u2" })).0, 201);
    assert_eq!(k.call("GET", &format!("{routes}/1"), None, "").0, 200);
    assert_eq!(k.write("PUT", &format!("{routes}/1"), json!({ "path": "/y", "upstream": "u2" })).0, 200);
    assert_eq!(k.write("DELETE", &format!("{routes}/9"), Value::Null).0, 404);
    assert_eq!(k.call("GET", "/draft/diff", None, "").0, 200);

    let (s, r1) = k.call("POST", "/revisions", None, r#"{"message":"first"}"#);
    assert_eq!(s, 201);
    assert_eq!(k.call("POST", "/revisions", None, r#"{"message":"first"}"#).0, 409);
    assert_eq!(k.write("DELETE", &format!("{routes}/1"), Value::Null).0, 200);
    let (_, r2) = k.call("POST", "/revisions", None, r#"{"message":"second"}"#);
    let (r1, r2) = (r1["number"].as_u64().expect("r1"), r2["number"].as_u64().expect("r2"));
    assert_eq!(k.call("GET", "/revisions", None, "").0, 200);
    assert_eq!(k.call("GET", &format!("/revisions/{r1}"), None, "").0, 200);
    assert_eq!(k.call("GET", "/revisions/99", None, "").0, 404);
    assert_eq!(k.call("GET", &format!("/revisions/{r1}/diff/{r2}"), None, "").0, 200);
    assert_eq!(k.call("GET", &format!("/revisions/{r1}/diff/draft"), None, "").0, 200);
    assert_eq!(k.call("GET", &format!("/draft/diff?against={r1}"), None, "").0, 200);
    assert_eq!(k.call("POST", &format!("/revisions/{r1}/release"), None, "").0, 200);
    assert_eq!(k.call("POST", &format!("/revisions/{r2}/release"), None, "").0, 200);
    assert_eq!(k.call("POST", &format!("/revisions/{r2}/rollback"), None, "").0, 409);
    assert_eq!(k.call("POST", &format!("/revisions/{r1}/rollback"), None, "").0, 200);
    assert_eq!(k.call("POST", &format!("/revisions/{r2}/stage"), None, r#"{"label":"canary"}"#).0, 200);
    assert_eq!(k.call("POST", &format!("/revisions/{r2}/stage"), None, r#"{"label":"no good"}"#).0, 422);
    assert_eq!(k.call("DELETE", "/stages/canary", None, "").0, 200);
    assert_eq!(k.call("DELETE", "/stages/canary", None, "").0, 404);
    assert_eq!(k.call("GET", "/releases", None, "").0, 200);
    assert_eq!(k.call("GET", "/nodes", None, "").0, 200);

    let pki = Pki::new();
    let pem = pki.ca.issue(&["api.test"], Algorithm::EcdsaP256, 30).expect("issue");
    assert_eq!(k.call("POST", "/certificates", None, &pem).0, 201);
    assert_eq!(k.call("POST", "/certificates", None, "not a pem").0, 422);
    assert_eq!(k.call("GET", "/certificates", None, "").0, 200);
    assert_eq!(k.call("GET", "/certificates/api.test", None, "").0, 200);
    assert_eq!(k.call("DELETE", "/certificates/api.test", None, "").0, 200);
    assert_eq!(k.call("GET", "/certificates/api.test", None, "").0, 404);
    // ACME is off on this node: nothing kept, nothing to renew.
    let (s, acme) = k.call("GET", "/acme", None, "");
    assert_eq!((s, acme["enabled"].as_bool()), (200, Some(false)), "{acme}");
    assert_eq!(k.call("POST", "/acme/api.test/renew", None, "").0, 409);
    // The process log's level, set and read back; a filter that is not one is refused.
    let (s, level) = k.call("PUT", "/log-level", None, r#"{"level": "info,gatehouse_acme=debug"}"#);
    assert_eq!((s, level["level"].as_str()), (200, Some("info,gatehouse_acme=debug")), "{level}");
    assert_eq!(k.call("PUT", "/log-level", None, r#"{"level": "loud"}"#).0, 422);
    let (s, level) = k.call("GET", "/log-level", None, "");
    assert_eq!((s, level["configured"].as_str()), (200, Some("info")), "{level}");
    assert_eq!(k.call("GET", "/audit?limit=5", None, "").0, 200);

    let mut missing = Vec::new();
    for (path, ops) in k.doc["paths"].as_object().expect("paths") {
        for method in ops.as_object().expect("ops").keys().filter(|m| *m != "parameters") {
            if !k.seen.contains(&(method.to_uppercase(), path.clone())) {
                missing.push(format!("{} {path}", method.to_uppercase()));
            }
        }
    }
    assert!(missing.is_empty(), "operations never exercised: {missing:?}");
}

#[test]
fn the_schema_checker_finds_what_breaks_a_schema() {
    let doc: Value = serde_json::from_str(gatehouse_admin::openapi()).expect("the served document");
    let node = json!({"$ref": "#/components/schemas/Node"});
    let good = json!({"id": "n1", "labels": [], "revision": null, "hash": null, "target": 3, "generation": 1,
        "last_error": {"revision": 3, "at": 0, "errors": ["x"]}, "health": "ok", "version": "0", "started": 0,
        "updated": 0, "stale": false});
    let mut out = Vec::new();
    violations(&doc, &node, &good, "node", &mut out);
    assert!(out.is_empty(), "{out:?}");
    for (bad, what) in [
        (json!({"health": "sick"}), "not one of"),
        (json!({"labels": "canary"}), "expected array"),
        (json!({"last_error": {"revision": 3}}), "missing `at`"),
        (json!({"generation": null}), "expected integer"),
    ] {
        let mut v = good.clone();
        for (k, x) in bad.as_object().expect("object") {
            v[k] = x.clone();
        }
        let mut out = Vec::new();
        violations(&doc, &node, &v, "node", &mut out);
        assert!(out.iter().any(|e| e.contains(what)), "{bad}: {out:?}");
    }
    let mut out = Vec::new();
    violations(&doc, &json!({"$ref": "#/components/schemas/Document"}), &json!({"listeners": {}}), "d", &mut out);
    assert_eq!(out, ["d: unexpected `listeners`"]);
}

/// A Python tool pinned to `version`, as `.ci/run` installs it in a venv of its own: `$env`, else
/// `~/.cache/gatehouse-tools/{name}-{version}/bin/{name}`, else (with `on_path`) `name` on
/// `PATH`; the first that says `version`. None (outside CI) skips the test and says so.
fn pinned_tool(env: &str, name: &str, version: &str, on_path: bool, test: &str) -> Option<std::path::PathBuf> {
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from).unwrap_or_default();
    let candidates = [
        std::env::var_os(env).map(std::path::PathBuf::from),
        Some(home.join(format!(".cache/gatehouse-tools/{name}-{version}/bin/{name}"))),
        on_path.then(|| name.into()),
    ];
    let found = candidates.into_iter().flatten().find(|bin| {
        std::process::Command::new(bin)
            .arg("--version")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(version))
    });
    if found.is_none() {
        assert!(std::env::var_os("CI").is_none(), "{name} {version} is needed but CI is set");
        eprintln!("{test}: skipped; pip install {name}=={version}");
    }
    found
}

/// schemathesis, pinned: `$GATEHOUSE_SCHEMATHESIS`, else the copy `.ci/run` installs, else one on
/// `PATH`.
fn schemathesis(test: &str) -> Option<std::path::PathBuf> {
    pinned_tool("GATEHOUSE_SCHEMATHESIS", "schemathesis", "4.32.5", true, test)
}

/// Runs schemathesis' every phase (examples, coverage, fuzzing, stateful with the links it
/// infers and the document gives) against `gw`'s admin API from the document it serves, bounded and with a fixed seed:
/// whether it found no failure, and its report.
fn schemathesis_run(bin: &std::path::Path, gw: &gatehouse_testkit::Gateway) -> (bool, String) {
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/schemathesis/schemathesis.toml");
    let base = format!("http://{}/api/v1", gw.admin());
    // schemathesis keeps a cache in its working directory: a directory of the test's own.
    let here = TempDir::new();
    let out = std::process::Command::new("timeout")
        .current_dir(here.path())
        .arg("600")
        .arg(bin)
        .args(["--config-file", config, "run", &format!("{base}/openapi.json"), "--url", &base])
        .args(["-H", &format!("Authorization: Bearer {}", crate::control::TOKEN)])
        .args(["--max-examples", "20", "--seed", "20261129", "--no-color"])
        .env("NO_COLOR", "1")
        .output()
        .expect("run schemathesis");
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let every_phase =
        ["Examples", "Coverage", "Fuzzing", "Stateful"].iter().all(|p| report.contains(&format!("✅ {p}")));
    // The stateful phase follows the document's links from a read draft to an entry written with
    // its `ETag`, a revision of it, and what reads, releases and stages that revision.
    let links_covered = report
        .split_once("API Links:")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|n| n.parse::<u32>().ok())
        .unwrap_or(0);
    eprintln!("schemathesis: {links_covered} API links covered");
    (out.status.success() && every_phase && links_covered >= 8 && report.contains(" passed"), report)
}

#[test]
fn schemathesis_finds_nothing_wrong_with_a_node_keeping_revisions_on_disk() {
    let Some(bin) = schemathesis("schemathesis_finds_nothing_wrong_with_a_node_keeping_revisions_on_disk") else {
        return;
    };
    let (backend, dir) = (Backend::start("a"), TempDir::new());
    std::fs::create_dir(dir.join("certs")).expect("store dir");
    let gw = start(&format!(
        "workers: 1\n{}control: {{dir: \"{}\"}}\nnode: {{id: solo}}\ntls: {{store: {{dir: \"{}\"}}}}\nlisteners:\n  http: {{bind: \"127.0.0.1:0\"}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}]}}\n",
        admin_section(""),
        dir.join("control").display(),
        dir.join("certs").display(),
        targets(&[&backend])
    ));
    let (ok, report) = schemathesis_run(&bin, &gw);
    assert!(ok, "{report}");
    assert!(!gw.stderr().contains("panicked"), "{}", gw.stderr());
}

#[test]
fn schemathesis_finds_nothing_wrong_with_a_node_keeping_revisions_in_redis() {
    let Some(bin) = schemathesis("schemathesis_finds_nothing_wrong_with_a_node_keeping_revisions_in_redis") else {
        return;
    };
    let cluster = crate::common::Cluster::new();
    let gw = start(&format!(
        "workers: 1\n{}{}node: {{id: solo}}\nlisteners:\n  http: {{bind: \"127.0.0.1:0\"}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}]}}\n",
        admin_section(""),
        cluster.redis_section(),
        targets(&[&cluster.backend])
    ));
    let (ok, report) = schemathesis_run(&bin, &gw);
    assert!(ok, "{report}");
    assert!(!gw.stderr().contains("panicked"), "{}", gw.stderr());
}

/// openapi-python-client, pinned: `$GATEHOUSE_OPENAPI_PYTHON_CLIENT`, else the copy `.ci/run`
/// installs; with the Python of its venv (which has the generated client's httpx and attrs).
fn openapi_python_client(test: &str) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    let bin = pinned_tool("GATEHOUSE_OPENAPI_PYTHON_CLIENT", "openapi-python-client", "0.29.1", false, test)?;
    let python = bin.with_file_name("python");
    Some((bin, python))
}

/// A client generated from the document the node serves drives a whole cycle: the draft
/// changed, two revisions, their diff, a stage, a release and a rollback, each answer parsed
/// into the generated models; the node runs what each step says.
#[test]
fn a_client_generated_from_the_document_drives_draft_revision_release_and_rollback() {
    let test = "a_client_generated_from_the_document_drives_draft_revision_release_and_rollback";
    let Some((generator, python)) = openapi_python_client(test) else { return };
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let dir = TempDir::new();
    let mut gw = start(&format!(
        "workers: 1\n{}control: {{dir: \"{}\", poll_interval: 1s}}\nnode: {{id: solo}}\nlisteners:\n  http: {{bind: \"127.0.0.1:0\"}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}]}}\n",
        admin_section(""),
        dir.join("control").display(),
        targets(&[&a])
    ));
    let doc = Api::new(&gw).raw("GET", "/openapi.json", None, "");
    assert_eq!(doc.status, 200);
    std::fs::write(dir.join("openapi.json"), doc.text()).expect("write the document");
    let out = std::process::Command::new(&generator)
        .args(["generate", "--meta", "none", "--path"])
        .arg(dir.join("openapi.json"))
        .arg("--output-path")
        .arg(dir.join("gen/gatehouse_api"))
        .output()
        .expect("run openapi-python-client");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{said}");
    // The one operation it leaves in part: the certificate upload's PEM body (JSON is generated).
    assert!(!said.contains("Unable to process schema"), "{said}");

    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/openapi_client/cycle.py");
    let out = std::process::Command::new(&python)
        .arg(script)
        .arg(format!("http://{}/api/v1", gw.admin()))
        .arg(crate::control::TOKEN)
        .arg(b.addr().to_string())
        .env("PYTHONPATH", dir.join("gen"))
        .output()
        .expect("run the generated client");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert_eq!((seen["first"].as_u64(), seen["second"].as_u64()), (Some(1), Some(2)), "{seen}");
    assert_eq!(seen["diff_has_target"], true, "{seen}");
    assert_eq!(seen["staged"]["releases"]["staged"]["canary"], 2, "{seen}");
    assert_eq!(seen["released"]["releases"]["released"], 2, "{seen}");
    assert_eq!(seen["released_now"], 1, "{seen}");
    let actions: Vec<&str> =
        seen["history"].as_array().into_iter().flatten().filter_map(|e| e["action"].as_str()).collect();
    assert_eq!(actions, ["rollback", "release", "stage"], "{seen}");
    // The node ran the rollback's revision: back on the first backend.
    // (Release and rollback came moments apart: the node may apply the second alone.)
    let applied = (0..3).any(|_| gw.wait_event("applied", crate::common::APPLY_WAIT)["revision"].as_u64() == Some(1));
    assert!(applied, "{}", gw.stderr());
    let r = gatehouse_testkit::http_get(gw.addr("http"), HOST, "/", &[]);
    assert_eq!(r.header("x-backend"), Some("a"), "{:?}", r.text());
}
