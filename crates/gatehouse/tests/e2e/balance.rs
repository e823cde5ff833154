//! Balancing policies through the binary, against real backends: the shares each policy promises.

use crate::common::{counts, settled, simple, start, targets, weighted, HOST};
use gatehouse_testkit::{curl, Backend, HttpConn, Load};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Sends `n` sequential GETs on one keep-alive connection; returns the `x-backend` of each answer.
fn sequential(conn: &mut HttpConn, n: usize, headers: &[(&str, &str)]) -> Vec<String> {
    (0..n)
        .map(|i| {
            let resp = conn.get(HOST, "/", headers).unwrap_or_else(|e| panic!("request {i}: {e}"));
            assert_eq!(resp.status, 200, "request {i}: {resp:?}");
            resp.header("x-backend").expect("x-backend header").to_string()
        })
        .collect()
}

#[test]
fn round_robin_follows_weights_exactly() {
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let gw = start(&simple(&format!("balance: round_robin, targets: {}", weighted(&[(&a, 1), (&b, 2)]))));
    let mut conn = HttpConn::open(gw.addr("http")).expect("connect");
    sequential(&mut conn, 300, &[]);
    assert_eq!(counts(&[&a, &b]), [100, 200]);
}

#[test]
fn random_follows_weights() {
    let (a, b) = (Backend::start("a"), Backend::start("b"));
    let gw = start(&simple(&format!("balance: random, targets: {}", weighted(&[(&a, 1), (&b, 3)]))));
    let mut conn = HttpConn::open(gw.addr("http")).expect("connect");
    sequential(&mut conn, 2000, &[]);
    let heavy = b.request_count() as f64 / 2000.0;
    assert!((heavy - 0.75).abs() <= 0.05, "weight 3 of 4 got a share of {heavy} ({:?})", counts(&[&a, &b]));
}

#[test]
fn least_conn_prefers_the_endpoint_with_fewer_requests_in_flight() {
    let (slow, fast) = (Backend::start("slow"), Backend::start("fast"));
    slow.set_delay(Duration::from_millis(200));
    let gw = start(&simple(&format!("balance: least_conn, targets: {}", targets(&[&slow, &fast]))));
    let report = Load::run(gw.addr("http"), HOST, "/", 20, 5);
    assert_eq!(report.failed, 0, "{report:?}");
    assert_eq!(report.statuses.get(&200), Some(&100), "{report:?}");
    let (s, f) = (slow.request_count(), fast.request_count());
    assert!(f > 2 * s, "least_conn sent {s} requests to the slow endpoint and only {f} to the fast one");
}

#[test]
fn ewma_steers_away_from_a_slow_endpoint() {
    let (slow, fast) = (Backend::start("slow"), Backend::start("fast"));
    slow.set_delay(Duration::from_millis(300));
    let gw = start(&simple(&format!("balance: ewma, targets: {}", targets(&[&slow, &fast]))));
    let mut conn = HttpConn::open(gw.addr("http")).expect("connect");
    sequential(&mut conn, 20, &[]);
    slow.clear();
    fast.clear();
    sequential(&mut conn, 100, &[]);
    let f = fast.request_count();
    assert!(
        f > 80,
        "after warm-up the fast endpoint got only {f} of 100 ({} went to the slow one)",
        slow.request_count()
    );
}

#[test]
fn ip_hash_sends_one_client_network_to_one_endpoint() {
    let (a, b, c) = (Backend::start("a"), Backend::start("b"), Backend::start("c"));
    let gw = start(&simple(&format!("balance: ip_hash, targets: {}", targets(&[&a, &b, &c]))));
    let mut conn = HttpConn::open(gw.addr("http")).expect("connect");
    let mut seen: BTreeSet<String> = sequential(&mut conn, 30, &[]).into_iter().collect();
    // Fresh connections (other source ports) from the same address.
    let url = format!("http://{}/", gw.addr("http"));
    for _ in 0..5 {
        let resp = curl(&[&url, "-H", &format!("Host: {HOST}")]);
        assert_eq!(resp.status, 200);
        seen.insert(resp.header("x-backend").expect("x-backend header").to_string());
    }
    assert_eq!(seen.len(), 1, "requests from 127.0.0.1 went to {seen:?}");
}

#[test]
fn consistent_hash_keeps_each_key_on_one_endpoint() {
    let (a, b, c) = (Backend::start("a"), Backend::start("b"), Backend::start("c"));
    let gw = start(&simple(&format!(
        "balance: consistent_hash, hash_key: \"header:X-User\", targets: {}",
        targets(&[&a, &b, &c])
    )));
    let mut conn = HttpConn::open(gw.addr("http")).expect("connect");
    let mut owner: BTreeMap<String, String> = BTreeMap::new();
    for i in 0..200 {
        let user = format!("user-{i}");
        let got = sequential(&mut conn, 1, &[("X-User", &user)]).remove(0);
        owner.insert(user, got);
    }
    for i in 0..20 {
        let user = format!("user-{i}");
        for again in sequential(&mut conn, 3, &[("x-user", &user)]) {
            assert_eq!(Some(&again), owner.get(&user), "{user} moved between endpoints");
        }
    }
    let mut spread: BTreeMap<&str, usize> = BTreeMap::new();
    for backend in owner.values() {
        *spread.entry(backend).or_default() += 1;
    }
    assert_eq!(spread.len(), 3, "200 users landed on {spread:?}");
    assert!(spread.values().all(|&n| n >= 20), "200 users spread unevenly: {spread:?}");
}

#[test]
fn consistent_hash_moves_only_the_keys_of_a_removed_endpoint() {
    let (a, b, c) = (Backend::start("a"), Backend::start("b"), Backend::start("c"));
    let config = |t: &[&Backend]| {
        simple(&format!("balance: consistent_hash, hash_key: \"header:X-User\", targets: {}", targets(t)))
    };
    let mut gw = start(&config(&[&a, &b, &c]));
    settled(&gw);
    let owners = |gw: &gatehouse_testkit::Gateway| {
        let mut conn = HttpConn::open(gw.addr("http")).expect("connect");
        (0..100)
            .map(|i| {
                let user = format!("user-{i}");
                (user.clone(), sequential(&mut conn, 1, &[("X-User", &user)]).remove(0))
            })
            .collect::<BTreeMap<String, String>>()
    };
    let before = owners(&gw);
    gw.write_config(&config(&[&a, &b]));
    assert_eq!(gw.reload()["event"], "reloaded");
    let after = owners(&gw);
    for (user, was) in &before {
        let now = &after[user];
        if was == "c" {
            assert_ne!(now, "c", "{user} still goes to the removed endpoint");
        } else {
            assert_eq!(now, was, "{user} moved from {was} to {now} although {was} is still there");
        }
    }
    assert!(before.values().any(|v| v == "c"), "no key mapped to c: {before:?}");
}
