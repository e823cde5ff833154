//! Rewrite phase: the request as the endpoint gets it (target, headers, `Host`), its deadline,
//! its body bounded, and what a retry and the balancer need kept of it; the mirror's copy.

use super::admit::Admission;
use super::Outcome;
use crate::error::ProxyError;
use crate::headers::{add_forwarding, strip_hop_by_hop, upstream_target, Keep};
use crate::snapshot::{RouteEntry, Snapshot};
use crate::{ClientCert, ConnInfo};
use bytes::Bytes;
use gatehouse_config::HostHeader;
use gatehouse_plugins::Admitted;
use gatehouse_upstream::{Protocol, RequestBody, Upstream};
use http::header::{self, HeaderValue};
use http::request::Parts;
use http::{Method, Request, Version};
use http_body::Body;

/// The request ready to go, and what the attempts need beside it.
pub(super) struct Prepared {
    /// The request for the next attempt: the first, or one a failed attempt gave back.
    pub(super) request: Option<Request<RequestBody>>,
    /// Method, target and headers of the request, to send it again; kept only when a replay may
    /// happen and the request cannot be had back from the failed attempt (see [`template`]).
    pub(super) template: Option<Template>,
    /// Whether the request may be sent again after it was sent: idempotent, with no body, no switch.
    pub(super) replayable: bool,
    /// The request switches protocols (a WebSocket).
    pub(super) upgrade: bool,
    /// The client speaks HTTP/2 or HTTP/3: its answer's head goes as a map.
    pub(super) h2_downstream: bool,
    /// The path and query the balancer hashes, when it hashes them.
    pub(super) key_uri: String,
    /// When the request's time is up, on [`gatehouse_clock::now_ms`].
    pub(super) due_ms: Option<u64>,
}

/// A request's head kept to send it again.
pub(super) type Template = (Method, http::Uri, http::HeaderMap);

/// Rewrites the admitted request for the endpoint of `upstream` (the route's, or the one its split chose): `target` (see [`target`]), hop-by-hop headers gone, forwarding and client-certificate headers added, the
/// service's request rewrite, `Host`; its deadline (`stream_timeout`, `grpc-timeout`) and its
/// body bounded by `max_body` and the body read timeout.
#[inline(always)] // one caller; its result is built in the caller's state, not copied there
pub(super) fn rewrite<B>(
    snap: &Snapshot,
    (route, upstream): (&RouteEntry, &Upstream),
    conn: &ConnInfo,
    (mut parts, body): (Parts, B),
    admission: Admission<'_>,
    target: http::Uri,
    outcome: &mut Outcome,
) -> Prepared
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<gatehouse_upstream::BoxError>,
{
    let h2_downstream = matches!(parts.version, Version::HTTP_2 | Version::HTTP_3);
    let Admission { client_cert, upgrade, .. } = admission;
    let key_uri = if upstream.balancer_needs_uri() {
        target.path_and_query().map_or("/", |p| p.as_str()).to_string()
    } else {
        String::new()
    };
    rewrite_headers(&mut parts.headers, snap, route, conn, outcome.admitted.as_ref(), upgrade, h2_downstream);
    if let Some(verified) = client_cert {
        client_cert_headers(&mut parts.headers, verified);
    }
    host_header(&mut parts, &route.host_header);
    parts.uri = target;
    // HTTP/2 towards the endpoint is made of it when the connection turns out to be one.
    parts.version = Version::HTTP_11;
    let due_ms = deadline(route, &parts.headers, outcome.grpc);
    outcome.due_ms = due_ms;
    // A gRPC stream may pause as long as the call lasts: what bounds a silent client is the
    // upstream's wait for the answer, counted from the request's last part.
    let idle = if outcome.grpc { std::time::Duration::MAX } else { conn.body_timeout };
    let decode = match &route.compression {
        Some(c) if c.decompress_requests && !body.is_end_stream() => crate::compress::request_coding(&parts.headers),
        _ => None,
    };
    let mut body = match (outcome.web, decode) {
        (Some(web), _) if web.text_in => {
            RequestBody::streaming(crate::grpc_web::TextBody::new(Box::pin(body)), route.max_body, idle)
        }
        (_, Some(coding)) => {
            // The endpoint gets the decoded body, chunked; `max_body` bounds it decoded.
            parts.headers.remove(header::CONTENT_ENCODING);
            parts.headers.remove(header::CONTENT_LENGTH);
            RequestBody::streaming(crate::compress::Decoded::new(body, coding), route.max_body, idle)
        }
        _ => RequestBody::streaming(body, route.max_body, idle),
    }
    .until(due_ms);
    if let (Some(mirror), false) = (&route.mirror, upgrade) {
        let origin = gatehouse_upstream::Origin { client: conn.peer, local: conn.local };
        body = crate::mirror::copy(mirror, &parts, body, origin);
    }
    let replayable = idempotent(&parts.method) && body.is_empty() && !upgrade;
    let template = template(&parts, upstream, replayable);
    let request = Some(Request::from_parts(parts, body));
    Prepared { request, template, replayable, upgrade, h2_downstream, key_uri, due_ms }
}

