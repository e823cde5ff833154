//! Response compression through the real binary, in front of a real nginx serving files: each
//! coding decoded by curl and by the reference decoders (`tests/compression/decode.py`: Python's
//! gzip, brotli's and zstd's C libraries), over HTTP/1.1 and HTTP/2; the answers that must be left
//! alone left alone; nginx's own gzip beside it on the same file; an event stream sent event by
//! event.

use crate::common::{head, start};
use gatehouse_testkit::{curl, Gateway, Nginx};
use serde_json::Value;
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const HOST: &str = "files.test";

/// nginx on port 0 serves `{dir}/files` as they are (strong ETags, ranges); `/nt/` says
/// `no-transform`, `/encoded/` says its files are brotli already. Port 1 serves the same files
/// with nginx's own gzip at level 6.
const NGINX: &str = r#"
types { application/json json; text/html html; text/css css; image/svg+xml svg; image/png png; text/plain txt; }
server {
  listen 127.0.0.1:{port0};
  root {dir}/files;
  location /nt/ { add_header Cache-Control "public, no-transform"; }
  location /encoded/ { add_header Content-Encoding br; }
}
server {
  listen 127.0.0.1:{port1};
  root {dir}/files;
  gzip on; gzip_comp_level 6; gzip_min_length 256; gzip_vary on;
  gzip_types application/json text/css image/svg+xml;
}
"#;

