//! OpenTelemetry traces read back from a real OTLP receiver (Jaeger v2): spans over OTLP/HTTP
//! and gRPC, the client's trace continued, the upstream given the attempt's `traceparent`, an
//! invalid one replaced, the sampling ratio, and a collector that is down or stuck costing
//! nothing but its spans.

use crate::common::{start, targets, HOST, SETTLE};
use gatehouse_testkit::{curl, free_port, http_get, span_tag, wait_until, Backend, Jaeger, Load, TempDir};
use serde_json::Value;
use std::time::Duration;

/// How long spans may take to reach Jaeger (the export interval is 100 ms in these tests).
const EXPORTED: Duration = Duration::from_secs(15);

pub(crate) fn tracing_section(endpoint: &str, protocol: &str, service: &str, extra: &str) -> String {
    format!(
        "tracing:\n  otlp: {{endpoint: \"{endpoint}\", protocol: {protocol}}}\n  service_name: {service}\n  export: {{interval: 100ms}}\n{extra}"
    )
}

fn gateway_yaml(tracing: &str, b: &Backend, log: &std::path::Path) -> String {
    format!(
        "workers: 2\nadmin: {{bind: \"127.0.0.1:0\"}}\naccess_log: {{path: \"{}\", format: json}}\n{tracing}listeners:\n  http: {{bind: \"127.0.0.1:0\"}}\n  h2c: {{bind: \"127.0.0.1:0\", protocol: h2c}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n  main: {{hosts: [\"{HOST}\"], routes: [{{path: /api/, upstream: u}}, {{path: /, upstream: u}}]}}\n",
        log.display(),
        targets(&[b])
    )
}

/// The `traceparent` the backend got on its last request with `path`.
fn upstream_traceparent(b: &Backend, path: &str) -> String {
    let r =
        b.requests().into_iter().rev().find(|r| r.uri.ends_with(path)).unwrap_or_else(|| panic!("{path} not received"));
    let tp: Vec<_> = r.headers.iter().filter(|(k, _)| k == "traceparent").map(|(_, v)| v.clone()).collect();
    assert_eq!(tp.len(), 1, "exactly one traceparent upstream: {:?}", r.headers);
    tp[0].clone()
}

fn span_of<'a>(trace: &'a Value, kind: &str) -> &'a Value {
    trace["spans"]
        .as_array()
        .and_then(|s| s.iter().find(|s| span_tag(s, "span.kind").and_then(Value::as_str) == Some(kind)))
        .unwrap_or_else(|| panic!("no {kind} span in {trace}"))
}

fn parent_of(span: &Value) -> Option<&str> {
    span["references"].as_array()?.iter().find(|r| r["refType"] == "CHILD_OF").and_then(|r| r["spanID"].as_str())
}

fn tag<'a>(span: &'a Value, key: &str) -> &'a Value {
    span_tag(span, key).unwrap_or_else(|| panic!("no {key} in {span}"))
}

