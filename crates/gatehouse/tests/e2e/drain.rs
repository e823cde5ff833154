//! Shutdown on SIGTERM: requests in flight finish, idle connections are closed, new connections are
//! refused, the process exits cleanly.

use crate::common::{settled, simple, start, targets, HOST, SETTLE};
use gatehouse_testkit::{connect_refused, http_request, wait_until, Backend, HttpConn};
use std::time::{Duration, Instant};

#[test]
fn sigterm_lets_in_flight_requests_finish() {
    let b = Backend::start("slow");
    // shutdown_grace is 10s: an exit well before that means nothing waited for the grace period.
    let mut gw = start(&simple(&format!("targets: {}", targets(&[&b]))));
    settled(&gw);
    let addr = gw.addr("http");
    let mut idle = HttpConn::open(addr).expect("connect");
    // Several requests: the connection waits for the drain signal from its first idle time on,
    // and must still be woken by it after going idle again.
    for _ in 0..3 {
        assert_eq!(idle.get(HOST, "/", &[]).expect("GET on the idle connection").status, 200);
    }
    b.clear();
    b.set_delay(Duration::from_secs(1));
    let in_flight = std::thread::spawn(move || http_request(addr, "GET", HOST, "/slow", &[], b""));
    wait_until(SETTLE, || (b.request_count() == 1).then_some(())).expect("the request reached the backend");

    let signalled = Instant::now();
    gw.signal("TERM");
    gw.wait_event("draining", SETTLE);
    assert!(
        wait_until(Duration::from_secs(1), || connect_refused(addr).then_some(())).is_some(),
        "new connections are still accepted while draining"
    );

    let resp = in_flight.join().expect("client thread").expect("the in-flight request got an answer");
    assert_eq!((resp.status, resp.text().as_str()), (200, "slow"), "{resp:?}");
    let status = gw.wait_exit(Duration::from_secs(15)).expect("gatehouse exits after draining");
    let took = signalled.elapsed();
    assert!(status.success(), "exit status {status}");
    assert!(took < Duration::from_secs(5), "exit took {took:?}: an idle keep-alive connection held up the drain");
    let events = gw.remaining_events();
    let stopped =
        events.iter().find(|e| e["event"] == "stopped").unwrap_or_else(|| panic!("no stopped event: {events:?}"));
    assert_eq!(stopped["unfinished_connections"], 0, "{stopped}");
    assert!(idle.is_closed() || idle.get(HOST, "/", &[]).is_err(), "the idle connection survived the shutdown");
}