/// The files, written into nginx's root: about 50 KB of JSON, a page, a style sheet, an icon, a
/// PNG (random bytes: nothing to gain), a tiny JSON.
fn files(nginx: &Nginx) -> PathBuf {
    let root = nginx.join("files");
    for d in ["", "nt", "encoded"] {
        std::fs::create_dir_all(root.join(d)).expect("mkdir");
    }
    let json: String = (0..600)
        .map(|i| format!("{{\"id\":{i},\"name\":\"item {i}\",\"tags\":[\"a{}\",\"b\"],\"price\":{}.5}}", i % 13, i * 3))
        .collect::<Vec<_>>()
        .join(",");
    let json = format!("[{json}]");
    let page: String = (0..300).map(|i| format!("<li class=\"row r{}\">Row {i}</li>\n", i % 5)).collect();
    let css: String = (0..200).map(|i| format!(".r{i} {{ margin: {i}px; color: #{:06x}; }}\n", i * 4099)).collect();
    let svg: String = (0..100).map(|i| format!("<circle cx=\"{i}\" cy=\"{}\" r=\"3\"/>", i * 2)).collect();
    let svg = format!("<svg xmlns=\"http://www.w3.org/2000/svg\">{svg}</svg>");
    let png: Vec<u8> = (0..20_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    for (name, body) in [
        ("data.json", json.as_bytes()),
        ("page.html", page.as_bytes()),
        ("style.css", css.as_bytes()),
        ("logo.svg", svg.as_bytes()),
        ("image.png", &png[..]),
        ("tiny.json", b"{\"ok\":true}"),
        ("nt/data.json", json.as_bytes()),
        ("encoded/data.json", b"not really brotli"),
    ] {
        std::fs::write(root.join(name), body).expect("write a file");
    }
    root
}

/// The gateway in front of nginx: site `files` compresses (minimum 256 bytes); its `/plain/`
/// route turns it off.
fn gateway(nginx: &Nginx) -> Gateway {
    start(&format!(
        r#"{head}upstreams:
  files: {{targets: ["127.0.0.1:{port}"]}}
sites:
  files:
    hosts: ["{HOST}"]
    compression: {{min_size: 256}}
    routes:
      - {{path: /, upstream: files}}
      - {{path: /plain/, upstream: files, rewrite: /, compression: {{enabled: false}}}}
"#,
        head = head(""),
        port = nginx.port(0),
    ))
}

/// What `decode.py` saw for `path` with `accept` (`-`: no `Accept-Encoding`) and `extra` headers,
/// checked against the file `expected` (`-`: none).
fn decoded(gw: &Gateway, path: &str, accept: &str, expected: &Path, extra: &[&str]) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/compression/decode.py");
    let url = format!("http://{}{path}", gw.addr("http"));
    let out = Command::new("python3")
        .arg(script)
        .args([url.as_str(), HOST, accept])
        .arg(expected)
        .args(extra)
        .output()
        .expect("run decode.py");
    assert!(out.status.success(), "decode.py {path} {accept}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("decode.py prints JSON")
}

fn varies(v: &Value) -> bool {
    v["vary"].as_array().is_some_and(|a| a.iter().any(|x| x.as_str().is_some_and(|s| s.contains("Accept-Encoding"))))
}

#[test]
fn each_coding_decodes_to_the_backends_body() {
    let nginx = Nginx::start(NGINX, 2);
    let root = files(&nginx);
    let gw = gateway(&nginx);
    for coding in ["gzip", "br", "zstd"] {
        for file in ["data.json", "page.html", "style.css", "logo.svg"] {
            let v = decoded(&gw, &format!("/{file}"), coding, &root.join(file), &[]);
            let size = std::fs::metadata(root.join(file)).expect("file").len();
            assert_eq!(v["status"], 200, "{file} {coding}: {v}");
            assert_eq!(v["encoding"], coding, "{file}: {v}");
            assert_eq!(v["same"], true, "{file} {coding} decodes to the file: {v}");
            assert!(varies(&v), "{v}");
            assert!(v["content_length"].is_null(), "{v}");
            assert!(v["etag"].as_str().is_some_and(|e| e.starts_with("W/\"")), "the ETag weakened: {v}");
            assert!(v["raw_len"].as_u64().is_some_and(|n| n * 3 < size), "{file} {coding}: {v} of {size}");
        }
    }
    // q-values, then the gateway's order (zstd, br, gzip) on a tie.
    let json = root.join("data.json");
    for (accept, want) in [
        ("gzip;q=0.5, br;q=0.8", "br"),
        ("gzip, br", "br"),
        ("gzip, deflate, br, zstd", "zstd"),
        ("*", "zstd"),
        ("*;q=0.3, zstd;q=0, gzip;q=0.2", "br"),
        ("x-gzip", "gzip"),
    ] {
        let v = decoded(&gw, "/data.json", accept, &json, &[]);
        assert_eq!((v["encoding"].as_str(), v["same"].as_bool()), (Some(want), Some(true)), "{accept}: {v}");
    }
    // curl's own decoders, over HTTP/1.1 and HTTP/2 (prior knowledge), with the codings curl offers.
    let want = std::fs::read(&json).expect("file");
    let url = format!("http://{}/data.json", gw.addr("http"));
    for version in ["--http1.1", "--http2-prior-knowledge"] {
        for coding in ["gzip", "br", "zstd"] {
            let r = curl(&[
                version,
                "--compressed",
                "-H",
                &format!("Accept-Encoding: {coding}"),
                "-H",
                &format!("Host: {HOST}"),
                &url,
            ]);
            assert_eq!(r.header("content-encoding"), Some(coding), "{version} {coding}");
            assert!(r.body == want, "{version} {coding}: {} bytes decoded, {} sent", r.body.len(), want.len());
        }
    }
}

#[test]
fn answers_that_must_not_change_pass_as_they_are() {
    let nginx = Nginx::start(NGINX, 2);
    let root = files(&nginx);
    let gw = gateway(&nginx);
    let size = |f: &str| std::fs::metadata(root.join(f)).expect("file").len().to_string();
    // Not a listed type, and under min_size: as they are, and no Vary (no other variant exists).
    for file in ["image.png", "tiny.json"] {
        let v = decoded(&gw, &format!("/{file}"), "gzip, br, zstd", &root.join(file), &[]);
        assert!(v["encoding"].is_null() && v["same"] == true && !varies(&v), "{file}: {v}");
        assert_eq!(v["content_length"].as_str(), Some(size(file).as_str()), "{file}: {v}");
    }
    // no-transform; the backend's own coding (passed once, untouched).
    let v = decoded(&gw, "/nt/data.json", "gzip", &root.join("nt/data.json"), &[]);
    assert!(v["encoding"].is_null() && v["same"] == true, "no-transform: {v}");
    let r = curl(&[
        "-H",
        "Accept-Encoding: gzip",
        "-H",
        &format!("Host: {HOST}"),
        &format!("http://{}/encoded/data.json", gw.addr("http")),
    ]);
    assert_eq!(r.headers.iter().filter(|(k, _)| k == "content-encoding").count(), 1);
    assert_eq!((r.header("content-encoding"), r.body.as_slice()), (Some("br"), &b"not really brotli"[..]));
    // A client that takes none of the codings: the file as it is, saying it varies.
    for accept in ["-", "identity", "gzip;q=0, br;q=0, zstd;q=0", "deflate"] {
        let v = decoded(&gw, "/data.json", accept, &root.join("data.json"), &[]);
        assert!(v["encoding"].is_null() && v["same"] == true && varies(&v), "{accept}: {v}");
        assert_eq!(v["content_length"].as_str(), Some(size("data.json").as_str()), "{v}");
        assert!(v["etag"].as_str().is_some_and(|e| e.starts_with('"')), "strong ETag kept: {v}");
    }
    // A range: nginx's 206 as it is.
    let v = decoded(&gw, "/data.json", "gzip", Path::new("-"), &["Range: bytes=0-99"]);
    assert_eq!(
        (v["status"].as_u64(), v["encoding"].as_str(), v["raw_len"].as_u64()),
        (Some(206), None, Some(100)),
        "{v}"
    );
    // HEAD and HTTP/1.0, as nginx's gzip leaves them.
    let url = format!("http://{}/data.json", gw.addr("http"));
    let host = format!("Host: {HOST}");
    let r = curl(&["-I", "-H", "Accept-Encoding: gzip", "-H", &host, &url]);
    assert_eq!((r.header("content-encoding"), r.header("content-length")), (None, Some(size("data.json").as_str())));
    let r = curl(&["-0", "-H", "Accept-Encoding: gzip", "-H", &host, &url]);
    assert_eq!((r.status, r.header("content-encoding")), (200, None));
    // A route that turns its site's compression off.
    let v = decoded(&gw, "/plain/data.json", "gzip", &root.join("data.json"), &[]);
    assert!(v["encoding"].is_null() && v["same"] == true && !varies(&v), "{v}");
    // A cache revalidating its compressed copy: nginx compares the weak ETag and says 304.
    let v = decoded(&gw, "/data.json", "gzip", &root.join("data.json"), &[]);
    let etag = v["etag"].as_str().expect("etag").to_string();
    let v = decoded(&gw, "/data.json", "gzip", Path::new("-"), &[&format!("If-None-Match: {etag}")]);
    assert_eq!(v["status"], 304, "{v}");
}

/// nginx's gzip (zlib, level 6) beside the gateway's (level 6: libdeflate for these answers of
/// known length under 64 KiB) on the same file: both decode to it, the gateway's no more than
/// 10 % larger.
#[test]
fn nginx_gzip_beside_it_on_the_same_file() {
    let nginx = Nginx::start(NGINX, 2);
    let root = files(&nginx);
    let gw = gateway(&nginx);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/compression/decode.py");
    for file in ["data.json", "style.css", "logo.svg"] {
        let ours = decoded(&gw, &format!("/{file}"), "gzip", &root.join(file), &[]);
        let out = Command::new("python3")
            .arg(&script)
            .args([&format!("http://127.0.0.1:{}/{file}", nginx.port(1)), HOST, "gzip"])
            .arg(root.join(file))
            .output()
            .expect("run decode.py");
        let theirs: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!((ours["same"].as_bool(), theirs["same"].as_bool()), (Some(true), Some(true)), "{ours}\n{theirs}");
        assert_eq!(theirs["encoding"], "gzip", "{theirs}");
        let (a, b) = (ours["raw_len"].as_f64().unwrap_or(0.0), theirs["raw_len"].as_f64().unwrap_or(0.0));
        eprintln!("{file}: gzip level 6: gateway {a} bytes, nginx {b}");
        assert!(a / b < 1.10, "{file}: gateway {a} bytes, nginx {b}");
    }
}

/// An event stream (listed in `types`) is compressed and still sent event by event: the first
/// event reaches curl, decoded, while the backend holds the second back.
#[test]
fn an_event_stream_is_sent_event_by_event() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let backend = listener.local_addr().expect("addr");
    let (release, released) = std::sync::mpsc::channel::<()>();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().expect("accept");
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).is_ok_and(|n| n == 1) {
            head.push(byte[0]);
        }
        let chunk = |s: &str| format!("{:x}\r\n{s}\r\n", s.len());
        let first = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n{}",
            chunk("data: one\n\n")
        );
        conn.write_all(first.as_bytes()).expect("write");
        let _ = released.recv_timeout(Duration::from_secs(30));
        let _ = conn.write_all(format!("{}0\r\n\r\n", chunk("data: two\n\n")).as_bytes());
        String::from_utf8_lossy(&head).into_owned()
    });
    let gw = start(&format!(
        "{}upstreams:\n  sse: {{targets: [\"{backend}\"]}}\nsites:\n  s:\n    hosts: [\"*\"]\n    routes: [{{path: /, upstream: sse, compression: {{types: [text/event-stream]}}}}]\n",
        head("")
    ));
    let mut child = Command::new("curl")
        .args(["-sS", "-N", "-i", "--noproxy", "*", "--max-time", "30", "--compressed", "-H", "Accept-Encoding: gzip"])
        .arg(format!("http://{}/events", gw.addr("http")))
        .stdout(Stdio::piped())
        .spawn()
        .expect("run curl");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, lines) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut seen = Vec::new();
    let wait_for = |want: &str, seen: &mut Vec<String>| {
        while let Ok(line) = lines.recv_timeout(Duration::from_secs(20)) {
            let done = line == want;
            seen.push(line);
            if done {
                return true;
            }
        }
        false
    };
    assert!(wait_for("data: one", &mut seen), "the first event, before the second was sent: {seen:?}");
    assert!(seen.iter().any(|l| l.eq_ignore_ascii_case("content-encoding: gzip")), "{seen:?}");
    release.send(()).expect("release the second event");
    assert!(wait_for("data: two", &mut seen), "{seen:?}");
    assert!(child.wait().expect("curl ends").success());
    let asked = server.join().expect("backend");
    assert!(
        asked.to_ascii_lowercase().contains("accept-encoding: gzip"),
        "the client's Accept-Encoding forwarded: {asked}"
    );
}

