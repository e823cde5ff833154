//! The request path's spans (OpenTelemetry HTTP semantic conventions): the server span of a
//! sampled request, finished with its answer's body like the access log line, and a client span
//! per upstream attempt. Recording is writing a [`Span`]'s protobuf bytes and a `try_send`; the exporter
//! thread does the rest ([`gatehouse_otel`]).

use crate::body::LogRecord;
use crate::forward::Outcome;
use crate::snapshot::Snapshot;
use gatehouse_otel::{Ctx, Kind, Span, Tracer};
use gatehouse_upstream::EndpointState;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// A request's trace while it is forwarded: its context, and what the service refused it for.
#[derive(Debug)]
pub(crate) struct Traced {
    /// Ids, sampled or not.
    pub ctx: Ctx,
    /// What the service refused the request for.
    pub denial: Option<&'static str>,
}

/// A request's trace, kept with its log record until the answer ends.
#[derive(Debug)]
pub(crate) struct TraceRecord {
    /// Ids (written to the access log too).
    pub ctx: Ctx,
    /// Where the server span goes, when the request is sampled.
    pub tracer: Option<Arc<Tracer>>,
    /// The API service that took the request.
    pub service: Option<Arc<str>>,
    /// What the service refused it for.
    pub denial: Option<&'static str>,
    /// The route: `site:prefix`.
    pub route: Option<Arc<str>>,
}

/// The request's trace context (out of line: the request path without `tracing` keeps only the
/// branch).
#[inline(never)]
pub(crate) fn begin(tracer: &Tracer, headers: &mut http::HeaderMap) -> Box<Traced> {
    Box::new(Traced { ctx: tracer.begin(headers), denial: None })
}

/// What the record phase keeps of the trace.
#[inline(never)]
pub(crate) fn record(snap: &Snapshot, traced: Traced, outcome: &Outcome) -> Option<Box<TraceRecord>> {
    let Traced { ctx, denial } = traced;
    if !ctx.sampled {
        // The ids, for the access log.
        return Some(Box::new(TraceRecord { ctx, tracer: None, service: None, denial: None, route: None }));
    }
    let tracer = snap.tracer.clone();
    let route = outcome.route.as_ref();
    Some(Box::new(TraceRecord {
        ctx,
        tracer,
        service: route.and_then(|r| r.service.as_ref()).map(|s| s.name.clone()),
        denial,
        route: route.map(|r| r.id.clone()),
    }))
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

/// Host and port of an authority (`[::1]:8443`, `example.com`).
fn split_authority(a: &str) -> (&str, Option<i64>) {
    if let Some(v6) = a.strip_prefix('[') {
        let (host, rest) = v6.split_once(']').unwrap_or((v6, ""));
        return (host, rest.strip_prefix(':').and_then(|p| p.parse().ok()));
    }
    match a.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => (h, p.parse().ok()),
        _ => (a, None),
    }
}

/// The path of a request target as logged (origin form, or absolute form for a proxy request).
fn path_of(uri: &str) -> &str {
    let path = match uri.find("://") {
        Some(i) => uri[i + 3..].find('/').map_or("/", |j| &uri[i + 3 + j..]),
        None => uri,
    };
    path.split(['?', '#']).next().unwrap_or(path)
}

