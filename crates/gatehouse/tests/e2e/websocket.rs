//! Protocol upgrades: a WebSocket handshake is passed through and the two connections are spliced.

use crate::common::{simple, start, targets, HOST};
use gatehouse_testkit::{Backend, RawConn};
use std::time::Duration;

#[test]
fn websocket_upgrade_is_tunnelled() {
    let b = Backend::start("ws");
    let gw = start(&simple(&format!("targets: {}", targets(&[&b]))));
    let (mut c, resp) = upgrade(&gw);
    assert_eq!(resp.status, 101, "{resp:?}");
    assert_eq!(resp.header("upgrade"), Some("websocket"), "{resp:?}");
    assert!(resp.header("connection").is_some_and(|v| v.eq_ignore_ascii_case("upgrade")), "{resp:?}");

    let reqs = b.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].header("upgrade"), Some("websocket"), "Upgrade must reach the backend: {:?}", reqs[0]);
    assert_eq!(reqs[0].header("sec-websocket-key"), Some("dGhlIHNhbXBsZSBub25jZQ=="));

    for msg in [&b"\x81\x05hello"[..], b"second message, longer than the first", &[0u8, 255, 1, 254]] {
        c.send(msg);
        let echoed = c.read_exact(msg.len(), Duration::from_secs(5)).expect("the echo through the tunnel");
        assert_eq!(echoed, msg);
    }
}

#[test]
fn an_active_websocket_outlives_the_http_timeouts() {
    // The head and keep-alive deadlines belong to HTTP exchanges; once the connection has switched
    // protocols they must not cut a tunnel that carries traffic.
    let b = Backend::start("ws");
    let yaml = format!(
        "{}upstreams:\n  u: {{targets: {}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}]}}\n",
        crate::common::head("header_read_timeout: 300ms, keepalive_timeout: 300ms"),
        targets(&[&b]),
    );
    let gw = start(&yaml);
    let (mut c, resp) = upgrade(&gw);
    assert_eq!(resp.status, 101, "{resp:?}");
    let started = std::time::Instant::now();
    // A message every 100 ms for 1.5 s: never idle for as long as either timeout.
    for i in 0..15 {
        let msg = format!("message {i}");
        c.send(msg.as_bytes());
        let echoed = c
            .read_exact(msg.len(), Duration::from_secs(2))
            .unwrap_or_else(|e| panic!("echo of message {i}, {:?} after the upgrade: {e}", started.elapsed()));
        assert_eq!(echoed, msg.as_bytes());
        assert!(c.wait_closed(Duration::from_millis(100)).is_none(), "tunnel closed after {:?}", started.elapsed());
    }
}

/// Opens a connection and asks for a WebSocket upgrade; returns it with the answer.
fn upgrade(gw: &gatehouse_testkit::Gateway) -> (RawConn, gatehouse_testkit::RawResponse) {
    let mut c = RawConn::connect(gw.addr("http"));
    c.send(
        format!(
            "GET /ws HTTP/1.1\r\nHost: {HOST}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        .as_bytes(),
    );
    let resp = c.read_response(Duration::from_secs(5)).expect("the upgrade answer");
    (c, resp)
}
