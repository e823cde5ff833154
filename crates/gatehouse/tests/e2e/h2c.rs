//! Cleartext HTTP/2: from clients (prior knowledge) and to upstreams (`protocol: http2`).

use crate::common::{head, simple, start, targets, HOST, SETTLE};
use gatehouse_testkit::{curl, raw, Backend, RawConn};
use http::Version;

#[test]
fn h2c_prior_knowledge_is_served() {
    let b = Backend::start("a");
    let gw = start(&simple(&format!("targets: {}", targets(&[&b]))));
    let url = format!("http://{}/h2", gw.addr("http"));
    let resp = curl(&["--http2-prior-knowledge", &url, "-H", &format!("Host: {HOST}")]);
    assert_eq!(resp.version, "HTTP/2", "{resp:?}");
    assert_eq!(resp.status, 200, "{resp:?}");
    assert_eq!(resp.text(), "a");
    let reqs = b.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].version, Version::HTTP_11, "the upstream speaks HTTP/1.1 by default");
    assert_eq!(reqs[0].path_and_query(), "/h2");
    assert_eq!(reqs[0].header("host"), Some(HOST), "the :authority becomes Host upstream: {:?}", reqs[0]);
}

#[test]
fn http2_upstream_is_reached_over_h2c() {
    let b = Backend::start("a");
    let gw = start(&simple(&format!("targets: {}, protocol: http2", targets(&[&b]))));
    let url = format!("http://{}/up?x=1", gw.addr("http"));
    for _ in 0..10 {
        let resp = curl(&[&url, "-H", &format!("Host: {HOST}")]);
        assert_eq!(resp.status, 200, "{resp:?}");
        assert_eq!(resp.text(), "a");
    }
    let reqs = b.requests();
    assert_eq!(reqs.len(), 10);
    for r in &reqs {
        assert_eq!(r.version, Version::HTTP_2, "{r:?}");
        assert_eq!(r.path_and_query(), "/up?x=1");
        let authority = r.uri.parse::<http::Uri>().ok().and_then(|u| u.authority().map(|a| a.to_string()));
        assert_eq!(authority.as_deref(), Some(HOST), "Host is preserved as :authority: {r:?}");
    }
    // One multiplexed connection per worker (the configuration runs 2), never one per request.
    assert!(b.connections() <= 2, "{} connections for 10 requests", b.connections());
}

/// RFC 9113 conformance of the HTTP/2-only cleartext listener, checked by h2spec (the Go tool).
/// CI installs it; elsewhere the test says it was skipped, unless `CI` is set.
#[test]
fn h2spec_passes_on_the_h2c_listener() {
    h2spec_on_cleartext("h2c");
}

/// The same on an `auto` listener, which serves HTTP/1.x and prior-knowledge HTTP/2 on one port
/// (the quick start's): a connection that opens as HTTP/2 is held to RFC 9113 there too.
#[test]
fn h2spec_passes_on_the_auto_listener() {
    h2spec_on_cleartext("auto");
}

/// Runs h2spec against a gateway whose one cleartext listener speaks `protocol`.
fn h2spec_on_cleartext(protocol: &str) {
    let Some(h2spec) = find_in_path("h2spec") else {
        assert!(std::env::var_os("CI").is_none(), "h2spec is not installed but CI is set");
        eprintln!("h2spec on the {protocol} listener: skipped, h2spec not on PATH");
        return;
    };
    // h2spec skips its flow-control cases unless responses carry some body; the backend answers
    // with its name.
    let b = Backend::start(&"h2spec-backend-".repeat(16));
    let gw = start(&format!(
        "workers: 1\nlisteners:\n  {protocol}: {{bind: \"127.0.0.1:0\", protocol: {protocol}}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n  s: {{hosts: [\"*\"], routes: [{{path: /, upstream: u}}]}}\n",
        targets(&[&b])
    ));
    let addr = gw.addr(protocol);
    run_h2spec(&h2spec, &gw, &["-h", &addr.ip().to_string(), "-p", &addr.port().to_string()], protocol);
}

