//! Cross-origin resource sharing (the Fetch standard's CORS protocol): which other origins' pages
//! a browser lets read a route's or a service's answers. Preflights are answered by the gateway;
//! answers get the `Access-Control-*` headers the policy gives.

use crate::units::Duration;
use serde::Deserialize;

/// A route's or a service's `cors` setting.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cors {
    /// Origins whose pages may read answers: `*` (any), an exact origin
    /// (`https://app.example.com`, with a port when not the scheme's), a wildcard subdomain
    /// (`https://*.example.com`: one or more labels before `example.com`), or a regular
    /// expression after `~` matched against the whole origin (`~^https://[a-z]+\.example\.org$`).
    pub origins: Vec<String>,
    /// Methods a preflight may ask for (`*`: any); GET, HEAD and POST need no preflight.
    #[serde(default = "default_methods")]
    pub methods: Vec<String>,
    /// Request headers a preflight may ask for, case-insensitive (`*`: any the browser asks
    /// for); the CORS-safelisted ones need none.
    #[serde(default)]
    pub headers: Vec<String>,
    /// Answer headers scripts may read beyond the safelisted ones (`*`: all, without
    /// credentials).
    #[serde(default)]
    pub expose_headers: Vec<String>,
    /// Let pages send cookies and HTTP authentication, and read the answers to them
    /// (`Access-Control-Allow-Credentials: true`); needs listed origins, not `*`.
    #[serde(default)]
    pub credentials: bool,
    /// How long a browser keeps a preflight's answer (`Access-Control-Max-Age`, whole seconds;
    /// Chromium keeps at most 2 h, Firefox 24 h); absent: the browser's default (5 s).
    #[serde(default)]
    pub max_age: Option<Duration>,
    /// Let public pages reach this private-network address (Private Network Access:
    /// `Access-Control-Allow-Private-Network: true` on preflights asking for it).
    #[serde(default)]
    pub private_network: bool,
    /// Replace the backend's own CORS headers (`true`), or leave an answer that has its own
    /// `Access-Control-Allow-Origin` as the backend made it (`false`).
    #[serde(default = "yes", rename = "override")]
    pub replace: bool,
}

fn default_methods() -> Vec<String> {
    ["GET", "HEAD", "POST"].map(String::from).to_vec()
}

fn yes() -> bool {
    true
}

/// A token (RFC 9110 §5.6.2): a method or a header name.
fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// What is wrong with origin pattern `o`, if anything.
pub fn origin_error(o: &str) -> Option<String> {
    if o == "*" {
        return None;
    }
    if let Some(re) = o.strip_prefix('~') {
        return regex::Regex::new(re).err().map(|e| format!("`{re}` is not a regular expression: {e}"));
    }
    let Some((scheme, rest)) = o.split_once("://") else {
        return Some(format!("`{o}` is not an origin: write `scheme://host[:port]`, `*`, or `~regex`"));
    };
    if scheme.is_empty() || !scheme.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b)) {
        return Some(format!("`{o}`: `{scheme}` is not a scheme"));
    }
    if rest.contains(['/', '?', '#']) {
        return Some(format!("`{o}`: an origin has no path (no `/` after the host)"));
    }
    let (host, port) = match rest.find(']') {
        Some(i) if rest.starts_with('[') => match &rest[i + 1..] {
            "" => (&rest[..=i], None),
            after => (&rest[..=i], Some(after.strip_prefix(':').unwrap_or(after))),
        },
        _ => match rest.rsplit_once(':') {
            Some((h, port)) => (h, Some(port)),
            None => (rest, None),
        },
    };
    if let Some(port) = port {
        if port.parse::<u16>().map_or(true, |p| p == 0) {
            return Some(format!("`{o}`: `{port}` is not a port"));
        }
    }
    let host = host.strip_prefix("*.").unwrap_or(host);
    let bracketed = host.starts_with('[') && host.ends_with(']');
    if host.is_empty() || (!bracketed && !host.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.".contains(&b))) {
        return Some(format!("`{o}`: `{host}` is not a host name (a wildcard is one `*.` before the domain)"));
    }
    None
}

