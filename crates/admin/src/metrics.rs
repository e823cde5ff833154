//! `/metrics`: every subsystem's counters and gauges in the Prometheus text format, rendered on
//! request from the atomics the data plane updates.

use gatehouse_proxy::{Shared, Snapshot};
use gatehouse_tls::{Failure, TlsStats};
use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;

fn esc(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn help(out: &mut String, name: &str, kind: &str, text: &str) {
    let _ = writeln!(out, "# HELP {name} {text}\n# TYPE {name} {kind}");
}

/// Appends the TLS counters.
pub fn render_tls(out: &mut String, t: &TlsStats) {
    render_tls_handshakes(out, t);
    render_cert_store(out, t);
    render_tls_redis(out, t);
    render_quic_handshakes(out, t);
    render_quic_counters(out, t);
    render_tls_state(out, t);
}

/// ACME: validation requests this node was asked to answer, the orders it placed, on-demand
/// decisions, the CA's answer times, kept certificates by days to expiry.
pub fn render_acme(out: &mut String, t: &TlsStats, a: &gatehouse_acme::AcmeStats) {
    help(out, "gatehouse_acme_challenges_total", "counter", "ACME validation requests by challenge type and result.");
    for (i, kind) in ["http-01", "tls-alpn-01"].into_iter().enumerate() {
        for (result, c) in [("answered", &t.challenges.answered[i]), ("unknown", &t.challenges.unknown[i])] {
            let _ = writeln!(out, "gatehouse_acme_challenges_total{{type=\"{kind}\",result=\"{result}\"}} {}", c.get());
        }
    }
    help(out, "gatehouse_acme_validations_total", "counter", "The CA's verdicts on this node's challenge answers.");
    for (kind, counts) in gatehouse_acme::stats::CHALLENGE_TYPES.iter().zip(&a.validations) {
        for (result, c) in ["valid", "invalid"].iter().zip(counts) {
            let _ =
                writeln!(out, "gatehouse_acme_validations_total{{type=\"{kind}\",result=\"{result}\"}} {}", c.get());
        }
    }
    help(out, "gatehouse_acme_orders_total", "counter", "ACME orders this node placed, by result.");
    let _ = writeln!(out, "gatehouse_acme_orders_total{{result=\"valid\"}} {}", a.orders_valid.get());
    let _ = writeln!(out, "gatehouse_acme_orders_total{{result=\"failed\"}} {}", a.orders_failed.get());
    single(
        out,
        "gatehouse_acme_expired_total",
        "counter",
        "Certificates that expired with no renewal in place.",
        a.expired.get(),
    );
    single(
        out,
        "gatehouse_acme_refused_nonces_total",
        "counter",
        "Requests the ACME CA refused for their nonce (badNonce), each sent again.",
        a.refused_nonces.get(),
    );
    help(out, "gatehouse_acme_on_demand_total", "counter", "On-demand certificate decisions.");
    for (decision, c) in gatehouse_acme::stats::ON_DEMAND_DECISIONS.iter().zip(&a.on_demand) {
        let _ = writeln!(out, "gatehouse_acme_on_demand_total{{decision=\"{decision}\"}} {}", c.get());
    }
    help(out, "gatehouse_acme_request_duration_seconds", "histogram", "Time of each request to the ACME CA.");
    a.requests.render(out, "gatehouse_acme_request_duration_seconds", "");
    help(out, "gatehouse_acme_certificates", "gauge", "Kept certificates by days to expiry (expired ones within 7d).");
    let bounds = gatehouse_acme::stats::EXPIRY_DAYS.iter().map(|d| format!("{d}d")).chain(["later".to_string()]);
    for (within, g) in bounds.zip(&a.expiring) {
        let _ = writeln!(out, "gatehouse_acme_certificates{{expires_within=\"{within}\"}} {}", g.load(Relaxed));
    }
}

/// A metric without labels: its help and its one sample.
fn single(out: &mut String, name: &str, kind: &str, text: &str, value: impl std::fmt::Display) {
    help(out, name, kind, text);
    let _ = writeln!(out, "{name} {value}");
}

/// TLS handshakes finished, by version, kind and resumption mechanism, and those that failed.
fn render_tls_handshakes(out: &mut String, t: &TlsStats) {
    help(
        out,
        "gatehouse_tls_handshakes_total",
        "counter",
        "Finished handshakes by version, kind and resumption mechanism.",
    );
    for (version, kind, mechanism, c) in [
        ("1.2", "full", "none", &t.full_tls12),
        ("1.3", "full", "none", &t.full_tls13),
        ("1.2", "resumed", "ticket", &t.resumed_tls12_ticket),
        ("1.2", "resumed", "session_cache", &t.resumed_tls12_cache),
        ("1.3", "resumed", "ticket", &t.resumed_tls13_ticket),
        ("1.3", "resumed", "session_cache", &t.resumed_tls13_cache),
    ] {
        let _ = writeln!(
            out,
            "gatehouse_tls_handshakes_total{{version=\"{version}\",kind=\"{kind}\",mechanism=\"{mechanism}\"}} {}",
            c.get()
        );
    }
    help(out, "gatehouse_tls_handshake_failures_total", "counter", "Failed handshakes by reason.");
    for (f, c) in Failure::ALL.iter().zip(&t.failures) {
        let _ = writeln!(out, "gatehouse_tls_handshake_failures_total{{reason=\"{}\"}} {}", f.as_str(), c.get());
    }
}

/// Certificate lookups by where they were answered, and bundles loaded from the store.
fn render_cert_store(out: &mut String, t: &TlsStats) {
    help(out, "gatehouse_tls_cert_lookups_total", "counter", "Certificate lookups by where they were answered.");
    let _ = writeln!(out, "gatehouse_tls_cert_lookups_total{{result=\"hit\"}} {}", t.cert_cache_hits.get());
    let _ = writeln!(out, "gatehouse_tls_cert_lookups_total{{result=\"miss\"}} {}", t.cert_cache_misses.get());
    for (name, text, v) in [
        ("gatehouse_tls_cert_loads_total", "Bundles loaded from the certificate store.", t.cert_loads.get()),
        ("gatehouse_tls_cert_load_errors_total", "Stored bundles that could not be loaded.", t.cert_load_errors.get()),
    ] {
        single(out, name, "counter", text, v);
    }
}

/// Redis commands for TLS state, and the sessions other nodes made that were fetched from it.
fn render_tls_redis(out: &mut String, t: &TlsStats) {
    for (name, text, v) in [
        (
            "gatehouse_tls_redis_commands_total",
            "Redis commands sent for TLS state (sessions, ticket keys, certificates).",
            t.redis.commands.load(Relaxed),
        ),
        ("gatehouse_tls_redis_errors_total", "Redis commands for TLS state that failed.", t.redis.errors.load(Relaxed)),
        (
            "gatehouse_tls_sessions_fetched_total",
            "Sessions made by another node, fetched from Redis before a handshake.",
            t.sessions_fetched.get(),
        ),
        (
            "gatehouse_tls_sessions_fetched_late_total",
            "Of the sessions fetched from Redis, those found only when asked again a moment later (the node that made them was still writing them).",
            t.sessions_fetched_late.get(),
        ),
    ] {
        single(out, name, "counter", text, v);
    }
}

/// QUIC handshakes by kind: full, resumed, or resumed with requests in 0-RTT data.
fn render_quic_handshakes(out: &mut String, t: &TlsStats) {
    let q = &t.quic;
    help(
        out,
        "gatehouse_quic_handshakes_total",
        "counter",
        "QUIC handshakes completed, by kind: full, resumed, or resumed with requests in 0-RTT data.",
    );
    let resumed = q.resumed.get().min(q.handshakes.get());
    let zero_rtt = q.zero_rtt.get().min(resumed);
    let _ = writeln!(out, "gatehouse_quic_handshakes_total{{kind=\"full\"}} {}", q.handshakes.get() - resumed);
    let _ = writeln!(out, "gatehouse_quic_handshakes_total{{kind=\"resumed\"}} {}", resumed - zero_rtt);
    let _ = writeln!(out, "gatehouse_quic_handshakes_total{{kind=\"0rtt\"}} {zero_rtt}");
}

/// QUIC and HTTP/3: failures, retries, refusals, connections, requests and packets.
fn render_quic_counters(out: &mut String, t: &TlsStats) {
    let q = &t.quic;
    for (name, kind, text, v) in [
        (
            "gatehouse_quic_handshake_failures_total",
            "counter",
            "QUIC handshakes that failed or timed out.",
            q.failed.get(),
        ),
        (
            "gatehouse_quic_retries_total",
            "counter",
            "Retry packets sent: new clients asked to prove their address first (quic.retry).",
            q.retries.get(),
        ),
        (
            "gatehouse_quic_refused_total",
            "counter",
            "New QUIC connections refused at a worker's max_connections.",
            q.refused.get(),
        ),
        ("gatehouse_quic_connections", "gauge", "QUIC connections open now.", q.connections.load(Relaxed)),
        ("gatehouse_http3_requests_total", "counter", "HTTP/3 requests (request streams).", q.requests.get()),
        (
            "gatehouse_quic_packets_lost_total",
            "counter",
            "Packets sent on closed QUIC connections that were declared lost.",
            q.packets_lost.get(),
        ),
        (
            "gatehouse_quic_forwarded_packets_total",
            "counter",
            "Packets of the previous process's QUIC connections sent on to it after a binary upgrade.",
            q.forwarded.get(),
        ),
        (
            "gatehouse_quic_steered_packets_total",
            "counter",
            "Packets that arrived on another worker's UDP socket than their connection's (the client's address changed), handed to the worker that has it.",
            q.steered.get(),
        ),
    ] {
        single(out, name, kind, text, v);
    }
}

/// The ticket key ring, the time spent on TLS state in Redis, and the certificates about to expire.
fn render_tls_state(out: &mut String, t: &TlsStats) {
    single(
        out,
        "gatehouse_tls_ticket_keys",
        "gauge",
        "Keys in the ticket key ring (the newest seals, all open).",
        t.ticket_keys.load(Relaxed),
    );
    single(
        out,
        "gatehouse_tls_redis_latency_seconds_total",
        "counter",
        "Total time of those Redis commands.",
        t.redis.latency_us.load(Relaxed) as f64 / 1e6,
    );
    help(out, "gatehouse_tls_certificates_expiring", "gauge", "Certificates in memory expiring within 30 days.");
    let _ =
        writeln!(out, "gatehouse_tls_certificates_expiring{{within=\"30d\"}} {}", t.certs_expiring_30d.load(Relaxed));
}

/// The discovery loop's counters by name.
pub fn render_dns(out: &mut String, stats: &gatehouse_discovery::Stats) {
    let names = stats.snapshot();
    help(out, "gatehouse_dns_lookups_total", "counter", "DNS lookups of upstream target names, by result.");
    for (name, s) in &names {
        for (result, n) in [("ok", s.resolved), ("error", s.failed)] {
            let _ = writeln!(out, "gatehouse_dns_lookups_total{{name=\"{}\",result=\"{result}\"}} {n}", esc(name));
        }
    }
    help(out, "gatehouse_dns_addresses", "gauge", "Addresses in the last good answer for the name.");
    for (name, s) in &names {
        let _ = writeln!(out, "gatehouse_dns_addresses{{name=\"{}\"}} {}", esc(name), s.addresses);
    }
}

/// Trace spans by what became of them.
pub fn render_traces(out: &mut String, stats: &gatehouse_otel::TraceStats) {
    use std::sync::atomic::Ordering::Relaxed;
    help(
        out,
        "gatehouse_tracing_spans_total",
        "counter",
        "Spans of sampled requests: exported, dropped (the export queue was full) or failed (the export failed).",
    );
    for (result, n) in [
        ("exported", stats.exported.load(Relaxed)),
        ("dropped", stats.dropped.load(Relaxed)),
        ("failed", stats.failed.load(Relaxed)),
    ] {
        let _ = writeln!(out, "gatehouse_tracing_spans_total{{result=\"{result}\"}} {n}");
    }
    help(out, "gatehouse_tracing_export_failures_total", "counter", "Exports to the collector that failed.");
    let _ = writeln!(out, "gatehouse_tracing_export_failures_total {}", stats.failed_exports.load(Relaxed));
}

/// The admin API's own counters.
pub fn render_admin(out: &mut String, refused: &crate::api::Refused) {
    help(
        out,
        "gatehouse_admin_unauthenticated_total",
        "counter",
        "Admin API calls refused for want of a valid token (not audited).",
    );
    let n = refused.total.load(std::sync::atomic::Ordering::Relaxed);
    let _ = writeln!(out, "gatehouse_admin_unauthenticated_total {n}");
}

/// The proxy's metrics in the Prometheus text format.
pub fn render_metrics(shared: &Shared) -> String {
    let snap = shared.snapshot.load();
    let mut out = String::with_capacity(8192);
    render_process(&mut out, &shared.stats, &snap);
    render_routes(&mut out, &snap);
    render_endpoints(&mut out, &snap);
    render_upstream_tls(&mut out, &snap);
    render_gateway(&mut out, &snap.gateway);
    out
}

/// Process-wide counters: connections, refusals, retries, reloads, HTTP/2 offenders, PROXY
/// protocol headers.
fn render_process(out: &mut String, s: &gatehouse_telemetry::ProcessStats, snap: &Snapshot) {
    let process: [(&str, &str, &str, i64); 13] = [
        (
            "gatehouse_connections_accepted_total",
            "counter",
            "Client connections accepted.",
            s.connections_accepted.get() as i64,
        ),
        ("gatehouse_connections_active", "gauge", "Client connections open now.", s.connections_active.get()),
        (
            "gatehouse_accept_errors_total",
            "counter",
            "Failed accepts on the traffic listeners (out of descriptors or memory); accept backs off and retries.",
            s.accept_errors.get() as i64,
        ),
        (
            "gatehouse_connections_over_ip_limit_total",
            "counter",
            "Client connections closed at once: their address had max_connections_per_ip open.",
            s.connections_over_ip_limit.get() as i64,
        ),
        (
            "gatehouse_client_send_timeouts_total",
            "counter",
            "Client connections closed because the client took nothing of a response for send_timeout.",
            s.send_timeouts.get() as i64,
        ),
        (
            "gatehouse_unrouted_requests_total",
            "counter",
            "Requests with no matching site or route (404).",
            s.unrouted.get() as i64,
        ),
        (
            "gatehouse_bad_requests_total",
            "counter",
            "Requests rejected as malformed (400).",
            s.bad_requests.get() as i64,
        ),
        ("gatehouse_upstream_retries_total", "counter", "Attempts made after a failed one.", s.retries.get() as i64),
        ("gatehouse_config_reloads_total", "counter", "Configurations applied after start.", s.reloads.get() as i64),
        (
            "gatehouse_config_reload_failures_total",
            "counter",
            "Configurations rejected on reload.",
            s.reload_failures.get() as i64,
        ),
        ("gatehouse_config_generation", "gauge", "Generation of the configuration in force.", snap.generation as i64),
        (
            "gatehouse_access_log_dropped_total",
            "counter",
            "Access log lines dropped because the writer fell behind.",
            snap.access_log.as_ref().map_or(0, |l| l.dropped()) as i64,
        ),
        ("gatehouse_routes", "gauge", "Routes in the configuration in force.", snap.routes.len() as i64),
    ];
    for (name, kind, text, value) in process {
        single(out, name, kind, text, value);
    }
    use gatehouse_telemetry::{H2Offence, ProxyRefusal};
    counters_by(
        out,
        ("gatehouse_http2_offenders_total", "reason"),
        "HTTP/2 connections closed with GOAWAY ENHANCE_YOUR_CALM, by what the client did.",
        H2Offence::ALL.iter().map(|o| o.label()).zip(&s.h2_offenders),
    );
    counters_by(
        out,
        ("gatehouse_proxy_protocol_headers_total", "version"),
        "Client connections that opened with a valid PROXY protocol header, by version.",
        ["1", "2"].into_iter().zip(&s.proxy_protocol_headers),
    );
    counters_by(
        out,
        ("gatehouse_proxy_protocol_refused_total", "reason"),
        "Client connections to proxy_protocol listeners closed unserved, by reason.",
        ProxyRefusal::ALL.iter().map(|r| r.label()).zip(&s.proxy_protocol_refused),
    );
}

/// A counter with one label, every value of which is always present.
fn counters_by<'a>(
    out: &mut String,
    (name, label): (&str, &str),
    text: &str,
    values: impl Iterator<Item = (&'static str, &'a gatehouse_telemetry::Counter)>,
) {
    help(out, name, "counter", text);
    for (value, c) in values {
        let _ = writeln!(out, "{name}{{{label}=\"{value}\"}} {}", c.get());
    }
}

