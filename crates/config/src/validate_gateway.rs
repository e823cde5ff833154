//! Validation of services, apps and plans: references between them, credentials, plugin settings,
//! and path clashes between services and site routes on the same host.

use crate::compile::check_host_pattern;
use crate::error::ValueError;
use crate::gateway::{Acl, App, AuthMethod, HeaderRewrite, JwtKey, LimitKey, LimitScope, RateLimit, Service};
use crate::model::{Config, HostHeader};
use crate::upstream::is_token;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Algorithms a JWT key may name.
pub const JWT_ALGORITHMS: &[&str] = &[
    "HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA",
];

pub(crate) fn validate(c: &Config, unread: &crate::schema::Unread, err: &mut impl FnMut(String, String)) {
    for (name, s) in &c.services {
        let p = format!("services.{name}");
        check_service_route(c, unread, &p, s, err);
        check_service_auth(&p, s, err);
        check_jwt_issuers(c, unread, &p, s, err);
        check_external(&p, s, err);
        let authenticated = !s.auth.0.is_empty();
        plugins(c, &p, &s.acl, &s.rate_limits, &s.headers, authenticated, err);
        if let Some(cors) = &s.cors {
            cors.check(&p, err);
        }
        if let Some(compression) = &s.compression {
            compression.check(&p, err);
        }
    }
    for (name, plan) in &c.plans {
        let p = format!("plans.{name}");
        plugins(c, &p, &plan.acl, &plan.rate_limits, &plan.headers, true, err);
    }
    validate_apps(c, unread, err);
    validate_circuit_breakers(c, err);
    path_clashes(c, err);
}

/// A service's path, upstream, stream timeout, hosts and Host header.
fn check_service_route(
    c: &Config,
    unread: &crate::schema::Unread,
    p: &str,
    s: &Service,
    err: &mut impl FnMut(String, String),
) {
    if !s.path.starts_with('/') {
        err(format!("{p}.path"), "must start with `/`".into());
    } else if s.path.contains("/~") || s.path.contains(['?', '#', '*']) {
        err(format!("{p}.path"), "a plain path prefix: no `/~`, `?`, `#` or `*`".into());
    }
    let known = |name: &str| c.upstreams.contains_key(name) || unread.has("upstreams", name);
    crate::split::check_destination(p, &s.upstream, s.sticky.as_ref(), s.mirror.as_ref(), known, err);
    if s.stream_timeout.is_some_and(|d| d.0.is_zero()) {
        err(format!("{p}.stream_timeout"), "must be more than 0 (leave it out for none)".into());
    }
    for (i, h) in s.hosts.iter().enumerate() {
        if let Err(e) = check_host_pattern(&h.to_ascii_lowercase()) {
            err(format!("{p}.hosts[{i}]"), e.to_string());
        }
    }
    if let HostHeader::Literal(h) = &s.host_header {
        if h.is_empty() || h.bytes().any(|b| b <= b' ' || b == 0x7f) {
            err(format!("{p}.host_header"), "must be `preserve`, `upstream` or a host name".into());
        }
    }
}

/// Where a service finds the app key and the JWT's app, and the header that names the app upstream.
fn check_service_auth(p: &str, s: &Service, err: &mut impl FnMut(String, String)) {
    let methods = &s.auth.0;
    if methods.contains(&AuthMethod::AppKey) {
        let k = &s.app_key;
        if k.header.is_empty() && k.query.is_empty() && !k.path {
            err(format!("{p}.app_key"), "every source is off: enable header, query or path".into());
        }
        if !k.header.is_empty() && !is_token(&k.header) {
            err(format!("{p}.app_key.header"), "not a header name".into());
        }
        if !k.query.is_empty() && !k.query.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b)) {
            err(format!("{p}.app_key.query"), "a parameter name of letters, digits, `-`, `.`, `_`, `~`".into());
        }
    }
    if !s.app_id_header.is_empty() && !is_token(&s.app_id_header) {
        err(format!("{p}.app_id_header"), "not a header name".into());
    }
}

