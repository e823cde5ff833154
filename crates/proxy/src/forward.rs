//! Forward stage: validate, route, rewrite, then try endpoints until one answers or the retry budget
//! is spent. A retry goes to an endpoint not tried yet, and only when the request was certainly not
//! sent, or is idempotent with no body (so it can be replayed exactly).

use crate::body::{LogRecord, ResponseBody};
use crate::error::ProxyError;
use crate::headers::{
    add_forwarding, keyless_target, strip_hop_by_hop, upstream_target, valid_host, wants_upgrade, Keep, ResponseHeaders,
};
use crate::path::PathState;
use crate::snapshot::{RouteEntry, Snapshot};
use crate::{ClientCert, ConnInfo, Shared};
use bytes::Bytes;
use gatehouse_config::HostHeader;
use gatehouse_plugins::{Admitted, EditHeaders};
use gatehouse_upstream::{Lease, Origin, Protocol, RequestBody, Retry, SelectKey, UpstreamBody, UpstreamError};
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, Version};
use http_body::Body;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

/// Most attempts one request may make (first try plus `retries`, which validation caps at 10).
const MAX_ATTEMPTS: usize = 11;

/// Answers one client request.
///
/// `B` is the client's body, from the HTTP/1.1 server or from hyper's HTTP/2 server. A protocol
/// switch (101) is left to the server that owns the client connection: the response body then
/// holds the endpoint's connection, which [`ResponseBody::take_upgrade`] hands over.
#[allow(clippy::manual_async_fn)] // see `forward`
pub fn handle<B>(
    shared: Arc<Shared>,
    mut req: Request<B>,
    conn: Arc<ConnInfo>,
) -> impl std::future::Future<Output = Response<ResponseBody>> + Send
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<gatehouse_upstream::BoxError>,
{
    async move {
        let start = gatehouse_clock::now();
        let snap = shared.snapshot.load_full();
        // Before anything can fail, so refusals and errors carry the id too.
        let request_id = snap.request_ids.as_ref().map(|ids| ids.assign(req.headers_mut()));
        // Before the log captures the target, so it shows the path every later stage judged.
        let path = crate::path::normalize(&mut req, snap.paths);
        let record = snap.access_log.as_ref().map(|log| capture(log, &req, &conn, start, request_id.clone()));
        // Calls are POSTs: any other request costs no header lookup.
        let (grpc, web) = if req.method() == Method::POST { call_kind(&mut req) } else { (false, None) };
        let mut outcome = Outcome {
            route: None,
            endpoint: None,
            admitted: None,
            keyless_uri: None,
            grpc,
            web,
            due_ms: None,
            judge: None,
        };
        let (rewrite, resp) = match forward(&shared, &snap, req, path, &conn, &mut outcome).await {
            Ok(mut resp) => {
                // A gRPC-Web call's answer goes back as gRPC-Web when it is a gRPC answer; any
                // other (an endpoint's error page) as it is.
                let web = web.filter(|&w| to_web(&mut resp, w));
                if grpc || outcome.due_ms.is_some() {
                    let stats = outcome.route.as_ref().map(|r| r.stats.clone());
                    resp.body_mut().bound(grpc, outcome.due_ms, stats, outcome.judge.take(), web);
                }
                let rewrite = match (&outcome.route, &outcome.admitted) {
                    (Some(route), Some(a)) => route.service.as_ref().map(|svc| (svc, a)),
                    _ => None,
                };
                (rewrite, resp)
            }
            Err(e) => {
                match e {
                    ProxyError::BadRequest(_) => shared.stats.bad_requests.inc(),
                    ProxyError::NoRoute => shared.stats.unrouted.inc(),
                    _ => {}
                }
                let mut resp = if grpc { e.into_grpc_response() } else { e.into_response() };
                if let Some(w) = web {
                    to_web(&mut resp, w);
                }
                (None, resp)
            }
        };
        let echo = snap.request_ids.as_ref().zip(request_id);
        let (mut parts, mut body) = resp.into_parts();
        if rewrite.is_some() || echo.is_some() || conn.alt_svc.is_some() {
            let mut headers = ResponseHeaders { map: &mut parts.headers, raw: body.raw_head_mut() };
            if let Some((svc, a)) = rewrite {
                svc.rewrite_response(a, &mut headers);
            }
            if let Some((ids, id)) = echo {
                ids.echo(&mut headers, id);
            }
            if let Some(alt_svc) = &conn.alt_svc {
                headers.insert(&header::ALT_SVC, alt_svc.clone());
            }
        }
        let mut resp = Response::from_parts(parts, body);
        let status = resp.status().as_u16();
        // A trailers-only answer (the endpoint's, or the gateway's own) has its gRPC status in
        // the head; any other gets it from its trailers as they pass (`ResponseBody`).
        let head_grpc = if grpc { crate::grpc::status_of(resp.headers()) } else { None };
        if let Some(route) = &outcome.route {
            route.stats.record(status, gatehouse_clock::now().saturating_duration_since(start));
            if let Some(code) = head_grpc {
                route.stats.record_grpc(code);
            }
        }
        if let Some(mut r) = record {
            r.status = status;
            if let Some(route) = &outcome.route {
                r.route = route.id.to_string();
                if let Some(addr) = outcome.endpoint.take() {
                    r.upstream = addr.into();
                }
            }
            if let Some(app) = outcome.admitted.as_ref().and_then(|a| a.app.as_ref()) {
                r.app = app.id.to_string();
            }
            if let Some(uri) = outcome.keyless_uri.take() {
                r.uri = uri;
            }
            r.grpc_status = head_grpc;
            resp.body_mut().set_record(r);
        }
        resp
    }
}