#[test]
fn spans_reach_jaeger_over_http_and_grpc_continuing_the_clients_trace() {
    let Some(jaeger) = Jaeger::start() else { return };
    let b = Backend::start("b");
    let dir = TempDir::new();
    let log = dir.join("access.log");
    let http_section = tracing_section(&format!("http://{}", jaeger.otlp_http), "http", "gw-http", "");
    let mut gw = start(&gateway_yaml(&http_section, &b, &log));
    let http = gw.addr("http");

    // A client in a trace: the gateway's server span is its child; the upstream's parent is the
    // gateway's client span for the attempt.
    let trace = "0af7651916cd43dd8448eb211c80319c";
    let client_span = "b7ad6b7169203331";
    let tp = format!("00-{trace}-{client_span}-01");
    let r = http_get(http, HOST, "/api/orders?id=7", &[("traceparent", &tp), ("tracestate", "vendor=x")]);
    assert_eq!(r.status, 200);
    let upstream = upstream_traceparent(&b, "/api/orders?id=7");
    let parts: Vec<&str> = upstream.split('-').collect();
    assert_eq!((parts[0], parts[1], parts[3]), ("00", trace, "01"), "{upstream}");
    assert_ne!(parts[2], client_span, "the upstream gets the gateway's span, not the client's");
    let got = b.requests().into_iter().rev().find(|r| r.uri.ends_with("id=7")).expect("received");
    assert!(got.headers.iter().any(|(k, v)| k == "tracestate" && v == "vendor=x"), "{:?}", got.headers);

    let t = jaeger.trace(trace, 2, EXPORTED).unwrap_or_else(|| panic!("trace {trace} not in Jaeger"));
    let server = span_of(&t, "server");
    let attempt = span_of(&t, "client");
    assert_eq!(parent_of(server), Some(client_span), "{server}");
    assert_eq!(parent_of(attempt), server["spanID"].as_str(), "{attempt}");
    assert_eq!(attempt["spanID"].as_str(), Some(parts[2]), "the upstream's parent is the attempt's span");
    assert_eq!(server["operationName"], "GET /api/");
    for (k, v) in [
        ("http.request.method", Value::from("GET")),
        ("url.path", "/api/orders".into()),
        ("url.scheme", "http".into()),
        ("http.route", "/api/".into()),
        ("http.response.status_code", 200.into()),
        ("network.protocol.version", "1.1".into()),
        ("client.address", "127.0.0.1".into()),
        ("server.address", HOST.into()),
        ("gatehouse.route", "main:/api/".into()),
    ] {
        assert_eq!(tag(server, k), &v, "{k}: {server}");
    }
    assert_eq!(tag(attempt, "http.response.status_code"), &Value::from(200));
    assert_eq!(tag(attempt, "network.peer.address"), &Value::from("127.0.0.1"));
    assert_eq!(tag(attempt, "gatehouse.upstream"), &Value::from("u"));
    let service = &t["processes"][server["processID"].as_str().unwrap_or("p1")]["serviceName"];
    assert_eq!(service, "gw-http");
    // The access log line carries the trace and the server span.
    let lines = crate::common::access_log_lines(&log, 1);
    let line = lines.iter().find(|l| l["uri"] == "/api/orders?id=7").expect("the line");
    assert_eq!((line["trace_id"].as_str(), line["span_id"].as_str()), (Some(trace), server["spanID"].as_str()));

    // An invalid traceparent (upper-case hex) is not continued and never forwarded as it came.
    let bad = "00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01";
    assert_eq!(http_get(http, HOST, "/bad", &[("traceparent", bad), ("tracestate", "vendor=x")]).status, 200);
    let upstream = upstream_traceparent(&b, "/bad");
    let new_trace = upstream.split('-').nth(1).unwrap_or_default().to_string();
    assert_ne!(new_trace, trace);
    let got = b.requests().into_iter().rev().find(|r| r.uri.ends_with("/bad")).expect("received");
    assert!(!got.headers.iter().any(|(k, _)| k == "tracestate"), "no tracestate without a valid parent");
    let t = jaeger.trace(&new_trace, 2, EXPORTED).expect("the new trace");
    assert_eq!(parent_of(span_of(&t, "server")), None, "a root span");

    // HTTP/2 (h2c), with the trace continued: the protocol version says 2.
    let tp2 = format!("00-{}-{client_span}-01", "1af7651916cd43dd8448eb211c80319c");
    let r = curl(&[
        "--http2-prior-knowledge",
        "-H",
        &format!("traceparent: {tp2}"),
        &format!("http://{}/h2", gw.addr("h2c")),
    ]);
    assert_eq!(r.status, 404, "no route for the h2c listener's host: {r:?}");
    let t = jaeger.trace("1af7651916cd43dd8448eb211c80319c", 1, EXPORTED).expect("the h2 trace");
    let server = span_of(&t, "server");
    assert_eq!(tag(server, "network.protocol.version"), &Value::from("2"));
    assert_eq!(tag(server, "http.response.status_code"), &Value::from(404));
    let r = curl(&[
        "--http2-prior-knowledge",
        "-H",
        &format!("Host: {HOST}"),
        "-H",
        "traceparent: 00-2af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        &format!("http://{}/h2", gw.addr("h2c")),
    ]);
    assert_eq!(r.status, 200, "{r:?}");
    let t = jaeger.trace("2af7651916cd43dd8448eb211c80319c", 2, EXPORTED).expect("the h2 trace with an attempt");
    assert_eq!(tag(span_of(&t, "server"), "network.protocol.version"), &Value::from("2"));

    // A reload to OTLP over gRPC: the next spans go there.
    let grpc_section = tracing_section(&format!("http://{}", jaeger.otlp_grpc), "grpc", "gw-grpc", "");
    gw.write_config(&gateway_yaml(&grpc_section, &b, &log));
    assert_eq!(gw.reload()["event"], "reloaded");
    let tp3 = "00-3af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    assert_eq!(http_get(http, HOST, "/after-reload", &[("traceparent", tp3)]).status, 200);
    let t = jaeger.trace("3af7651916cd43dd8448eb211c80319c", 2, EXPORTED).expect("exported over gRPC");
    let server = span_of(&t, "server");
    assert_eq!(&t["processes"][server["processID"].as_str().unwrap_or("p1")]["serviceName"], "gw-grpc");
    let m = gw.metrics();
    assert!(
        gatehouse_testkit::metric_value(&m, "gatehouse_tracing_spans_total{result=\"exported\"}").unwrap_or(0.0) >= 7.0,
        "{m}"
    );
    assert_eq!(gatehouse_testkit::metric_value(&m, "gatehouse_tracing_spans_total{result=\"dropped\"}"), Some(0.0));
}

