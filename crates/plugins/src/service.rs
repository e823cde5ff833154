//! One service's Admit stage: who is calling (app key or JWT), may they (address, grant, ACL),
//! how often (rate limits); then the header rewrites on the way in and out.

use crate::app_key::{PathCut, Sources};
use crate::denial::Denial;
use crate::error::GatewayError;
use crate::gateway::{AppEntry, Gateway, PlanGate, PluginSet};
use crate::headers::EditHeaders;
use crate::rate_limit::{Quota, Subject, Verdict};
use crate::stats::ServiceStats;
use gatehouse_config::{AuthMethod, Service};
use gatehouse_jwt::Validation;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::request::Parts;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, LazyLock};
use std::time::{SystemTime, UNIX_EPOCH};

static RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("ratelimit-limit");
static RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("ratelimit-remaining");
static RATELIMIT_RESET: HeaderName = HeaderName::from_static("ratelimit-reset");

/// A compiled service.
#[derive(Debug)]
pub struct ServiceGate {
    /// Service name.
    pub name: Arc<str>,
    /// A stable hash of the name, for rate-limit keys.
    hash: u64,
    index: usize,
    /// Length of the path prefix without a trailing `/` (0 for `/`).
    base_len: usize,
    app_key: Option<Sources>,
    jwt: Option<JwtCheck>,
    external: Option<crate::external::ExternalCheck>,
    app_id_header: Option<HeaderName>,
    challenge: HeaderValue,
    invalid_challenge: HeaderValue,
    plugins: PluginSet,
    /// Counters, kept across reloads.
    pub stats: Arc<ServiceStats>,
}

/// How tokens of one issuer are checked.
#[derive(Debug)]
pub(crate) struct IssuerCheck {
    /// The `iss` this entry is for; `None`: any.
    pub(crate) issuer: Option<String>,
    pub(crate) validation: Validation,
    /// Claim naming the app.
    pub(crate) app_claim: Option<String>,
    pub(crate) keys: IssuerKeys,
    /// Claims sent upstream: claim name, header.
    pub(crate) forward: Box<[(String, HeaderName)]>,
    pub(crate) strip_token: bool,
    /// Plan of callers the token names no app for (key sets only).
    pub(crate) plan: Option<Arc<PlanGate>>,
}

/// Where an issuer's verification keys come from.
#[derive(Debug)]
pub(crate) enum IssuerKeys {
    /// The apps' own keys (`secret`, `jwt_keys`).
    Apps,
    /// A provider's key set.
    Set(Arc<gatehouse_jwks::KeySource>),
}

#[derive(Debug)]
struct JwtCheck {
    issuers: Box<[IssuerCheck]>,
    /// Every header some issuer forwards a claim in: removed from every request first.
    claim_headers: Box<[HeaderName]>,
    /// Some issuer strips its tokens: then a bearer token that was not verified (the request
    /// came with an app key) is not forwarded either.
    strip_any: bool,
}

impl JwtCheck {
    /// The request as the rate limits and the backend see it: the client's own claim headers
    /// gone, a verified token's claims in their place, the token removed when its issuer says.
    fn upstream(&self, headers: &mut HeaderMap, verified: Option<(Vec<(HeaderName, HeaderValue)>, bool)>) {
        for name in self.claim_headers.iter() {
            headers.remove(name);
        }
        let strip = match verified {
            Some((claims, strip)) => {
                for (name, value) in claims {
                    headers.insert(name, value);
                }
                strip
            }
            None => self.strip_any && headers.get(header::AUTHORIZATION).is_some_and(|v| bearer(v).is_some()),
        };
        if strip {
            headers.remove(header::AUTHORIZATION);
        }
    }
}

