//! Select, attempt and retry phases: an endpoint chosen among those not tried yet, a lease on a
//! pooled or new connection, the request sent and its answer's head awaited (within the
//! request's deadline), the answer judged; another attempt when the failure allows it and the
//! budget (`retries`) is not spent.

use super::rewrite::{Prepared, Template};
use super::{Judge, Outcome};
use crate::body::ResponseBody;
use crate::error::ProxyError;
use crate::headers::{strip_hop_by_hop, Keep};
use crate::snapshot::{RouteEntry, Snapshot};
use crate::{ConnInfo, Shared};
use gatehouse_config::HostHeader;
use gatehouse_upstream::{
    EndpointState, Lease, Origin, RequestBody, Retry, SelectKey, SendFailure, Upstream, UpstreamBody, UpstreamError,
};
use http::header::{self, HeaderValue};
use http::{Request, Response};
use std::sync::Arc;
use std::time::Instant;

/// Most attempts one request may make (first try plus `retries`, which validation caps at 10).
const MAX_ATTEMPTS: usize = 11;

/// Tries endpoints until one answers or the retry budget is spent: the endpoint's answer, or
/// the last failure (none tried: no endpoint resolved, or none healthy).
#[allow(clippy::manual_async_fn)] // see `super::forward`
pub(super) fn attempts<'a>(
    shared: &'a Shared,
    snap: &'a Snapshot,
    route: &'a Arc<RouteEntry>,
    upstream: &'a Arc<Upstream>,
    conn: &'a ConnInfo,
    prepared: &'a mut Prepared,
    outcome: &'a mut Outcome,
) -> impl std::future::Future<Output = Result<Response<ResponseBody>, ProxyError>> + Send + 'a {
    async move {
        let settings = &upstream.settings;
        let Prepared { request: pending, template, replayable, upgrade, h2_downstream, key_uri, due_ms } = prepared;
        let (replayable, upgrade, h2_downstream, due_ms) = (*replayable, *upgrade, *h2_downstream, *due_ms);
        let select_headers =
            pending.as_ref().filter(|_| upstream.balancer_needs_headers()).map(|r| r.headers().clone());
        let empty = http::HeaderMap::new();
        let key =
            SelectKey { client_ip: conn.peer.ip(), uri: key_uri, headers: select_headers.as_ref().unwrap_or(&empty) };
        // Read once: the endpoints stay the same for every attempt, even if a new DNS answer is
        // published meanwhile.
        let members = upstream.members();
        let mut tried = [0usize; MAX_ATTEMPTS];
        let attempts = (settings.retries as usize + 1).min(MAX_ATTEMPTS);
        let mut last_error = None;
        // A retryable status answer, returned as it is if no other endpoint does better.
        let mut fallback: Option<Response<ResponseBody>> = None;
        for attempt in 0..attempts {
            // Select.
            let Some(idx) = upstream.select(&members, &key, &tried[..attempt]) else {
                break;
            };
            tried[attempt] = idx;
            if attempt > 0 {
                shared.stats.retries.inc();
            }
            let ep = &members.endpoints[idx].state;
            if snap.access_log.is_some() || outcome.trace.as_ref().is_some_and(|t| t.ctx.sampled) {
                outcome.endpoint = Some(ep.addr_text.clone());
            }
            let Some(mut request) = pending.take().or_else(|| rebuild(template)) else {
                break;
            };
            // Attempt: a lease on a pooled connection, else a new one (or HTTP/2 stream; boxed,
            // so the state of connecting does not size every request's future), then the
            // request sent and the answer's head awaited.
            upstream_host(&mut request, ep, route);
            // The attempt's trace context on the request, and its span when sampled (kept in the
            // request's trace record: nothing in the request's future).
            if let (Some(tracer), Some(t)) = (&snap.tracer, outcome.trace.as_deref_mut()) {
                crate::trace::Attempt::begin(tracer, t, &mut request);
            }
            let origin = Origin { client: conn.peer, local: conn.local };
            let acquired = match Lease::pooled(ep, settings, upgrade, origin) {
                Some(lease) => Ok(lease),
                None => Box::pin(Lease::open(ep, settings, upgrade, origin)).await,
            };
            if let (Some(span), Ok(lease)) = (outcome.trace.as_mut().and_then(|t| t.attempt.as_mut()), &acquired) {
                span.connection = Some((lease.reused, lease.tls_resumed()));
            }
            let sent_at = upstream.tracks_latency().then(Instant::now);
            let answer = match (acquired, due_ms) {
                // Never sent (`Retry::Unsent`): the same request can go elsewhere, whatever its method.
                (Err(error), _) => Err(SendFailure { error, request: Some(request) }),
                (Ok(lease), None) => lease.send(request, settings.read_timeout).await,
                (Ok(lease), Some(due)) => {
                    let left = std::time::Duration::from_millis(due.saturating_sub(gatehouse_clock::now_ms()));
                    // Dropping the attempt resets its HTTP/2 stream (or closes its connection).
                    let sent = Box::pin(tokio::time::timeout(left, lease.send(request, settings.read_timeout))).await;
                    within_deadline(sent, due)?
                }
            };
            if let (Some(tracer), Some(t)) = (&snap.tracer, outcome.trace.as_deref_mut()) {
                if let Some(span) = t.attempt.take() {
                    span.finish(tracer, &t.ctx, &upstream.name, ep, attempt, &answer);
                }
            }
            let failure = match answer {
                Ok(resp) => {
                    // Judge the answer.
                    let retry_status = attempt + 1 < attempts && template.is_some();
                    if judge(upstream, &members, idx, &resp, outcome, sent_at, retry_status) {
                        fallback = Some(respond(resp, false, h2_downstream));
                        continue;
                    }
                    return Ok(respond(resp, upgrade, h2_downstream));
                }
                Err(failure) => failure,
            };
            // Retry: what the next attempt may send, the request itself when it never left, or,
            // for an idempotent request without a body, the one that was sent.
            let again = match failure.error.retry() {
                Retry::Never => return Err(client_failure(failure.error, route.max_body)),
                Retry::Unsent => failure.request,
                Retry::IfIdempotent => failure.request.filter(|_| replayable),
            };
            upstream.record_failure(&members, idx);
            last_error = Some(ProxyError::Upstream { endpoint: ep.addr_text.to_string(), source: failure.error });
            match again {
                Some(request) => *pending = Some(request),
                None if template.is_none() => break,
                None => {}
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

/// `Host` naming the endpoint, by the route's `host_header: upstream`.
#[inline]
fn upstream_host(request: &mut Request<RequestBody>, ep: &EndpointState, route: &RouteEntry) {
    if route.host_header == HostHeader::Upstream {
        if let Ok(v) = HeaderValue::try_from(&*ep.authority) {
            request.headers_mut().insert(header::HOST, v);
        }
    }
}

/// An attempt bounded by the request's deadline `due`: its answer, or the deadline passed.
#[inline]
fn within_deadline<T>(
    sent: Result<Result<T, SendFailure>, tokio::time::error::Elapsed>,
    due: u64,
) -> Result<Result<T, SendFailure>, ProxyError> {
    match sent {
        // Both bounds passed before the task ran again (a busy worker): the deadline, the
        // earlier one, is why.
        Ok(Err(failure)) if failure.error.is_timeout() && gatehouse_clock::now_ms() >= due => {
            Err(ProxyError::DeadlineExceeded)
        }
        Ok(answer) => Ok(answer),
        Err(_) => Err(ProxyError::DeadlineExceeded),
    }
}

/// Judges endpoint `idx`'s answer: its status (and a gRPC status in a trailers-only head) counted
/// for the endpoint's health; whether another endpoint is tried (`retry_on_status` lists the
/// status, and `may_retry`) rather than the answer given to the client.
#[inline(always)]
fn judge(
    upstream: &Arc<Upstream>,
    members: &gatehouse_upstream::Members,
    idx: usize,
    resp: &Response<UpstreamBody>,
    outcome: &mut Outcome,
    sent_at: Option<Instant>,
    may_retry: bool,
) -> bool {
    let settings = &upstream.settings;
    let ep = &members.endpoints[idx].state;
    let status = resp.status().as_u16();
    // A gRPC status the upstream counts as a failure: in a trailers-only head now, or in the
    // trailers later (`ResponseBody` reports it).
    let grpc_judged = outcome.grpc && settings.grpc_failures != 0 && status < 500;
    let head_code = grpc_judged.then(|| crate::grpc::status_of(resp.headers())).flatten();
    let grpc_failed = head_code.is_some_and(|c| upstream.grpc_failure(c));
    // Judged when its trailers come, not now.
    let later = grpc_judged && head_code.is_none();
    if !later {
        upstream.record_outcome(members, idx, status >= 500 || grpc_failed);
    }
    if settings.retry_on_status.contains(&status) || grpc_failed {
        ep.record_failure(settings.eject_after, settings.eject_for);
        if !grpc_failed && may_retry {
            return true;
        }
    } else if later {
        let judge: Judge = Box::new((upstream.clone(), ep.clone()));
        outcome.judge = Some(judge);
    } else {
        ep.record_success(sent_at.map(|t| t.elapsed()));
    }
    false
}

/// The answer to a request whose own side failed while it was being forwarded.
fn client_failure(e: UpstreamError, limit: u64) -> ProxyError {
    match e {
        UpstreamError::BodyTooLarge => ProxyError::BodyTooLarge { limit },
        UpstreamError::ClientTimeout => ProxyError::ClientTimeout,
        _ => ProxyError::BadRequest("client body ended early"),
    }
}

fn rebuild(template: &Option<Template>) -> Option<Request<RequestBody>> {
    let (method, uri, headers) = template.as_ref()?;
    let mut req = Request::new(RequestBody::empty());
    *req.method_mut() = method.clone();
    *req.uri_mut() = uri.clone();
    *req.headers_mut() = headers.clone();
    Some(req)
}

/// The endpoint's answer for the client: hop-by-hop headers gone, and for a client on HTTP/2 every
/// header in the map. `upgrade`: the request switches protocols, so a 101 keeps its `Upgrade`.
fn respond(resp: Response<UpstreamBody>, upgrade: bool, h2_downstream: bool) -> Response<ResponseBody> {
    let switching = upgrade && resp.status() == http::StatusCode::SWITCHING_PROTOCOLS;
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
