//! HTTP/2 denial of service, short form: each attack runs against a real gateway (one worker, an
//! h2c listener; one attack also over TLS) from a raw frame client, while a well-behaved client
//! (curl) on another connection must keep being served. The gateway's CPU time and memory must stay within bounds that hold
//! with room to spare when the attack is handled and fail when it is not. `bench/h2-dos.sh` runs
//! the same attacks for longer against a release build.

use crate::common::{targets, HOST};
use gatehouse_testkit::h2raw::{code, encode_frame, encode_rst, flag, kind, setting, GoAway, H2Conn, Hpack, ReadEnd};
use gatehouse_testkit::{curl, metric_value, Backend, Gateway, ProcStats};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::thread;
use std::time::{Duration, Instant};

/// How long a test waits for the gateway's answer to an attack.
const ANSWER: Duration = Duration::from_secs(20);
const MIB: u64 = 1 << 20;

/// One worker, so the attacker and the well-behaved client share a thread; an h2c listener with
/// `listener` as extra settings.
fn gateway(b: &Backend, listener: &str) -> Gateway {
    let sep = if listener.is_empty() { "" } else { ", " };
    crate::common::start(&format!(
        "workers: 1\nadmin: {{bind: \"127.0.0.1:0\"}}\nlisteners:\n  h2c: {{bind: \"127.0.0.1:0\", protocol: h2c{sep}{listener}}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}]}}\n",
        targets(&[b])
    ))
}

/// One request from curl over a connection of its own; panics unless it is answered 200.
fn served(addr: std::net::SocketAddr, path: &str) {
    let url = format!("http://{addr}{path}");
    let resp = curl(&["--http2-prior-knowledge", &url, "-H", &format!("Host: {HOST}")]);
    assert_eq!((resp.version.as_str(), resp.status), ("HTTP/2", 200), "well-behaved client during an attack: {resp:?}");
}

/// Runs `attack` while a well-behaved client sends requests on its own connections, one after
/// another (at most 100); every one of them must be answered 200, and at least one must be sent.
fn while_served<T>(gw: &Gateway, attack: impl FnOnce() -> T) -> T {
    let stop = AtomicBool::new(false);
    let addr = gw.addr("h2c");
    let result = thread::scope(|s| {
        let probe = s.spawn(|| {
            let mut sent = 0;
            while sent < 100 && (sent == 0 || !stop.load(SeqCst)) {
                served(addr, "/probe");
                sent += 1;
            }
            sent
        });
        let result = attack();
        stop.store(true, SeqCst);
        match probe.join() {
            Ok(sent) => assert!(sent > 0),
            Err(panic) => std::panic::resume_unwind(panic),
        }
        result
    });
    served(addr, "/after");
    result
}

/// The gateway's CPU and memory when an attack starts, to bound what it spends.
struct Budget {
    start: ProcStats,
    cpu: Duration,
    memory: u64,
}

impl Budget {
    /// At most `cpu` more CPU time and `memory` more resident memory (peak) from now on.
    fn new(gw: &Gateway, cpu: Duration, memory: u64) -> Budget {
        Budget { start: gw.proc_stats(), cpu, memory }
    }

    /// Asserts the gateway stayed within the budget; returns what it spent.
    fn check(&self, gw: &Gateway, attack: &str) -> (Duration, u64) {
        let now = gw.proc_stats();
        let cpu = now.cpu.saturating_sub(self.start.cpu);
        let grown = now.peak_rss.saturating_sub(self.start.rss);
        eprintln!("{attack}: gateway used {cpu:?} CPU, peak resident memory grew {} KiB", grown / 1024);
        assert!(cpu <= self.cpu, "{attack}: {cpu:?} of CPU, over the {:?} budget", self.cpu);
        assert!(grown <= self.memory, "{attack}: memory grew by {grown} bytes, over {} bytes", self.memory);
        (cpu, grown)
    }
}