/// The token of an `Authorization: Bearer TOKEN` value.
fn bearer(v: &HeaderValue) -> Option<&str> {
    let (scheme, token) = v.to_str().ok()?.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// What the credentials sent come to: an app, or a token still to verify.
enum Found<'s, 'p> {
    App(Arc<AppEntry>),
    Token(&'s JwtCheck, &'p str),
    /// No app key or token: the authorization service decides.
    External(&'s crate::external::ExternalCheck),
}

/// Who a verified token says is calling, and what it sends upstream.
struct Verified {
    /// The app it names (its keys signed it, or its `app_claim` names an app that trusts the
    /// issuer).
    app: Option<Arc<AppEntry>>,
    /// The issuer's plan, for a token that names no app.
    plan: Option<Arc<PlanGate>>,
    /// Claims, as the headers the backend gets them in.
    claims: Vec<(HeaderName, HeaderValue)>,
    /// Remove the token before forwarding.
    strip_token: bool,
}

/// What the Admit stage learned about an admitted request.
#[derive(Debug, Default)]
pub struct Admitted {
    /// The calling app, when the service authenticates.
    pub app: Option<Arc<AppEntry>>,
    /// The app's plan for this service.
    pub plan: Option<Arc<PlanGate>>,
    /// The tightest rate limit's quota, for the `RateLimit-*` headers, and its limit as a
    /// header value.
    pub quota: Option<(Quota, HeaderValue)>,
}

impl ServiceGate {
    pub(crate) fn new(
        name: &str,
        index: usize,
        s: &Service,
        plugins: PluginSet,
        stats: Arc<ServiceStats>,
        issuers: Vec<IssuerCheck>,
    ) -> Result<Self, GatewayError> {
        let methods = &s.auth.0;
        let app_key = methods.contains(&AuthMethod::AppKey).then(|| Sources::new(&s.app_key)).transpose()?;
        let jwt = methods.contains(&AuthMethod::Jwt).then(|| {
            let mut claim_headers: Vec<HeaderName> =
                issuers.iter().flat_map(|i| i.forward.iter().map(|(_, h)| h.clone())).collect();
            claim_headers.sort_by(|a, b| a.as_str().cmp(b.as_str()));
            claim_headers.dedup();
            let strip_any = issuers.iter().any(|i| i.strip_token);
            JwtCheck { issuers: issuers.into(), claim_headers: claim_headers.into(), strip_any }
        });
        let external = match (methods.contains(&AuthMethod::External), &s.external) {
            (true, Some(e)) => Some(crate::external::ExternalCheck::new(e)?),
            _ => None,
        };
        let scheme = if jwt.is_some() { "Bearer" } else { "AppKey" };
        let challenge = HeaderValue::try_from(format!("{scheme} realm=\"{name}\""))
            .map_err(|_| GatewayError::ServiceNameNotHeaderValue)?;
        let invalid = match scheme {
            "Bearer" => format!("Bearer realm=\"{name}\", error=\"invalid_token\""),
            _ => format!("AppKey realm=\"{name}\""),
        };
        let invalid_challenge = HeaderValue::try_from(invalid).map_err(|_| GatewayError::ServiceNameNotHeaderValue)?;
        let app_id_header = match s.app_id_header.as_str() {
            "" => None,
            h => {
                Some(HeaderName::from_bytes(h.as_bytes()).map_err(|_| GatewayError::AppIdHeader { header: h.into() })?)
            }
        };
        let trimmed = s.path.trim_end_matches('/');
        Ok(ServiceGate {
            name: name.into(),
            hash: crate::rate_limit::fnv1a(name.as_bytes()),
            index,
            base_len: trimmed.len(),
            app_key,
            jwt,
            external,
            app_id_header,
            challenge,
            invalid_challenge,
            plugins,
            stats,
        })
    }

    /// Whether `path` is within the service: its prefix, then the end, `/` or nothing else
    /// (`/mws` owns `/mws` and `/mws/a`, not `/mwsx`).
    pub fn owns(&self, path: &str) -> bool {
        matches!(path.as_bytes().get(self.base_len), None | Some(b'/'))
    }

    /// Runs the checks; the result says who called. Whatever the result, the request has lost
    /// its app key, except for a `/~KEY` path segment, which is left in `cut` for the caller to
    /// leave out of the forwarded target (and of the log).
    pub async fn admit(
        &self,
        gw: &Gateway,
        parts: &mut Parts,
        client_ip: IpAddr,
        cut: &mut PathCut,
    ) -> Result<Admitted, Denial> {
        let mut admitted = Admitted::default();
        if self.app_key.is_some() || self.jwt.is_some() || self.external.is_some() {
            let (app, plan) = match self.authenticate(gw, parts, cut)? {
                Found::App(app) => {
                    if let Some(jwt) = &self.jwt {
                        jwt.upstream(&mut parts.headers, None);
                    }
                    (Some(app), None)
                }
                Found::Token(check, token) => {
                    let v = self.verify_jwt(gw, check, token).await?;
                    check.upstream(&mut parts.headers, Some((v.claims, v.strip_token)));
                    (v.app, v.plan)
                }
                Found::External(ext) => {
                    if let Some(jwt) = &self.jwt {
                        jwt.upstream(&mut parts.headers, None);
                    }
                    self.ask_external(ext, parts, client_ip).await?;
                    (None, None)
                }
            };
            match app {
                Some(app) => {
                    if !app.allows_ip(client_ip) {
                        self.stats.address_refused.inc();
                        return Err(Denial::AddressRefused { app: app.id.clone() });
                    }
                    let Some(plan) = app.grant(self.index) else {
                        self.stats.not_granted.inc();
                        return Err(Denial::NotGranted { app: app.id.clone() });
                    };
                    admitted.plan = plan.cloned();
                    admitted.app = Some(app);
                }
                // A provider's token that names no app: the issuer's plan.
                None => admitted.plan = plan,
            }
        }
        // The path below the prefix, without the key segment (which sits right after it).
        let below = cut.as_ref().map_or(self.base_len, |c| c.end);
        let path = match parts.uri.path().get(below..) {
            Some("") | None => "/",
            Some(p) => p,
        };
        let plan_plugins = admitted.plan.as_ref().map(|p| &p.plugins);
        for set in std::iter::once(&self.plugins).chain(plan_plugins) {
            if set.acl.as_ref().is_some_and(|acl| !acl.allows(&parts.method, path)) {
                self.stats.acl_denied.inc();
                return Err(Denial::AclDenied);
            }
        }
        let subject = Subject {
            service: &self.name,
            service_hash: self.hash,
            app: admitted.app.as_ref().map(|a| &*a.id),
            app_hash: admitted.app.as_ref().map_or(0, |a| a.hash),
            client_ip,
            headers: &parts.headers,
            path,
        };
        for set in std::iter::once(&self.plugins).chain(plan_plugins) {
            for limiter in set.limits.iter() {
                match limiter.check(&subject, &self.stats).await {
                    Verdict::Allow(q) => {
                        let Some(limit) = limiter.limit_value() else { continue };
                        if admitted.quota.as_ref().is_none_or(|(best, _)| q.remaining < best.remaining) {
                            admitted.quota = Some((q, limit.clone()));
                        }
                    }
                    Verdict::Deny { retry_after_us, limit } => {
                        self.stats.rate_limited.inc();
                        return Err(Denial::RateLimited {
                            retry_after_secs: retry_after_us.div_ceil(1_000_000).max(1),
                            limit,
                        });
                    }
                    Verdict::Unavailable => {
                        self.stats.limiter_unavailable.inc();
                        return Err(Denial::LimiterUnavailable);
                    }
                }
            }
        }
        self.stats.admitted.inc();
        Ok(admitted)
    }

    /// Finds the caller from an app key, else the bearer JWT to verify.
    fn authenticate<'s, 'p>(
        &'s self,
        gw: &Gateway,
        parts: &'p mut Parts,
        cut: &mut PathCut,
    ) -> Result<Found<'s, 'p>, Denial> {
        if let Some(sources) = &self.app_key {
            let (key, path_cut) =
                sources.take(&mut parts.uri, &mut parts.headers, self.base_len).map_err(|_| Denial::BadTarget)?;
            *cut = path_cut;
            if let Some(key) = key {
                let app = gw.app_by_key(key.as_bytes()).cloned().ok_or_else(|| self.invalid("unknown app key"))?;
                return Ok(Found::App(app));
            }
        }
        if let Some(check) = &self.jwt {
            if let Some(token) = parts.headers.get(header::AUTHORIZATION).and_then(bearer) {
                return Ok(Found::Token(check, token));
            }
        }
        if let Some(ext) = &self.external {
            return Ok(Found::External(ext));
        }
        self.stats.missing_credentials.inc();
        Err(Denial::MissingCredentials { challenge: self.challenge.clone() })
    }

    /// Asks the authorization service; boxed and type-erased as [`Self::verify_jwt`] is.
    fn ask_external<'a>(
        &'a self,
        ext: &'a crate::external::ExternalCheck,
        parts: &'a mut Parts,
        client_ip: IpAddr,
    ) -> Pin<Box<dyn Future<Output = Result<(), Denial>> + Send + 'a>> {
        Box::pin(ext.ask(parts, client_ip, &self.stats))
    }

    /// Verifies a bearer token. Boxed and type-erased, so that neither the future nor its code
    /// sits in `admit`, which requests without a token run (measured: inlined, it cost every
    /// service request about 200 instructions).
    fn verify_jwt<'a>(
        &'a self,
        gw: &'a Gateway,
        check: &'a JwtCheck,
        token: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<Verified, Denial>> + Send + 'a>> {
        Box::pin(self.verify_jwt_now(gw, check, token))
    }

    async fn verify_jwt_now(&self, gw: &Gateway, check: &JwtCheck, token: &str) -> Result<Verified, Denial> {
        let t = gatehouse_jwt::decode(token).map_err(|_| self.invalid("malformed token"))?;
        // The unverified `iss` only picks the entry; that entry's keys and its issuer check decide.
        let iss = t.claims().iss.as_deref();
        let issuer = check
            .issuers
            .iter()
            .find(|i| i.issuer.is_none() || i.issuer.as_deref() == iss)
            .ok_or_else(|| self.invalid("unknown issuer"))?;
        // The claims first: a token that is expired or for another audience never makes the
        // gateway fetch keys. (The signature is checked below all the same.)
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        t.claims().validate(now, &issuer.validation).map_err(|e| self.invalid(claim_reason(&e)))?;
        let app = match &issuer.keys {
            IssuerKeys::Apps => Some(self.app_signed(gw, issuer, &t)?),
            IssuerKeys::Set(source) => {
                let Some(set) = source.keys(t.kid()).await else {
                    self.stats.keys_unavailable.inc();
                    return Err(Denial::KeysUnavailable);
                };
                if !set.find(t.kid(), t.algorithm()).any(|k| t.verify(k).is_ok()) {
                    return Err(self.invalid("bad signature, algorithm or key id"));
                }
                // Only an app that trusts this issuer can be named by its tokens.
                let named = issuer.app_claim.as_deref().and_then(|c| t.claims().get_str(c));
                let app = named.and_then(|id| gw.by_id.get(id));
                app.filter(|a| issuer.issuer.as_deref().is_some_and(|iss| a.trusts_issuer(iss))).cloned()
            }
        };
        let claims: Vec<_> = issuer
            .forward
            .iter()
            .filter_map(|(claim, header)| Some((header.clone(), claim_value(t.claims().raw().get(claim)?)?)))
            .collect();
        Ok(Verified { app, plan: issuer.plan.clone(), claims, strip_token: issuer.strip_token })
    }

    /// The app whose own key signed `t`: by `kid`, else the app its `app_claim` (default `sub`) names.
    fn app_signed(
        &self,
        gw: &Gateway,
        issuer: &IssuerCheck,
        t: &gatehouse_jwt::Token<'_>,
    ) -> Result<Arc<AppEntry>, Denial> {
        Ok(match t.kid() {
            Some(kid) => {
                let (app, key) = gw.by_kid.get(kid).ok_or_else(|| self.invalid("unknown kid"))?;
                t.verify(key).map_err(|_| self.invalid("bad signature or algorithm"))?;
                app.clone()
            }
            None => {
                let claim = issuer.app_claim.as_deref().unwrap_or("sub");
                let id = t.claims().get_str(claim).ok_or_else(|| self.invalid("no app claim"))?;
                let app = gw.by_id.get(id).ok_or_else(|| self.invalid("unknown app in token"))?;
                if !app.jwt_keys.iter().any(|k| k.algorithm() == t.algorithm() && t.verify(k).is_ok()) {
                    return Err(self.invalid("bad signature or algorithm"));
                }
                app.clone()
            }
        })
    }

    fn invalid(&self, reason: &'static str) -> Denial {
        self.stats.invalid_credentials.inc();
        tracing::debug!(service = %self.name, reason, "credentials refused");
        Denial::InvalidCredentials { challenge: self.invalid_challenge.clone(), reason }
    }

    /// Request headers for the backend: the app id (whatever the client sent under that name
    /// removed), then the service's and the plan's rewrites.
    pub fn rewrite_request(&self, a: &Admitted, headers: &mut HeaderMap) {
        if let Some(name) = &self.app_id_header {
            // `insert` replaces whatever the client sent under the name.
            match &a.app {
                Some(app) => drop(headers.insert(name.clone(), app.id_value.clone())),
                None => drop(headers.remove(name)),
            }
        }
        self.plugins.request.apply(headers);
        if let Some(p) = &a.plan {
            p.plugins.request.apply(headers);
        }
    }

    /// Response headers for the client: the service's and plan's rewrites, then `RateLimit-*`.
    pub fn rewrite_response<H: EditHeaders + ?Sized>(&self, a: &Admitted, headers: &mut H) {
        self.plugins.response.apply(headers);
        if let Some(p) = &a.plan {
            p.plugins.response.apply(headers);
        }
        if let Some((q, limit)) = &a.quota {
            quota_headers(headers, limit.clone(), q.remaining, q.reset_us.div_ceil(1_000_000));
        }
    }
}

