//! A compiled CORS policy (`cors:` of a route or a service; the Fetch standard's CORS protocol):
//! preflights answered at the edge, and the `Access-Control-*` headers of every other answer.

use crate::EditHeaders;
use gatehouse_config::Cors;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::Method;

/// `Access-Control-Request-Private-Network` (Private Network Access).
static REQUEST_PRIVATE_NETWORK: HeaderName = HeaderName::from_static("access-control-request-private-network");
/// `Access-Control-Allow-Private-Network`.
static ALLOW_PRIVATE_NETWORK: HeaderName = HeaderName::from_static("access-control-allow-private-network");

/// The headers a policy answers with, which it takes off the backend's answers when it replaces
/// them.
const POLICY_HEADERS: [&HeaderName; 7] = [
    &header::ACCESS_CONTROL_ALLOW_ORIGIN,
    &header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
    &header::ACCESS_CONTROL_EXPOSE_HEADERS,
    &header::ACCESS_CONTROL_ALLOW_METHODS,
    &header::ACCESS_CONTROL_ALLOW_HEADERS,
    &header::ACCESS_CONTROL_MAX_AGE,
    &ALLOW_PRIVATE_NETWORK,
];

/// Whether `o` is `lower` (lowercase) but for the case of ASCII letters: the bytes compared
/// first, as a browser sends an origin lowercase.
fn eq_lower(o: &[u8], lower: &[u8]) -> bool {
    o == lower || o.eq_ignore_ascii_case(lower)
}

/// One allowed origin.
#[derive(Debug)]
enum Origin {
    /// `scheme://host[:port]`, lowercase.
    Exact(String),
    /// `scheme://*.domain[:port]`: `scheme://`, `.domain`, and `:port` when one is written.
    Subdomains { scheme: String, suffix: String, port: String },
    /// A regular expression the whole origin matches.
    Pattern(regex::bytes::Regex),
}

impl Origin {
    fn parse(o: &str) -> Result<Origin, String> {
        if let Some(e) = gatehouse_config::origin_error(o) {
            return Err(e);
        }
        if let Some(re) = o.strip_prefix('~') {
            return regex::bytes::Regex::new(&format!("^(?:{re})$")).map(Origin::Pattern).map_err(|e| e.to_string());
        }
        let lower = o.to_ascii_lowercase();
        let Some((scheme, rest)) = lower.split_once("://") else { return Err(format!("`{o}` is not an origin")) };
        match rest.strip_prefix('*') {
            Some(domain) => {
                let (suffix, port) = match domain.rfind(':') {
                    Some(i) => (&domain[..i], &domain[i..]),
                    None => (domain, ""),
                };
                Ok(Origin::Subdomains { scheme: format!("{scheme}://"), suffix: suffix.into(), port: port.into() })
            }
            None => Ok(Origin::Exact(lower)),
        }
    }

    /// Whether `o`, an `Origin` header's bytes, is this origin.
    fn matches(&self, o: &[u8]) -> bool {
        match self {
            Origin::Exact(origin) => eq_lower(o, origin.as_bytes()),
            Origin::Pattern(re) => re.is_match(o),
            Origin::Subdomains { scheme, suffix, port } => {
                // `scheme://` + one or more labels + `.domain` + `:port`.
                let (s, p) = (scheme.len(), port.len());
                if o.len() <= s + suffix.len() + p
                    || !eq_lower(&o[..s], scheme.as_bytes())
                    || !eq_lower(&o[o.len() - p..], port.as_bytes())
                {
                    return false;
                }
                let host = &o[s..o.len() - p];
                let (labels, domain) = host.split_at(host.len() - suffix.len());
                eq_lower(domain, suffix.as_bytes())
                    && labels.first() != Some(&b'.')
                    && labels.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
            }
        }
    }
}

/// A route's or a service's CORS policy, compiled.
#[derive(Debug)]
pub struct Policy {
    /// `None`: any origin (`*`).
    origins: Option<Vec<Origin>>,
    /// `None`: any method.
    methods: Option<Vec<String>>,
    methods_value: Option<HeaderValue>,
    /// `None`: any header the browser asks for; else lowercase names.
    headers: Option<Vec<String>>,
    headers_value: Option<HeaderValue>,
    expose: Option<HeaderValue>,
    credentials: bool,
    max_age: Option<HeaderValue>,
    private_network: bool,
    replace: bool,
}

