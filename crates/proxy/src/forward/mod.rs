//! Forward stage: each request through its phases, in this order (the stage table of
//! docs/architecture.md, "The forward stage"):
//!
//! ```text
//! validate  id, path normalized once, log captured, gRPC or gRPC-Web told   (this file)
//! route     host checked, router lookup; a split's upstream chosen             route.rs
//! admit     HTTPS, client certificate, body limit, switch; service: keys,    admit.rs
//!           JWT, addresses, grants, ACL, rate limits
//! rewrite   target, headers, Host, deadline, body bounds, replay template,    rewrite.rs
//!           the mirror's copy
//! select    an endpoint not tried yet                                         attempt.rs
//! attempt   lease (pooled or new), send, head awaited within the deadline     attempt.rs
//! retry     judged: answer, or another endpoint when the failure allows it    attempt.rs
//! respond   failure → ProxyError's response; gRPC(-Web) answer bound;       (this file)
//!           service's response rewrite, sticky cookie, request id echoed,
//!           Alt-Svc, HSTS, CORS, compression
//! record    route counters, access log record handed to the body              (this file)
//! ```
//!
//! A retry goes to an endpoint not tried yet, and only when the request was certainly not sent,
//! or is idempotent with no body (so it can be replayed exactly).

mod admit;
mod attempt;
mod rewrite;
mod route;

use crate::body::{LogRecord, ResponseBody};
use crate::error::ProxyError;
use crate::headers::ResponseHeaders;
use crate::path::PathState;
use crate::snapshot::{RouteEntry, Snapshot};
use crate::{ConnInfo, Shared};
use bytes::Bytes;
use gatehouse_plugins::{Admitted, EditHeaders};
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, Version};
use http_body::Body;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

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
        // The client's trace context, taken off the request before anything else reads it.
        let trace = snap.tracer.as_ref().map(|t| crate::trace::begin(t, req.headers_mut(), &conn));
        let sampled = trace.as_ref().is_some_and(|t| t.ctx.sampled);
        let (path, request_id, log) = validate(&snap, &mut req, &conn, start, sampled);
        let mut outcome = Outcome::of(&mut req);
        outcome.trace = trace;
        let result = forward(&shared, &snap, req, path, &conn, &mut outcome).await;
        let resp = respond(&shared, &snap, &conn, result, &mut outcome, request_id);
        record(&snap, resp, &mut outcome, log, start)
    }
}

/// Validate phase: the request's id given (before anything can fail, so refusals and errors
/// carry it too), its path normalized (before the log captures the target, so it shows the path
/// every later phase judged), and its access log record started (also for a sampled trace's
/// server span).
#[inline(always)] // one caller, on every request
fn validate<B>(
    snap: &Snapshot,
    req: &mut Request<B>,
    conn: &ConnInfo,
    start: Instant,
    sampled: bool,
) -> (PathState, Option<HeaderValue>, Option<Box<LogRecord>>) {
    let request_id = snap.request_ids.as_ref().map(|ids| ids.assign(req.headers_mut()));
    let path = crate::path::normalize(req, snap.paths);
    let log = match (&snap.access_log, sampled) {
        (None, false) => None,
        (log, _) => Some(capture(log.as_ref(), req, conn, start, request_id.clone())),
    };
    (path, request_id, log)
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
        if let (Some(board), false) = (&snap.acme, conn.tls) {
            if let Some(token) = crate::acme::token(req.method(), req.uri().path()) {
                return crate::acme::answer(board.as_ref(), token).await;
            }
        }
        let route = route::route(snap, &mut req, path, outcome)?;
        outcome.route = Some(route.clone());
        let (mut parts, body) = req.into_parts();
        let upstream = match &route.split {
            None => &route.upstream,
            Some(split) => {
                let choice = split.choose(&parts.headers, &parts.uri, conn.peer.ip());
                outcome.set_cookie = choice.set_cookie;
                choice.upstream
            }
        };
        let mut admission = admit::route_checks(route, upstream, &mut parts, conn)?;
        if let Some(cors) = &route.cors {
            // A preflight is answered here: before any credential, ACL or rate limit.
            if let Some(headers) = cors.preflight(&parts.method, &parts.headers) {
                // Not an answer of the upstream chosen: no sticky cookie names it.
                outcome.set_cookie = None;
                return Ok(preflight_answer(headers));
            }
            outcome.cors = Some(parts.headers.get(header::ORIGIN).cloned());
        }
        if let (Some(policy), false) = (&route.compression, outcome.grpc) {
            outcome.compress = policy.negotiate(&parts.method, parts.version, &parts.headers);
        }
        if let Some(svc) = &route.service {
            admit::service(svc, snap, &mut parts, conn, &mut admission.cut, outcome).await?;
        }
        let target = rewrite::target(route, &parts, &admission)?;
        let mut prepared = rewrite::rewrite(snap, (route, upstream), conn, (parts, body), admission, target, outcome);
        attempt::attempts(shared, snap, route, upstream, conn, &mut prepared, outcome).await
    }
}