/// An `auto` connection that opens with the HTTP/2 preface's first line and then breaks the
/// preface is an HTTP/2 connection error (RFC 9113 §3.4), and so is one whose request line names
/// another protocol than HTTP (what h2spec sends as an invalid preface): both are closed without
/// an HTTP/1.x answer. HTTP/1.1 on the same listener is unaffected, and an `http1` listener, where
/// no client can be speaking HTTP/2, still answers the second with a 505.
#[test]
fn a_broken_preface_on_an_auto_listener_gets_no_http1_answer() {
    let b = Backend::start("a");
    let config = |protocol: &str| {
        format!(
            "{}upstreams:\n  u: {{targets: {}}}\nsites:\n  main:\n    hosts: [\"{HOST}\"]\n    routes: [{{path: /, upstream: u}}]\n",
            head(&format!("protocol: {protocol}")),
            targets(&[&b])
        )
    };
    let gw = start(&config("auto"));
    for opening in [&b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n"[..], b"INVALID CONNECTION PREFACE\r\n\r\n"] {
        let mut c = RawConn::connect(gw.addr("http"));
        c.send(opening);
        let (reply, closed) = c.read_to_close(SETTLE);
        let sent = String::from_utf8_lossy(opening);
        assert!(closed, "{sent:?}: the connection stays open: {reply:?}");
        assert!(!reply.contains("HTTP/1."), "{sent:?}: an HTTP/1.x answer: {reply:?}");
    }
    let http1 = raw(gw.addr("http"), format!("GET / HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n").as_bytes());
    assert!(http1.starts_with("HTTP/1.1 200"), "{http1:?}");
    assert_eq!(b.request_count(), 1, "only the HTTP/1.1 request reaches the backend");

    let http1_only = start(&config("http1"));
    let reply = raw(http1_only.addr("http"), b"INVALID CONNECTION PREFACE\r\n\r\n");
    assert!(reply.starts_with("HTTP/1.1 505"), "{reply:?}");
}

/// Runs h2spec with `args` (target and TLS options) and asserts that every case passed.
pub(crate) fn run_h2spec(h2spec: &std::path::Path, gw: &gatehouse_testkit::Gateway, args: &[&str], label: &str) {
    let out = std::process::Command::new(h2spec)
        .args(args)
        .args(["-o", "5", "-j"])
        .arg(gw.dir().join(format!("h2spec-{label}.xml")))
        .output()
        .expect("run h2spec");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary = stdout.lines().rev().find(|l| l.contains("tests,")).unwrap_or("no summary").to_string();
    assert!(out.status.success() && summary.contains(" 0 skipped, 0 failed"), "h2spec ({label}): {summary}\n{stdout}");
    eprintln!("h2spec on the {label} listener: {summary}");
}

pub(crate) fn find_in_path(name: &str) -> Option<std::path::PathBuf> {
    let dirs = std::env::var_os("PATH")?;
    std::env::split_paths(&dirs).map(|d| d.join(name)).find(|p| p.is_file())
}

/// `http2_ping_interval`: a client that says nothing for the interval is sent a PING. One that
/// answers keeps its connection; one that does not is closed once `http2_ping_timeout` passes
/// (how a dead peer behind a NAT is found while its streams wait).
#[test]
fn quiet_http2_clients_are_pinged_and_closed_when_they_do_not_answer() {
    use gatehouse_testkit::h2raw::{flag, kind, H2Conn, ReadEnd};
    let b = Backend::start("a");
    let gw = start(&format!(
        "workers: 1\nlisteners:\n  h2c: {{bind: \"127.0.0.1:0\", protocol: h2c, http2_ping_interval: 200ms, http2_ping_timeout: 300ms}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n  s: {{hosts: [\"*\"], routes: [{{path: /, upstream: u}}]}}\n",
        targets(&[&b])
    ));
    let is_ping = |f: &gatehouse_testkit::h2raw::Frame| f.kind == kind::PING && f.flags & flag::ACK == 0;
    let mut answering = H2Conn::connect(gw.addr("h2c"));
    answering.handshake(SETTLE).expect("handshake");
    for round in 0..3 {
        let ping = answering.read_until(SETTLE, is_ping, |_| {}).unwrap_or_else(|e| panic!("no PING {round}: {e:?}"));
        let mut data = [0u8; 8];
        data.copy_from_slice(&ping.payload[..8]);
        answering.ping(data, true).expect("answer the PING");
    }
    let mut silent = H2Conn::connect(gw.addr("h2c"));
    silent.handshake(SETTLE).expect("handshake");
    silent.read_until(SETTLE, is_ping, |_| {}).expect("a PING");
    // Then the connection ends: a GOAWAY first, or just the close.
    match silent.read_until(SETTLE, |f| f.kind == kind::GOAWAY, |_| {}) {
        Ok(_) | Err(ReadEnd::Closed) => {}
        Err(e) => panic!("the silent client's connection stayed open: {e:?}"),
    }
}

