//! Upstream targets by name, against a real DNS server (dnsmasq, answers with a one-second TTL):
//! traffic follows a changed answer with no failed request under load, several addresses are
//! balanced, a failed lookup keeps the last answer, a name that never resolved gives 503 with the
//! reason in the log, SRV records give ports and weights, and `gatehouse check` needs no DNS.

use crate::common::{check, head, settled, start, Traffic, HOST, SETTLE};
use gatehouse_testkit::{http_get, metric_value, wait_until, Backend, DnsServer, Gateway};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

fn ip(s: &str) -> IpAddr {
    s.parse().expect("ip")
}

/// Two backends on the same port of 127.0.0.2 and 127.0.0.3, so one name can point at either.
fn twin_backends() -> (Backend, Backend) {
    let a = Backend::start_at("a", SocketAddr::from(([127, 0, 0, 2], 0)));
    let b = Backend::start_at("b", SocketAddr::from(([127, 0, 0, 3], a.addr().port())));
    (a, b)
}

/// The gateway with upstream `u` on `targets` (a flow list), resolving with `dns`.
fn gateway(dns: &DnsServer, targets: &str, upstream: &str) -> Gateway {
    start(&format!(
        "{}resolver: {{nameservers: [\"{}\"], timeout: 500ms, attempts: 1, failure_retry: 300ms}}\nupstreams:\n  u: {{targets: {targets}{upstream}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}]}}\n",
        head(""),
        dns.addr()
    ))
}

fn get(gw: &Gateway) -> gatehouse_testkit::Response {
    http_get(gw.addr("http"), HOST, "/", &[])
}

#[test]
fn traffic_follows_a_changed_answer_with_no_failed_request() {
    let (a, b) = twin_backends();
    let dns = DnsServer::start(&[("api.test", ip("127.0.0.2"))], &[]);
    let gw = gateway(&dns, &format!("[\"api.test:{}\"]", a.addr().port()), "");
    settled(&gw);
    // Resolved before the node was ready: the first request already has an endpoint.
    assert_eq!(get(&gw).status, 200);
    assert_eq!(a.request_count(), 1);

    let traffic = Traffic::start(gw.addr("http"));
    dns.set(&[("api.test", ip("127.0.0.3"))]);
    // TTL (1 s) plus one lookup: well within the bound.
    wait_until(SETTLE, || (b.request_count() > 0).then_some(())).expect("traffic reaches the new address");
    let moved = a.request_count();
    traffic.progress("the move");
    assert!(a.request_count() <= moved + 16, "requests in flight may end on the old address, no new ones start there");
    traffic.finish("a DNS change");
    assert!(b.request_count() > 50);
    let text = gw.metrics();
    assert!(metric_value(&text, "gatehouse_dns_lookups_total{name=\"api.test\",result=\"ok\"}").unwrap_or(0.0) >= 2.0);
    assert_eq!(metric_value(&text, "gatehouse_dns_addresses{name=\"api.test\"}"), Some(1.0));
}

#[test]
fn every_address_of_a_name_is_an_endpoint_and_state_of_one_that_stays_is_kept() {
    let (a, b) = twin_backends();
    let port = a.addr().port();
    let dns = DnsServer::start(&[("api.test", ip("127.0.0.2"))], &[]);
    let gw = gateway(&dns, &format!("[\"api.test:{port}\"]"), ", balance: round_robin");
    for _ in 0..4 {
        assert_eq!(get(&gw).status, 200);
    }
    let sent_a = format!("gatehouse_upstream_requests_total{{upstream=\"u\",endpoint=\"127.0.0.2:{port}\"}}");
    assert_eq!(metric_value(&gw.metrics(), &sent_a), Some(4.0));

    dns.set(&[("api.test", ip("127.0.0.2")), ("api.test", ip("127.0.0.3"))]);
    let sent_b = format!("gatehouse_upstream_requests_total{{upstream=\"u\",endpoint=\"127.0.0.3:{port}\"}}");
    gw.wait_metric(SETTLE, |t| metric_value(t, &sent_b).is_some());
    for _ in 0..20 {
        assert_eq!(get(&gw).status, 200);
    }
    // Round robin over the two: ten each; the address that stayed kept its count.
    assert_eq!((a.request_count(), b.request_count()), (14, 10));
    assert_eq!(metric_value(&gw.metrics(), &sent_a), Some(14.0));
}

