//! Route phase: the host checked, then the router's match for host and normalized path.

use super::Outcome;
use crate::error::ProxyError;
use crate::headers::valid_host;
use crate::path::PathState;
use crate::snapshot::{RouteEntry, Snapshot};
use http::{header, Request, Version};
use std::sync::Arc;

/// The route of a request: its host checked, then the router's match for host and normalized
/// path. A route that takes paths as sent (`normalize_path: false`) gets the client's target
/// back, and only when that selects it too; a path the normalizer refused goes nowhere else.
#[inline(always)] // one caller, on every request
pub(super) fn route<'s, B>(
    snap: &'s Snapshot,
    req: &mut Request<B>,
    path: PathState,
    outcome: &mut Outcome,
) -> Result<&'s Arc<RouteEntry>, ProxyError> {
    let host = request_host(req.uri(), req.headers(), req.version())?;
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

/// The host a request is for: the authority of an absolute-form or HTTP/2 target, else `Host`.
#[inline]
pub(super) fn request_host<'r>(
    uri: &'r http::Uri,
    headers: &'r http::HeaderMap,
    version: Version,
) -> Result<Option<&'r str>, ProxyError> {
    if let Some(a) = uri.authority() {
        return Ok(Some(a.as_str()));
    }
    let mut hosts = headers.get_all(header::HOST).iter();
    match (hosts.next(), hosts.next()) {
        (Some(_), Some(_)) => Err(ProxyError::BadRequest("several Host headers")),
        (Some(v), None) => v.to_str().map(Some).map_err(|_| ProxyError::BadRequest("invalid Host header")),
        (None, _) if version == Version::HTTP_11 => Err(ProxyError::BadRequest("missing Host header")),
        (None, _) => Ok(None),
    }
}