/// Respond phase: the answer for the client. A failure becomes its [`ProxyError`]'s response (a
/// gRPC status for a call); an endpoint's gRPC-Web answer is made gRPC-Web again, and a call's or
/// a request with a deadline has its body bound to them. Then the head as the client gets it:
/// the service's response rewrite (for an endpoint's answer), the request id echoed, `Alt-Svc`,
/// and over TLS `Strict-Transport-Security`.
#[inline(always)] // one caller, on every request
fn respond(
    shared: &Shared,
    snap: &Snapshot,
    conn: &ConnInfo,
    result: Result<Response<ResponseBody>, ProxyError>,
    outcome: &mut Outcome,
    request_id: Option<HeaderValue>,
) -> Response<ResponseBody> {
    let (grpc, web) = (outcome.grpc, outcome.web);
    let answered = result.is_ok();
    let resp = match result {
        Ok(mut resp) => {
            // A gRPC-Web call's answer goes back as gRPC-Web when it is a gRPC answer; any
            // other (an endpoint's error page) as it is.
            let web = web.filter(|&w| to_web(&mut resp, w));
            if grpc || outcome.due_ms.is_some() {
                let stats = outcome.route.as_ref().map(|r| r.stats.clone());
                resp.body_mut().bound(grpc, outcome.due_ms, stats, outcome.judge.take(), web);
            }
            resp
        }
        Err(e) => {
            match &e {
                ProxyError::BadRequest(_) => shared.stats.bad_requests.inc(),
                ProxyError::NoRoute => shared.stats.unrouted.inc(),
                ProxyError::Denied(d) => {
                    if let Some(t) = outcome.trace.as_mut() {
                        t.denial = Some(d.label());
                    }
                }
                _ => {}
            }
            let mut resp = if grpc { e.into_grpc_response() } else { e.into_response() };
            if let Some(w) = web {
                to_web(&mut resp, w);
            }
            resp
        }
    };
    let rewrite = match (&outcome.route, &outcome.admitted) {
        (Some(route), Some(a)) if answered => route.service.as_ref().map(|svc| (svc, a)),
        _ => None,
    };
    let echo = snap.request_ids.as_ref().zip(request_id);
    // Over TLS only (RFC 6797 §7.2): the site's, else the listener's.
    let hsts = match conn.tls {
        true => outcome.route.as_ref().and_then(|r| r.hsts.as_ref()).or(conn.hsts.as_ref()),
        false => None,
    };
    let cors = match (&outcome.route, outcome.cors.take()) {
        (Some(route), Some(origin)) => route.cors.as_ref().map(|p| (p, origin)),
        _ => None,
    };
    let compress = match (&outcome.route, outcome.compress.take()) {
        (Some(route), Some(choice)) if answered => route.compression.as_ref().map(|p| (p, choice)),
        _ => None,
    };
    let set_cookie = match outcome.set_cookie.take() {
        Some(member) if answered => sticky_cookie(outcome.route.as_deref(), member, conn.tls),
        _ => None,
    };
    if rewrite.is_none()
        && set_cookie.is_none()
        && echo.is_none()
        && conn.alt_svc.is_none()
        && hsts.is_none()
        && cors.is_none()
        && compress.is_none()
    {
        return resp;
    }
    let (mut parts, mut body) = resp.into_parts();
    if let Some((policy, _)) = &cors {
        // Whether the backend answered with a CORS policy of its own: read from its lines too.
        if !policy.replaces() {
            if let Some(raw) = body.take_raw_head() {
                raw.into_map(&mut parts.headers);
            }
        }
    }
    let mut headers = ResponseHeaders { map: &mut parts.headers, raw: body.raw_head_mut() };
    if let Some((svc, a)) = rewrite {
        svc.rewrite_response(a, &mut headers);
    }
    if let Some(cookie) = set_cookie {
        // The split's sticky cookie, beside any the endpoint set.
        headers.append(&header::SET_COOKIE, cookie);
    }
    if let Some((ids, id)) = echo {
        ids.echo(&mut headers, id);
    }
    if let Some(alt_svc) = &conn.alt_svc {
        headers.insert(&header::ALT_SVC, alt_svc.clone());
    }
    if let Some(hsts) = hsts {
        // The gateway's policy for the host, in place of any the endpoint sent.
        headers.insert(&header::STRICT_TRANSPORT_SECURITY, hsts.clone());
    }
    if let Some((policy, origin)) = cors {
        let own = !policy.replaces() && headers.map.contains_key(header::ACCESS_CONTROL_ALLOW_ORIGIN);
        policy.answer(origin.as_ref(), &mut headers, own);
    }
    if let Some((policy, choice)) = compress {
        compress_answer(policy, choice, &mut parts, &mut body);
    }
    Response::from_parts(parts, body)
}

