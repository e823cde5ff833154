//! The request path's spans (OpenTelemetry HTTP semantic conventions): the server span of a
//! sampled request, finished with its answer's body like the access log line, and a client span
//! per upstream attempt. Recording is building a [`SpanRecord`] and a `try_send`; the exporter
//! thread does the rest ([`gatehouse_otel`]).

use crate::body::LogRecord;
use crate::forward::Outcome;
use crate::snapshot::Snapshot;
use gatehouse_otel::{Ctx, Kind, SpanRecord, Tracer, Value};
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
    let tracer = if ctx.sampled { snap.tracer.clone() } else { None };
    let route = outcome.route.as_ref();
    Some(Box::new(TraceRecord {
        ctx,
        tracer,
        service: route.and_then(|r| r.service.as_ref()).map(|s| s.name.clone()),
        denial,
        route: route.map(|r| r.id.clone()),
    }))
}

fn s(v: &str) -> Value {
    Value::Str(v.to_string())
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
    let name = match prefix {
        Some(p) => format!("{} {p}", r.method),
        None => r.method.clone(),
    };
    let (host, port) = split_authority(&r.host);
    let mut attributes = vec![
        ("http.request.method", s(&r.method)),
        ("url.path", s(path_of(&r.uri))),
        ("url.scheme", s(if r.tls { "https" } else { "http" })),
        ("http.response.status_code", Value::Int(i64::from(r.status))),
        ("network.protocol.version", s(protocol_version(r.version))),
        ("client.address", s(&r.client.to_string())),
        ("server.address", s(host)),
        ("http.response.body.size", Value::Int(bytes as i64)),
    ];
    if let Some(p) = port {
        attributes.push(("server.port", Value::Int(p)));
    }
    if let Some(p) = prefix {
        attributes.push(("http.route", s(p)));
    }
    if let Some(id) = &t.route {
        attributes.push(("gatehouse.route", s(id)));
    }
    if !r.user_agent.is_empty() {
        attributes.push(("user_agent.original", s(&r.user_agent)));
    }
    if let Some(svc) = &t.service {
        attributes.push(("gatehouse.service", s(svc)));
    }
    if !r.app.is_empty() {
        attributes.push(("gatehouse.app", s(&r.app)));
    }
    if let Some(d) = t.denial {
        attributes.push(("gatehouse.denial", s(d)));
    }
    if !r.upstream.is_empty() {
        attributes.push(("gatehouse.upstream.endpoint", s(&r.upstream)));
    }
    if let Some(id) = r.request_id.as_ref().and_then(|v| v.to_str().ok()) {
        attributes.push(("gatehouse.request_id", s(id)));
    }
    if let Some(code) = r.grpc_status {
        attributes.push(("rpc.system", s("grpc")));
        attributes.push(("rpc.grpc.status_code", Value::Int(i64::from(code))));
    }
    // Server spans: 5xx are errors, 4xx are the client's (semantic conventions).
    let error = (r.status >= 500).then(|| r.status.to_string());
    if let Some(e) = &error {
        attributes.push(("error.type", s(e)));
    }
    tracer.finish(SpanRecord {
        trace_id: t.ctx.trace_id,
        span_id: t.ctx.span_id,
        parent: t.ctx.parent,
        parent_remote: true,
        kind: Kind::Server,
        name,
        start: r.time,
        end: r.time + duration,
        attributes,
        error,
    });
}

/// An upstream attempt being traced: its span id, start, method (sampled requests only) and
/// connection.
pub(crate) struct Attempt {
    span_id: u64,
    start: SystemTime,
    method: Option<http::Method>,
    /// Whether the connection was reused, and whether its TLS session resumed.
    pub connection: Option<(bool, Option<bool>)>,
}

impl Attempt {
    /// Starts the attempt's span: its `traceparent` goes on the request (with `propagate`).
    #[inline(never)]
    pub(crate) fn begin<B>(tracer: &Tracer, ctx: &Ctx, request: &mut http::Request<B>) -> Box<Attempt> {
        let span_id = gatehouse_otel::span_id();
        if tracer.propagates() {
            ctx.inject(request.headers_mut(), span_id);
        }
        let method = ctx.sampled.then(|| request.method().clone());
        Box::new(Attempt { span_id, start: SystemTime::now(), method, connection: None })
    }

    /// Sends the attempt's client span (sampled requests only): the endpoint, the retry number,
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
        let Some(method) = &self.method else { return };
        let answer = answer.as_ref().map(|r| r.status().as_u16()).map_err(|f| &f.error);
        let method = method.as_str();
        let (host, port) = split_authority(&ep.authority);
        let mut attributes = vec![
            ("http.request.method", s(method)),
            ("server.address", s(host)),
            ("server.port", Value::Int(port.unwrap_or(i64::from(ep.addr.port())))),
            ("network.peer.address", s(&ep.addr.ip().to_string())),
            ("network.peer.port", Value::Int(i64::from(ep.addr.port()))),
            ("gatehouse.upstream", s(upstream)),
        ];
        if retry > 0 {
            attributes.push(("http.request.resend_count", Value::Int(retry as i64)));
        }
        if let Some((reused, resumed)) = self.connection {
            attributes.push(("gatehouse.connection.reused", Value::Bool(reused)));
            if let Some(resumed) = resumed {
                attributes.push(("tls.resumed", Value::Bool(resumed)));
            }
        }
        if ep.tls_name().is_some() {
            attributes.push(("url.scheme", s("https")));
        }
        let error = match answer {
            Ok(status) => {
                attributes.push(("http.response.status_code", Value::Int(i64::from(status))));
                // Client spans: 4xx and 5xx are errors.
                (status >= 400).then(|| status.to_string())
            }
            Err(e) => Some(e.to_string()),
        };
        if let Some(e) = &error {
            let kind = match answer {
                Ok(_) => e.clone(),
                Err(e) if e.is_timeout() => "timeout".into(),
                Err(_) => "upstream_error".into(),
            };
            attributes.push(("error.type", Value::Str(kind)));
        }
        tracer.finish(SpanRecord {
            trace_id: ctx.trace_id,
            span_id: self.span_id,
            parent: Some(ctx.span_id),
            parent_remote: false,
            kind: Kind::Client,
            name: method.to_string(),
            start: self.start,
            end: SystemTime::now(),
            attributes,
            error,
        });
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