/// The ratio over 1,000 new traces; a parent's sampled flag decides for its requests.
/// A collector behind TLS, verified against `otlp.ca`: spans arrive over OTLP/HTTP (HTTP/1.1 or
/// HTTP/2 by ALPN) and over gRPC (HTTP/2 by ALPN). The second node has no access log: the server
/// span still names the endpoint that answered.
#[test]
fn spans_reach_a_collector_over_https_for_both_protocols() {
    let pki = crate::tls::Pki::new();
    let bundle = pki.issue(&["127.0.0.1"], gatehouse_tls::issue::Algorithm::EcdsaP256, "otel.pem", None);
    let Some(jaeger) = Jaeger::start_tls(&bundle) else { return };
    let b = Backend::start("b");
    let dir = TempDir::new();
    let log = dir.join("access.log");
    for (i, (protocol, addr)) in [("http", jaeger.otlp_http), ("grpc", jaeger.otlp_grpc)].into_iter().enumerate() {
        let section = tracing_section(&format!("https://{addr}"), protocol, "gw-tls", "")
            .replace("protocol: ", &format!("ca: \"{}\", protocol: ", pki.ca_file().display()));
        let mut yaml = gateway_yaml(&section, &b, &log);
        if i == 1 {
            yaml = yaml.replace(&format!("access_log: {{path: \"{}\", format: json}}\n", log.display()), "");
            assert!(!yaml.contains("access_log"), "{yaml}");
        }
        let gw = start(&yaml);
        let trace = format!("{:032x}", 0x5eed_0000u128 + i as u128);
        let tp = format!("00-{trace}-b7ad6b7169203331-01");
        assert_eq!(http_get(gw.addr("http"), HOST, "/x", &[("traceparent", &tp)]).status, 200);
        let t = jaeger.trace(&trace, 2, EXPORTED).unwrap_or_else(|| panic!("{protocol}: trace {trace} not in Jaeger"));
        assert_eq!(tag(span_of(&t, "server"), "url.path"), &Value::from("/x"), "{protocol}");
        assert_eq!(tag(span_of(&t, "server"), "gatehouse.upstream.endpoint"), &Value::from(b.addr().to_string()));
        let m = gw.metrics();
        assert_eq!(
            gatehouse_testkit::metric_value(&m, "gatehouse_tracing_export_failures_total").unwrap_or(0.0),
            0.0,
            "{protocol}"
        );
    }
}