/// Responses and their latency, by route.
fn render_routes(out: &mut String, snap: &Snapshot) {
    help(out, "gatehouse_requests_total", "counter", "Responses by route and status class.");
    for r in &snap.routes {
        for (i, c) in r.stats.by_class.iter().enumerate() {
            let _ = writeln!(
                out,
                "gatehouse_requests_total{{route=\"{}\",status=\"{}xx\"}} {}",
                esc(&r.id),
                i + 1,
                c.get()
            );
        }
    }
    help(out, "gatehouse_grpc_responses_total", "counter", "gRPC calls by route and the grpc-status they ended with.");
    for r in &snap.routes {
        for (code, c) in r.stats.grpc.iter().enumerate() {
            // Only the statuses a route has seen: 17 series per route would be mostly zeros.
            let n = c.get();
            if n > 0 {
                let name = gatehouse_config::GRPC_CODE_NAMES[code];
                let _ = writeln!(
                    out,
                    "gatehouse_grpc_responses_total{{route=\"{}\",grpc_status=\"{name}\"}} {n}",
                    esc(&r.id)
                );
            }
        }
    }
    render_splits(out, snap);
    help(out, "gatehouse_request_duration_seconds", "histogram", "Time from request head to response head, by route.");
    for r in &snap.routes {
        r.stats.latency.render(out, "gatehouse_request_duration_seconds", &format!("route=\"{}\"", esc(&r.id)));
    }
}