impl Cors {
    /// What is wrong with the setting at `p` (`sites.web.routes[0]`, `services.api`).
    pub(crate) fn check(&self, p: &str, err: &mut impl FnMut(String, String)) {
        if self.origins.is_empty() {
            err(format!("{p}.cors.origins"), "at least one origin (or `*`)".into());
        }
        for (i, o) in self.origins.iter().enumerate() {
            if let Some(e) = origin_error(o) {
                err(format!("{p}.cors.origins[{i}]"), e);
            }
        }
        let any = self.origins.iter().any(|o| o == "*");
        if any && self.origins.len() > 1 {
            err(format!("{p}.cors.origins"), "`*` allows every origin: list no other".into());
        }
        if any && self.credentials {
            err(
                format!("{p}.cors.credentials"),
                "browsers refuse credentials with `Access-Control-Allow-Origin: *`: list the origins".into(),
            );
        }
        if self.credentials && self.expose_headers.iter().any(|h| h == "*") {
            err(format!("{p}.cors.expose_headers"), "`*` means no header with credentials: list them".into());
        }
        for (field, list) in
            [("methods", &self.methods), ("headers", &self.headers), ("expose_headers", &self.expose_headers)]
        {
            for (i, v) in list.iter().enumerate() {
                if v != "*" && !is_token(v) {
                    err(format!("{p}.cors.{field}[{i}]"), format!("`{v}` is not a token (RFC 9110 §5.6.2)"));
                }
            }
        }
        if let Some(d) = self.max_age {
            if d.0.subsec_nanos() != 0 {
                err(format!("{p}.cors.max_age"), "must be whole seconds".into());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "listeners: {http: {bind: \"127.0.0.1:0\"}}\nupstreams: {u: {targets: [\"127.0.0.1:1\"]}}\n";

    fn errors(yaml: &str) -> Vec<String> {
        match crate::compile(&format!("{HEAD}{yaml}")) {
            Ok(_) => Vec::new(),
            Err(e) => e.0.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn every_error_of_a_policy_is_named() {
        let e = errors(
            "sites: {s: {hosts: [\"*\"], routes: [{path: /, upstream: u, cors: {origins: [\"*\", \"https://a.test/\"], credentials: true, methods: [\"GE T\"], max_age: 1500ms}}]}}\n\
             services: {api: {path: /api, upstream: u, cors: {origins: []}}}\n",
        );
        let want = [
            "services.api.cors.origins: at least one origin (or `*`)",
            "sites.s.routes[0].cors.origins[1]: `https://a.test/`: an origin has no path (no `/` after the host)",
            "sites.s.routes[0].cors.origins: `*` allows every origin: list no other",
            "sites.s.routes[0].cors.credentials: browsers refuse credentials with `Access-Control-Allow-Origin: *`: list the origins",
            "sites.s.routes[0].cors.methods[0]: `GE T` is not a token (RFC 9110 §5.6.2)",
            "sites.s.routes[0].cors.max_age: must be whole seconds",
        ];
        assert_eq!(e, want);
        assert_eq!(
            errors("services: {api: {path: /api, upstream: u, cors: {origins: [\"https://*.a.test\"], orgins: []}}}\n")
                .len(),
            1
        );
        let ok = "services: {api: {path: /api, upstream: u, cors: {origins: [\"https://a.test\"], credentials: true, max_age: 10m, override: false}}}\n";
        let c = crate::compile(&format!("{HEAD}{ok}")).expect("compiles");
        let cors = c.services["api"].cors.as_ref().expect("cors");
        assert_eq!((cors.replace, cors.methods.len(), cors.max_age.map(|d| d.0.as_secs())), (false, 3, Some(600)));
    }

    #[test]
    fn origin_patterns() {
        for ok in [
            "*",
            "https://app.example.com",
            "http://localhost:3000",
            "https://*.example.com",
            "https://*.example.com:8443",
            "http://[::1]:8080",
            "http://[::1]",
            "~^https://[a-z]+\\.example\\.org$",
            "null",
        ] {
            let e = origin_error(ok);
            // `null` (sandboxed pages, files) is not an origin a policy should trust: refused.
            assert_eq!(e.is_none(), ok != "null", "{ok}: {e:?}");
        }
        for bad in [
            "https://app.example.com/",
            "app.example.com",
            "https://",
            "https://a.example.com:0",
            "https://a.example.com:99999",
            "https://*.*.example.com",
            "https://a_b.example.com",
            "~(",
        ] {
            assert!(origin_error(bad).is_some(), "{bad}");
        }
    }
}