/// What the request path learned, for metrics and the log.
struct Outcome {
    route: Option<Arc<RouteEntry>>,
    /// The last endpoint tried, for the access log (only kept when there is one).
    endpoint: Option<Box<str>>,
    /// What the service's Admit stage found, for the response rewrite and the log.
    admitted: Option<Admitted>,
    /// The target without the app key the client put in it, for the log.
    keyless_uri: Option<String>,
    /// A gRPC call (answers of the gateway's own are gRPC statuses).
    grpc: bool,
    /// A gRPC-Web call, translated to gRPC (`grpc` is set too).
    web: Option<crate::grpc_web::Web>,
    /// When the request's time is up (`stream_timeout`, `grpc-timeout`), on
    /// [`gatehouse_clock::now_ms`].
    due_ms: Option<u64>,
    /// The upstream and endpoint of a gRPC call whose status in the trailers may count as the
    /// endpoint's failure (`passive_health.grpc_failures`).
    judge: Option<Judge>,
}

/// Who answered a gRPC call, to be judged by its status.
pub(crate) type Judge = Box<(Arc<gatehouse_upstream::Upstream>, Arc<gatehouse_upstream::EndpointState>)>;

/// Makes a gRPC answer's head a gRPC-Web one (the endpoint's lines passed unparsed are put in
/// the map first); whether it was a gRPC answer.
fn to_web(resp: &mut Response<ResponseBody>, web: crate::grpc_web::Web) -> bool {
    if let Some(raw) = resp.body_mut().take_raw_head() {
        raw.into_map(resp.headers_mut());
    }
    crate::grpc_web::to_web(resp.headers_mut(), web)
}

/// Whether a POST is a gRPC call (HTTP/2 only), or a gRPC-Web one (any version), whose head is
/// then made a gRPC call's.
fn call_kind<B>(req: &mut Request<B>) -> (bool, Option<crate::grpc_web::Web>) {
    if req.version() == Version::HTTP_2 && crate::grpc::is_call(req.headers()) {
        return (true, None);
    }
    let web = crate::grpc_web::of(req.headers());
    if web.is_some() {
        crate::grpc_web::to_grpc(req.headers_mut());
    }
    (web.is_some(), web)
}

fn capture<B>(
    log: &gatehouse_telemetry::access_log::AccessLog,
    req: &Request<B>,
    conn: &ConnInfo,
    start: Instant,
    request_id: Option<HeaderValue>,
) -> Box<LogRecord> {
    let h = |name: header::HeaderName| req.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    Box::new(LogRecord {
        log: log.clone(),
        client: conn.peer.ip(),
        time: SystemTime::now(),
        start,
        method: req.method().as_str().to_string(),
        // As the client wrote it in HTTP/1.x; HTTP/2 targets carry scheme and authority, which
        // the log shows as the path only (the host has its own field).
        uri: match (req.version(), req.uri().path_and_query()) {
            (Version::HTTP_2 | Version::HTTP_3, Some(pq)) => pq.as_str().to_string(),
            _ => req.uri().to_string(),
        },
        version: version_text(req.version()),
        host: req.uri().authority().map(|a| a.as_str().to_string()).unwrap_or_else(|| h(header::HOST)),
        referer: h(header::REFERER),
        user_agent: h(header::USER_AGENT),
        status: 0,
        upstream: String::new(),
        route: String::new(),
        app: String::new(),
        request_id,
        grpc_status: None,
    })
}

