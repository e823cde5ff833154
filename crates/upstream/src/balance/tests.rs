//! Statistical checks of every policy: distributions follow weights within bounds many standard
//! deviations wide (so they do not flake), and unavailable or tried endpoints are never picked.

use super::*;
use crate::endpoint::EndpointState;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

fn eps(weights: &[u32]) -> Vec<Endpoint> {
    weights
        .iter()
        .enumerate()
        .map(|(i, &w)| Endpoint {
            state: Arc::new(EndpointState::new(SocketAddr::from(([127, 0, 0, 1], 9000 + i as u16)), None, None, 1)),
            weight: w,
            max_conns: 0,
        })
        .collect()
}

fn key<'a>(ip: [u8; 4], headers: &'a HeaderMap) -> SelectKey<'a> {
    SelectKey { client_ip: IpAddr::V4(Ipv4Addr::from(ip)), uri: "/", headers }
}

fn counts(b: &Balancer, eps: &[Endpoint], n: usize) -> Vec<usize> {
    let h = HeaderMap::new();
    let mut c = vec![0; eps.len()];
    for i in 0..n {
        let k = key([10, (i % 251) as u8, (i / 251 % 251) as u8, 1], &h);
        c[b.select(eps, &k, &[], 0).expect("an endpoint")] += 1;
    }
    c
}

fn assert_share(c: &[usize], i: usize, expected: f64, tolerance: f64) {
    let total: usize = c.iter().sum();
    let share = c[i] as f64 / total as f64;
    assert!(
        (share - expected).abs() < tolerance,
        "endpoint {i}: share {share:.3}, expected {expected:.3} ± {tolerance} ({c:?})"
    );
}

#[test]
fn random_follows_weights() {
    let e = eps(&[1, 3]);
    let b = Balancer::new(Balance::Random, None, &e);
    let c = counts(&b, &e, 40_000);
    // Standard deviation of the share is ~0.002 here; 0.02 is ten of them.
    assert_share(&c, 1, 0.75, 0.02);
}

#[test]
fn round_robin_is_nginx_smooth_order() {
    let e = eps(&[5, 1, 1]);
    let b = Balancer::new(Balance::RoundRobin, None, &e);
    let h = HeaderMap::new();
    let seq: Vec<usize> = (0..7).map(|_| b.select(&e, &key([1, 1, 1, 1], &h), &[], 0).expect("pick")).collect();
    assert_eq!(seq, vec![0, 0, 1, 0, 2, 0, 0]);
    let c = counts(&b, &e, 7_000);
    assert_eq!(c, vec![5_000, 1_000, 1_000]);
}

#[test]
fn least_conn_prefers_the_least_loaded_per_weight() {
    let e = eps(&[1, 1, 2]);
    e[0].state.inflight.store(4, Relaxed);
    e[1].state.inflight.store(1, Relaxed);
    e[2].state.inflight.store(1, Relaxed);
    let b = Balancer::new(Balance::LeastConn, None, &e);
    let c = counts(&b, &e, 1_000);
    assert_eq!(c, vec![0, 0, 1_000], "1/2 per weight beats 1/1 and 4/1");
    for s in &e {
        s.state.inflight.store(0, Relaxed);
    }
    let c = counts(&b, &e, 30_000);
    for i in 0..3 {
        assert_share(&c, i, 1.0 / 3.0, 0.03);
    }
}

#[test]
fn ewma_prefers_fast_endpoints() {
    let e = eps(&[1, 1, 1]);
    e[0].state.record_success(Some(std::time::Duration::from_millis(20)));
    e[1].state.record_success(Some(std::time::Duration::from_millis(5)));
    e[2].state.record_success(Some(std::time::Duration::from_millis(1)));
    let b = Balancer::new(Balance::Ewma, None, &e);
    let c = counts(&b, &e, 30_000);
    // Two distinct random choices out of three: the fastest is in 2/3 of pairs, the middle wins 1/3,
    // the slowest never.
    assert_eq!(c[0], 0, "{c:?}");
    assert_share(&c, 2, 2.0 / 3.0, 0.03);
}

