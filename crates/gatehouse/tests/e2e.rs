//! End-to-end tests: the real `gatehouse` binary on port 0, real backends, real clients (curl, raw
//! TCP, hyper). One test binary; each test has its own gateway and backends.

#[path = "e2e/acme.rs"]
mod acme;
#[path = "e2e/admin_hardening.rs"]
mod admin_hardening;
#[path = "e2e/balance.rs"]
mod balance;
#[path = "e2e/cli.rs"]
mod cli;
#[path = "e2e/common.rs"]
mod common;
#[path = "e2e/compression.rs"]
mod compression;
#[path = "e2e/control.rs"]
mod control;
#[path = "e2e/control_cluster.rs"]
mod control_cluster;
#[path = "e2e/control_contract.rs"]
mod control_contract;
#[path = "e2e/cors.rs"]
mod cors;
#[path = "e2e/dashboard.rs"]
mod dashboard;
#[path = "e2e/dns.rs"]
mod dns;
#[path = "e2e/dos.rs"]
mod dos;
#[path = "e2e/drain.rs"]
mod drain;
#[path = "e2e/errors.rs"]
mod errors;
#[path = "e2e/external_auth.rs"]
mod external_auth;
#[path = "e2e/faults.rs"]
mod faults;
#[path = "e2e/forwarding.rs"]
mod forwarding;
#[path = "e2e/gateway.rs"]
mod gateway;
#[path = "e2e/gateway_cluster.rs"]
mod gateway_cluster;
#[path = "e2e/gateway_jwt.rs"]
mod gateway_jwt;
#[path = "e2e/grpc.rs"]
mod grpc;
#[path = "e2e/h2_dos.rs"]
mod h2_dos;
#[path = "e2e/h2c.rs"]
mod h2c;
#[path = "e2e/health.rs"]
mod health;
#[path = "e2e/http1.rs"]
mod http1;
#[path = "e2e/http3.rs"]
mod http3;
#[path = "e2e/limits.rs"]
mod limits;
#[path = "e2e/logs.rs"]
mod logs;
#[path = "e2e/metrics.rs"]
mod metrics;
#[path = "e2e/oidc.rs"]
mod oidc;
#[path = "e2e/paths.rs"]
mod paths;
#[path = "e2e/pool.rs"]
mod pool;
#[path = "e2e/proxy_protocol.rs"]
mod proxy_protocol;
#[path = "e2e/redis_deployments.rs"]
mod redis_deployments;
#[path = "e2e/reload.rs"]
mod reload;
#[path = "e2e/request_id.rs"]
mod request_id;
#[path = "e2e/send_proxy_protocol.rs"]
mod send_proxy_protocol;
#[path = "e2e/smuggling.rs"]
mod smuggling;
#[path = "e2e/split.rs"]
mod split;
#[path = "e2e/systemd.rs"]
mod systemd;
#[path = "e2e/tls.rs"]
mod tls;
#[path = "e2e/tls_cluster.rs"]
mod tls_cluster;
#[path = "e2e/traces.rs"]
mod traces;
#[path = "e2e/trailers.rs"]
mod trailers;
#[path = "e2e/upgrade.rs"]
mod upgrade;
#[path = "e2e/upstream_tls.rs"]
mod upstream_tls;
#[path = "e2e/websocket.rs"]
mod websocket;
#[path = "e2e/websocket_h2.rs"]
mod websocket_h2;