/// A service's JWT issuers: each gets its keys from apps or from one key set, names a plan that
/// exists, forwards claims under header names; an issuer appears once, and an entry for any
/// issuer comes last.
fn check_jwt_issuers(
    c: &Config,
    unread: &crate::schema::Unread,
    p: &str,
    s: &Service,
    err: &mut impl FnMut(String, String),
) {
    let entries = &s.jwt.0;
    let uses_jwt = s.auth.0.contains(&AuthMethod::Jwt);
    if entries.is_empty() {
        err(format!("{p}.jwt"), "an empty list: give at least one issuer".into());
    }
    if !uses_jwt && *entries != crate::JwtIssuers::default().0 {
        err(format!("{p}.jwt"), "`auth` does not list `jwt`: these settings would not be used".into());
    }
    let mut issuers = HashMap::new();
    for (i, j) in entries.iter().enumerate() {
        let jp = if entries.len() == 1 { format!("{p}.jwt") } else { format!("{p}.jwt[{i}]") };
        match &j.issuer {
            Some(iss) if iss.is_empty() => err(format!("{jp}.issuer"), "must not be empty".into()),
            Some(iss) => {
                if let Some(first) = issuers.insert(iss.as_str(), i) {
                    err(format!("{jp}.issuer"), format!("`{iss}` is already the issuer of entry {first}"));
                }
            }
            None if i + 1 < entries.len() => {
                err(format!("{jp}.issuer"), "an entry without `issuer` takes every token: it must come last".into())
            }
            None => {}
        }
        if j.app_claim.as_deref() == Some("") {
            err(format!("{jp}.app_claim"), "must name a claim".into());
        }
        if j.discovery && j.jwks_uri.is_some() {
            err(jp.clone(), "set one of `discovery` and `jwks_uri`".into());
        }
        if j.discovery {
            match &j.issuer {
                None => err(
                    format!("{jp}.discovery"),
                    "needs `issuer`: discovery reads {issuer}/.well-known/openid-configuration".into(),
                ),
                Some(iss) => {
                    if let Err(e) = check_fetch_url(iss) {
                        err(format!("{jp}.issuer"), e);
                    }
                }
            }
        }
        if let Some(uri) = &j.jwks_uri {
            if let Err(e) = check_fetch_url(uri) {
                err(format!("{jp}.jwks_uri"), e);
            }
        }
        let k = &j.jwks;
        let second = std::time::Duration::from_secs(1);
        if k.refresh.0 < second {
            err(format!("{jp}.jwks.refresh"), "at least 1s".into());
        }
        if k.min_refetch.0 < second {
            // Tokens with made-up key ids would otherwise make the gateway fetch without pause.
            err(format!("{jp}.jwks.min_refetch"), "at least 1s".into());
        } else if k.min_refetch.0 > k.refresh.0 {
            err(format!("{jp}.jwks.min_refetch"), "longer than `refresh`".into());
        }
        if k.timeout.0.is_zero() || k.timeout.0 > std::time::Duration::from_secs(60) {
            err(format!("{jp}.jwks.timeout"), "from above zero to 60s: a request may wait this long".into());
        }
        if j.uses_key_set() {
            // A provider signs for many clients (and, for some, many tenants): say which are yours.
            if j.issuer.is_none() && !j.discovery {
                err(format!("{jp}.issuer"), "required with `jwks_uri`: a key set signs for its issuer only".into());
            }
            if j.audience.is_none() {
                err(
                    format!("{jp}.audience"),
                    "required with a key set: the provider signs tokens for other clients too".into(),
                );
            }
        }
        if !j.uses_key_set() {
            if j.plan.is_some() {
                err(
                    format!("{jp}.plan"),
                    "only for a key set (`discovery` or `jwks_uri`): apps' tokens get their grant's plan".into(),
                );
            }
            if *k != crate::JwksSettings::default() {
                err(format!("{jp}.jwks"), "only with `discovery` or `jwks_uri`".into());
            }
        }
        if let Some(plan) = &j.plan {
            if !c.plans.contains_key(plan) && !unread.has("plans", plan) {
                err(format!("{jp}.plan"), format!("unknown plan `{plan}`"));
            }
        }
        let mut headers = HashMap::new();
        for (claim, header) in &j.forward_claims {
            let hp = format!("{jp}.forward_claims.{claim}");
            if claim.is_empty() {
                err(hp.clone(), "must name a claim".into());
            }
            let lower = header.to_ascii_lowercase();
            if !is_token(header) {
                err(hp, format!("`{header}` is not a header name"));
            } else if FORBIDDEN_CLAIM_HEADERS.contains(&lower.as_str()) || lower.eq_ignore_ascii_case(&s.app_id_header)
            {
                err(hp, format!("`{header}` cannot carry a claim"));
            } else if let Some(other) = headers.insert(lower, claim) {
                err(hp, format!("`{header}` already carries claim `{other}`"));
            }
        }
    }
}

