//! `/api/v1/stats`: the counters the console charts, summed over routes, as JSON. The console
//! polls it and turns differences between polls into rates, percentiles and ratios.

use crate::bodies::{Breaker, EndpointStats, Handshakes, Latency, Stats, StatusClasses, UpstreamStats};
use gatehouse_proxy::Shared;
use gatehouse_telemetry::LATENCY_BUCKETS;
use gatehouse_tls::TlsStats;
use std::sync::atomic::Ordering::Relaxed;

/// Everything the dashboard shows, now.
pub fn stats(shared: &Shared, tls: &TlsStats) -> Stats {
    let snap = shared.snapshot.load();
    let mut classes = [0u64; 5];
    let mut buckets = [0u64; LATENCY_BUCKETS.len() + 1];
    let (mut count, mut sum) = (0u64, 0f64);
    for r in &snap.routes {
        for (i, c) in r.stats.by_class.iter().enumerate() {
            classes[i] += c.get();
        }
        let (b, n, s) = r.stats.latency.snapshot();
        for (acc, x) in buckets.iter_mut().zip(b) {
            *acc += x;
        }
        count += n;
        sum += s;
    }
    let full = tls.full_tls12.get() + tls.full_tls13.get();
    let resumed = tls.resumed_tls12_ticket.get()
        + tls.resumed_tls12_cache.get()
        + tls.resumed_tls13_ticket.get()
        + tls.resumed_tls13_cache.get();
    let upstreams = snap
        .upstreams
        .iter()
        .map(|(name, u)| {
            let endpoints = u
                .members()
                .endpoints
                .iter()
                .map(|ep| {
                    let e = &ep.state;
                    let breaker = match e.breaker.state().as_gauge() {
                        1 => Breaker::Open,
                        2 => Breaker::HalfOpen,
                        _ => Breaker::Closed,
                    };
                    EndpointStats {
                        address: e.addr.to_string(),
                        healthy: e.healthy(),
                        ejected: e.ejected(),
                        breaker,
                        inflight: e.inflight(),
                        idle: e.idle_connections(),
                        requests: e.stats.requests.load(Relaxed),
                        failures: e.stats.failures.load(Relaxed),
                    }
                })
                .collect();
            UpstreamStats { name: name.clone(), endpoints }
        })
        .collect();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    Stats {
        time_ms: now,
        generation: snap.generation,
        connections_active: shared.stats.connections_active.get(),
        requests: StatusClasses {
            informational: classes[0],
            success: classes[1],
            redirection: classes[2],
            client_error: classes[3],
            server_error: classes[4],
        },
        latency: Latency { bounds: &LATENCY_BUCKETS, buckets: buckets.to_vec(), count, sum },
        tls: Handshakes { full, resumed },
        upstreams,
    }
}