/// A gateway with one worker whose upstream `u` (`protocol: http2`, then `upstream_extra`) is the
/// returned listener, where a test plays the HTTP/2 server frame by frame.
fn raw_http2_upstream(upstream_extra: &str) -> (std::net::TcpListener, gatehouse_testkit::Gateway) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let gw = start(&format!(
        "workers: 1\nlisteners:\n  http: {{bind: \"127.0.0.1:0\"}}\nupstreams:\n  u: {{targets: [\"{}\"], protocol: http2{upstream_extra}}}\nsites:\n  s: {{hosts: [\"*\"], routes: [{{path: /, upstream: u}}]}}\n",
        listener.local_addr().expect("address")
    ));
    (listener, gw)
}

/// `keepalive.ping_interval` of an HTTP/2 upstream: while a request waits on a quiet endpoint,
/// Gatehouse PINGs it at the interval (an endpoint that answers keeps the connection and
/// answers the request in the end), as a raw HTTP/2 server here sees frame by frame.
#[test]
fn http2_upstreams_with_open_streams_are_pinged_at_the_interval() {
    use gatehouse_testkit::h2raw::{flag, kind, H2Conn};
    let (listener, gw) = raw_http2_upstream(", keepalive: {ping_interval: 200ms}");
    let url = format!("http://{}/slow", gw.addr("http"));
    let client = std::thread::spawn(move || curl(&[&url, "-H", &format!("Host: {HOST}")]));
    let (stream, _) = listener.accept().expect("the gateway connects");
    let mut endpoint = H2Conn::accept(stream, SETTLE).expect("the gateway's preface");
    let request = endpoint.read_until(SETTLE, |f| f.kind == kind::HEADERS, |_| {}).expect("the request");
    let mut pings = 0;
    while pings < 3 {
        let frame = endpoint.read_frame(SETTLE).expect("a frame while the request waits");
        if frame.kind == kind::SETTINGS && frame.flags & flag::ACK == 0 {
            endpoint.frame(kind::SETTINGS, flag::ACK, 0, &[]).expect("ack the settings");
        } else if frame.kind == kind::PING && frame.flags & flag::ACK == 0 {
            let mut data = [0u8; 8];
            data.copy_from_slice(&frame.payload[..8]);
            endpoint.ping(data, true).expect("answer the PING");
            pings += 1;
        }
    }
    // `:status: 200` (HPACK static index 8), then a body.
    endpoint.headers(request.stream, &[0x88], false, true).expect("answer");
    endpoint.data(request.stream, b"pinged", true).expect("body");
    let resp = client.join().expect("curl");
    assert_eq!((resp.status, resp.text()), (200, "pinged".to_string()), "{resp:?}");
}