/// Tells a client its quota: `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset`
/// (seconds until the whole burst is available again).
pub fn quota_headers<H: EditHeaders + ?Sized>(headers: &mut H, limit: HeaderValue, remaining: u64, reset_secs: u64) {
    headers.insert(&RATELIMIT_LIMIT, limit);
    headers.insert(&RATELIMIT_REMAINING, number(remaining));
    headers.insert(&RATELIMIT_RESET, number(reset_secs));
}

/// Small numbers as header values, made once and never freed, so the `RateLimit-*` headers of
/// a response cost no allocation.
static SMALL_NUMBERS: LazyLock<Box<[HeaderValue]>> = LazyLock::new(|| {
    (0..4096u32).map(|n| HeaderValue::from_static(Box::leak(n.to_string().into_boxed_str()))).collect()
});

fn number(n: u64) -> HeaderValue {
    usize::try_from(n).ok().and_then(|i| SMALL_NUMBERS.get(i)).cloned().unwrap_or_else(|| n.into())
}

/// A claim as a header value: a string as it is, a number or boolean as JSON writes it, an
/// array of those joined by `,` (an HTTP list), an object as compact JSON. `None` (nothing sent)
/// when the result could be read otherwise than it was meant: control characters, whitespace
/// around a value (backends trim it: `" admin"` would become `admin`), an array element holding a
/// `,` or a `"` (`["a,admin"]` would read as two).
fn claim_value(v: &serde_json::Value) -> Option<HeaderValue> {
    use serde_json::Value;
    let plain = |s: &str| !s.is_empty() && s.trim() == s;
    let scalar = |v: &Value| match v {
        Value::String(s) if plain(s) => Some(s.clone()),
        Value::Number(_) | Value::Bool(_) => Some(v.to_string()),
        _ => None,
    };
    let text = match v {
        Value::Array(items) if !items.is_empty() => {
            let parts = items.iter().map(scalar).collect::<Option<Vec<_>>>()?;
            if parts.iter().any(|p| p.contains([',', '"'])) {
                return None;
            }
            parts.join(",")
        }
        Value::Object(_) => v.to_string(),
        _ => scalar(v)?,
    };
    HeaderValue::try_from(text).ok()
}

