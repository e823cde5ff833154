//! Slow and greedy clients (short form; `bench/dos.sh` is the long one): slowloris connections
//! trickling their heads are closed by `header_read_timeout` while normal clients are served, a
//! client over `max_connections_per_ip` is cut off without touching others, a request body that
//! stops coming gets `408` at `body_read_timeout`, a client that stops reading is disconnected at
//! `send_timeout`, and running out of file descriptors makes accept back off and recover.

use crate::common::{head, settled, start, targets, HOST, SETTLE};
use gatehouse_testkit::{metric_value, wait_until, Backend, Gateway, Load, RawConn, TempDir};
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

const ATTACKER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

fn config(b: &Backend, listener: &str) -> String {
    format!(
        "{}upstreams:\n  u: {{targets: {}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}]}}\n",
        head(listener),
        targets(&[b])
    )
}

#[test]
fn slowloris_connections_are_closed_and_normal_clients_served() {
    let b = Backend::start("b");
    let gw = start(&config(&b, "header_read_timeout: 2s"));
    settled(&gw);
    let addr = gw.addr("http");
    // 400 connections that send a request head a byte at a time, every 100 ms.
    let mut slow: Vec<RawConn> = (0..400).map(|_| RawConn::connect_from(addr, ATTACKER)).collect();
    for c in &mut slow {
        c.send(b"GET / HTTP/1.1\r\nHost: app.test\r\n");
    }
    let load = Load::start(addr, HOST, "/", 4, 300);
    let started = Instant::now();
    let mut alive = slow.len();
    // Bounded: the header timeout closes them within seconds; the test gives up after 10.
    while alive > 0 && started.elapsed() < Duration::from_secs(10) {
        alive = 0;
        for c in &mut slow {
            if c.try_send(b"X").is_ok() {
                alive += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let report = load.wait();
    assert_eq!(report.failed, 0, "normal clients failed under slowloris: {report:?}");
    assert_eq!(report.ok, 1_200, "{report:?}");
    // Every slow connection was closed by the server, not before the header timeout.
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(1_500), "slow heads were cut before the header timeout: {took:?}");
    for (i, c) in slow.iter_mut().enumerate() {
        assert!(c.wait_closed(SETTLE).is_some(), "slow connection {i} still open after {:?}", started.elapsed());
    }
    let active = gw.wait_metric(SETTLE, |m| metric_value(m, "gatehouse_connections_active").is_some_and(|n| n < 10.0));
    assert!(metric_value(&active, "gatehouse_connections_active").is_some());
    assert_eq!(b.request_count(), 1_200, "no slow head reached the backend");
}

#[test]
fn a_client_over_max_connections_per_ip_is_cut_off_alone() {
    let b = Backend::start("b");
    let gw = start(&config(&b, "max_connections_per_ip: 20"));
    settled(&gw);
    let addr = gw.addr("http");
    let mut held: Vec<RawConn> = (0..20).map(|_| RawConn::connect_from(addr, ATTACKER)).collect();
    // Each of the 20 is served (so each was accepted and counted before the next).
    for c in &mut held {
        c.send(b"GET / HTTP/1.1\r\nHost: app.test\r\n\r\n");
        let resp = c.read_response(SETTLE).expect("a response within the limit");
        assert_eq!(resp.status, 200);
    }
    let mut over = RawConn::connect_from(addr, ATTACKER);
    let _ = over.try_send(b"GET / HTTP/1.1\r\nHost: app.test\r\n\r\n");
    assert!(over.wait_closed(SETTLE).is_some(), "the 21st connection from one address was not closed");
    let m = gw.wait_metric(SETTLE, |m| metric_value(m, "gatehouse_connections_over_ip_limit_total") >= Some(1.0));
    assert_eq!(metric_value(&m, "gatehouse_connections_over_ip_limit_total"), Some(1.0));
    // Another address is not affected.
    let report = Load::run(addr, HOST, "/", 4, 50);
    assert_eq!((report.ok, report.failed), (200, 0), "{report:?}");
    // A connection closed frees its place.
    drop(held.pop());
    let admitted = wait_until(SETTLE, || {
        let mut c = RawConn::connect_from(addr, ATTACKER);
        c.send(b"GET / HTTP/1.1\r\nHost: app.test\r\n\r\n");
        c.read_response(Duration::from_secs(1)).ok().map(|r| r.status)
    });
    assert_eq!(admitted, Some(200), "the freed place was not given back");
}

#[test]
fn a_request_body_that_stops_coming_gets_408() {
    let b = Backend::start("b");
    let gw = start(&config(&b, "body_read_timeout: 500ms"));
    let mut c = RawConn::connect(gw.addr("http"));
    c.send(b"POST /upload HTTP/1.1\r\nHost: app.test\r\nContent-Length: 100\r\n\r\n0123456789");
    let started = Instant::now();
    let resp = c.read_response(SETTLE).expect("an answer to the stalled body");
    let took = started.elapsed();
    assert_eq!(resp.status, 408, "{resp:?}");
    assert_eq!(resp.header("connection"), Some("close"));
    assert!(took >= Duration::from_millis(400) && took < Duration::from_secs(3), "408 after {took:?}");
    assert!(c.wait_closed(SETTLE).is_some(), "the connection stays open after 408");
    // A body that keeps coming, slowly but within the timeout, goes through.
    let mut c = RawConn::connect(gw.addr("http"));
    c.send(b"POST /upload HTTP/1.1\r\nHost: app.test\r\nContent-Length: 30\r\n\r\n");
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(200));
        c.send(b"0123456789");
    }
    let resp = c.read_response(SETTLE).expect("an answer to the slow body");
    assert_eq!(resp.status, 200, "{resp:?}");
}

