//! The request path's spans (OpenTelemetry HTTP semantic conventions): the server span of a
//! sampled request, finished with its answer's body like the access log line, and a client span
//! per upstream attempt. Recording is writing a [`Span`]'s protobuf bytes and adding them to the
//! thread's batch; the exporter thread does the rest ([`gatehouse_otel`]).

use crate::body::{LogRecord, Text};
use crate::forward::Outcome;
use crate::snapshot::{RouteEntry, Snapshot};
use gatehouse_otel::{Attrs, Ctx, Kind, Span, Tracer};
use gatehouse_upstream::EndpointState;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// The attributes' keys, encoded once.
mod key {
    use gatehouse_otel::Key;
    pub const CLIENT_ADDRESS: Key = Key::new("client.address");
    pub const ERROR_TYPE: Key = Key::new("error.type");
    pub const GATEHOUSE_APP: Key = Key::new("gatehouse.app");
    pub const GATEHOUSE_CONNECTION_REUSED: Key = Key::new("gatehouse.connection.reused");
    pub const GATEHOUSE_DENIAL: Key = Key::new("gatehouse.denial");
    pub const GATEHOUSE_REQUEST_ID: Key = Key::new("gatehouse.request_id");
    pub const GATEHOUSE_ROUTE: Key = Key::new("gatehouse.route");
    pub const GATEHOUSE_SERVICE: Key = Key::new("gatehouse.service");
    pub const GATEHOUSE_UPSTREAM: Key = Key::new("gatehouse.upstream");
    pub const GATEHOUSE_UPSTREAM_ENDPOINT: Key = Key::new("gatehouse.upstream.endpoint");
    pub const HTTP_REQUEST_METHOD: Key = Key::new("http.request.method");
    pub const HTTP_REQUEST_RESEND_COUNT: Key = Key::new("http.request.resend_count");
    pub const HTTP_RESPONSE_BODY_SIZE: Key = Key::new("http.response.body.size");
    pub const HTTP_RESPONSE_STATUS_CODE: Key = Key::new("http.response.status_code");
    pub const HTTP_ROUTE: Key = Key::new("http.route");
    pub const NETWORK_PEER_ADDRESS: Key = Key::new("network.peer.address");
    pub const NETWORK_PEER_PORT: Key = Key::new("network.peer.port");
    pub const NETWORK_PROTOCOL_VERSION: Key = Key::new("network.protocol.version");
    pub const RPC_GRPC_STATUS_CODE: Key = Key::new("rpc.grpc.status_code");
    pub const RPC_SYSTEM: Key = Key::new("rpc.system");
    pub const SERVER_ADDRESS: Key = Key::new("server.address");
    pub const SERVER_PORT: Key = Key::new("server.port");
    pub const TLS_RESUMED: Key = Key::new("tls.resumed");
    pub const URL_PATH: Key = Key::new("url.path");
    pub const URL_SCHEME: Key = Key::new("url.scheme");
    pub const USER_AGENT_ORIGINAL: Key = Key::new("user_agent.original");
}

/// A request's trace: made when it comes in, kept with its log record until the answer ends
/// (one allocation per traced request: the attempts' spans and the record use it too).
#[derive(Debug)]
pub(crate) struct TraceRecord {
    /// Ids (written to the access log too).
    pub ctx: Ctx,
    /// What the service refused the request for.
    pub denial: Option<&'static str>,
    /// The upstream attempt under way, when sampled.
    pub attempt: Option<Attempt>,
    /// Where the server span goes, when the request is sampled (set by [`record`]).
    pub tracer: Option<Arc<Tracer>>,
    /// The route that took the request (and its API service).
    pub route: Option<Arc<RouteEntry>>,
    /// The client's address as text (made once per connection), when sampled.
    client: Option<http::HeaderValue>,
}

/// The request's trace context (out of line: the request path without `tracing` keeps only the
/// branch).
#[inline(never)]
pub(crate) fn begin(tracer: &Tracer, headers: &mut http::HeaderMap, conn: &crate::ConnInfo) -> Box<TraceRecord> {
    let ctx = tracer.begin(headers);
    let client = ctx.sampled.then(|| conn.peer_ip.clone());
    Box::new(TraceRecord { ctx, denial: None, attempt: None, tracer: None, route: None, client })
}

/// What the record phase keeps of the trace: for a sampled request, what its server span needs.
#[inline(never)]
pub(crate) fn record(snap: &Snapshot, mut t: Box<TraceRecord>, outcome: &Outcome) -> Box<TraceRecord> {
    t.attempt = None;
    if t.ctx.sampled {
        t.tracer = snap.tracer.clone();
        t.route = outcome.route.clone();
    } else {
        // The ids, for the access log.
        t.denial = None;
    }
    t
}

/// `network.protocol.version` of a request line's version.
fn protocol_version(version: &str) -> &str {
    match version {
        "HTTP/1.0" => "1.0",
        "HTTP/1.1" => "1.1",
        "HTTP/2.0" => "2",
        "HTTP/3.0" => "3",
        other => other,
    }
}