fn version_text(v: Version) -> &'static str {
    match v {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_11 => "HTTP/1.1",
        Version::HTTP_2 => "HTTP/2.0",
        _ => "HTTP/3.0",
    }
}

fn idempotent(m: &Method) -> bool {
    matches!(*m, Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE)
}

/// `https://host[:port]/path?query` for a plain-HTTP request to an HTTPS-only site.
fn https_location(host: &str, port: u16, uri: &http::Uri) -> String {
    // The host without its port; an IPv6 literal keeps its brackets.
    let name = match host.rfind(':') {
        Some(i) if !host[i..].contains(']') => &host[..i],
        _ => host,
    };
    let pq = uri.path_and_query().map_or("/", |p| p.as_str());
    if port == 443 {
        format!("https://{name}{pq}")
    } else {
        format!("https://{name}:{port}{pq}")
    }
}

/// The host a request is for: the authority of an absolute-form or HTTP/2 target, else `Host`.
fn request_host<B>(req: &Request<B>) -> Result<Option<&str>, ProxyError> {
    if let Some(a) = req.uri().authority() {
        return Ok(Some(a.as_str()));
    }
    let mut hosts = req.headers().get_all(header::HOST).iter();
    match (hosts.next(), hosts.next()) {
        (Some(_), Some(_)) => Err(ProxyError::BadRequest("several Host headers")),
        (Some(v), None) => v.to_str().map(Some).map_err(|_| ProxyError::BadRequest("invalid Host header")),
        (None, _) if req.version() == Version::HTTP_11 => Err(ProxyError::BadRequest("missing Host header")),
        (None, _) => Ok(None),
    }
}