/// Writes `batches` from a second thread (stopping at the first write error) while this thread
/// reads frames until a GOAWAY comes; returns the GOAWAY (or how reading ended) and the number of
/// batches written.
fn flood_until_goaway(conn: &mut H2Conn, batches: &[&[u8]]) -> (Result<GoAway, ReadEnd>, usize) {
    let mut writer = conn.writer();
    thread::scope(|s| {
        let sender = s.spawn(move || batches.iter().take_while(|batch| writer.send(batch).is_ok()).count());
        let goaway = conn.read_goaway(ANSWER);
        (goaway, sender.join().unwrap_or(0))
    })
}

fn assert_calm(goaway: &Result<GoAway, ReadEnd>, attack: &str) {
    let Ok(g) = goaway else { panic!("{attack}: no GOAWAY, reading ended with {goaway:?}") };
    assert_eq!(g.code, code::ENHANCE_YOUR_CALM, "{attack}: {g:?}");
}

#[test]
fn rapid_reset_gets_goaway_and_reaches_the_backend_a_bounded_number_of_times() {
    const PAIRS: usize = 20_000;
    const PER_BATCH: usize = 100;
    let b = Backend::start("b");
    let gw = gateway(&b, "");
    let budget = Budget::new(&gw, Duration::from_secs(5), 32 * MIB);
    let mut conn = H2Conn::connect(gw.addr("h2c"));
    let block = Hpack::get(HOST, "/rapid-reset").into_bytes();
    let (goaway, batches) = while_served(&gw, || {
        // Every batch opens and at once cancels PER_BATCH streams: each pair costs the client 50
        // bytes and no round trip.
        let mut next = 1u32;
        let mut all = Vec::new();
        for _ in 0..PAIRS / PER_BATCH {
            let mut batch = Vec::new();
            for _ in 0..PER_BATCH {
                encode_frame(&mut batch, kind::HEADERS, flag::END_HEADERS | flag::END_STREAM, next, &block);
                encode_rst(&mut batch, next, code::CANCEL);
                next += 2;
            }
            all.push(batch);
        }
        let batches: Vec<&[u8]> = all.iter().map(Vec::as_slice).collect();
        flood_until_goaway(&mut conn, &batches)
    });
    assert_calm(&goaway, "rapid reset");
    let last = goaway.as_ref().map_or(0, |g| g.last_stream_id);
    eprintln!("rapid reset: GOAWAY {goaway:?} after {} of {PAIRS} pairs were written", batches * PER_BATCH);
    assert!(last < 2 * 1000, "the connection went on for {} streams", last / 2);
    let forwarded = b.requests().iter().filter(|r| r.path_and_query() == "/rapid-reset").count();
    assert!(forwarded <= 400, "{forwarded} reset requests reached the backend");
    budget.check(&gw, "rapid reset");
    gw.wait_metric(Duration::from_secs(5), |m| {
        metric_value(m, r#"gatehouse_http2_offenders_total{reason="rapid_reset"}"#).is_some_and(|v| v >= 1.0)
    });
}

#[test]
fn continuation_flood_gets_goaway_without_buffering_the_block() {
    let b = Backend::start("b");
    let gw = gateway(&b, "");
    let budget = Budget::new(&gw, Duration::from_secs(5), 32 * MIB);
    // Two kinds of never-ending block: a header whose value never ends, and an endless list of small
    // headers. Either way at most 64 MiB are written per connection.
    let mut endless_value = Hpack::get(HOST, "/continuation").into_bytes();
    endless_value.extend_from_slice(&[0x00, 0x05]);
    endless_value.extend_from_slice(b"x-big");
    endless_value.extend_from_slice(&[0x7f, 0xff, 0xff, 0xff, 0x0f]); // a 2^31-byte value follows
    let mut fields = Hpack::new();
    while fields.bytes().len() < 16_000 {
        fields.literal(b"x-a", b"b");
    }
    let cases: [(&str, Vec<u8>); 2] = [("endless value", vec![b'v'; 16_384]), ("endless list", fields.into_bytes())];
    for (name, chunk) in cases {
        let mut conn = H2Conn::connect(gw.addr("h2c"));
        let mut batch = Vec::new();
        for _ in 0..16 {
            encode_frame(&mut batch, kind::CONTINUATION, 0, 1, &chunk);
        }
        conn.headers(1, &endless_value, true, false).expect("send the first HEADERS");
        let (goaway, batches) = while_served(&gw, || flood_until_goaway(&mut conn, &[batch.as_slice(); 256]));
        eprintln!("CONTINUATION flood ({name}): {goaway:?} after {} frames", batches * 16);
        let g = goaway.unwrap_or_else(|e| panic!("{name}: no GOAWAY ({e:?})"));
        assert!(
            [code::ENHANCE_YOUR_CALM, code::COMPRESSION_ERROR, code::PROTOCOL_ERROR].contains(&g.code),
            "{name}: {g:?}"
        );
        assert!(batches < 256, "{name}: all 64 MiB were accepted");
    }
    assert!(!b.requests().iter().any(|r| r.path_and_query() == "/continuation"), "an unfinished block was forwarded");
    budget.check(&gw, "CONTINUATION flood");
}

/// A flood of `frame` (17 bytes or less), written `count` times.
/// The gateway must answer with GOAWAY ENHANCE_YOUR_CALM and count the connection under `reason`.
fn control_flood(gw: &Gateway, frame: &[u8], count: usize, read_while_flooding: bool, attack: &str, reason: &str) {
    const PER_BATCH: usize = 1000;
    let series = format!("gatehouse_http2_offenders_total{{reason=\"{reason}\"}}");
    let counted = |m: &str| metric_value(m, &series).unwrap_or(0.0);
    let before = counted(&gw.metrics());
    let budget = Budget::new(gw, Duration::from_secs(5), 48 * MIB);
    let batch = frame.repeat(PER_BATCH);
    let mut conn = H2Conn::connect(gw.addr("h2c"));
    let (goaway, batches) = while_served(gw, || {
        if read_while_flooding {
            flood_until_goaway(&mut conn, &vec![batch.as_slice(); count / PER_BATCH])
        } else {
            // The client reads nothing until it has written everything or the gateway stopped
            // taking it; the writes are bounded by the socket's write timeout.
            let mut writer = conn.writer();
            let batches = (0..count / PER_BATCH).take_while(|_| writer.send(&batch).is_ok()).count();
            (conn.read_goaway(ANSWER), batches)
        }
    });
    eprintln!("{attack}: {goaway:?} after {} frames were written", batches * PER_BATCH);
    assert_calm(&goaway, attack);
    assert!(batches < count / PER_BATCH, "{attack}: all {count} frames were taken");
    budget.check(gw, attack);
    gw.wait_metric(Duration::from_secs(5), |m| counted(m) > before);
}

#[test]
fn settings_flood_gets_goaway_whether_or_not_the_client_reads() {
    let b = Backend::start("b");
    let gw = gateway(&b, "");
    let mut frame = Vec::new();
    gatehouse_testkit::h2raw::encode_settings(&mut frame, &[(setting::INITIAL_WINDOW_SIZE, 65_535)]);
    control_flood(&gw, &frame, 1_000_000, false, "SETTINGS flood, client not reading", "settings_flood");
    control_flood(&gw, &frame, 1_000_000, true, "SETTINGS flood, client reading", "settings_flood");
}

#[test]
fn ping_flood_gets_goaway_whether_or_not_the_client_reads() {
    let b = Backend::start("b");
    let gw = gateway(&b, "");
    let mut frame = Vec::new();
    encode_frame(&mut frame, kind::PING, 0, 0, b"flooding");
    control_flood(&gw, &frame, 1_000_000, false, "PING flood, client not reading", "ping_flood");
    control_flood(&gw, &frame, 1_000_000, true, "PING flood, client reading", "ping_flood");
}

#[test]
fn streams_over_the_concurrency_limit_are_refused() {
    const LIMIT: u32 = 100;
    const STREAMS: u32 = 150;
    let b = Backend::start("b");
    // Holds each request long enough for all of them to be open at once.
    b.set_delay(Duration::from_millis(1500));
    let gw = gateway(&b, &format!("http2_max_concurrent_streams: {LIMIT}"));
    let budget = Budget::new(&gw, Duration::from_secs(5), 32 * MIB);
    let mut conn = H2Conn::connect(gw.addr("h2c"));
    let settings = conn.handshake(ANSWER).expect("the gateway's SETTINGS");
    let limit = settings.iter().find(|(id, _)| *id == setting::MAX_CONCURRENT_STREAMS).map(|(_, v)| *v);
    assert_eq!(limit, Some(LIMIT), "{settings:?}");
    let mut all = Vec::new();
    for i in 0..STREAMS {
        encode_frame(
            &mut all,
            kind::HEADERS,
            flag::END_HEADERS | flag::END_STREAM,
            1 + 2 * i,
            &Hpack::get(HOST, "/many").into_bytes(),
        );
    }
    conn.send(&all).expect("open the streams");
    let (mut ok, mut refused) = (0, 0);
    while_served(&gw, || {
        let deadline = Instant::now() + ANSWER;
        while ok + refused < STREAMS {
            let f =
                conn.read_frame_by(deadline).unwrap_or_else(|e| panic!("{e:?} after {ok} answers, {refused} refusals"));
            match f.kind {
                kind::RST_STREAM => {
                    let code = f.error_code();
                    assert!(matches!(code, Some(code::REFUSED_STREAM | code::PROTOCOL_ERROR)), "{f:?}");
                    refused += 1;
                }
                kind::HEADERS | kind::DATA if f.flags & flag::END_STREAM != 0 => ok += 1,
                kind::GOAWAY => panic!("GOAWAY {:?} after {ok} answers, {refused} refusals", f.error_code()),
                _ => {}
            }
        }
    });
    eprintln!("{STREAMS} streams at once: {ok} answered, {refused} refused");
    assert_eq!(refused, STREAMS - LIMIT, "{ok} answered");
    assert!(b.requests().iter().filter(|r| r.path_and_query() == "/many").count() <= LIMIT as usize);
    budget.check(&gw, "many concurrent streams");
}

#[test]
fn hpack_bomb_is_refused_without_decoding_it() {
    let b = Backend::start("b");
    let gw = gateway(&b, "");
    let budget = Budget::new(&gw, Duration::from_secs(5), 32 * MIB);
    let before = b.request_count();
    for round in 0..20 {
        let mut conn = H2Conn::connect(gw.addr("h2c"));
        conn.handshake(ANSWER).expect("the gateway's SETTINGS");
        // One 4000-byte header enters the dynamic table (index 62), then 16,000 one-byte references
        // to it: 64 MB of header list from 20 KB on the wire.
        let mut bomb = Hpack::get(HOST, "/bomb");
        bomb.literal_indexed(b"x-bomb", &[b'a'; 4000]);
        let mut block = bomb.into_bytes();
        let head = block.len();
        block.resize(head + 16_000, 0x80 | 62);
        let (first, rest) = block.split_at(16_384);
        conn.headers(1, first, true, false).expect("send HEADERS");
        let _ = conn.continuation(1, rest, true);
        let answer =
            conn.read_until(ANSWER, |f| matches!(f.kind, kind::GOAWAY | kind::RST_STREAM | kind::HEADERS), |_| {});
        match answer {
            Ok(f) if f.kind == kind::GOAWAY => {
                assert!(matches!(f.error_code(), Some(code::ENHANCE_YOUR_CALM | code::COMPRESSION_ERROR)), "{f:?}")
            }
            Ok(f) if f.kind == kind::RST_STREAM => {}
            Ok(f) => panic!("round {round}: the bomb got a response: {f:?}"),
            Err(e) => panic!("round {round}: {e:?} instead of a refusal"),
        }
    }
    served(gw.addr("h2c"), "/after-bomb");
    assert_eq!(b.request_count(), before + 1, "a bomb was forwarded");
    budget.check(&gw, "HPACK bomb");
}

#[test]
fn header_list_just_over_the_limit_is_431_and_the_connection_goes_on() {
    let b = Backend::start("b");
    let gw = gateway(&b, "max_header_bytes: 16k");
    let mut conn = H2Conn::connect(gw.addr("h2c"));
    conn.handshake(ANSWER).expect("the gateway's SETTINGS");
    // Five references to a 4000-byte entry: 20 KB decoded, over 16k but under the abuse limit.
    let mut h = Hpack::get(HOST, "/over");
    h.literal_indexed(b"x-big", &[b'a'; 4000]);
    for _ in 0..4 {
        h.indexed(62);
    }
    conn.headers(1, h.bytes(), true, true).expect("send HEADERS");
    let status = conn.read_response(1, ANSWER);
    assert!(matches!(status, Ok((431, _))) || status.as_ref().is_err_and(|e| e.contains("reset")), "{status:?}");
    // The table entry stays usable: one reference fits.
    let mut h = Hpack::get(HOST, "/fits");
    h.indexed(62);
    conn.headers(3, h.bytes(), true, true).expect("send HEADERS");
    assert_eq!(conn.read_response(3, ANSWER).map(|(s, _)| s), Ok(200));
    assert_eq!(b.requests().iter().map(|r| r.path_and_query()).collect::<Vec<_>>(), ["/fits"]);
}

/// Opens 200 streams for 1 MiB responses and never reads them, announcing `window` as every
/// stream's flow-control window (and the connection's); the gateway may hold only so much of the
/// responses in memory.
fn unread_responses(window: u32, attack: &str) {
    const STREAMS: u32 = 200;
    let b = Backend::start("b");
    b.set_body(vec![b'r'; 1 << 20]);
    let gw = gateway(&b, "");
    let mut conn = H2Conn::connect_with(gw.addr("h2c"), &[(setting::INITIAL_WINDOW_SIZE, window)]);
    let settings = conn.handshake(ANSWER).expect("the gateway's SETTINGS");
    assert!(settings.contains(&(setting::MAX_CONCURRENT_STREAMS, 256)), "the default limit: {settings:?}");
    if let Some(more) = window.checked_sub(65_535).filter(|m| *m > 0) {
        conn.window_update(0, more).expect("grow the connection window");
    }
    let budget = Budget::new(&gw, Duration::from_secs(5), 40 * MIB);
    let mut all = Vec::new();
    for i in 0..STREAMS {
        let block = Hpack::get(HOST, "/unread").into_bytes();
        encode_frame(&mut all, kind::HEADERS, flag::END_HEADERS | flag::END_STREAM, 1 + 2 * i, &block);
    }
    conn.send(&all).expect("open the streams");
    let unread = |b: &Backend| b.requests().iter().filter(|r| r.path_and_query() == "/unread").count();
    while_served(&gw, || {
        let all_forwarded = gatehouse_testkit::wait_until(ANSWER, || (unread(&b) >= STREAMS as usize).then_some(()));
        assert!(all_forwarded.is_some(), "{attack}: {} of {STREAMS} requests reached the backend", unread(&b));
        // The gateway now takes response bodies for as long as it lets itself buffer them.
        let over = gatehouse_testkit::wait_until(Duration::from_secs(3), || {
            let grown = gw.proc_stats().peak_rss.saturating_sub(budget.start.rss);
            (grown > budget.memory).then_some(grown)
        });
        assert_eq!(over, None, "{attack}: response buffers grew past the budget");
    });
    budget.check(&gw, attack);
    // The responses are whole once the client reads (with no window, once it opens stream 1's).
    if window == 0 {
        conn.window_update(0, 2 << 20).expect("open the connection window");
        conn.window_update(1, 2 << 20).expect("open the window of stream 1");
    }
    let (status, body) = conn.read_response(1, ANSWER).expect("the first response");
    assert_eq!((status, body), (200, 1 << 20), "{attack}");
}

#[test]
fn a_client_with_no_window_does_not_pin_response_buffers() {
    unread_responses(0, "zero-window client");
}

#[test]
fn a_client_that_never_reads_does_not_pin_unbounded_response_buffers() {
    unread_responses(i32::MAX as u32, "client not reading, windows open");
}

/// `send_timeout` on HTTP/2: a client that asks for a large response and never opens its
/// flow-control window holds its stream, and the upstream connection behind it, for about that
/// long; then the gateway closes the connection. A stream that waits as long for a slow upstream is
/// not the client's doing and is answered whole.
#[test]
fn a_client_that_takes_nothing_is_disconnected_at_send_timeout() {
    let b = Backend::start("b");
    b.set_body(vec![b'r'; 1 << 20]);
    let slow = Backend::start("slow");
    slow.set_delay(Duration::from_millis(2500));
    let gw = crate::common::start(&format!(
        "workers: 1\nadmin: {{bind: \"127.0.0.1:0\"}}\nlisteners:\n  h2c: {{bind: \"127.0.0.1:0\", protocol: h2c, send_timeout: 1s}}\nupstreams:\n  u: {{targets: {}}}\n  slow: {{targets: {}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}, {{path: /slow/, upstream: slow}}]}}\n",
        targets(&[&b]),
        targets(&[&slow])
    ));
    let mut patient = H2Conn::connect(gw.addr("h2c"));
    patient.handshake(ANSWER).expect("the gateway's SETTINGS");
    patient.headers(1, Hpack::get(HOST, "/slow/x").bytes(), true, true).expect("send HEADERS");
    assert_eq!(patient.read_response(1, ANSWER), Ok((200, 4)), "a stream waiting 2.5 s for its upstream was cut");

    let mut stuck = H2Conn::connect_with(gw.addr("h2c"), &[(setting::INITIAL_WINDOW_SIZE, 0)]);
    stuck.handshake(ANSWER).expect("the gateway's SETTINGS");
    let started = Instant::now();
    stuck.headers(1, Hpack::get(HOST, "/big").bytes(), true, true).expect("send HEADERS");
    let mut data = 0;
    let end = stuck.read_until(ANSWER, |_| false, |f| data += usize::from(f.kind == kind::DATA) * f.payload.len());
    let took = started.elapsed();
    assert_eq!(end, Err(ReadEnd::Closed), "the connection of a client that takes nothing stays open");
    assert_eq!(data, 0, "DATA went to a client with no window");
    assert!(took >= Duration::from_millis(900), "closed before send_timeout: {took:?}");
    let m = gw.metrics();
    assert_eq!(metric_value(&m, "gatehouse_client_send_timeouts_total"), Some(1.0), "{m}");
    assert_eq!(b.requests().len(), 1, "the stuck request reached the backend once");
    served(gw.addr("h2c"), "/after");
}

/// A gateway whose `/slow/` route goes to `slow` and everything else to `b`.
fn gateway_with_slow(b: &Backend, slow: &Backend) -> Gateway {
    crate::common::start(&format!(
        "workers: 1\nadmin: {{bind: \"127.0.0.1:0\"}}\nlisteners:\n  h2c: {{bind: \"127.0.0.1:0\", protocol: h2c}}\nupstreams:\n  u: {{targets: {}}}\n  slow: {{targets: {}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}, {{path: /slow/, upstream: slow}}]}}\n",
        targets(&[b]),
        targets(&[slow])
    ))
}

#[test]
fn resetting_streams_once_they_reach_the_backend_gets_goaway() {
    const ROUND: u32 = 100;
    const ROUNDS: u32 = 10;
    let b = Backend::start("b");
    let slow = Backend::start("slow");
    // Requests stay in progress until the client resets them.
    slow.set_delay(Duration::from_secs(5));
    let gw = gateway_with_slow(&b, &slow);
    let budget = Budget::new(&gw, Duration::from_secs(5), 32 * MIB);
    let mut conn = H2Conn::connect(gw.addr("h2c"));
    conn.handshake(ANSWER).expect("the gateway's SETTINGS");
    let block = Hpack::get(HOST, "/slow/reset").into_bytes();
    let goaway = while_served(&gw, || {
        // Unlike the rapid reset above, each stream is accepted and forwarded before it is reset,
        // which the HTTP/2 library's limit on resets of streams not yet accepted does not see.
        for round in 0..ROUNDS {
            let ids: Vec<u32> = (0..ROUND).map(|i| 1 + 2 * (round * ROUND + i)).collect();
            let mut opens = Vec::new();
            let mut resets = Vec::new();
            for id in &ids {
                encode_frame(&mut opens, kind::HEADERS, flag::END_HEADERS | flag::END_STREAM, *id, &block);
                encode_rst(&mut resets, *id, code::CANCEL);
            }
            if conn.send(&opens).is_err() {
                break;
            }
            let want = ((round + 1) * ROUND) as usize;
            if gatehouse_testkit::wait_until(ANSWER, || (slow.request_count() >= want).then_some(())).is_none() {
                break;
            }
            if conn.send(&resets).is_err() {
                break;
            }
            match conn.read_goaway(Duration::from_millis(500)) {
                Err(ReadEnd::TimedOut) => continue,
                other => return other,
            }
        }
        conn.read_goaway(ANSWER)
    });
    eprintln!("resets of forwarded streams: {goaway:?}; {} requests forwarded", slow.request_count());
    assert_calm(&goaway, "resets of forwarded streams");
    assert!(slow.request_count() <= 300, "{} reset requests reached the backend", slow.request_count());
    budget.check(&gw, "resets of forwarded streams");
    gw.wait_metric(Duration::from_secs(5), |m| {
        metric_value(m, r#"gatehouse_http2_offenders_total{reason="rapid_reset"}"#).is_some_and(|v| v >= 1.0)
    });
}

#[test]
fn a_ping_flood_over_tls_gets_goaway() {
    use crate::tls::{certificates, Pki};
    use std::io::{Read, Write};
    use std::process::{Command, Stdio};
    let pki = Pki::new();
    let bundle = pki.issue(&[HOST], gatehouse_tls::issue::Algorithm::EcdsaP256, "app.pem", None);
    let b = Backend::start("b");
    let gw = crate::common::start(&format!(
        "workers: 1\ntls:\n{}\nlisteners:\n  https: {{bind: \"127.0.0.1:0\", tls: {{}}}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}]}}\n",
        certificates(&[&bundle]),
        targets(&[&b])
    ));
    // openssl s_client carries the frames as they are, in TLS with ALPN h2 (so the preface is read
    // through TLS, not sniffed).
    let mut client = Command::new("openssl")
        .args(["s_client", "-connect", &gw.addr("https").to_string(), "-servername", HOST])
        .args(["-alpn", "h2", "-quiet", "-ign_eof"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run openssl s_client");
    let mut flood = gatehouse_testkit::h2raw::PREFACE.to_vec();
    gatehouse_testkit::h2raw::encode_settings(&mut flood, &[]);
    for _ in 0..5000 {
        encode_frame(&mut flood, kind::PING, 0, 0, b"flooding");
    }
    let mut stdin = client.stdin.take().expect("piped stdin");
    let mut stdout = client.stdout.take().expect("piped stdout");
    let output = thread::scope(|s| {
        // The gateway closes the connection, then s_client exits: both pipes end.
        s.spawn(move || stdin.write_all(&flood));
        let reader = s.spawn(move || {
            let mut out = Vec::new();
            let _ = stdout.read_to_end(&mut out);
            out
        });
        let exited = gatehouse_testkit::wait_until(ANSWER, || client.try_wait().ok().flatten());
        if exited.is_none() {
            let _ = client.kill();
            let _ = client.wait();
        }
        reader.join().unwrap_or_default()
    });
    let frames = gatehouse_testkit::h2raw::decode_frames(&output);
    let goaway = frames.iter().find(|f| f.kind == kind::GOAWAY);
    let pongs = frames.iter().filter(|f| f.kind == kind::PING).count();
    assert_eq!(goaway.and_then(|f| f.error_code()), Some(code::ENHANCE_YOUR_CALM), "{pongs} PONGs, then {goaway:?}");
    assert!(pongs < 5000, "every PING was answered");
}