/// The target the endpoint gets: the path by the route's rewrite (`strip_prefix`, `rewrite`), an
/// app key cut out of it, the query kept.
#[inline(always)] // one caller, on every request
pub(super) fn target(route: &RouteEntry, parts: &Parts, admission: &Admission<'_>) -> Result<http::Uri, ProxyError> {
    upstream_target(&route.rewrite, route.prefix_len, &parts.uri, &admission.cut).map_err(ProxyError::BadRequest)
}

/// When a request's time is up: the route's `stream_timeout`, shortened by a gRPC call's own
/// `grpc-timeout`.
#[inline]
fn deadline(route: &RouteEntry, headers: &http::HeaderMap, grpc: bool) -> Option<u64> {
    let limit = match (route.stream_timeout, grpc.then(|| crate::grpc::timeout(headers)).flatten()) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    limit.map(|d| gatehouse_clock::now_ms().saturating_add(gatehouse_clock::millis(d)))
}

/// A copy for replay, only when a replay may happen and the request cannot be had back from the
/// failed attempt: an HTTP/1.1 attempt that fails hands back the request it sent (see
/// `SendFailure::request`), while HTTP/2 consumes it, and a retried status answer needs it anew.
#[inline]
fn template(parts: &Parts, upstream: &Upstream, replayable: bool) -> Option<Template> {
    let settings = &upstream.settings;
    (replayable
        && settings.retries > 0
        && (settings.protocol != Protocol::Http1 || !settings.retry_on_status.is_empty()))
    .then(|| (parts.method.clone(), parts.uri.clone(), parts.headers.clone()))
}

fn idempotent(m: &Method) -> bool {
    matches!(*m, Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE)
}

/// The request's headers for the endpoint: hop-by-hop ones gone, the forwarding ones added, the
/// service's rewrite applied.
#[inline]
fn rewrite_headers(
    headers: &mut http::HeaderMap,
    snap: &Snapshot,
    route: &RouteEntry,
    conn: &ConnInfo,
    admitted: Option<&Admitted>,
    upgrade: bool,
    h2_downstream: bool,
) {
    strip_hop_by_hop(headers, Keep { upgrade, te_trailers: true });
    add_forwarding(headers, snap, conn, h2_downstream);
    if let (Some(svc), Some(a)) = (&route.service, admitted) {
        svc.rewrite_request(a, headers);
    }
}

/// What the endpoint learns of the client certificate; what the client sent under these names
/// never reaches it.
fn client_cert_headers(headers: &mut http::HeaderMap, verified: Option<&ClientCert>) {
    headers.remove("x-client-cert-subject");
    let verify = match verified {
        Some(c) => {
            if let Ok(v) = HeaderValue::try_from(&*c.subject) {
                headers.insert("x-client-cert-subject", v);
            }
            "SUCCESS"
        }
        None => "NONE",
    };
    headers.insert("x-client-verify", HeaderValue::from_static(verify));
}

/// `Host` towards the endpoint by the route's `host_header` rule (the `upstream` rule is applied
/// per attempt, since it names the endpoint chosen).
#[inline]
fn host_header(parts: &mut Parts, rule: &HostHeader) {
    match rule {
        HostHeader::Literal(h) => {
            if let Ok(v) = HeaderValue::try_from(h.as_str()) {
                parts.headers.insert(header::HOST, v);
            }
        }
        // Only HTTP/2 and absolute-form requests carry the host in the target; the others were
        // routed by their `Host`, so it is there.
        HostHeader::Preserve if parts.uri.authority().is_some() && !parts.headers.contains_key(header::HOST) => {
            if let Some(v) = parts.uri.authority().and_then(|a| HeaderValue::try_from(a.as_str()).ok()) {
                parts.headers.insert(header::HOST, v);
            }
        }
        _ => {}
    }
}
