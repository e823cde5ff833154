//! A real OTLP receiver for tests: Jaeger v2 (`jaeger` of module version v1.76.0, Jaeger
//! v2.13.0) with an in-memory store, receiving OTLP over HTTP and gRPC and answering its query
//! API, every socket on a free loopback port; killed on drop. Built by `.ci/run` into
//! `~/.cache/gatehouse-tools/jaeger-v1.76.0/` (or named by `$GATEHOUSE_JAEGER`).

use crate::free_port;
use crate::gateway::TempDir;
use crate::wait::wait_until;
use serde_json::Value;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The Jaeger module version the tests are written against.
pub const JAEGER_VERSION: &str = "v1.76.0";

/// How long Jaeger may take to be ready.
const READY: Duration = Duration::from_secs(30);

/// The configuration: OTLP in, memory store, query API; no port but the ones given (its own
/// metrics off, its query service not tracing itself to localhost:4317).
const CONFIG: &str = r#"
service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: []
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 100000
  jaeger_query:
    storage:
      traces: mem
    enable_tracing: false
    http:
      endpoint: "127.0.0.1:${env:JAEGER_QUERY_HTTP_PORT}"
    grpc:
      endpoint: "127.0.0.1:0"
  healthcheckv2:
    use_v2: true
    http:
      endpoint: "127.0.0.1:${env:JAEGER_HEALTH_PORT}"
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: "127.0.0.1:${env:JAEGER_OTLP_GRPC_PORT}"
        TLS
      http:
        endpoint: "127.0.0.1:${env:JAEGER_OTLP_HTTP_PORT}"
        TLS
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
"#;

/// A running Jaeger.
#[derive(Debug)]
pub struct Jaeger {
    child: Child,
    /// OTLP over HTTP (`http://ADDR`, spans posted to `/v1/traces`).
    pub otlp_http: SocketAddr,
    /// OTLP over gRPC.
    pub otlp_grpc: SocketAddr,
    /// The query API (`/api/traces/{id}`).
    pub query: SocketAddr,
    _dir: TempDir,
}

/// The `jaeger` binary: `$GATEHOUSE_JAEGER`, else the one `.ci/run` builds, else `PATH`'s.
pub fn jaeger_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("GATEHOUSE_JAEGER") {
        return Some(PathBuf::from(p));
    }
    let home = std::env::var_os("HOME").map(PathBuf::from)?;
    let cached = home.join(format!(".cache/gatehouse-tools/jaeger-{JAEGER_VERSION}/jaeger"));
    if cached.exists() {
        return Some(cached);
    }
    Command::new("jaeger").arg("--version").output().ok().map(|_| PathBuf::from("jaeger"))
}

impl Jaeger {
    /// Starts Jaeger and waits until its health check says ready; `None` when it is not
    /// installed (a test then skips, unless `CI` is set).
    pub fn start() -> Option<Jaeger> {
        Jaeger::start_with(None)
    }

    /// Jaeger whose OTLP receivers (HTTP and gRPC) serve TLS with the certificate and key in the
    /// PEM file `bundle`.
    pub fn start_tls(bundle: &std::path::Path) -> Option<Jaeger> {
        Jaeger::start_with(Some(bundle))
    }

    fn start_with(tls: Option<&std::path::Path>) -> Option<Jaeger> {
        let Some(bin) = jaeger_binary() else {
            assert!(std::env::var_os("CI").is_none(), "jaeger {JAEGER_VERSION} is needed but CI is set");
            return None;
        };
        let dir = TempDir::new();
        let config = dir.join("jaeger.yaml");
        let tls = match tls {
            Some(b) => format!("tls: {{cert_file: \"{}\", key_file: \"{}\"}}", b.display(), b.display()),
            None => String::new(),
        };
        std::fs::write(&config, CONFIG.replace("TLS", &tls)).expect("write the Jaeger configuration");
        let (grpc, http, query, health) = (free_port(), free_port(), free_port(), free_port());
        let child = Command::new(&bin)
            .arg(format!("--config=file:{}", config.display()))
            .env("JAEGER_OTLP_GRPC_PORT", grpc.to_string())
            .env("JAEGER_OTLP_HTTP_PORT", http.to_string())
            .env("JAEGER_QUERY_HTTP_PORT", query.to_string())
            .env("JAEGER_HEALTH_PORT", health.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
        let local = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
        let mut j = Jaeger { child, otlp_http: local(http), otlp_grpc: local(grpc), query: local(query), _dir: dir };
        let ready = wait_until(READY, || {
            if let Ok(Some(status)) = j.child.try_wait() {
                panic!("jaeger exited: {status}");
            }
            let up = std::net::TcpStream::connect(local(health)).is_ok()
                && crate::http_get(local(health), "127.0.0.1", "/status", &[]).status == 200;
            up.then_some(())
        });
        assert!(ready.is_some(), "jaeger was not ready within {READY:?}");
        Some(j)
    }

    /// The trace `id` (32 hex digits) as the query API gives it (`{"traceID", "spans", "processes"}`),
    /// once it has at least `spans` spans; `None` if it has fewer within `within`.
    pub fn trace(&self, id: &str, spans: usize, within: Duration) -> Option<Value> {
        wait_until(within, || {
            let r = crate::http_get(self.query, "127.0.0.1", &format!("/api/traces/{id}"), &[]);
            let v: Value = serde_json::from_slice(&r.body).ok()?;
            let t = v["data"].get(0)?.clone();
            (t["spans"].as_array().map_or(0, Vec::len) >= spans).then_some(t)
        })
    }

    /// The traces of `service` now (up to `limit`).
    pub fn traces(&self, service: &str, limit: usize) -> Vec<Value> {
        let r = crate::http_get(
            self.query,
            "127.0.0.1",
            &format!("/api/traces?service={service}&limit={limit}&lookback=1h"),
            &[],
        );
        let v: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        v["data"].as_array().cloned().unwrap_or_default()
    }
}

impl Drop for Jaeger {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A span's tag `key` from the query API's JSON.
pub fn span_tag<'a>(span: &'a Value, key: &str) -> Option<&'a Value> {
    span["tags"].as_array()?.iter().find(|t| t["key"] == key).map(|t| &t["value"])
}