/// Host and port of an authority (`[::1]:8443`, `example.com`), read byte by byte: it runs for
/// both spans of every traced request.
fn split_authority(a: &str) -> (&str, Option<i64>) {
    if let Some(v6) = a.strip_prefix('[') {
        let (host, rest) = v6.split_once(']').unwrap_or((v6, ""));
        return (host, rest.strip_prefix(':').and_then(port_number));
    }
    // One pass: the last colon, and whether it is the only one (else an IPv6 address, no port).
    let (mut last, mut colons) = (0, 0);
    for (i, &c) in a.as_bytes().iter().enumerate() {
        if c == b':' {
            last = i;
            colons += 1;
        }
    }
    match colons {
        1 => (&a[..last], port_number(&a[last + 1..])),
        _ => (a, None),
    }
}

/// A port's digits as a number (1 to 5 digits, at most 65535).
fn port_number(p: &str) -> Option<i64> {
    if p.is_empty() || p.len() > 5 {
        return None;
    }
    let mut n = 0i64;
    for &c in p.as_bytes() {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n * 10 + i64::from(c - b'0');
    }
    (n <= 65_535).then_some(n)
}

/// The path of a request target as logged (origin form, or absolute form for a proxy request).
fn path_of(uri: &str) -> &str {
    let b = uri.as_bytes();
    // Origin form (nearly every request) starts with its path: no search for `://`.
    let path = match b.first() {
        Some(b'/') | None => uri,
        _ => match b.windows(3).position(|w| w == b"://") {
            Some(i) => uri[i + 3..].find('/').map_or("/", |j| &uri[i + 3 + j..]),
            None => uri,
        },
    };
    match path.as_bytes().iter().position(|&c| c == b'?' || c == b'#') {
        Some(i) => &path[..i],
        None => path,
    }
}

/// What a route's server spans say of it: `http.route` (its prefix), the route's id and its API
/// service. Encoded once per route.
fn route_attributes(route: &RouteEntry) -> Box<[u8]> {
    let mut a = Attrs::default();
    if let Some((_, prefix)) = route.id.split_once(':') {
        a.str(&key::HTTP_ROUTE, prefix);
    }
    a.str(&key::GATEHOUSE_ROUTE, &route.id);
    if let Some(svc) = &route.service {
        a.str(&key::GATEHOUSE_SERVICE, &svc.name);
    }
    a.into_bytes()
}

/// Sends the server span of a sampled request, once its answer ended.
#[inline(never)]
pub(crate) fn finish_server(r: &LogRecord, t: &TraceRecord, bytes: u64, duration: Duration) {
    let Some(tracer) = &t.tracer else { return };
    let route = t.route.as_deref();
    let prefix = route.and_then(|r| r.id.split_once(':')).map(|(_, p)| p);
    let mut span = Span::new(Kind::Server, t.ctx.trace_id, t.ctx.span_id, t.ctx.parent, true, r.time);
    match prefix {
        Some(p) => span.name(&[r.method(), " ", p]),
        None => span.name(&[r.method()]),
    }
    let (host, port) = split_authority(r.host());
    span.str(&key::HTTP_REQUEST_METHOD, r.method());
    span.str(&key::URL_PATH, path_of(r.uri()));
    span.str(&key::URL_SCHEME, if r.tls { "https" } else { "http" });
    span.int(&key::HTTP_RESPONSE_STATUS_CODE, i64::from(r.status));
    span.str(&key::NETWORK_PROTOCOL_VERSION, protocol_version(r.version));
    match &t.client {
        Some(text) => span.str(&key::CLIENT_ADDRESS, text.to_str().unwrap_or_default()),
        None => span.ip(&key::CLIENT_ADDRESS, r.client),
    }
    span.str(&key::SERVER_ADDRESS, host);
    span.int(&key::HTTP_RESPONSE_BODY_SIZE, bytes as i64);
    if let Some(p) = port {
        span.int(&key::SERVER_PORT, p);
    }
    if let Some(route) = route {
        span.encoded(route.trace_attributes.get_or_init(|| route_attributes(route)));
    }
    let user_agent = r.text(Text::UserAgent);
    if !user_agent.is_empty() {
        span.str(&key::USER_AGENT_ORIGINAL, user_agent);
    }
    if let Some(app) = &r.app {
        span.str(&key::GATEHOUSE_APP, app);
    }
    if let Some(d) = t.denial {
        span.str(&key::GATEHOUSE_DENIAL, d);
    }
    if let Some(endpoint) = &r.upstream {
        span.str(&key::GATEHOUSE_UPSTREAM_ENDPOINT, endpoint);
    }
    if let Some(id) = r.request_id.as_ref().and_then(|v| v.to_str().ok()) {
        span.str(&key::GATEHOUSE_REQUEST_ID, id);
    }
    if let Some(code) = r.grpc_status {
        span.str(&key::RPC_SYSTEM, "grpc");
        span.int(&key::RPC_GRPC_STATUS_CODE, i64::from(code));
    }
    // Server spans: 5xx are errors, 4xx are the client's (semantic conventions).
    if r.status >= 500 {
        let status = r.status.to_string();
        span.str(&key::ERROR_TYPE, &status);
        span.error(&status);
    }
    tracer.finish(span, r.time + duration);
}