// `handle` and `forward` return an `async move` block instead of being `async fn`s: an `async fn`
// keeps each argument twice in its state (as passed, and moved into its local), and the request
// is 240 bytes; the request path's future is allocated per request.
#[allow(clippy::manual_async_fn)]
fn forward<'a, B>(
    shared: &'a Shared,
    snap: &'a Snapshot,
    mut req: Request<B>,
    path: PathState,
    conn: &'a ConnInfo,
    outcome: &'a mut Outcome,
) -> impl std::future::Future<Output = Result<Response<ResponseBody>, ProxyError>> + Send + 'a
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<gatehouse_upstream::BoxError>,
{
    async move {
        let route = route(snap, &mut req, path, outcome)?;
        outcome.route = Some(route.clone());
        let client_cert = gate(route, &req, conn)?;
        let upstream = &route.upstream;
        let settings = &upstream.settings;
        // HTTP/2 and HTTP/3 clients: pseudo-headers, no hop-by-hop headers, the head as a map.
        let h2_downstream = matches!(req.version(), Version::HTTP_2 | Version::HTTP_3);
        let upgrade = match req.version() {
            Version::HTTP_2 => h2_upgrade(&req, settings.protocol)?,
            // No extended CONNECT (RFC 9220) over HTTP/3 yet: a CONNECT is refused below.
            Version::HTTP_3 => false,
            _ => settings.protocol != Protocol::Http2 && wants_upgrade(req.headers()),
        };

        let (mut parts, body) = req.into_parts();
        if upgrade && h2_downstream {
            // The handshake's method on HTTP/1.1; the log keeps the client's CONNECT.
            parts.method = Method::GET;
        }
        let mut cut = None;
        if let Some(svc) = &route.service {
            let len = parts.uri.path_and_query().map_or(0, |p| p.as_str().len());
            let admitted = svc.admit(&snap.gateway, &mut parts, conn.peer.ip(), &mut cut).await;
            let changed = cut.is_some() || parts.uri.path_and_query().map_or(0, |p| p.as_str().len()) != len;
            if changed && snap.access_log.is_some() {
                // The key was in the target: the log shows the target without it.
                outcome.keyless_uri = Some(keyless_target(&parts.uri, &cut));
            }
            outcome.admitted = Some(admitted.map_err(ProxyError::Denied)?);
        }
        let target =
            upstream_target(&route.rewrite, route.prefix_len, &parts.uri, &cut).map_err(ProxyError::BadRequest)?;
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
        // A request's time: the route's `stream_timeout`, shortened by a gRPC call's own.
        let limit = match (route.stream_timeout, outcome.grpc.then(|| crate::grpc::timeout(&parts.headers)).flatten()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let due_ms = limit.map(|d| gatehouse_clock::now_ms().saturating_add(gatehouse_clock::millis(d)));
        outcome.due_ms = due_ms;
        // A gRPC stream may pause as long as the call lasts: what bounds a silent client is the
        // upstream's wait for the answer, counted from the request's last part.
        let idle = if outcome.grpc { std::time::Duration::MAX } else { conn.body_timeout };
        let body = match outcome.web {
            Some(web) if web.text_in => {
                RequestBody::streaming(crate::grpc_web::TextBody::new(Box::pin(body)), route.max_body, idle)
            }
            _ => RequestBody::streaming(body, route.max_body, idle),
        }
        .until(due_ms);
        let method = parts.method.clone();
        let replayable = idempotent(&method) && body.is_empty() && !upgrade;
        // A copy for replay, only when a replay may happen and the request cannot be had back from the
        // failed attempt: an HTTP/1.1 attempt that fails hands back the request it sent (see
        // `SendFailure::request`), while HTTP/2 consumes it, and a retried status answer needs it anew.
        let template = (replayable
            && settings.retries > 0
            && (settings.protocol != Protocol::Http1 || !settings.retry_on_status.is_empty()))
        .then(|| (parts.method.clone(), parts.uri.clone(), parts.headers.clone()));
        let mut pending = Some(Request::from_parts(parts, body));

        let select_headers =
            pending.as_ref().filter(|_| upstream.balancer_needs_headers()).map(|r| r.headers().clone());
        let empty = http::HeaderMap::new();
        let key =
            SelectKey { client_ip: conn.peer.ip(), uri: &key_uri, headers: select_headers.as_ref().unwrap_or(&empty) };

        // Read once: the endpoints stay the same for every attempt, even if a new DNS answer is
        // published meanwhile.
        let members = upstream.members();
        let mut tried = [0usize; MAX_ATTEMPTS];
        let attempts = (settings.retries as usize + 1).min(MAX_ATTEMPTS);
        let mut last_error = None;
        // A retryable status answer, returned as it is if no other endpoint does better.
        let mut fallback: Option<Response<ResponseBody>> = None;
        for attempt in 0..attempts {
            let Some(idx) = upstream.select(&members, &key, &tried[..attempt]) else {
                break;
            };
            tried[attempt] = idx;
            if attempt > 0 {
                shared.stats.retries.inc();
            }
            let ep = &members.endpoints[idx].state;
            if snap.access_log.is_some() {
                outcome.endpoint = Some(ep.addr_text.clone());
            }
            let Some(mut request) = pending.take().or_else(|| rebuild(&template)) else {
                break;
            };
            if route.host_header == HostHeader::Upstream {
                if let Ok(v) = HeaderValue::try_from(&*ep.authority) {
                    request.headers_mut().insert(header::HOST, v);
                }
            }
            // A new connection (or HTTP/2) only when the pool has none; boxed, so the state of
            // connecting does not size every request's future.
            let origin = Origin { client: conn.peer, local: conn.local };
            let acquired = match Lease::pooled(ep, settings, upgrade, origin) {
                Some(lease) => Ok(lease),
                None => Box::pin(Lease::open(ep, settings, upgrade, origin)).await,
            };
            let lease = match acquired {
                Ok(lease) => lease,
                Err(e) => {
                    upstream.record_failure(&members, idx);
                    // Never sent (`Retry::Unsent`): the same request can go elsewhere, whatever its method.
                    debug_assert_eq!(e.retry(), Retry::Unsent);
                    last_error = Some(ProxyError::Upstream { endpoint: ep.addr_text.to_string(), source: e });
                    pending = Some(request);
                    continue;
                }
            };
            let sent_at = upstream.tracks_latency().then(Instant::now);
            let answer = match due_ms {
                None => lease.send(request, settings.read_timeout).await,
                Some(due) => {
                    let left = std::time::Duration::from_millis(due.saturating_sub(gatehouse_clock::now_ms()));
                    // Dropping the attempt resets its HTTP/2 stream (or closes its connection).
                    match Box::pin(tokio::time::timeout(left, lease.send(request, settings.read_timeout))).await {
                        // Both bounds passed before the task ran again (a busy worker): the
                        // deadline, the earlier one, is why.
                        Ok(Err(failure)) if failure.error.is_timeout() && gatehouse_clock::now_ms() >= due => {
                            return Err(ProxyError::DeadlineExceeded)
                        }
                        Ok(answer) => answer,
                        Err(_) => return Err(ProxyError::DeadlineExceeded),
                    }
                }
            };
            match answer {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    // A gRPC status the upstream counts as a failure: in a trailers-only head
                    // now, or in the trailers later (`ResponseBody` reports it).
                    let grpc_judged = outcome.grpc && settings.grpc_failures != 0 && status < 500;
                    let head_code = grpc_judged.then(|| crate::grpc::status_of(resp.headers())).flatten();
                    let grpc_failed = head_code.is_some_and(|c| upstream.grpc_failure(c));
                    // Judged when its trailers come, not now.
                    let later = grpc_judged && head_code.is_none();
                    if !later {
                        upstream.record_outcome(&members, idx, status >= 500 || grpc_failed);
                    }
                    if settings.retry_on_status.contains(&status) || grpc_failed {
                        ep.record_failure(settings.eject_after, settings.eject_for);
                        if !grpc_failed && attempt + 1 < attempts && template.is_some() {
                            fallback = Some(respond(resp, false, h2_downstream));
                            continue;
                        }
                    } else if later {
                        outcome.judge = Some(Box::new((route.upstream.clone(), ep.clone())));
                    } else {
                        ep.record_success(sent_at.map(|t| t.elapsed()));
                    }
                    let switching = upgrade && status == 101;
                    return Ok(respond(resp, switching, h2_downstream));
                }
                Err(failure) => {
                    // What the next attempt may send: the request itself when it never left, or, for
                    // an idempotent request without a body, the one that was sent.
                    let again = match failure.error.retry() {
                        Retry::Never => return Err(client_failure(failure.error, route.max_body)),
                        Retry::Unsent => failure.request,
                        Retry::IfIdempotent => failure.request.filter(|_| replayable),
                    };
                    upstream.record_failure(&members, idx);
                    last_error =
                        Some(ProxyError::Upstream { endpoint: ep.addr_text.to_string(), source: failure.error });
                    match again {
                        Some(request) => pending = Some(request),
                        None if template.is_none() => break,
                        None => {}
                    }
                }
            }
        }
        if let Some(resp) = fallback {
            return Ok(resp);
        }
        Err(last_error.unwrap_or_else(|| match members.endpoints.is_empty() {
            true => ProxyError::Unresolved { upstream: upstream.name.to_string(), why: members.unresolved.join("; ") },
            false => ProxyError::NoHealthyEndpoint { upstream: upstream.name.to_string() },
        }))
    }
}

