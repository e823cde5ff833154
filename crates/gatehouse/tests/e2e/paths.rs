//! Paths as an attacker writes them, against a real nginx serving a protected file behind two
//! services: `/files` denies `/admin/**`, `/open` allows only `/public/**`. Every vector goes over
//! HTTP/1.1 (raw bytes), HTTP/2 (hyper's client, prior knowledge) and HTTP/3 (aioquic): the
//! protected file is never served, and nginx never sees a request for it. Allowed paths reach
//! nginx normalized, their query as sent (docs/security.md, "Paths").

use crate::common::start;
use crate::tls::{certificates, Pki};
use gatehouse_testkit::{h2c_get_each, Gateway, Nginx, RawConn};
use gatehouse_tls::issue::Algorithm;
use std::time::Duration;

const SECRET: &str = "ADMIN SECRET";
const HOST: &str = "files.test";

/// Each a way to ask for `/files/admin/secret.txt` (or `/open/admin/secret.txt`) without
/// writing it.
const BYPASSES: &[&str] = &[
    // Dot segments.
    "/files/public/../admin/secret.txt",
    "/files/./admin/secret.txt",
    "/files/public/./../admin/secret.txt",
    "/files/public/x/../../admin/secret.txt",
    "/files/admin/./secret.txt",
    "/x/../files/admin/secret.txt",
    // Encoded dots, mixed case.
    "/files/public/%2e%2e/admin/secret.txt",
    "/files/public/%2E%2E/admin/secret.txt",
    "/files/public/%2E%2e/admin/secret.txt",
    "/files/public/.%2e/admin/secret.txt",
    "/files/public/%2e./admin/secret.txt",
    "/files/%2e/admin/secret.txt",
    // Double encoding.
    "/files/public/%252e%252e/admin/secret.txt",
    "/files/%2561dmin/secret.txt",
    "/files/public/%252e%252e%252fadmin%252fsecret.txt",
    // Unreserved characters escaped.
    "/files/%61dmin/secret.txt",
    "/files/adm%69n/secret.txt",
    "/files/%61%64%6d%69%6E/%73ecret.txt",
    "/files/admin/secret%2etxt",
    // Repeated slashes.
    "/files//admin/secret.txt",
    "/files///admin//secret.txt",
    "//files/admin/secret.txt",
    "/files/public//../admin/secret.txt",
    // Encoded slashes.
    "/files/public/%2E%2E%2Fadmin%2Fsecret.txt",
    "/files/public%2F..%2Fadmin%2Fsecret.txt",
    "/files/%2Fadmin/secret.txt",
    "/files/admin%2fsecret.txt",
    // Backslashes, bare and encoded.
    "/files/public\\..\\admin\\secret.txt",
    "/files/public/..\\admin/secret.txt",
    "/files/public/%5C..%5Cadmin%5Csecret.txt",
    "/files\\admin\\secret.txt",
    // Overlong UTF-8 for `.` and `/`.
    "/files/public/%c0%ae%c0%ae/admin/secret.txt",
    "/files/public/%e0%80%ae%e0%80%ae/admin/secret.txt",
    "/files/public/..%c0%afadmin/secret.txt",
    "/files/public/%c0%ae%c0%ae%c0%afadmin/secret.txt",
    // NUL.
    "/files/admin/secret.txt%00",
    "/files/admin%00/secret.txt",
    "/files/public/%00/../admin/secret.txt",
    // `;` path parameters.
    "/files/public/..;/admin/secret.txt",
    "/files/public/.;x/../admin/secret.txt",
    "/files/admin;x/secret.txt",
    "/files/admin/secret.txt;.png",
    // Trailing dots.
    "/files/admin./secret.txt",
    "/files/admin/secret.txt.",
    "/files/admin/secret.txt/.",
    // The service prefix itself encoded or walked into.
    "/%66iles/admin/secret.txt",
    "/%66%69%6C%65%73/admin/secret.txt",
    "/fil%65s/%61dmin/secret.txt",
    "/files%2fadmin/secret.txt",
    "/open/../files/admin/secret.txt",
    // Invalid escapes.
    "/files/%zzadmin/secret.txt",
    "/files/admin/secret.txt%",
    "/files/admin/secret.txt%2",
    // Above the root.
    "/files/../../admin/secret.txt",
    "/../files/admin/secret.txt",
    // The allow-list of `/open`.
    "/open/public/%2E%2E%2Fadmin%2Fsecret.txt",
    "/open/public/../admin/secret.txt",
    "/open/public/%2e%2e/admin/secret.txt",
    "/open//admin/secret.txt",
    "/open/public/..;/admin/secret.txt",
];