/// The `Set-Cookie` that keeps a client on the upstream its route's split chose for it.
#[cold]
fn sticky_cookie(route: Option<&RouteEntry>, member: u32, tls: bool) -> Option<HeaderValue> {
    route?.split.as_ref()?.set_cookie(member, tls)
}

/// The route's compression applied to an endpoint's answer (the gateway's own are short): its
/// head read whole, then given `Vary` and, when compressed, the encoder.
#[inline(never)] // only on routes that compress
fn compress_answer(
    policy: &crate::compress::Policy,
    choice: crate::compress::Choice,
    parts: &mut http::response::Parts,
    body: &mut ResponseBody,
) {
    if body.full_bytes().is_some() {
        return;
    }
    if let Some(raw) = body.take_raw_head() {
        raw.into_map(&mut parts.headers);
    }
    // An answer already at its end (an HTTP/2 head that ends the stream) is sent as it is.
    let choice = match http_body::Body::is_end_stream(body) {
        true => crate::compress::Choice::Vary(None),
        false => choice,
    };
    if let Some(encoder) = policy.apply(parts.status, &mut parts.headers, choice) {
        body.encode(encoder);
    }
}

/// Record phase: the route's counters (status class, latency, a gRPC status in the head), and the
/// access log record completed and handed to the body, which writes it when the answer ends.
#[inline(always)] // one caller, on every request
fn record(
    snap: &Snapshot,
    mut resp: Response<ResponseBody>,
    outcome: &mut Outcome,
    log: Option<Box<LogRecord>>,
    start: Instant,
) -> Response<ResponseBody> {
    let status = resp.status().as_u16();
    // A trailers-only answer (the endpoint's, or the gateway's own) has its gRPC status in
    // the head; any other gets it from its trailers as they pass (`ResponseBody`).
    let head_grpc = if outcome.grpc { crate::grpc::status_of(resp.headers()) } else { None };
    if let Some(route) = &outcome.route {
        route.stats.record(status, gatehouse_clock::now().saturating_duration_since(start));
        if let Some(code) = head_grpc {
            route.stats.record_grpc(code);
        }
    }
    if let Some(mut r) = log {
        r.status = status;
        if let Some(route) = &outcome.route {
            r.route = Some(route.id.clone());
            r.upstream = outcome.endpoint.take();
        }
        if let Some(app) = outcome.admitted.as_ref().and_then(|a| a.app.as_ref()) {
            r.app = Some(app.id.clone());
        }
        r.keyless_uri = outcome.keyless_uri.take();
        r.grpc_status = head_grpc;
        if let Some(t) = outcome.trace.take() {
            r.trace = Some(crate::trace::record(snap, t, outcome));
        }
        resp.body_mut().set_record(r);
    }
    resp
}