/// Whether an HTTP/2 request is a WebSocket's extended CONNECT, made an upgrade by the server
/// (`websocket::to_upgrade`): HTTP/2 forbids `Upgrade`, so only those have it. Any other CONNECT,
/// and that one to an HTTP/2 upstream, is not forwarded.
#[inline(never)]
fn h2_upgrade<B>(req: &Request<B>, protocol: Protocol) -> Result<bool, ProxyError> {
    if req.method() != Method::CONNECT {
        return Ok(false);
    }
    match (protocol, wants_upgrade(req.headers())) {
        (Protocol::Http2, true) => Err(ProxyError::NotForwarded("a WebSocket over HTTP/2 to an HTTP/2 upstream")),
        (_, true) => Ok(true),
        (_, false) => Err(ProxyError::NotForwarded("CONNECT")),
    }
}

/// The answer to a request whose own side failed while it was being forwarded.
fn client_failure(e: UpstreamError, limit: u64) -> ProxyError {
    match e {
        UpstreamError::BodyTooLarge => ProxyError::BodyTooLarge { limit },
        UpstreamError::ClientTimeout => ProxyError::ClientTimeout,
        _ => ProxyError::BadRequest("client body ended early"),
    }
}

/// The route of a request: its host checked, then the router's match for host and normalized
/// path. A route that takes paths as sent (`normalize_path: false`) gets the client's target
/// back, and only when that selects it too; a path the normalizer refused goes nowhere else.
#[inline]
fn route<'s, B>(
    snap: &'s Snapshot,
    req: &mut Request<B>,
    path: PathState,
    outcome: &mut Outcome,
) -> Result<&'s Arc<RouteEntry>, ProxyError> {
    let host = request_host(req)?;
    if host.is_some_and(|h| !valid_host(h)) {
        return Err(ProxyError::BadRequest("invalid Host header"));
    }
    let host = host.unwrap_or("");
    let lookup = |path: &str| match snap.router.lookup(host, path) {
        Some(route) if route.service.as_ref().is_none_or(|s| s.owns(path)) => Ok(route),
        _ => Err(ProxyError::NoRoute),
    };
    match path {
        PathState::Same => lookup(req.uri().path()),
        PathState::Refused(why) if !snap.raw_routes => Err(ProxyError::BadRequest(why.reason())),
        PathState::Refused(why) => match lookup(req.uri().path()) {
            Ok(route) if !route.normalize_path => Ok(route),
            _ => Err(ProxyError::BadRequest(why.reason())),
        },
        PathState::Normalized { raw } => {
            let route = lookup(req.uri().path())?;
            if route.normalize_path {
                return Ok(route);
            }
            match lookup(raw.path()) {
                Ok(same) if Arc::ptr_eq(same, route) => {}
                _ => return Err(ProxyError::BadRequest("the path as sent and normalized select different routes")),
            }
            if snap.access_log.is_some() {
                outcome.keyless_uri = Some(raw.path_and_query().map_or("/", |pq| pq.as_str()).to_string());
            }
            *req.uri_mut() = *raw;
            Ok(route)
        }
    }
}