/// Requests sent to each upstream of a route's split, and copies sent to its mirror.
fn render_splits(out: &mut String, snap: &Snapshot) {
    help(out, "gatehouse_split_requests_total", "counter", "Requests sent to each upstream of a route's split.");
    for r in snap.routes.iter() {
        for (upstream, t) in r.split.iter().flat_map(|s| s.tallies()) {
            let (route, upstream) = (esc(&r.id), esc(upstream));
            let _ = writeln!(
                out,
                "gatehouse_split_requests_total{{route=\"{route}\",upstream=\"{upstream}\"}} {}",
                t.requests.get()
            );
        }
    }
    help(out, "gatehouse_mirror_requests_total", "counter", "Requests of a route copied to its mirror, by result.");
    for r in snap.routes.iter() {
        let Some((upstream, t)) = r.mirror.as_ref().map(|m| m.tally()) else { continue };
        let (route, upstream) = (esc(&r.id), esc(upstream));
        for (result, c) in
            [("answered", &t.requests), ("failed", &t.failed), ("skipped", &t.skipped), ("incomplete", &t.incomplete)]
        {
            let _ = writeln!(
                out,
                "gatehouse_mirror_requests_total{{route=\"{route}\",upstream=\"{upstream}\",result=\"{result}\"}} {}",
                c.get()
            );
        }
    }
    help(out, "gatehouse_mirror_request_bytes_total", "counter", "Request body bytes copied to a route's mirror.");
    for r in snap.routes.iter() {
        let Some((upstream, t)) = r.mirror.as_ref().map(|m| m.tally()) else { continue };
        let _ = writeln!(
            out,
            "gatehouse_mirror_request_bytes_total{{route=\"{}\",upstream=\"{}\"}} {}",
            esc(&r.id),
            esc(upstream),
            t.bytes.get()
        );
    }
}