#[test]
fn running_out_of_descriptors_backs_off_and_recovers() {
    let b = Backend::start("b");
    // The gateway raises its soft limit to the hard one at start: both are set low here.
    let dir = TempDir::new();
    let wrapper = dir.join("gatehouse-few-fds");
    let script = format!("#!/bin/sh\nulimit -n 128 || exit 1\nexec {} \"$@\"\n", env!("CARGO_BIN_EXE_gatehouse"));
    std::fs::write(&wrapper, script).expect("write the wrapper");
    std::process::Command::new("chmod").arg("755").arg(&wrapper).status().expect("chmod the wrapper");
    let gw = Gateway::start_with(&wrapper, &config(&b, ""));
    settled(&gw);
    let addr = gw.addr("http");
    // More connections than descriptors: the rest wait in the backlog.
    let mut held: Vec<RawConn> = (0..200).map(|_| RawConn::connect(addr)).collect();
    let logged = wait_until(SETTLE, || gw.stderr().contains("accept failed; backing off").then_some(()));
    assert!(logged.is_some(), "no accept failure was logged with 200 connections and 128 descriptors");
    // Connections waiting in the backlog are served once descriptors come free.
    held.truncate(150);
    let mut waiting = held.pop().expect("a held connection");
    drop(held);
    waiting.send(b"GET / HTTP/1.1\r\nHost: app.test\r\n\r\n");
    let resp = waiting.read_response(SETTLE).expect("the waiting connection is served after the release");
    assert_eq!(resp.status, 200);
    let report = Load::run(addr, HOST, "/", 4, 50);
    assert_eq!((report.ok, report.failed), (200, 0), "{report:?}");
    // The gateway's stderr is read by a thread of the test: the line may come after the answers.
    let recovered = wait_until(SETTLE, || gw.stderr().contains("accept works again").then_some(()));
    assert!(recovered.is_some(), "the recovery is logged:\n{}", gw.stderr());
    let m = gw.metrics();
    assert!(metric_value(&m, "gatehouse_accept_errors_total").is_some_and(|n| n >= 1.0), "{m}");
}

#[test]
fn a_client_that_stops_reading_is_disconnected_at_send_timeout() {
    let b = Backend::start("big");
    // Larger than what the sockets' buffers on both sides can absorb.
    b.set_body(vec![b'x'; 64 << 20]);
    let gw = start(&config(&b, "send_timeout: 500ms"));
    settled(&gw);
    let mut reader = RawConn::connect(gw.addr("http"));
    reader.send(b"GET /big HTTP/1.1\r\nHost: app.test\r\n\r\n");
    let started = Instant::now();
    // The connection is counted while the response is stuck, then closed by the gateway.
    gw.wait_metric(SETTLE, |m| metric_value(m, "gatehouse_connections_active") == Some(1.0));
    gw.wait_metric(Duration::from_secs(10), |m| metric_value(m, "gatehouse_connections_active") == Some(0.0));
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(400), "closed before the send timeout: {took:?}");
    // What the client reads now ends early: the response was cut, not completed.
    let (text, closed) = reader.read_to_close(SETTLE);
    assert!(closed, "the connection is closed");
    assert!(text.len() < 64 << 20, "the whole body arrived: the client was not cut off");
    let m = gw.metrics();
    assert_eq!(metric_value(&m, "gatehouse_client_send_timeouts_total"), Some(1.0), "{m}");
    drop(reader);
    assert_eq!(gatehouse_testkit::http_get(gw.addr("http"), HOST, "/", &[]).status, 200);
}