/// A service's authorization service: set exactly when `auth` lists `external`, a URL, header
/// names, bounds.
fn check_external(p: &str, s: &Service, err: &mut impl FnMut(String, String)) {
    let listed = s.auth.0.contains(&AuthMethod::External);
    let Some(e) = &s.external else {
        if listed {
            err(format!("{p}.external"), "`auth` lists `external`: say which service to ask".into());
        }
        return;
    };
    let ep = format!("{p}.external");
    if !listed {
        err(ep.clone(), "`auth` does not list `external`: this would not be used".into());
    }
    match e.url.parse::<http::Uri>() {
        Ok(u) if matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some() => {
            if e.ca.is_some() && u.scheme_str() != Some("https") {
                err(format!("{ep}.ca"), "only an https:// service uses a CA".into());
            }
        }
        _ => err(format!("{ep}.url"), format!("`{}` is not an http:// or https:// URL with a host", e.url)),
    }
    if e.timeout.0.is_zero() || e.timeout.0 > std::time::Duration::from_secs(60) {
        err(format!("{ep}.timeout"), "from above zero to 60s: every request waits for it".into());
    }
    for (i, h) in e.forward_headers.iter().enumerate() {
        if !is_token(h) {
            err(format!("{ep}.forward_headers[{i}]"), format!("`{h}` is not a header name"));
        }
    }
    for (i, h) in e.copy_response_headers.iter().enumerate() {
        if !is_token(h) {
            err(format!("{ep}.copy_response_headers[{i}]"), format!("`{h}` is not a header name"));
        } else if FORBIDDEN_CLAIM_HEADERS.contains(&h.to_ascii_lowercase().as_str())
            && !h.eq_ignore_ascii_case("authorization")
        {
            err(format!("{ep}.copy_response_headers[{i}]"), format!("`{h}` is the gateway's or HTTP's own"));
        }
    }
    if let Some(c) = &e.cache {
        if c.ttl.0 < std::time::Duration::from_secs(1) {
            err(format!("{ep}.cache.ttl"), "at least 1s".into());
        }
        if c.max_entries == 0 {
            err(format!("{ep}.cache.max_entries"), "at least 1".into());
        }
        for (i, h) in c.key.iter().enumerate() {
            if !is_token(h) {
                err(format!("{ep}.cache.key[{i}]"), format!("`{h}` is not a header name"));
            }
        }
    }
}

/// Headers whose meaning the gateway or HTTP owns; a claim never rides in them.
const FORBIDDEN_CLAIM_HEADERS: &[&str] = &[
    "host",
    "authorization",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "proxy-authorization",
    "cookie",
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "traceparent",
    "tracestate",
    "via",
    "x-real-ip",
    "x-request-id",
    "expect",
    "grpc-timeout",
];