/// Each endpoint's counters and state, by upstream and address.
fn render_endpoints(out: &mut String, snap: &Snapshot) {
    type Read = fn(&gatehouse_upstream::EndpointState) -> u64;
    let endpoint_metrics: [(&str, &str, &str, Read); 11] = [
        ("gatehouse_upstream_requests_total", "counter", "Requests sent to the endpoint.", |e| {
            e.stats.requests.load(Relaxed)
        }),
        ("gatehouse_upstream_connections_total", "counter", "TCP connections opened to the endpoint.", |e| {
            e.stats.connects.load(Relaxed)
        }),
        ("gatehouse_upstream_pool_reused_total", "counter", "Requests sent on a pooled keep-alive connection.", |e| {
            e.stats.requests.load(Relaxed).saturating_sub(e.stats.connects.load(Relaxed))
        }),
        ("gatehouse_upstream_connect_errors_total", "counter", "Failed connection attempts.", |e| {
            e.stats.connect_errors.load(Relaxed)
        }),
        (
            "gatehouse_upstream_failures_total",
            "counter",
            "Failed exchanges (connect, timeout, reset, retryable status).",
            |e| e.stats.failures.load(Relaxed),
        ),
        ("gatehouse_upstream_ejections_total", "counter", "Ejections by passive health.", |e| {
            e.stats.ejections.load(Relaxed)
        }),
        ("gatehouse_upstream_inflight", "gauge", "Requests in flight to the endpoint.", |e| u64::from(e.inflight())),
        ("gatehouse_upstream_idle_connections", "gauge", "Idle pooled connections to the endpoint.", |e| {
            e.idle_connections() as u64
        }),
        (
            "gatehouse_upstream_healthy",
            "gauge",
            "1 when the endpoint may be selected (healthy and not ejected).",
            |e| u64::from(e.healthy() && !e.ejected()),
        ),
        (
            "gatehouse_upstream_breaker_state",
            "gauge",
            "Circuit breaker: 0 closed, 1 open, 2 half-open (one probe in flight).",
            |e| e.breaker.state().as_gauge() as u64,
        ),
        ("gatehouse_upstream_breaker_opened_total", "counter", "Times the circuit breaker opened.", |e| {
            e.breaker.opened.load(Relaxed)
        }),
    ];
    for (name, kind, text, read) in endpoint_metrics {
        help(out, name, kind, text);
        for (uname, u) in &snap.upstreams {
            for ep in u.members().endpoints.iter() {
                let _ = writeln!(
                    out,
                    "{name}{{upstream=\"{}\",endpoint=\"{}\"}} {}",
                    esc(uname),
                    ep.state.addr,
                    read(&ep.state)
                );
            }
        }
    }
}