/// Allowed paths and what nginx must see for each (the prefix stripped, the path normalized,
/// the query as sent).
const ALLOWED: &[(&str, &str)] = &[
    ("/files/public/index.txt", "/public/index.txt"),
    ("/files/public/./x/../index.txt", "/public/index.txt"),
    ("/files//public//%69ndex.txt", "/public/index.txt"),
    ("/%66iles/public/index.txt", "/public/index.txt"),
    ("/open/public/index.txt?q=%2e%2e/../x", "/public/index.txt?q=%2e%2e/../x"),
    ("/open/public/a%20b.txt", "/public/a%20b.txt"),
    ("/open/public/a%20b%2etxt", "/public/a%20b.txt"),
];

struct Files {
    nginx: Nginx,
    gw: Gateway,
    pki: Pki,
    /// Holds the gateway's JSON access log.
    logs: gatehouse_testkit::TempDir,
}

impl Files {
    fn start() -> Files {
        let nginx = Nginx::start(
            "log_format paths '$status $request_uri';\n\
             server { listen 127.0.0.1:{port0}; root {dir}/www; access_log {dir}/paths.log paths; }",
            1,
        );
        for (file, text) in [("admin/secret.txt", SECRET), ("public/index.txt", "PUBLIC"), ("public/a b.txt", "SPACE")]
        {
            let path = nginx.join(&format!("www/{file}"));
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, text).expect("write");
        }
        let pki = Pki::new();
        let cert = pki.issue(&[HOST], Algorithm::EcdsaP256, "files.pem", None);
        let logs = gatehouse_testkit::TempDir::new();
        let yaml = format!(
            "workers: 2\nadmin: {{bind: \"127.0.0.1:0\"}}\naccess_log: {{path: \"{}\", format: json}}\ntls:\n{}\nlisteners:\n  http: {{bind: \"127.0.0.1:0\"}}\n  https: {{bind: \"127.0.0.1:0\", tls: {{}}, http3: true}}\n\
             upstreams:\n  www: {{targets: [\"127.0.0.1:{}\"]}}\n\
             services:\n\
             \x20 files: {{path: /files, upstream: www, acl: {{deny: [{{paths: [\"/admin/**\"]}}]}}}}\n\
             \x20 open: {{path: /open, upstream: www, acl: {{allow: [{{paths: [\"/public/**\"]}}]}}}}\n",
            logs.join("access.log").display(),
            certificates(&[&cert]),
            nginx.port(0),
        );
        Files { gw: start(&yaml), nginx, pki, logs }
    }

    /// What nginx answered, as `status request_uri` lines.
    fn backend_log(&self) -> Vec<String> {
        std::fs::read_to_string(self.nginx.join("paths.log")).unwrap_or_default().lines().map(str::to_string).collect()
    }

    /// Each target over HTTP/1.1, as raw bytes on a connection of its own: (status, body).
    fn h1(&self, targets: &[&str]) -> Vec<(u16, String)> {
        targets
            .iter()
            .map(|t| {
                let mut c = RawConn::connect(self.gw.addr("http"));
                c.send(format!("GET {t} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n").as_bytes());
                let r = c.read_response(Duration::from_secs(5)).unwrap_or_else(|e| panic!("{t}: {e}"));
                (r.status, String::from_utf8_lossy(&r.body).into_owned())
            })
            .collect()
    }

    /// Each target over HTTP/2 on one connection.
    fn h2(&self, targets: &[&str]) -> Vec<(u16, String)> {
        h2c_get_each(self.gw.addr("http"), HOST, targets).into_iter().map(|r| (r.status, r.text())).collect()
    }

    /// Each target over HTTP/3 on one connection; `None` without aioquic.
    fn h3(&self, targets: &[&str], test: &str) -> Option<Vec<(u16, String)>> {
        if !crate::http3::aioquic(test) {
            return None;
        }
        let ca = self.pki.ca_file().display().to_string();
        let port = self.gw.addr("https").port();
        let mut args = vec!["--sni", HOST, "--ca", &ca];
        for t in targets {
            args.extend(["--path", t]);
        }
        let out = crate::http3::h3(port, &args);
        let answers = crate::http3::responses(&out);
        assert_eq!(answers.len(), targets.len(), "{out}");
        Some(
            answers
                .iter()
                .map(|a| (a["status"].as_u64().unwrap_or(0) as u16, a["text"].as_str().unwrap_or("").to_string()))
                .collect(),
        )
    }
}