/// A URL the gateway fetches keys from: `https://`, or `http://` to a loopback address (a key
/// set fetched in the clear could be replaced on the way). Also applied to the `jwks_uri` a
/// discovery document names.
pub fn check_fetch_url(url: &str) -> Result<http::Uri, String> {
    let uri: http::Uri = url.parse().map_err(|_| format!("`{url}` is not a URL"))?;
    let host = uri.host().ok_or_else(|| format!("`{url}` has no host"))?;
    match uri.scheme_str() {
        Some("https") => Ok(uri),
        Some("http") if is_loopback(host) => Ok(uri),
        Some("http") => Err(format!("`{url}`: keys are fetched over https (http only to a loopback address)")),
        _ => Err(format!("`{url}` is not an http(s) URL")),
    }
}

fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || bare.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Every app's credentials and grants. No two apps share a key or a JWT key id.
fn validate_apps(c: &Config, unread: &crate::schema::Unread, err: &mut impl FnMut(String, String)) {
    let mut kids: HashMap<&str, &str> = HashMap::new();
    let mut keys: HashMap<&str, &str> = HashMap::new();
    for (name, app) in &c.apps {
        let p = format!("apps.{name}");
        check_app_keys(c, &p, name, app, &mut keys, err);
        check_app_credentials(&p, app, err);
        for (i, k) in app.jwt_keys.iter().enumerate() {
            check_jwt_key(&format!("{p}.jwt_keys[{i}]"), name, k, &mut kids, err);
        }
        check_grants(c, unread, &p, app, err);
    }
}

/// An app's `key`, `key_sha256` or `key_hmac` (one at most); `keys` holds the keys of the apps
/// checked before.
fn check_app_keys<'c>(
    c: &Config,
    p: &str,
    name: &'c str,
    app: &'c App,
    keys: &mut HashMap<&'c str, &'c str>,
    err: &mut impl FnMut(String, String),
) {
    if [app.key.is_some(), app.key_sha256.is_some(), app.key_hmac.is_some()].iter().filter(|s| **s).count() > 1 {
        err(p.to_string(), "set one of `key`, `key_sha256` and `key_hmac`".into());
    } else if let Some(h) = &app.key_hmac {
        if h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
            err(format!("{p}.key_hmac"), "64 hexadecimal digits expected".into());
        }
        if c.redis.is_none() {
            err(format!("{p}.key_hmac"), "needs the cluster secret (`redis.secret_file`)".into());
        }
    }
    match (&app.key, &app.key_sha256) {
        (Some(_), Some(_)) => {}
        (Some(k), None) => {
            if let Err(e) = check_app_key(k) {
                err(format!("{p}.key"), e.to_string());
            } else if let Some(other) = keys.insert(k, name) {
                err(format!("{p}.key"), format!("the same key as app `{other}`"));
            }
        }
        (None, Some(h)) => {
            if h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
                err(format!("{p}.key_sha256"), "64 hexadecimal digits expected".into());
            }
        }
        (None, None) => {}
    }
}

/// An app has some credential, and a `secret` is not empty.
fn check_app_credentials(p: &str, app: &App, err: &mut impl FnMut(String, String)) {
    let has_credentials = app.key.is_some()
        || app.key_sha256.is_some()
        || app.key_hmac.is_some()
        || app.secret.is_some()
        || !app.jwt_keys.is_empty()
        || !app.issuers.is_empty();
    if !has_credentials {
        err(p.to_string(), "no credentials: set key, key_sha256, key_hmac, secret, jwt_keys or issuers".into());
    }
    for (i, iss) in app.issuers.iter().enumerate() {
        if iss.is_empty() {
            err(format!("{p}.issuers[{i}]"), "must not be empty".into());
        }
    }
    if app.secret.as_deref() == Some("") {
        err(format!("{p}.secret"), "must not be empty".into());
    }
}