/// Upstream TLS, for the endpoints of upstreams that use it: handshakes by kind, their time, and
/// failures by reason.
fn render_upstream_tls(out: &mut String, snap: &Snapshot) {
    let tls_endpoints = || {
        snap.upstreams
            .iter()
            .flat_map(|(name, u)| {
                u.members_full().endpoints.iter().map(|ep| (name, ep.state.clone())).collect::<Vec<_>>()
            })
            .filter(|(_, ep)| ep.tls_name().is_some())
    };
    help(
        out,
        "gatehouse_upstream_tls_handshakes_total",
        "counter",
        "TLS handshakes with the endpoint, full or resumed.",
    );
    for (u, ep) in tls_endpoints() {
        for (kind, n) in [("full", &ep.tls_stats.full), ("resumed", &ep.tls_stats.resumed)] {
            let _ = writeln!(
                out,
                "gatehouse_upstream_tls_handshakes_total{{upstream=\"{}\",endpoint=\"{}\",kind=\"{kind}\"}} {}",
                esc(u),
                ep.addr,
                n.load(Relaxed)
            );
        }
    }
    help(out, "gatehouse_upstream_tls_handshake_seconds", "summary", "Time spent in TLS handshakes with the endpoint.");
    for (u, ep) in tls_endpoints() {
        let labels = format!("upstream=\"{}\",endpoint=\"{}\"", esc(u), ep.addr);
        let micros = ep.tls_stats.handshake_micros.load(Relaxed);
        let count = ep.tls_stats.full.load(Relaxed) + ep.tls_stats.resumed.load(Relaxed);
        let _ = writeln!(out, "gatehouse_upstream_tls_handshake_seconds_sum{{{labels}}} {}", micros as f64 / 1e6);
        let _ = writeln!(out, "gatehouse_upstream_tls_handshake_seconds_count{{{labels}}} {count}");
    }
    help(out, "gatehouse_upstream_tls_failures_total", "counter", "TLS failures with the endpoint, by reason.");
    for (u, ep) in tls_endpoints() {
        for reason in gatehouse_upstream::TlsFailure::ALL {
            let _ = writeln!(
                out,
                "gatehouse_upstream_tls_failures_total{{upstream=\"{}\",endpoint=\"{}\",reason=\"{}\"}} {}",
                esc(u),
                ep.addr,
                reason.label(),
                ep.tls_stats.failures(reason)
            );
        }
    }
}