#[test]
fn a_failed_lookup_keeps_the_last_answer() {
    let (a, _b) = twin_backends();
    let mut dns = DnsServer::start(&[("api.test", ip("127.0.0.2"))], &[]);
    let mut gw = gateway(&dns, &format!("[\"api.test:{}\"]", a.addr().port()), "");
    assert_eq!(get(&gw).status, 200);
    dns.stop();
    let failed = "gatehouse_dns_lookups_total{name=\"api.test\",result=\"error\"}";
    gw.wait_metric(Duration::from_secs(10), |t| metric_value(t, failed).is_some_and(|n| n >= 2.0));
    for _ in 0..5 {
        assert_eq!(get(&gw).status, 200);
    }
    assert_eq!(metric_value(&gw.metrics(), "gatehouse_dns_addresses{name=\"api.test\"}"), Some(1.0));
    let (_, _) = gw.terminate();
    let log = gw.stderr();
    assert!(log.contains("DNS lookup failed") && log.contains("kept_last_answer=true"), "{log}");
}

#[test]
fn a_name_that_never_resolved_gives_503_with_the_reason() {
    let a = Backend::start("a");
    let dns = DnsServer::start(&[("api.test", ip("127.0.0.1"))], &[]);
    let mut gw = gateway(&dns, &format!("[\"nowhere.test:{}\"]", a.addr().port()), "");
    assert_eq!(get(&gw).status, 503);
    // A reload that adds a name that resolves: the new name is asked before the configuration is
    // applied, so the first request after it is served.
    gw.write_config(&format!(
        "{}resolver: {{nameservers: [\"{}\"], timeout: 500ms, attempts: 1}}\nupstreams:\n  u: {{targets: [\"nowhere.test:{p}\", \"api.test:{p}\"]}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /, upstream: u}}]}}\n",
        head(""),
        dns.addr(),
        p = a.addr().port()
    ));
    settled(&gw);
    gw.reload();
    assert_eq!(get(&gw).status, 200);
    let (_, _) = gw.terminate();
    let log = gw.stderr();
    assert!(log.contains("no endpoint: no target has resolved") && log.contains("nowhere.test"), "{log}");
}

#[test]
fn srv_records_give_addresses_ports_and_weights() {
    let a = Backend::start_at("a", SocketAddr::from(([127, 0, 0, 2], 0)));
    let b = Backend::start_at("b", SocketAddr::from(([127, 0, 0, 3], 0)));
    let srv_a = format!("_http._tcp.api.test,a.api.test,{},0,3", a.addr().port());
    let srv_b = format!("_http._tcp.api.test,b.api.test,{},0,1", b.addr().port());
    let dns = DnsServer::start(&[("a.api.test", ip("127.0.0.2")), ("b.api.test", ip("127.0.0.3"))], &[&srv_a, &srv_b]);
    let gw = gateway(&dns, "[{srv: _http._tcp.api.test}]", ", balance: round_robin");
    for _ in 0..8 {
        assert_eq!(get(&gw).status, 200, "{}", gw.stderr());
    }
    // Weights 3 and 1.
    assert_eq!((a.request_count(), b.request_count()), (6, 2));
    // `Host` under `host_header: upstream` would be the record's target; here it is the client's.
    assert_eq!(a.requests()[0].header("host"), Some(HOST));
}

#[test]
fn check_needs_no_dns() {
    let closed = Backend::closed_port();
    let (ok, err) = check(&format!("resolver: {{nameservers: [\"{closed}\"]}}\nlisteners:\n  http: {{bind: \"127.0.0.1:0\"}}\nupstreams:\n  u: {{targets: [\"api.test:80\", {{srv: _http._tcp.api.test}}]}}\nsites:\n  main: {{hosts: [\"*\"], routes: [{{path: /, upstream: u}}]}}\n"));
    assert!(ok, "{err}");
}

#[test]
fn invalid_names_are_refused_with_their_path() {
    let (ok, err) = check("listeners:\n  http: {bind: \"127.0.0.1:0\"}\nupstreams:\n  a: {targets: [\"bad_name!:80\"]}\n  b: {targets: [\"127.0.0.1:1\", \"api.test\"]}\n  c: {targets: [{srv: _x._tcp.a, weight: 2}]}\n");
    assert!(!ok);
    assert!(err.contains("upstreams.a.targets[0]: invalid host name `bad_name!`"), "{err}");
    assert!(err.contains("upstreams.b.targets[1]: invalid address `api.test`: expected ip:port or name:port"), "{err}");
    assert!(err.contains("upstreams.c.targets[0]") && err.contains("takes its weights from the records"), "{err}");
}