/// One JWT key (at `kp`) of app `app`: its algorithm, the secret or public key that goes with it,
/// and a key id that `kids` (the ids of the keys checked before) does not hold yet.
fn check_jwt_key<'c>(
    kp: &str,
    app: &'c str,
    k: &'c JwtKey,
    kids: &mut HashMap<&'c str, &'c str>,
    err: &mut impl FnMut(String, String),
) {
    if !JWT_ALGORITHMS.contains(&k.alg.as_str()) {
        err(format!("{kp}.alg"), format!("`{}` is not one of {}", k.alg, JWT_ALGORITHMS.join(", ")));
    }
    match (k.alg.as_str(), &k.secret, &k.public_key) {
        ("HS256" | "HS384" | "HS512", Some(s), None) if !s.is_empty() => {}
        ("HS256" | "HS384" | "HS512", _, _) => {
            err(kp.to_string(), format!("{} needs a non-empty `secret` and no `public_key`", k.alg))
        }
        (_, None, Some(_)) => {}
        _ => err(kp.to_string(), format!("{} needs `public_key` (a PEM file) and no `secret`", k.alg)),
    }
    if let Some(kid) = &k.kid {
        if kid.is_empty() {
            err(format!("{kp}.kid"), "must not be empty".into());
        } else if let Some(other) = kids.insert(kid, app) {
            err(format!("{kp}.kid"), format!("`{kid}` is already a key of app `{other}`"));
        }
    }
}

/// An app's grants name services and plans that exist.
fn check_grants(c: &Config, unread: &crate::schema::Unread, p: &str, app: &App, err: &mut impl FnMut(String, String)) {
    for (service, plan) in &app.grants {
        if !c.services.contains_key(service) && !unread.has("services", service) {
            err(format!("{p}.grants.{service}"), format!("unknown service `{service}`"));
        }
        if let Some(plan) = plan {
            if !c.plans.contains_key(plan) && !unread.has("plans", plan) {
                err(format!("{p}.grants.{service}"), format!("unknown plan `{plan}`"));
            }
        }
    }
}

fn validate_circuit_breakers(c: &Config, err: &mut impl FnMut(String, String)) {
    for (name, u) in &c.upstreams {
        if let Some(cb) = &u.circuit_breaker {
            let p = format!("upstreams.{name}.circuit_breaker");
            if cb.error_threshold == 0 {
                err(format!("{p}.error_threshold"), "must be at least 1".into());
            }
            if cb.error_reset.0.is_zero() || cb.retry_delay.0.is_zero() {
                err(p, "error_reset and retry_delay must be more than zero".into());
            }
        }
    }
}

/// Characters an app key may use: it travels in a header, a query string and a path segment.
/// The file check and the admin API (before it keeps only the key's hash) both use this.
pub fn check_app_key(k: &str) -> Result<(), ValueError> {
    if k.is_empty() || k.len() > 512 {
        return Err(ValueError::AppKeyLength);
    }
    if !k.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~+=!$'()*,;:@".contains(&b)) {
        return Err(ValueError::AppKeyCharacters);
    }
    Ok(())
}