/// `payload` coded by Python's gzip or the brotli and zstd libraries.
fn coded(coding: &str, payload: &[u8]) -> Vec<u8> {
    let code = match coding {
        "gzip" => "import gzip,sys; sys.stdout.buffer.write(gzip.compress(sys.stdin.buffer.read()))",
        "br" => "import brotli,sys; sys.stdout.buffer.write(brotli.compress(sys.stdin.buffer.read()))",
        _ => "import zstandard,sys; sys.stdout.buffer.write(zstandard.ZstdCompressor().compress(sys.stdin.buffer.read()))",
    };
    let mut child = Command::new("python3")
        .args(["-c", code])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run python3");
    child.stdin.take().expect("stdin").write_all(payload).expect("write");
    let out = child.wait_with_output().expect("python3");
    assert!(out.status.success());
    out.stdout
}

/// `decompress_requests`: bodies coded by the client reach the backend decoded (chunked, no
/// `Content-Encoding`), bounded by `max_body` once decoded; a body that is not what it says
/// gets 400 and the backend never sees it whole; a route without it passes coded bodies on.
#[test]
fn coded_request_bodies_are_decoded_for_the_backend() {
    let backend = gatehouse_testkit::Backend::start("b");
    let gw = start(&format!(
        r#"{head}upstreams:
  u: {{targets: ["{addr}"]}}
sites:
  s:
    hosts: ["*"]
    routes:
      - {{path: /, upstream: u, max_body: 100KB, compression: {{enabled: false, decompress_requests: true}}}}
      - {{path: /as-is/, upstream: u}}
"#,
        head = head(""),
        addr = backend.addr(),
    ));
    let payload: Vec<u8> = (0..5000).flat_map(|i| format!("{{\"n\":{i}}}\n").into_bytes()).collect();
    let url = format!("http://{}", gw.addr("http"));
    let post = |path: &str, coding: &str, body: &[u8], version: &str| {
        let file = gatehouse_testkit::TempDir::new();
        let p = file.join("body");
        std::fs::write(&p, body).expect("write");
        curl(&[
            version,
            "-X",
            "POST",
            "-H",
            &format!("Content-Encoding: {coding}"),
            "-H",
            "Content-Type: application/x-ndjson",
            "--data-binary",
            &format!("@{}", p.display()),
            &format!("{url}{path}"),
        ])
    };
    for version in ["--http1.1", "--http2-prior-knowledge"] {
        for coding in ["gzip", "br", "zstd"] {
            backend.clear();
            let r = post("/in", coding, &coded(coding, &payload), version);
            assert_eq!(r.status, 200, "{version} {coding}: {}", r.text());
            let seen = backend.requests().pop().expect("forwarded");
            assert!(seen.body == payload, "{version} {coding}: {} bytes arrived", seen.body.len());
            assert_eq!(seen.header("content-encoding"), None);
            assert_eq!(seen.header("content-length"), None, "{version} {coding}");
        }
    }
    // 1 MB of zeros is a small gzip body, and over max_body decoded.
    backend.clear();
    let r = post("/in", "gzip", &coded("gzip", &vec![0u8; 1_000_000]), "--http1.1");
    assert_eq!(r.status, 413, "{}", r.text());
    assert!(backend.requests().iter().all(|q| q.aborted), "never forwarded whole");
    // Not gzip at all: 400.
    backend.clear();
    let r = post("/in", "gzip", b"plain text, not gzip", "--http1.1");
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(backend.requests().iter().all(|q| q.aborted), "never forwarded whole");
    // Another coding, and a route that does not decode: passed on as sent.
    backend.clear();
    let r = post("/in", "deflate", b"whatever", "--http1.1");
    assert_eq!(r.status, 200);
    let gz = coded("gzip", &payload);
    let r2 = post("/as-is/x", "gzip", &gz, "--http1.1");
    assert_eq!(r2.status, 200);
    let seen = backend.requests();
    assert_eq!((seen[0].header("content-encoding"), seen[0].body.as_slice()), (Some("deflate"), &b"whatever"[..]));
    assert_eq!((seen[1].header("content-encoding"), seen[1].body == gz), (Some("gzip"), true));
}