/// Sends the server span of a sampled request, once its answer ended.
#[inline(never)]
pub(crate) fn finish_server(r: &LogRecord, t: &TraceRecord, bytes: u64, duration: Duration) {
    let Some(tracer) = &t.tracer else { return };
    let prefix = t.route.as_deref().and_then(|id| id.split_once(':')).map(|(_, p)| p);
    let mut span = Span::new(Kind::Server, t.ctx.trace_id, t.ctx.span_id, t.ctx.parent, true, r.time);
    match prefix {
        Some(p) => span.name(&[&r.method, " ", p]),
        None => span.name(&[&r.method]),
    }
    let (host, port) = split_authority(&r.host);
    span.str("http.request.method", &r.method);
    span.str("url.path", path_of(&r.uri));
    span.str("url.scheme", if r.tls { "https" } else { "http" });
    span.int("http.response.status_code", i64::from(r.status));
    span.str("network.protocol.version", protocol_version(r.version));
    span.ip("client.address", r.client);
    span.str("server.address", host);
    span.int("http.response.body.size", bytes as i64);
    if let Some(p) = port {
        span.int("server.port", p);
    }
    if let Some(p) = prefix {
        span.str("http.route", p);
    }
    if let Some(id) = &t.route {
        span.str("gatehouse.route", id);
    }
    if !r.user_agent.is_empty() {
        span.str("user_agent.original", &r.user_agent);
    }
    if let Some(svc) = &t.service {
        span.str("gatehouse.service", svc);
    }
    if !r.app.is_empty() {
        span.str("gatehouse.app", &r.app);
    }
    if let Some(d) = t.denial {
        span.str("gatehouse.denial", d);
    }
    if !r.upstream.is_empty() {
        span.str("gatehouse.upstream.endpoint", &r.upstream);
    }
    if let Some(id) = r.request_id.as_ref().and_then(|v| v.to_str().ok()) {
        span.str("gatehouse.request_id", id);
    }
    if let Some(code) = r.grpc_status {
        span.str("rpc.system", "grpc");
        span.int("rpc.grpc.status_code", i64::from(code));
    }
    // Server spans: 5xx are errors, 4xx are the client's (semantic conventions).
    if r.status >= 500 {
        let status = r.status.to_string();
        span.str("error.type", &status);
        span.error(&status);
    }
    tracer.finish(span, r.time + duration);
}

/// An upstream attempt of a sampled request: its span id, start, method and connection.
pub(crate) struct Attempt {
    span_id: u64,
    start: SystemTime,
    method: http::Method,
    /// Whether the connection was reused, and whether its TLS session resumed.
    pub connection: Option<(bool, Option<bool>)>,
}

impl Attempt {
    /// Gives the attempt a span id, whose `traceparent` goes on the request (with `propagate`);
    /// for a sampled request, starts its span.
    #[inline(never)]
    pub(crate) fn begin<B>(tracer: &Tracer, ctx: &Ctx, request: &mut http::Request<B>) -> Option<Box<Attempt>> {
        let span_id = gatehouse_otel::span_id();
        if tracer.propagates() {
            ctx.inject(request.headers_mut(), span_id);
        }
        if !ctx.sampled {
            return None;
        }
        let method = request.method().clone();
        Some(Box::new(Attempt { span_id, start: SystemTime::now(), method, connection: None }))
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
        let (host, port) = split_authority(&ep.authority);
        let mut span = Span::new(Kind::Client, ctx.trace_id, self.span_id, Some(ctx.span_id), false, self.start);
        span.name(&[method]);
        span.str("http.request.method", method);
        span.str("server.address", host);
        span.int("server.port", port.unwrap_or(i64::from(ep.addr.port())));
        span.ip("network.peer.address", ep.addr.ip());
        span.int("network.peer.port", i64::from(ep.addr.port()));
        span.str("gatehouse.upstream", upstream);
        if retry > 0 {
            span.int("http.request.resend_count", retry as i64);
        }
        if let Some((reused, resumed)) = self.connection {
            span.bool("gatehouse.connection.reused", reused);
            if let Some(resumed) = resumed {
                span.bool("tls.resumed", resumed);
            }
        }
        if ep.tls_name().is_some() {
            span.str("url.scheme", "https");
        }
        match answer {
            Ok(status) => {
                span.int("http.response.status_code", i64::from(status));
                // Client spans: 4xx and 5xx are errors.
                if status >= 400 {
                    let status = status.to_string();
                    span.str("error.type", &status);
                    span.error(&status);
                }
            }
            Err(e) => {
                span.str("error.type", if e.is_timeout() { "timeout" } else { "upstream_error" });
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
        assert_eq!(split_authority("example.com:8443"), ("example.com", Some(8443)));
        assert_eq!(split_authority("[::1]:80"), ("::1", Some(80)));
        assert_eq!(split_authority("example.com"), ("example.com", None));
    }
}