fn plugins(
    c: &Config,
    p: &str,
    acl: &Option<Acl>,
    limits: &[RateLimit],
    headers: &HeaderRewrite,
    authenticated: bool,
    err: &mut impl FnMut(String, String),
) {
    if let Some(acl) = acl {
        for (list, rules) in [("allow", &acl.allow), ("deny", &acl.deny)] {
            for (i, r) in rules.iter().enumerate() {
                let rp = format!("{p}.acl.{list}[{i}]");
                for (j, m) in r.methods.iter().enumerate() {
                    if !is_token(m) || m.bytes().any(|b| b.is_ascii_lowercase()) {
                        err(format!("{rp}.methods[{j}]"), format!("`{m}` is not an upper-case method name"));
                    }
                }
                for (j, g) in r.paths.iter().enumerate() {
                    if !g.starts_with('/') {
                        err(format!("{rp}.paths[{j}]"), "must start with `/`".into());
                    }
                }
            }
        }
    }
    for (i, l) in limits.iter().enumerate() {
        let lp = format!("{p}.rate_limits[{i}]");
        if l.limit == 0 {
            err(format!("{lp}.limit"), "must be at least 1".into());
        }
        if l.interval.0.as_millis() == 0 {
            err(format!("{lp}.interval"), "must be at least 1ms".into());
        }
        if l.interval.0.as_micros() / u128::from(l.limit.max(1)) == 0 {
            err(format!("{lp}.limit"), "more than one request per microsecond cannot be measured".into());
        }
        if l.burst == Some(0) {
            err(format!("{lp}.burst"), "must be at least 1".into());
        }
        if l.key == LimitKey::App && !authenticated {
            err(format!("{lp}.key"), "`app` needs a service with auth; use client_ip, header:NAME or service".into());
        }
        if l.scope == LimitScope::Cluster && c.redis.is_none() {
            err(format!("{lp}.scope"), "`cluster` needs the `redis` section".into());
        }
        if !(16..=1 << 24).contains(&l.max_keys) {
            err(format!("{lp}.max_keys"), "from 16 to 16777216".into());
        }
    }
    for (dir, ops) in [("request", &headers.request), ("response", &headers.response)] {
        let hp = format!("{p}.headers.{dir}");
        for (i, n) in ops.remove.iter().enumerate() {
            if !is_token(n) {
                err(format!("{hp}.remove[{i}]"), format!("`{n}` is not a header name"));
            }
        }
        for (op, map) in [("set", &ops.set), ("append", &ops.append)] {
            for (n, v) in map {
                if !is_token(n) {
                    err(format!("{hp}.{op}.{n}"), "not a header name".into());
                } else if v.bytes().any(|b| (b < b' ' && b != b'\t') || b == 0x7f) {
                    err(format!("{hp}.{op}.{n}"), "control characters are not allowed in a header value".into());
                }
            }
        }
    }
}

/// A service and a route (or two services) must not claim the same path on the same host.
fn path_clashes(c: &Config, err: &mut impl FnMut(String, String)) {
    // Host pattern → the site that serves it.
    let mut site_of: HashMap<String, &str> = HashMap::new();
    for (name, site) in &c.sites {
        for h in &site.hosts {
            site_of.insert(h.to_ascii_lowercase(), name);
        }
    }
    // Where each path is claimed: a site (by name) or a host pattern no site serves.
    let mut claimed: BTreeMap<String, HashMap<String, String>> = BTreeMap::new();
    for (name, site) in &c.sites {
        let paths = claimed.entry(format!("site {name}")).or_default();
        for r in &site.routes {
            paths.insert(normal(&r.path).to_string(), format!("sites.{name}.routes"));
        }
    }
    for (name, s) in &c.services {
        let mut places: HashSet<String> = HashSet::new();
        if s.hosts.is_empty() {
            places.extend(c.sites.keys().map(|n| format!("site {n}")));
            if !site_of.contains_key("*") {
                places.insert("host *".into());
            }
        }
        for h in &s.hosts {
            let h = h.to_ascii_lowercase();
            places.insert(match site_of.get(&h) {
                Some(site) => format!("site {site}"),
                None => format!("host {h}"),
            });
        }
        let mut places: Vec<_> = places.into_iter().collect();
        places.sort();
        for place in places {
            let paths = claimed.entry(place.clone()).or_default();
            if let Some(other) = paths.insert(normal(&s.path).to_string(), format!("services.{name}")) {
                err(format!("services.{name}.path"), format!("`{}` on {place} is already claimed by {other}", s.path));
            }
        }
    }
}

fn normal(path: &str) -> &str {
    match path.trim_end_matches('/') {
        "" => "/",
        p => p,
    }
}

#[cfg(test)]
mod tests {
    use crate::compile::compile;

    const BASE: &str = r#"
listeners: { main: { bind: "127.0.0.1:0" } }
upstreams: { api: { targets: ["127.0.0.1:9001"], circuit_breaker: { error_threshold: 5, error_reset: 10s, retry_delay: 30s } } }
sites: { web: { hosts: ["www.example.com"], routes: [{ path: /, upstream: api }] } }
"#;