/// What the route asks of the connection and the request before anything is forwarded: HTTPS
/// (a redirect), a client certificate verified for its site, a body within its limit. With
/// client certificates on, the verified one (`None` where optional and absent).
#[inline]
fn gate<'c, B>(
    route: &RouteEntry,
    req: &Request<B>,
    conn: &'c ConnInfo,
) -> Result<Option<Option<&'c ClientCert>>, ProxyError> {
    if let (Some(port), false) = (route.https_redirect, conn.tls) {
        let host = request_host(req).ok().flatten().unwrap_or("");
        return Err(ProxyError::RedirectHttps(https_location(host, port, req.uri())));
    }
    let client_cert = match route.client_auth {
        None => None,
        Some(_) if !conn.tls => return Err(ProxyError::ClientCertRequired),
        Some(required) => {
            let verified = conn.client_cert.as_ref().filter(|c| c.site == route.site);
            if required && verified.is_none() {
                return Err(ProxyError::MisdirectedRequest);
            }
            Some(verified)
        }
    };
    let declared = match req.headers().get(header::CONTENT_LENGTH) {
        Some(v) => Some(
            v.to_str()
                .ok()
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or(ProxyError::BadRequest("invalid Content-Length"))?,
        ),
        None => None,
    };
    if declared.is_some_and(|n| n > route.max_body) {
        return Err(ProxyError::BodyTooLarge { limit: route.max_body });
    }
    Ok(client_cert)
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
fn host_header(parts: &mut http::request::Parts, rule: &HostHeader) {
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

fn rebuild(template: &Option<(Method, http::Uri, http::HeaderMap)>) -> Option<Request<RequestBody>> {
    let (method, uri, headers) = template.as_ref()?;
    let mut req = Request::new(RequestBody::empty());
    *req.method_mut() = method.clone();
    *req.uri_mut() = uri.clone();
    *req.headers_mut() = headers.clone();
    Some(req)
}

/// The endpoint's answer for the client: hop-by-hop headers gone, and for a client on HTTP/2 every
/// header in the map.
fn respond(resp: Response<UpstreamBody>, switching: bool, h2_downstream: bool) -> Response<ResponseBody> {
    let (mut parts, mut body) = resp.into_parts();
    if body.raw_head_mut().is_none() {
        strip_hop_by_hop(&mut parts.headers, Keep { upgrade: switching, te_trailers: false });
    } else if h2_downstream {
        // The lines left out as the head was read were the hop-by-hop ones.
        if let Some(raw) = body.take_raw_head() {
            raw.into_map(&mut parts.headers);
        }
    }
    // For a switch the body is empty but keeps the endpoint's connection for the tunnel.
    Response::from_parts(parts, ResponseBody::upstream(body))
}