/// The key sets of OpenID providers, one series per provider: fetches by result, keys in use,
/// whether an older set is serving because the provider fails. Two services fetching the same
/// provider differently (another `refresh`) have two sources; their series are added up.
fn render_key_sets(out: &mut String, sources: &[std::sync::Arc<gatehouse_jwks::KeySource>]) {
    // provider → (ok, failed, unknown-kid fetches, keys, stale)
    let mut by: std::collections::BTreeMap<&str, (u64, u64, u64, u64, bool)> = std::collections::BTreeMap::new();
    for s in sources {
        let e = by.entry(s.label.as_str()).or_default();
        e.0 += s.stats.fetched.get();
        e.1 += s.stats.failed.get();
        e.2 += s.stats.unknown_kid_fetches.get();
        e.3 = e.3.max(s.stats.keys.load(Relaxed));
        e.4 |= s.stats.stale.load(Relaxed);
    }
    help(out, "gatehouse_jwks_fetches_total", "counter", "Key set fetches from OpenID providers, by result.");
    for (p, (ok, failed, ..)) in &by {
        let p = esc(p);
        let _ = writeln!(out, "gatehouse_jwks_fetches_total{{provider=\"{p}\",result=\"ok\"}} {ok}");
        let _ = writeln!(out, "gatehouse_jwks_fetches_total{{provider=\"{p}\",result=\"failed\"}} {failed}");
    }
    help(
        out,
        "gatehouse_jwks_unknown_kid_fetches_total",
        "counter",
        "Key set fetches asked for by a token naming a key the set did not have.",
    );
    for (p, (_, _, n, ..)) in &by {
        let _ = writeln!(out, "gatehouse_jwks_unknown_kid_fetches_total{{provider=\"{}\"}} {n}", esc(p));
    }
    help(out, "gatehouse_jwks_keys", "gauge", "Usable keys in the key set in use.");
    for (p, (_, _, _, keys, _)) in &by {
        let _ = writeln!(out, "gatehouse_jwks_keys{{provider=\"{}\"}} {keys}", esc(p));
    }
    help(out, "gatehouse_jwks_stale", "gauge", "1 when the last fetch failed and an older key set is in use.");
    for (p, (.., stale)) in &by {
        let _ = writeln!(out, "gatehouse_jwks_stale{{provider=\"{}\"}} {}", esc(p), u8::from(*stale));
    }
}