    #[test]
    fn a_gateway_compiles() {
        let text = format!(
            "{BASE}{}",
            r#"
services:
  mws:
    path: /mws
    upstream: api
    auth: [app_key, jwt]
    acl: { deny: [{ methods: [DELETE] }] }
    rate_limits: [{ limit: 100, interval: 1s, key: client_ip, per_path: true, block: 60s }]
    headers: { request: { set: { x-env: prod } }, response: { remove: [server] } }
apps:
  shop:
    key: k-shop-1
    allow_ips: ["10.0.0.0/8", "127.0.0.1"]
    jwt_keys: [{ kid: shop-1, alg: HS256, secret: s3cret }]
    grants: { mws: gold }
  free:
    key_sha256: "0000000000000000000000000000000000000000000000000000000000000000"
    grants: { mws: ~ }
plans:
  gold:
    rate_limits: [{ limit: 10, interval: 1s, burst: 20 }]
"#
        );
        let c = compile(&text).expect("valid");
        assert_eq!(c.services["mws"].auth.0.len(), 2);
        assert_eq!(c.apps["shop"].grants["mws"].as_deref(), Some("gold"));
        assert_eq!(c.apps["free"].grants["mws"], None);
        assert_eq!(c.upstreams["api"].circuit_breaker.as_ref().map(|b| b.error_threshold), Some(5));
    }

    #[test]
    fn every_gateway_error_is_reported() {
        let text = format!(
            "{BASE}{}",
            r#"
services:
  a: { path: mws, upstream: nowhere, rate_limits: [{ limit: 0 }] }
  b: { path: /x, upstream: api, hosts: [www.example.com], auth: app_key, app_key: { header: "", query: "", path: false } }
  c: { path: /x/, upstream: api, hosts: [www.example.com] }
  d: { path: /, upstream: api, auth: jwt, headers: { request: { set: { "bad name": v } } } }
apps:
  one: { key: "a/b", grants: { nope: gold } }
  two: { grants: {} }
  three: { key: k3, jwt_keys: [{ kid: k, alg: none }, { kid: k, alg: RS256, secret: x }] }
plans:
  gold: { rate_limits: [{ limit: 1, scope: cluster }], acl: { allow: [{ methods: [get], paths: [nope] }] } }
"#
        );
        let errs = compile(&text).expect_err("invalid").0;
        let paths: Vec<&str> = errs.iter().map(|e| e.path.as_str()).collect();
        for expected in [
            "services.a.path",
            "services.a.upstream",
            "services.a.rate_limits[0].limit",
            "services.a.rate_limits[0].key",
            "services.b.app_key",
            "services.c.path",
            "services.d.path",
            "services.d.headers.request.set.bad name",
            "apps.one.key",
            "apps.one.grants.nope",
            "apps.two",
            "apps.three.jwt_keys[0].alg",
            "apps.three.jwt_keys[1]",
            "apps.three.jwt_keys[1].kid",
            "plans.gold.rate_limits[0].scope",
            "plans.gold.acl.allow[0].methods[0]",
            "plans.gold.acl.allow[0].paths[0]",
        ] {
            assert!(paths.contains(&expected), "missing {expected} in {errs:#?}");
        }
    }