/// What the request path learned, for metrics, the log and the trace.
pub(crate) struct Outcome {
    pub(crate) route: Option<Arc<RouteEntry>>,
    /// The last endpoint tried, for the access log and the server span (only kept for them).
    endpoint: Option<Arc<str>>,
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
    /// The request's trace, when `tracing` is on (boxed: off, it costs a word).
    pub(crate) trace: Option<Box<crate::trace::TraceRecord>>,
    /// On a route with a CORS policy, the request's `Origin` (none: not a cross-origin
    /// request), for the answer's `Access-Control-*` headers.
    cors: Option<Option<HeaderValue>>,
    /// On a route that compresses, what the request allows.
    compress: Option<crate::compress::Choice>,
    /// On a route that splits with a sticky cookie, the member of the split whose cookie keeps
    /// the client on the upstream it got (the request did not carry it).
    set_cookie: Option<u32>,
}

impl Outcome {
    /// Nothing learned yet but what the request is: a gRPC call (POSTs only: any other request
    /// costs no header lookup), or a gRPC-Web one made a gRPC call's.
    #[inline(always)] // one caller, on every request
    fn of<B>(req: &mut Request<B>) -> Outcome {
        let (grpc, web) = if req.method() == Method::POST { call_kind(req) } else { (false, None) };
        Outcome {
            route: None,
            endpoint: None,
            admitted: None,
            keyless_uri: None,
            grpc,
            web,
            due_ms: None,
            judge: None,
            trace: None,
            cors: None,
            compress: None,
            set_cookie: None,
        }
    }
}

/// The gateway's answer to a preflight: 204 with the policy's headers (a refused preflight has
/// no `Access-Control-Allow-*` header).
#[cold]
fn preflight_answer(headers: http::HeaderMap) -> Response<ResponseBody> {
    let mut resp = Response::new(ResponseBody::empty());
    *resp.status_mut() = http::StatusCode::NO_CONTENT;
    *resp.headers_mut() = headers;
    resp
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
    log: Option<&gatehouse_telemetry::access_log::AccessLog>,
    req: &Request<B>,
    conn: &ConnInfo,
    start: Instant,
    request_id: Option<HeaderValue>,
) -> Box<LogRecord> {
    let h = |name: header::HeaderName| req.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("");
    let uri = req.uri();
    let host = uri.authority().map_or_else(|| h(header::HOST), |a| a.as_str());
    // The referer is the access log's only (the server span has no attribute for it).
    let referer = if log.is_some() { h(header::REFERER) } else { "" };
    let user_agent = h(header::USER_AGENT);
    // As the client wrote it in HTTP/1.x; HTTP/2 targets carry scheme and authority, which the
    // log shows as the path only (the host has its own field).
    let (scheme, authority) = match req.version() {
        Version::HTTP_2 | Version::HTTP_3 => (None, None),
        _ => (uri.scheme_str(), uri.authority().map(|a| a.as_str())),
    };
    let (path, query) = (uri.path(), uri.query());
    let method = req.method().as_str();
    // One buffer for the five, sized once.
    let mut text = String::with_capacity(
        method.len()
            + scheme.map_or(0, |s| s.len() + 3)
            + authority.map_or(0, str::len)
            + path.len()
            + query.map_or(0, |q| q.len() + 1)
            + host.len()
            + referer.len()
            + user_agent.len(),
    );
    let mut ends = [0u32; 5];
    text.push_str(method);
    ends[0] = text.len() as u32;
    if let Some(s) = scheme {
        text.push_str(s);
        text.push_str("://");
    }
    text.push_str(authority.unwrap_or(""));
    text.push_str(path);
    if let Some(q) = query {
        text.push('?');
        text.push_str(q);
    }
    ends[1] = text.len() as u32;
    text.push_str(host);
    ends[2] = text.len() as u32;
    text.push_str(referer);
    ends[3] = text.len() as u32;
    text.push_str(user_agent);
    ends[4] = text.len() as u32;
    Box::new(LogRecord {
        log: log.cloned(),
        tls: conn.tls,
        client: conn.peer.ip(),
        time: SystemTime::now(),
        start,
        text,
        ends,
        keyless_uri: None,
        version: version_text(req.version()),
        status: 0,
        upstream: None,
        route: None,
        app: None,
        request_id,
        grpc_status: None,
        trace: None,
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