/// A list as one header value (`GET, PUT`).
fn joined(list: &[String]) -> Option<HeaderValue> {
    (!list.is_empty()).then(|| HeaderValue::from_str(&list.join(", ")).ok()).flatten()
}

impl Policy {
    /// Compiles `c` (checked by the configuration's validation: an error here is one it missed).
    pub fn new(c: &Cors) -> Result<Policy, String> {
        let any = |l: &[String]| l.iter().any(|x| x == "*");
        let origins = match any(&c.origins) {
            true => None,
            false => Some(c.origins.iter().map(|o| Origin::parse(o)).collect::<Result<Vec<_>, _>>()?),
        };
        let methods = (!any(&c.methods)).then(|| c.methods.clone());
        let headers = (!any(&c.headers)).then(|| c.headers.iter().map(|h| h.to_ascii_lowercase()).collect::<Vec<_>>());
        Ok(Policy {
            origins,
            methods_value: methods.as_deref().and_then(joined),
            methods,
            headers_value: headers.as_deref().and_then(joined),
            headers,
            expose: joined(&c.expose_headers),
            credentials: c.credentials,
            max_age: c.max_age.map(|d| HeaderValue::from(d.0.as_secs())),
            private_network: c.private_network,
            replace: c.replace,
        })
    }

    /// Whether pages of `origin` may read answers.
    pub fn allows(&self, origin: &HeaderValue) -> bool {
        match &self.origins {
            None => true,
            Some(list) => list.iter().any(|o| o.matches(origin.as_bytes())),
        }
    }

    /// Whether answers say `*` whatever the origin (any origin, no credentials): they then need
    /// no `Vary: Origin`.
    fn uniform(&self) -> bool {
        self.origins.is_none() && !self.credentials
    }

    /// Whether the policy replaces the backend's own CORS headers (`override`).
    pub fn replaces(&self) -> bool {
        self.replace
    }

    /// `Access-Control-Allow-Origin` for an allowed `origin`.
    fn allow_origin(&self, origin: &HeaderValue) -> HeaderValue {
        match self.uniform() {
            true => HeaderValue::from_static("*"),
            false => origin.clone(),
        }
    }