    #[test]
    fn jwt_issuers_are_checked_each_with_every_error_named() {
        let text = format!(
            "{BASE}{}",
            r#"
plans: { free: {} }
services:
  one:
    path: /one
    upstream: api
    auth: jwt
    jwt: { issuer: "https://id.example.com", audience: api, discovery: true, app_claim: azp, forward_claims: { sub: x-user }, strip_token: true, plan: free }
  many:
    path: /many
    upstream: api
    auth: jwt
    jwt:
      - { discovery: true }
      - { issuer: "http://id.example.com", discovery: true, jwks_uri: "https://x/certs" }
      - { issuer: "https://a", jwks_uri: "http://10.0.0.1/certs", jwks: { min_refetch: 20m, timeout: 0s }, plan: gold }
      - { jwks_uri: "https://c/certs", audience: api, jwks: { min_refetch: 0s, timeout: 2m } }
      - { issuer: "https://a", forward_claims: { sub: Authorization, scope: "bad header", email: x-u, name: X-U }, app_claim: "" }
      - { issuer: "https://b", plan: free, jwks: { refresh: 5m } }
  unused:
    path: /unused
    upstream: api
    jwt: { issuer: "https://id.example.com", discovery: true }
"#
        );
        let errs = compile(&text).expect_err("invalid").0;
        let found: Vec<(&str, &str)> = errs.iter().map(|e| (e.path.as_str(), e.message.as_str())).collect();
        let paths: Vec<&str> = found.iter().map(|(p, _)| *p).collect();
        for expected in [
            "services.many.jwt[0].issuer",
            "services.many.jwt[0].discovery",
            "services.many.jwt[0].audience",
            "services.many.jwt[1]",
            "services.many.jwt[1].issuer",
            "services.many.jwt[2].jwks_uri",
            "services.many.jwt[2].jwks.min_refetch",
            "services.many.jwt[2].jwks.timeout",
            "services.many.jwt[2].plan",
            "services.many.jwt[2].audience",
            "services.many.jwt[3].issuer",
            "services.many.jwt[3].jwks.min_refetch",
            "services.many.jwt[3].jwks.timeout",
            "services.many.jwt[4].issuer",
            "services.many.jwt[4].app_claim",
            "services.many.jwt[4].forward_claims.sub",
            "services.many.jwt[4].forward_claims.scope",
            "services.many.jwt[4].forward_claims.name",
            "services.many.jwt[5].plan",
            "services.many.jwt[5].jwks",
            "services.unused.jwt",
        ] {
            assert!(paths.contains(&expected), "missing {expected} in {found:#?}");
        }
        assert!(!paths.iter().any(|p| p.starts_with("services.one")), "{found:#?}");
        assert!(found.iter().any(|(p, m)| *p == "services.many.jwt[1].issuer" && m.contains("https")), "{found:#?}");
    }

    #[test]
    fn an_external_authorization_service_is_checked() {
        let text = format!(
            "{BASE}{}",
            r#"
services:
  good: { path: /good, upstream: api, auth: external, external: { url: "http://127.0.0.1:4180/auth", cache: { ttl: 30s } } }
  bad:
    path: /bad
    upstream: api
    auth: [app_key, external]
    external:
      url: "ftp://x"
      timeout: 0s
      forward_headers: ["bad header"]
      copy_response_headers: [content-length, x-user]
      cache: { ttl: 10ms, max_entries: 0, key: ["no good"] }
  missing: { path: /missing, upstream: api, auth: external }
  unused: { path: /unused, upstream: api, external: { url: "http://127.0.0.1:1/" } }
  https_ca: { path: /ca, upstream: api, auth: external, external: { url: "http://a/", ca: ca.pem } }
"#
        );
        let errs = compile(&text).expect_err("invalid").0;
        let paths: Vec<&str> = errs.iter().map(|e| e.path.as_str()).collect();
        for expected in [
            "services.bad.external.url",
            "services.bad.external.timeout",
            "services.bad.external.forward_headers[0]",
            "services.bad.external.copy_response_headers[0]",
            "services.bad.external.cache.ttl",
            "services.bad.external.cache.max_entries",
            "services.bad.external.cache.key[0]",
            "services.missing.external",
            "services.unused.external",
            "services.https_ca.external.ca",
        ] {
            assert!(paths.contains(&expected), "missing {expected} in {errs:#?}");
        }
        assert!(
            !paths
                .iter()
                .any(|p| p.starts_with("services.good") || *p == "services.bad.external.copy_response_headers[1]"),
            "{errs:#?}"
        );
    }
}