#[test]
fn ip_hash_keys_on_two_octets_and_follows_weights() {
    let e = eps(&[1, 1, 2]);
    let b = Balancer::new(Balance::IpHash, None, &e);
    let h = HeaderMap::new();
    let first = b.select(&e, &key([192, 168, 1, 1], &h), &[], 0);
    for last in 0..=255u8 {
        assert_eq!(b.select(&e, &key([192, 168, last, 255 - last], &h), &[], 0), first);
    }
    let mut c = vec![0usize; 3];
    for a in 0..=255u8 {
        for bb in 0..=255u8 {
            c[b.select(&e, &key([a, bb, 0, 0], &h), &[], 0).expect("pick")] += 1;
        }
    }
    assert_share(&c, 2, 0.5, 0.02);
    // With the chosen endpoint down, the same client goes elsewhere, consistently.
    let chosen = first.expect("pick");
    e[chosen].state.healthy.store(false, Relaxed);
    let moved = b.select(&e, &key([192, 168, 1, 1], &h), &[], 0).expect("pick");
    assert_ne!(moved, chosen);
    assert_eq!(b.select(&e, &key([192, 168, 9, 9], &h), &[], 0), Some(moved));
}

#[test]
fn consistent_hash_is_stable_and_moves_few_keys() {
    let e = eps(&[1, 1, 1, 1]);
    let b = Balancer::new(Balance::ConsistentHash, Some(HashKey::Header("x-user".into())), &e);
    let pick = |user: usize| {
        let mut h = HeaderMap::new();
        h.insert("x-user", user.to_string().parse().expect("header"));
        b.select(&e, &key([1, 2, 3, 4], &h), &[], 0).expect("pick")
    };
    let before: Vec<usize> = (0..20_000).map(pick).collect();
    assert_eq!(before, (0..20_000).map(pick).collect::<Vec<_>>(), "same key, same endpoint");
    let mut c = vec![0; 4];
    for &i in &before {
        c[i] += 1;
    }
    for i in 0..4 {
        assert_share(&c, i, 0.25, 0.05);
    }
    e[3].state.healthy.store(false, Relaxed);
    let after: Vec<usize> = (0..20_000).map(pick).collect();
    for (b, a) in before.iter().zip(&after) {
        if *b != 3 {
            assert_eq!(a, b, "keys of surviving endpoints must not move");
        } else {
            assert_ne!(*a, 3);
        }
    }
}

#[test]
fn consistent_hash_on_cookie_and_client_ip() {
    let e = eps(&[1, 1, 1]);
    let b = Balancer::new(Balance::ConsistentHash, Some(HashKey::Cookie("sid".into())), &e);
    let mut h = HeaderMap::new();
    h.insert(http::header::COOKIE, "a=1; sid=abc; z=2".parse().expect("cookie"));
    let one = b.select(&e, &key([1, 1, 1, 1], &h), &[], 0);
    h.insert(http::header::COOKIE, "sid=abc".parse().expect("cookie"));
    assert_eq!(b.select(&e, &key([9, 9, 9, 9], &h), &[], 0), one);
    let b = Balancer::new(Balance::ConsistentHash, Some(HashKey::ClientIp), &e);
    let h = HeaderMap::new();
    let one = b.select(&e, &key([10, 0, 0, 7], &h), &[], 0);
    assert_eq!(b.select(&e, &key([10, 0, 0, 7], &h), &[], 0), one);
}

#[test]
fn every_policy_skips_unavailable_and_tried() {
    let policies = [
        (Balance::Random, None),
        (Balance::RoundRobin, None),
        (Balance::LeastConn, None),
        (Balance::Ewma, None),
        (Balance::IpHash, None),
        (Balance::ConsistentHash, Some(HashKey::Uri)),
    ];
    for (policy, k) in policies {
        let e = eps(&[1, 1, 1, 1]);
        e[0].state.healthy.store(false, Relaxed);
        e[1].state.ejected_until_ms.store(u64::MAX, Relaxed);
        let mut limited = e.clone();
        limited[2].max_conns = 1;
        limited[2].state.inflight.store(1, Relaxed);
        let b = Balancer::new(policy, k, &limited);
        let h = HeaderMap::new();
        for i in 0..200u8 {
            let got = b.select(&limited, &key([i, i, 1, 1], &h), &[], 1);
            assert_eq!(got, Some(3), "{policy:?}");
            assert_eq!(b.select(&limited, &key([i, i, 1, 1], &h), &[3], 1), None, "{policy:?}");
        }
    }
}