    /// The answer's headers to a preflight (`OPTIONS` with `Origin` and
    /// `Access-Control-Request-Method`), or `None` for any other request. A preflight the policy
    /// refuses (an origin, a method, a header or private network access it does not allow) gets
    /// no `Access-Control-Allow-*` header, which the browser takes as a refusal.
    pub fn preflight(&self, method: &Method, req: &HeaderMap) -> Option<HeaderMap> {
        if method != Method::OPTIONS {
            return None;
        }
        let origin = req.get(header::ORIGIN)?;
        let asked = req.get(header::ACCESS_CONTROL_REQUEST_METHOD)?;
        let mut out = HeaderMap::new();
        let mut vary = "Origin, Access-Control-Request-Method, Access-Control-Request-Headers";
        let pna = req.get(&REQUEST_PRIVATE_NETWORK).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"true"));
        if pna {
            vary = "Origin, Access-Control-Request-Method, Access-Control-Request-Headers, \
                    Access-Control-Request-Private-Network";
        }
        out.insert(header::VARY, HeaderValue::from_static(vary));
        let asked_headers = req.get_all(header::ACCESS_CONTROL_REQUEST_HEADERS);
        let names = || {
            asked_headers
                .iter()
                .flat_map(|v| v.to_str().unwrap_or("\u{0}").split(','))
                .map(str::trim)
                .filter(|n| !n.is_empty())
        };
        let method_ok = match (&self.methods, asked.to_str()) {
            (_, Ok("GET" | "HEAD" | "POST")) | (None, Ok(_)) => true,
            (Some(list), Ok(m)) => list.iter().any(|x| x == m),
            (_, Err(_)) => false,
        };
        let headers_ok = match &self.headers {
            None => names().all(|n| n.bytes().all(|b| b.is_ascii_graphic())),
            Some(list) => names().all(|n| list.iter().any(|x| x.eq_ignore_ascii_case(n))),
        };
        if !self.allows(origin) || !method_ok || !headers_ok || (pna && !self.private_network) {
            return Some(out);
        }
        out.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, self.allow_origin(origin));
        if self.credentials {
            out.insert(header::ACCESS_CONTROL_ALLOW_CREDENTIALS, HeaderValue::from_static("true"));
        }
        let methods = match &self.methods_value {
            Some(v) => Some(v.clone()),
            None => Some(asked.clone()),
        };
        if let Some(m) = methods {
            out.insert(header::ACCESS_CONTROL_ALLOW_METHODS, m);
        }
        // What was asked for, when any header may be (`*` is no wildcard with credentials).
        let headers = match &self.headers_value {
            None if self.headers.is_none() => asked_headers.iter().next().cloned(),
            v => v.clone(),
        };
        if let Some(h) = headers {
            out.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, h);
        }
        if let Some(age) = &self.max_age {
            out.insert(header::ACCESS_CONTROL_MAX_AGE, age.clone());
        }
        if pna {
            out.insert(&ALLOW_PRIVATE_NETWORK, HeaderValue::from_static("true"));
        }
        Some(out)
    }

    /// The CORS headers of an answer to a request from `origin` (none: not a cross-origin
    /// request): the backend's own taken off first (`override`), then `Access-Control-Allow-Origin`,
    /// `-Credentials` and `-Expose-Headers` for an allowed origin, and `Vary: Origin` whenever
    /// the answer depends on it. With `override: false`, an answer that has its own
    /// `Access-Control-Allow-Origin` (`backend_own`) keeps what the backend said.
    pub fn answer(&self, origin: Option<&HeaderValue>, out: &mut impl EditHeaders, backend_own: bool) {
        if !self.uniform() {
            out.append(&header::VARY, HeaderValue::from_static("Origin"));
        }
        if self.replace {
            out.remove_all(&POLICY_HEADERS);
        } else if backend_own {
            return;
        }
        let Some(origin) = origin.filter(|o| self.allows(o)) else { return };
        // Added beside nothing: the policy's names are off the answer (`override`), or the
        // backend set no `Access-Control-Allow-Origin`, and then its others are replaced.
        let mut set = |name: &HeaderName, value: HeaderValue| match self.replace {
            true => out.append(name, value),
            false => out.insert(name, value),
        };
        set(&header::ACCESS_CONTROL_ALLOW_ORIGIN, self.allow_origin(origin));
        if self.credentials {
            set(&header::ACCESS_CONTROL_ALLOW_CREDENTIALS, HeaderValue::from_static("true"));
        }
        if let Some(e) = &self.expose {
            set(&header::ACCESS_CONTROL_EXPOSE_HEADERS, e.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(yaml: &str) -> Policy {
        let c: Cors = serde_yaml::from_str(yaml).expect("yaml");
        Policy::new(&c).expect("policy")
    }

    fn v(s: &str) -> HeaderValue {
        HeaderValue::from_str(s).expect("value")
    }

    #[test]
    fn origins_match_exactly_by_subdomain_or_by_expression() {
        let p = policy(
            "origins: [\"https://app.example.com\", \"https://*.example.net\", \"http://*.dev.test:8080\", \"~https://[a-z]+\\\\.example\\\\.org\", \"~(?i)https://\\\\w+\\\\.example\\\\.com\"]",
        );
        for (origin, allowed) in [
            ("https://app.example.com", true),
            ("HTTPS://APP.EXAMPLE.COM", true),
            ("http://app.example.com", false),
            ("https://app.example.com:8443", false),
            ("https://app.example.com.evil.test", false),
            ("https://a.example.net", true),
            ("https://a.b.example.net", true),
            ("https://example.net", false),
            ("https://.example.net", false),
            ("https://evilexample.net", false),
            ("https://a.example.net:443", false),
            ("http://a.dev.test:8080", true),
            ("http://a.dev.test", false),
            ("https://shop.example.org", true),
            ("https://shop.example.org.evil.test", false),
            ("https://sh0p.example.org", false),
            ("https://SHOP.example.org", false),
            ("null", false),
        ] {
            assert_eq!(p.allows(&v(origin)), allowed, "{origin}");
        }
        assert!(p.allows(&v("HTTPS://Caps.EXAMPLE.com")), "(?i) and \\w");
        assert!(policy("origins: [\"*\"]").allows(&v("https://anything.test")));
    }

    fn preflight(p: &Policy, headers: &[(&str, &str)]) -> Option<HeaderMap> {
        let mut req = HeaderMap::new();
        for (k, val) in headers {
            req.append(HeaderName::from_bytes(k.as_bytes()).expect("name"), v(val));
        }
        p.preflight(&Method::OPTIONS, &req)
    }

    #[test]
    fn preflights_are_answered_or_refused_by_the_policy() {
        let p = policy(
            "{origins: [\"https://app.example.com\"], methods: [GET, PUT], headers: [content-type, x-app-key], credentials: true, max_age: 10m}",
        );
        let ok = preflight(
            &p,
            &[
                ("origin", "https://app.example.com"),
                ("access-control-request-method", "PUT"),
                ("access-control-request-headers", "Content-Type,x-app-key"),
            ],
        )
        .expect("a preflight");
        assert_eq!(ok["access-control-allow-origin"], "https://app.example.com");
        assert_eq!(ok["access-control-allow-credentials"], "true");
        assert_eq!(ok["access-control-allow-methods"], "GET, PUT");
        assert_eq!(ok["access-control-allow-headers"], "content-type, x-app-key");
        assert_eq!(ok["access-control-max-age"], "600");
        assert!(ok["vary"].to_str().unwrap_or("").starts_with("Origin, "));
        for refused in [
            vec![("origin", "https://evil.test"), ("access-control-request-method", "PUT")],
            vec![("origin", "https://app.example.com"), ("access-control-request-method", "DELETE")],
            vec![
                ("origin", "https://app.example.com"),
                ("access-control-request-method", "GET"),
                ("access-control-request-headers", "x-other"),
            ],
            vec![
                ("origin", "https://app.example.com"),
                ("access-control-request-method", "GET"),
                ("access-control-request-private-network", "true"),
            ],
        ] {
            let h = preflight(&p, &refused).expect("a preflight");
            assert!(!h.contains_key("access-control-allow-origin"), "{refused:?}: {h:?}");
            assert!(h.contains_key("vary"));
        }
        // Not a preflight: no Access-Control-Request-Method, or no Origin.
        assert!(preflight(&p, &[("origin", "https://app.example.com")]).is_none());
        assert!(preflight(&p, &[("access-control-request-method", "PUT")]).is_none());
        // Any header, with credentials: what was asked for is echoed (`*` would be taken literally).
        let any = policy("{origins: [\"https://a.test\"], headers: [\"*\"], credentials: true, private_network: true}");
        let h = preflight(
            &any,
            &[
                ("origin", "https://a.test"),
                ("access-control-request-method", "GET"),
                ("access-control-request-headers", "x-one, x-two"),
                ("access-control-request-private-network", "true"),
            ],
        )
        .expect("a preflight");
        assert_eq!(h["access-control-allow-headers"], "x-one, x-two");
        assert_eq!(h["access-control-allow-private-network"], "true");
    }

    #[test]
    fn answers_get_the_policy_in_place_of_the_backends() {
        let p = policy("{origins: [\"https://app.example.com\"], expose_headers: [x-request-id], credentials: true}");
        let mut h = HeaderMap::new();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, v("*"));
        p.answer(Some(&v("https://app.example.com")), &mut h, true);
        assert_eq!(h["access-control-allow-origin"], "https://app.example.com");
        assert_eq!(h["access-control-allow-credentials"], "true");
        assert_eq!(h["access-control-expose-headers"], "x-request-id");
        assert_eq!(h["vary"], "Origin");
        let mut h = HeaderMap::new();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, v("*"));
        p.answer(Some(&v("https://evil.test")), &mut h, true);
        assert!(!h.contains_key("access-control-allow-origin"), "{h:?}");
        let mut h = HeaderMap::new();
        p.answer(None, &mut h, false);
        assert_eq!((h.len(), &h["vary"]), (1, &v("Origin")));
        // Any origin without credentials: `*`, the same for every origin, so no Vary.
        let mut h = HeaderMap::new();
        policy("origins: [\"*\"]").answer(Some(&v("https://x.test")), &mut h, false);
        assert_eq!((h.len(), &h["access-control-allow-origin"]), (1, &v("*")));
        // `override: false` keeps the backend's.
        let keep = policy("{origins: [\"https://app.example.com\"], override: false}");
        let mut h = HeaderMap::new();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, v("https://other.test"));
        keep.answer(Some(&v("https://app.example.com")), &mut h, true);
        assert_eq!(h["access-control-allow-origin"], "https://other.test");
    }
}