/// Admit-stage counters by service.
fn render_gateway(out: &mut String, gw: &gatehouse_plugins::Gateway) {
    help(out, "gatehouse_gateway_admitted_total", "counter", "Requests a service admitted.");
    for (name, s) in &gw.services {
        let _ =
            writeln!(out, "gatehouse_gateway_admitted_total{{service=\"{}\"}} {}", esc(name), s.stats.admitted.get());
    }
    help(out, "gatehouse_gateway_denied_total", "counter", "Requests a service refused, by reason.");
    for (name, s) in &gw.services {
        for (reason, n) in s.stats.denials() {
            let _ =
                writeln!(out, "gatehouse_gateway_denied_total{{service=\"{}\",reason=\"{reason}\"}} {n}", esc(name));
        }
    }
    render_key_sets(out, &gw.key_sources);
    help(
        out,
        "gatehouse_gateway_external_cached_total",
        "counter",
        "Requests admitted on a kept answer of the authorization service, without asking it.",
    );
    for (name, s) in &gw.services {
        let n = s.stats.external_cached.get();
        let _ = writeln!(out, "gatehouse_gateway_external_cached_total{{service=\"{}\"}} {n}", esc(name));
    }
    help(
        out,
        "gatehouse_gateway_limiter_errors_total",
        "counter",
        "Cluster rate-limit decisions Redis could not make (then admitted or refused per on_redis_error).",
    );
    for (name, s) in &gw.services {
        let _ = writeln!(
            out,
            "gatehouse_gateway_limiter_errors_total{{service=\"{}\"}} {}",
            esc(name),
            s.stats.limiter_errors.get()
        );
    }
}