#[test]
fn the_sampling_ratio_and_the_parents_flag_decide_what_is_recorded() {
    let Some(jaeger) = Jaeger::start() else { return };
    let b = Backend::start("b");
    let dir = TempDir::new();
    let section = tracing_section(
        &format!("http://{}", jaeger.otlp_http),
        "http",
        "gw-ratio",
        "  sampler: {ratio: 0.1, parent_based: true}\n",
    );
    let gw = start(&gateway_yaml(&section, &b, &dir.join("access.log")));
    let http = gw.addr("http");
    let report = Load::run(http, HOST, "/sampled", 4, 250);
    assert_eq!(report.ok, 1_000, "{report:?}");
    // Every upstream request carried a traceparent, sampled or not.
    let flags: Vec<String> = b
        .requests()
        .iter()
        .map(|r| {
            r.headers.iter().find(|(k, _)| k == "traceparent").map(|(_, v)| v[53..].to_string()).unwrap_or_default()
        })
        .collect();
    assert_eq!(flags.len(), 1_000);
    let sampled = flags.iter().filter(|f| *f == "01").count();
    assert_eq!(flags.iter().filter(|f| *f == "00").count() + sampled, 1_000, "{flags:?}");
    // Binomial(1000, 0.1): mean 100, standard deviation 9.5; five deviations either way.
    assert!((52..=148).contains(&sampled), "{sampled} of 1,000 sampled at 0.1");
    let spans = || {
        let m = gw.metrics();
        gatehouse_testkit::metric_value(&m, "gatehouse_tracing_spans_total{result=\"exported\"}").unwrap_or(0.0)
            as usize
    };
    wait_until(EXPORTED, || (spans() >= 2 * sampled).then_some(()))
        .expect("every sampled request's two spans exported");
    assert_eq!(spans(), 2 * sampled, "exactly the sampled requests were recorded");
    let traces = wait_until(EXPORTED, || {
        let t = jaeger.traces("gw-ratio", 2_000);
        (t.len() >= sampled).then_some(t)
    })
    .unwrap_or_default();
    assert_eq!(traces.len(), sampled, "one trace per sampled request");

    // Parent-based: not sampled upstream of us stays not sampled; sampled stays sampled.
    let before = spans();
    for i in 0..20u32 {
        let tp = format!("00-{:032x}-b7ad6b7169203331-00", 0x4af0_0000u128 + u128::from(i));
        assert_eq!(http_get(http, HOST, "/unsampled", &[("traceparent", &tp)]).status, 200);
    }
    for i in 0..20u32 {
        let tp = format!("00-{:032x}-b7ad6b7169203331-01", 0x5af0_0000u128 + u128::from(i));
        assert_eq!(http_get(http, HOST, "/sampled-parent", &[("traceparent", &tp)]).status, 200);
    }
    wait_until(EXPORTED, || (spans() >= before + 40).then_some(())).expect("the sampled parents' spans");
    assert_eq!(spans(), before + 40, "20 sampled parents, two spans each; none for the unsampled");
    assert!(jaeger.trace(&format!("{:032x}", 0x5af0_0000u128), 2, EXPORTED).is_some());
}