/// What an endpoint's client spans say of it: `server.address` and `server.port` (its authority),
/// `network.peer.address` and `network.peer.port`, its upstream, and `url.scheme` over TLS.
/// Encoded once per endpoint.
fn endpoint_attributes(upstream: &str, ep: &EndpointState) -> Box<[u8]> {
    let (host, port) = split_authority(&ep.authority);
    let mut a = Attrs::default();
    a.str(&key::SERVER_ADDRESS, host);
    a.int(&key::SERVER_PORT, port.unwrap_or(i64::from(ep.addr.port())));
    a.ip(&key::NETWORK_PEER_ADDRESS, ep.addr.ip());
    a.int(&key::NETWORK_PEER_PORT, i64::from(ep.addr.port()));
    a.str(&key::GATEHOUSE_UPSTREAM, upstream);
    if ep.tls_name().is_some() {
        a.str(&key::URL_SCHEME, "https");
    }
    a.into_bytes()
}

/// An upstream attempt of a sampled request: its span id, start, method and connection.
#[derive(Debug)]
pub(crate) struct Attempt {
    span_id: u64,
    start: SystemTime,
    method: http::Method,
    /// Whether the connection was reused, and whether its TLS session resumed.
    pub connection: Option<(bool, Option<bool>)>,
}

impl Attempt {
    /// Gives the attempt a span id, whose `traceparent` goes on the request (with `propagate`);
    /// for a sampled request, starts its span in `t.attempt`.
    #[inline(never)]
    pub(crate) fn begin<B>(tracer: &Tracer, t: &mut TraceRecord, request: &mut http::Request<B>) {
        let span_id = gatehouse_otel::span_id();
        if tracer.propagates() {
            t.ctx.inject(request.headers_mut(), span_id);
        }
        if t.ctx.sampled {
            let method = request.method().clone();
            t.attempt = Some(Attempt { span_id, start: SystemTime::now(), method, connection: None });
        }
    }

    /// Sends the attempt's client span: the endpoint, the retry number,
    /// whether the connection was reused (and its TLS session resumed), and the status or the
    /// failure.
    #[inline(never)]
    pub(crate) fn finish<T>(
        &self,
        tracer: &Tracer,
        ctx: &Ctx,
        upstream: &str,
        ep: &EndpointState,
        retry: usize,
        answer: &Result<http::Response<T>, gatehouse_upstream::SendFailure>,
    ) {
        let answer = answer.as_ref().map(|r| r.status().as_u16()).map_err(|f| &f.error);
        let method = self.method.as_str();
        let mut span = Span::new(Kind::Client, ctx.trace_id, self.span_id, Some(ctx.span_id), false, self.start);
        span.name(&[method]);
        span.str(&key::HTTP_REQUEST_METHOD, method);
        span.encoded(ep.trace_attributes.get_or_init(|| endpoint_attributes(upstream, ep)));
        if retry > 0 {
            span.int(&key::HTTP_REQUEST_RESEND_COUNT, retry as i64);
        }
        if let Some((reused, resumed)) = self.connection {
            span.bool(&key::GATEHOUSE_CONNECTION_REUSED, reused);
            if let Some(resumed) = resumed {
                span.bool(&key::TLS_RESUMED, resumed);
            }
        }
        match answer {
            Ok(status) => {
                span.int(&key::HTTP_RESPONSE_STATUS_CODE, i64::from(status));
                // Client spans: 4xx and 5xx are errors.
                if status >= 400 {
                    let status = status.to_string();
                    span.str(&key::ERROR_TYPE, &status);
                    span.error(&status);
                }
            }
            Err(e) => {
                span.str(&key::ERROR_TYPE, if e.is_timeout() { "timeout" } else { "upstream_error" });
                span.error(&e.to_string());
            }
        }
        tracer.finish(span, SystemTime::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_authorities() {
        assert_eq!(path_of("/a/b?x=1"), "/a/b");
        assert_eq!(path_of("http://h:8080/p?q"), "/p");
        assert_eq!(path_of("http://h"), "/");
        assert_eq!(path_of("/a#f"), "/a");
        assert_eq!(path_of("*"), "*");
        assert_eq!(path_of(""), "");
        assert_eq!(split_authority("example.com:8443"), ("example.com", Some(8443)));
        assert_eq!(split_authority("[::1]:80"), ("::1", Some(80)));
        assert_eq!(split_authority("example.com"), ("example.com", None));
        assert_eq!(split_authority("example.com:"), ("example.com", None));
        assert_eq!(split_authority("example.com:65536"), ("example.com", None));
        assert_eq!(split_authority("example.com:+80"), ("example.com", None));
        assert_eq!(split_authority("::1"), ("::1", None));
        assert_eq!(split_authority("[::1]"), ("::1", None));
    }
}