/// An HTTP/2 upstream that sends GOAWAY (a server shutting down gracefully) while a stream is
/// still open on the connection gets no new streams there: the next request goes on a new
/// connection, and the open stream is still answered on the old one.
#[test]
fn an_http2_upstream_that_sends_goaway_is_left_for_a_new_connection() {
    use gatehouse_testkit::h2raw::{flag, kind, H2Conn};
    let (listener, gw) = raw_http2_upstream("");
    let (accepted_tx, accepted) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for _ in 0..2 {
            if let Ok((stream, _)) = listener.accept() {
                if accepted_tx.send(stream).is_err() {
                    return;
                }
            }
        }
    });
    let request = |endpoint: &mut H2Conn| {
        let request = endpoint.read_until(SETTLE, |f| f.kind == kind::HEADERS, |_| {}).expect("the request");
        endpoint.frame(kind::SETTINGS, flag::ACK, 0, &[]).expect("ack the settings");
        request.stream
    };
    let answer = |endpoint: &mut H2Conn, stream: u32, text: &[u8]| {
        // `:status: 200` (HPACK static index 8), then a body.
        endpoint.headers(stream, &[0x88], false, true).expect("answer");
        endpoint.data(stream, text, true).expect("body");
    };
    let get = |path: &str| {
        let url = format!("http://{}{path}", gw.addr("http"));
        std::thread::spawn(move || curl(&[&url, "-H", &format!("Host: {HOST}")]))
    };

    let first = get("/slow");
    let stream = accepted.recv_timeout(SETTLE).expect("the gateway connects");
    let mut old = H2Conn::accept(stream, SETTLE).expect("the gateway's preface");
    let open = request(&mut old);
    // GOAWAY: no stream after the open one, NO_ERROR.
    let mut goaway = open.to_be_bytes().to_vec();
    goaway.extend_from_slice(&0u32.to_be_bytes());
    old.frame(kind::GOAWAY, 0, 0, &goaway).expect("GOAWAY");

    let second = get("/next");
    let stream = accepted.recv_timeout(SETTLE).expect("a new connection for the next request");
    let mut new = H2Conn::accept(stream, SETTLE).expect("the gateway's preface");
    let next = request(&mut new);
    answer(&mut new, next, b"new");
    let resp = second.join().expect("curl");
    assert_eq!((resp.status, resp.text()), (200, "new".to_string()), "{resp:?}");

    answer(&mut old, open, b"old");
    let resp = first.join().expect("curl");
    assert_eq!((resp.status, resp.text()), (200, "old".to_string()), "{resp:?}");
}

/// Runs h2load against `url` with `args` and returns how many requests succeeded. CI installs
/// it (nghttp2-client); elsewhere `None` says the test was skipped, unless `CI` is set.
fn h2load(url: &str, args: &[&str]) -> Option<(u64, String)> {
    let out = match std::process::Command::new("h2load").args(args).arg(url).output() {
        Ok(out) => out,
        Err(_) => {
            assert!(std::env::var_os("CI").is_none(), "h2load is needed but CI is set");
            eprintln!("skipped: no h2load");
            return None;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let line = text.lines().find(|l| l.starts_with("requests:")).unwrap_or_else(|| panic!("h2load said {text}"));
    // "requests: 12 total, 12 started, 12 done, 12 succeeded, 0 failed, ..."
    let succeeded = line
        .split(',')
        .find_map(|part| part.trim().strip_suffix(" succeeded"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("h2load said {text}"));
    Some((succeeded, text))
}

#[test]
fn a_second_http2_connection_opens_at_the_servers_stream_limit() {
    let b = Backend::start("a");
    b.set_h2_max_streams(4);
    let yaml = simple(&format!("targets: {}, protocol: http2", targets(&[&b]))).replace("workers: 2", "workers: 1");
    let gw = start(&yaml);
    let url = format!("http://{}/streams", gw.addr("http"));
    // One request first: the worker's connection is open and its server's SETTINGS are in.
    let resp = curl(&[&url, "-H", &format!("Host: {HOST}")]);
    assert_eq!(resp.status, 200, "{resp:?}");
    assert_eq!(b.connections(), 1);
    // Twelve streams at once, each answered after a while: four per connection.
    b.set_delay(std::time::Duration::from_millis(400));
    let Some((succeeded, said)) =
        h2load(&url, &["-n", "12", "-c", "1", "-m", "12", "-H", &format!(":authority: {HOST}")])
    else {
        return;
    };
    assert_eq!(succeeded, 12, "{said}");
    assert_eq!(b.connections(), 3, "12 concurrent streams, 4 allowed per connection");
    // Quiet again: one request at a time goes on the first connection; the others close.
    b.set_delay(std::time::Duration::ZERO);
    for _ in 0..5 {
        assert_eq!(curl(&[&url, "-H", &format!("Host: {HOST}")]).status, 200);
    }
    assert_eq!(b.connections(), 3, "no connection opened for requests the first can carry");
}
