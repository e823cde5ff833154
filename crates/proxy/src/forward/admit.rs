//! Admit phase: what the route asks of the connection and the request before anything is
//! forwarded (HTTPS, a client certificate, a body within its limit, a protocol switch it can
//! carry), then, for a service, the API gateway's Admit stage (app key or JWT, addresses, grants,
//! ACL, rate limits).

use super::route::request_host;
use super::Outcome;
use crate::error::ProxyError;
use crate::headers::{keyless_target, wants_upgrade};
use crate::snapshot::{RouteEntry, Snapshot};
use crate::{ClientCert, ConnInfo};
use gatehouse_plugins::app_key::PathCut;
use gatehouse_plugins::ServiceGate;
use gatehouse_upstream::{Protocol, Upstream};
use http::request::Parts;
use http::{header, Method, Version};

/// What admission found: the verified client certificate (with client certificates on; `None`
/// inside where optional and absent), whether the request switches protocols, and where an app
/// key was cut out of the path.
pub(super) struct Admission<'c> {
    pub(super) client_cert: Option<Option<&'c ClientCert>>,
    pub(super) upgrade: bool,
    pub(super) cut: PathCut,
}

/// Admits the request to `route` as far as the route itself asks, or says why not; a service's
/// own Admit stage follows ([`service`]). A WebSocket over HTTP/2 becomes the `GET` of its
/// HTTP/1.1 handshake here (the log keeps the client's CONNECT).
#[inline(always)] // one caller, on every request
pub(super) fn route_checks<'c>(
    route: &RouteEntry,
    upstream: &Upstream,
    parts: &mut Parts,
    conn: &'c ConnInfo,
) -> Result<Admission<'c>, ProxyError> {
    let client_cert = gate(route, parts, conn)?;
    let upgrade = match parts.version {
        Version::HTTP_2 => h2_upgrade(parts, upstream.settings.protocol)?,
        // No extended CONNECT (RFC 9220) over HTTP/3 yet: a CONNECT is refused below.
        Version::HTTP_3 => false,
        _ => upstream.settings.protocol != Protocol::Http2 && wants_upgrade(&parts.headers),
    };
    if upgrade && parts.version == Version::HTTP_2 {
        parts.method = Method::GET;
    }
    Ok(Admission { client_cert, upgrade, cut: None })
}

/// A service's Admit stage (app key or JWT, addresses, grants, ACL, rate limits): what it found
/// kept for the rewrite and the log, or its refusal. An app key cut out of the target leaves the
/// log the target without it.
#[allow(clippy::manual_async_fn)] // see `super::forward`
pub(super) fn service<'a>(
    svc: &'a ServiceGate,
    snap: &'a Snapshot,
    parts: &'a mut Parts,
    conn: &'a ConnInfo,
    cut: &'a mut PathCut,
    outcome: &'a mut Outcome,
) -> impl std::future::Future<Output = Result<(), ProxyError>> + Send + 'a {
    async move {
        let len = parts.uri.path_and_query().map_or(0, |p| p.as_str().len());
        let admitted = svc.admit(&snap.gateway, parts, conn.peer.ip(), cut).await;
        let changed = cut.is_some() || parts.uri.path_and_query().map_or(0, |p| p.as_str().len()) != len;
        if changed && snap.access_log.is_some() {
            outcome.keyless_uri = Some(keyless_target(&parts.uri, cut));
        }
        outcome.admitted = Some(admitted.map_err(ProxyError::Denied)?);
        Ok(())
    }
}

/// What the route asks of the connection and the request before anything is forwarded: HTTPS
/// (a redirect), a client certificate verified for its site, a body within its limit. With
/// client certificates on, the verified one (`None` where optional and absent).
#[inline(always)] // one caller, on every request
fn gate<'c>(
    route: &RouteEntry,
    parts: &Parts,
    conn: &'c ConnInfo,
) -> Result<Option<Option<&'c ClientCert>>, ProxyError> {
    if let (Some(port), false) = (route.https_redirect, conn.tls) {
        return Err(redirect(parts, port));
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
    let declared = match parts.headers.get(header::CONTENT_LENGTH) {
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

/// The redirect of a plain-HTTP request to an HTTPS-only site.
#[cold]
fn redirect(parts: &Parts, port: u16) -> ProxyError {
    let host = request_host(&parts.uri, &parts.headers, parts.version).ok().flatten().unwrap_or("");
    ProxyError::RedirectHttps(https_location(host, port, &parts.uri))
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

/// Whether an HTTP/2 request is a WebSocket's extended CONNECT, made an upgrade by the server
/// (`websocket::to_upgrade`): HTTP/2 forbids `Upgrade`, so only those have it. Any other CONNECT,
/// and that one to an HTTP/2 upstream, is not forwarded.
#[inline(never)]
fn h2_upgrade(parts: &Parts, protocol: Protocol) -> Result<bool, ProxyError> {
    if parts.method != Method::CONNECT {
        return Ok(false);
    }
    match (protocol, wants_upgrade(&parts.headers)) {
        (Protocol::Http2, true) => Err(ProxyError::NotForwarded("a WebSocket over HTTP/2 to an HTTP/2 upstream")),
        (_, true) => Ok(true),
        (_, false) => Err(ProxyError::NotForwarded("CONNECT")),
    }
}