#[test]
fn no_path_trick_reaches_a_file_an_acl_protects() {
    let files = Files::start();
    assert!(BYPASSES.len() >= 40);
    let test = "no_path_trick_reaches_a_file_an_acl_protects";
    // The file is there: written plainly, the ACL is what refuses it.
    assert_eq!(files.h1(&["/files/admin/secret.txt"])[0].0, 403);
    let mut runs = vec![("HTTP/1.1", files.h1(BYPASSES)), ("HTTP/2", files.h2(BYPASSES))];
    if let Some(answers) = files.h3(BYPASSES, test) {
        runs.push(("HTTP/3", answers));
    }
    for (protocol, answers) in &runs {
        for (target, (status, body)) in BYPASSES.iter().zip(answers) {
            assert!(
                *status != 200 && !body.contains(SECRET),
                "{protocol} {target}: {status} {body:?} (the protected file was served)"
            );
            assert!(matches!(status, 400 | 403 | 404), "{protocol} {target}: {status} {body:?}");
        }
    }
    let log = files.backend_log();
    assert!(
        !log.iter().any(|l| l.starts_with("200 ") && l.contains("secret")),
        "nginx served the protected file: {log:?}"
    );
}

#[test]
fn allowed_paths_reach_the_backend_normalized_with_the_query_as_sent() {
    let files = Files::start();
    let test = "allowed_paths_reach_the_backend_normalized_with_the_query_as_sent";
    let targets: Vec<&str> = ALLOWED.iter().map(|(t, _)| *t).collect();
    let mut runs = vec![("HTTP/1.1", files.h1(&targets)), ("HTTP/2", files.h2(&targets))];
    if let Some(answers) = files.h3(&targets, test) {
        runs.push(("HTTP/3", answers));
    }
    for (protocol, answers) in &runs {
        for (target, (status, body)) in targets.iter().zip(answers) {
            assert_eq!(*status, 200, "{protocol} {target}: {body:?}");
            assert!(body == "PUBLIC" || body == "SPACE", "{protocol} {target}: {body:?}");
        }
    }
    // HTTP/3 sends its requests at once: compared in order, not as they came.
    let mut log = files.backend_log();
    log.sort();
    let mut want: Vec<String> =
        runs.iter().flat_map(|_| ALLOWED.iter().map(|(_, seen)| format!("200 {seen}"))).collect();
    want.sort();
    assert_eq!(log, want);
    // The access log shows the path every stage judged, as the backend got it (prefix and all).
    let lines = crate::common::access_log_lines(&files.logs.join("access.log"), ALLOWED.len() * runs.len());
    let mut logged: Vec<String> = lines.iter().map(|l| l["uri"].as_str().unwrap_or("").to_string()).collect();
    logged.sort();
    logged.dedup();
    let mut normalized: Vec<&str> =
        vec!["/files/public/index.txt", "/open/public/index.txt?q=%2e%2e/../x", "/open/public/a%20b.txt"];
    normalized.sort();
    assert_eq!(logged, normalized);
}

#[test]
fn a_route_that_takes_paths_as_sent_gets_them_as_sent_and_only_its_own() {
    let b = gatehouse_testkit::Backend::start("b");
    let gw = start(&format!(
        "workers: 1\nlisteners:\n  http: {{bind: \"127.0.0.1:0\"}}\nupstreams:\n  u: {{targets: {}}}\n\
         sites:\n  s: {{hosts: [\"*\"], routes: [{{path: /, upstream: u}}, {{path: /raw/, upstream: u, normalize_path: false}}]}}\n",
        crate::common::targets(&[&b])
    ));
    let get = |target: &str| {
        b.clear();
        let mut c = RawConn::connect(gw.addr("http"));
        c.send(format!("GET {target} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n").as_bytes());
        let status = c.read_response(Duration::from_secs(5)).unwrap_or_else(|e| panic!("{target}: {e}")).status;
        (status, b.requests().first().map(|r| r.path_and_query()))
    };
    // The raw route: as sent, escaped slashes, repeated slashes and all.
    assert_eq!(get("/raw/a%2Fb//c%2e?x=%2e"), (200, Some("/raw/a%2Fb//c%2e?x=%2e".to_string())));
    // Elsewhere: normalized.
    assert_eq!(get("/a//b/./%63"), (200, Some("/a/b/c".to_string())));
    assert_eq!(get("/raw/../etc"), (200, Some("/etc".to_string())));
    // Normalized it is the raw route's, as sent it is not: refused.
    assert_eq!(get("/x/../raw/a"), (400, None));
    // Refused by the normalizer and not the raw route's as sent.
    assert_eq!(get("/x/%2Fy"), (400, None));
}
