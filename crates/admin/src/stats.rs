//! `/api/v1/stats`: the counters the console charts, summed over routes, as JSON. The console
//! polls it and turns differences between polls into rates, percentiles and ratios.

use gatehouse_proxy::Shared;
use gatehouse_telemetry::LATENCY_BUCKETS;
use gatehouse_tls::TlsStats;
use serde_json::{json, Value};
use std::sync::atomic::Ordering::Relaxed;

/// Everything the dashboard shows, now.
pub fn stats(shared: &Shared, tls: &TlsStats) -> Value {
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
    let upstreams: Vec<Value> = snap
        .upstreams
        .iter()
        .map(|(name, u)| {
            let endpoints: Vec<Value> = u
                .members()
                .endpoints
                .iter()
                .map(|ep| {
                    let e = &ep.state;
                    let breaker = match e.breaker.state().as_gauge() {
                        1 => "open",
                        2 => "half_open",
                        _ => "closed",
                    };
                    json!({
                        "address": e.addr.to_string(),
                        "healthy": e.healthy(),
                        "ejected": e.ejected(),
                        "breaker": breaker,
                        "inflight": e.inflight(),
                        "idle": e.idle_connections(),
                        "requests": e.stats.requests.load(Relaxed),
                        "failures": e.stats.failures.load(Relaxed),
                    })
                })
                .collect();
            json!({ "name": name, "endpoints": endpoints })
        })
        .collect();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    json!({
        "time_ms": now,
        "generation": snap.generation,
        "connections_active": shared.stats.connections_active.get(),
        "requests": { "1xx": classes[0], "2xx": classes[1], "3xx": classes[2], "4xx": classes[3], "5xx": classes[4] },
        "latency": { "bounds": LATENCY_BUCKETS, "buckets": buckets, "count": count, "sum": sum },
        "tls": { "full": full, "resumed": resumed },
        "upstreams": upstreams,
    })
}