fn claim_reason(e: &gatehouse_jwt::JwtError) -> &'static str {
    use gatehouse_jwt::JwtError as E;
    match e {
        E::Expired => "token expired",
        E::NotYetValid => "token not yet valid",
        E::WrongIssuer => "wrong issuer",
        E::WrongAudience => "wrong audience",
        E::MissingExpiry => "token without exp",
        _ => "invalid claims",
    }
}

#[cfg(test)]
mod tests {
    use super::claim_value;
    use serde_json::json;

    #[test]
    fn claims_become_header_values_only_when_they_read_one_way() {
        let v = |j: serde_json::Value| claim_value(&j).map(|h| h.to_str().expect("text").to_string());
        assert_eq!(v(json!("user-7")), Some("user-7".into()));
        assert_eq!(v(json!("read write")), Some("read write".into()));
        assert_eq!(v(json!(42)), Some("42".into()));
        assert_eq!(v(json!(true)), Some("true".into()));
        assert_eq!(v(json!(["a", "b", 3])), Some("a,b,3".into()));
        assert_eq!(v(json!({"role": "x"})), Some(r#"{"role":"x"}"#.into()));
        for ambiguous in [
            json!(" admin"),
            json!("admin\t"),
            json!(""),
            json!("a\r\nx-admin: 1"),
            json!(["a,admin"]),
            json!(["a\"b"]),
            json!(["a", {"b": 1}]),
            json!([]),
            json!(null),
        ] {
            assert_eq!(v(ambiguous.clone()), None, "{ambiguous}");
        }
    }
}