/// A collector that refuses connections, then one that accepts and never answers: every
/// request is served, spans are counted as failed or dropped, nothing else changes.
#[test]
fn a_collector_down_or_stuck_costs_only_the_spans() {
    let b = Backend::start("b");
    let dir = TempDir::new();
    let refused = format!("http://127.0.0.1:{}", free_port());
    let section = tracing_section(&refused, "http", "gw-down", "");
    let mut gw = start(&gateway_yaml(&section, &b, &dir.join("access.log")));
    let http = gw.addr("http");
    let report = Load::run(http, HOST, "/down", 4, 100);
    assert_eq!((report.ok, report.failed), (400, 0), "{report:?}");
    let metric = |gw: &gatehouse_testkit::Gateway, result: &str| {
        let m = gw.metrics();
        gatehouse_testkit::metric_value(&m, &format!("gatehouse_tracing_spans_total{{result=\"{result}\"}}"))
            .unwrap_or(0.0)
    };
    wait_until(SETTLE, || (metric(&gw, "failed") >= 800.0).then_some(())).expect("the failed exports counted");
    assert!(gw.stderr().contains("trace export failed"), "{}", gw.stderr());

    // A collector that takes the connection and never answers: the exporter waits on it (up to
    // its timeout) while the queue fills; then spans are dropped, and requests go on.
    let stuck = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let section = tracing_section(
        &format!("http://{}", stuck.local_addr().expect("addr")),
        "http",
        "gw-stuck",
        "  export: {queue: 64, batch: 16, interval: 100ms}\n",
    )
    .replace("  export: {interval: 100ms}\n", "");
    gw.write_config(&gateway_yaml(&section, &b, &dir.join("access.log")));
    assert_eq!(gw.reload()["event"], "reloaded");
    let report = Load::run(http, HOST, "/stuck", 4, 250);
    assert_eq!((report.ok, report.failed), (1_000, 0), "{report:?}");
    assert!(metric(&gw, "dropped") >= 1_000.0, "a full queue drops: {}", gw.metrics());
    let r = http_get(http, HOST, "/still", &[]);
    assert_eq!(r.status, 200);
    drop(stuck);
}

/// `gatehouse check` refuses a broken `tracing` section with every error, and reads its CA file
/// as `run` does.
#[test]
fn check_refuses_a_broken_tracing_section_and_reads_its_ca() {
    let dir = TempDir::new();
    let write = |yaml: &str| {
        let path = dir.join("gatehouse.yaml");
        std::fs::write(&path, yaml).expect("write");
        let out =
            std::process::Command::new(env!("CARGO_BIN_EXE_gatehouse")).arg("check").arg(&path).output().expect("run");
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let listeners = "listeners:\n  http: {bind: \"127.0.0.1:0\"}\n";
    let (ok, said) = write(&format!(
        "tracing:\n  otlp: {{endpoint: \"127.0.0.1:4318\", protocol: thrift}}\n  sampler: {{ratio: 2}}\n  export: {{batch: 0}}\n{listeners}"
    ));
    assert!(!ok && said.contains("tracing.otlp.protocol"), "{said}");
    let (ok, said) = write(&format!(
        "tracing:\n  otlp: {{endpoint: \"127.0.0.1:4318\"}}\n  sampler: {{ratio: 2}}\n  export: {{batch: 0}}\n{listeners}"
    ));
    assert!(!ok, "{said}");
    for want in ["tracing.otlp.endpoint", "tracing.sampler.ratio", "tracing.export.batch"] {
        assert!(said.contains(want), "{want}: {said}");
    }
    let missing = dir.join("no-such-ca.pem");
    let (ok, said) = write(&format!(
        "tracing:\n  otlp: {{endpoint: \"https://collector.test:4318\", ca: \"{}\"}}\n{listeners}",
        missing.display()
    ));
    assert!(!ok && said.contains("tracing.otlp.ca: cannot read") && said.contains("no-such-ca.pem"), "{said}");
    let (ok, said) = write(&format!("tracing:\n  otlp: {{endpoint: \"http://127.0.0.1:4318\"}}\n{listeners}"));
    assert!(ok, "{said}");
}
