//! Target `router`: route tables and the requests routed by them. The router's hash probes (one
//! map per prefix length, one per wildcard suffix length) must answer what a scan of every site
//! and route answers: the site by exact host, else the longest `*` suffix with a label before it,
//! else `*`; within the site, the longest prefix of the path.
//!
//! The input is text, one item per line. Before the first empty line, one site per line: host
//! patterns separated by `,`, then path prefixes, separated by spaces. After it (or all of it,
//! against a fixed table, when there is no empty line) one request per line: the host, a space,
//! the path. The method plays no part in routing (the Admit stage's ACL reads it).

use gatehouse_router::{BuildError, Router};

/// A table of exact names, wildcards, a catch-all, nested prefixes and a port-less IPv6 literal.
const FIXED: &str = "example.com,www.example.com / /api/ /api/v2/ /api/v2/users
*.example.com / /static/
*.deep.example.com /
api.test /v1 /v1/ /v2/
*.test /
[::1],127.0.0.1 /
* /static /health";

/// One site of a table: host patterns and path prefixes, as written.
struct Site<'a> {
    hosts: Vec<&'a str>,
    prefixes: Vec<&'a str>,
}

/// What a route resolves to: its site's index and its prefix.
type Found<'a> = (usize, &'a str);

/// Builds the table the input gives (or the fixed one) and routes every request line with the
/// router and with a scan, which must agree.
pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (table, requests) = text.split_once("\n\n").unwrap_or((FIXED, text));
    let sites: Vec<Site<'_>> = table.lines().map(site).collect();
    let Some(router) = build(&sites) else {
        return;
    };
    for line in requests.lines() {
        let (host, path) = line.split_once(' ').unwrap_or(("", line));
        let found = router.lookup(host, path).copied();
        if let Some((_, prefix)) = found {
            assert!(path.starts_with(prefix), "`{prefix}` routed `{path}`");
        }
        // Names over 255 bytes are refused before routing (the proxy's Host check); the router
        // may send them to the catch-all instead of lowering their case.
        if normalise(host).len() <= 255 {
            assert_eq!(found, scan(&sites, host, path), "host `{host}`, path `{path}`");
        }
    }
}

fn site(line: &str) -> Site<'_> {
    let mut words = line.split(' ');
    let hosts = words.next().unwrap_or("").split(',').collect();
    Site { hosts, prefixes: words.collect() }
}

/// The router for `sites`, or `None` when the builder refused a duplicate, which must be one.
fn build<'a>(sites: &[Site<'a>]) -> Option<Router<Found<'a>>> {
    let mut builder = Router::builder();
    for (i, s) in sites.iter().enumerate() {
        let routes = s.prefixes.iter().map(|&p| (p.to_string(), (i, p)));
        match builder.site(s.hosts.iter().copied(), routes) {
            Ok(()) => {}
            Err(BuildError::DuplicateHost(h)) => {
                let taken = sites[..=i].iter().flat_map(|s| &s.hosts).filter(|p| p.eq_ignore_ascii_case(&h)).count();
                assert!(taken > 1, "`{h}` refused as a duplicate host");
                return None;
            }
            Err(BuildError::DuplicatePath(p)) => {
                assert!(s.prefixes.iter().filter(|&&q| q == p).count() > 1, "`{p}` refused as a duplicate path");
                return None;
            }
        }
    }
    Some(builder.build())
}

/// The host without port, trailing dot and upper case, as routing sees it.
fn normalise(host: &str) -> String {
    let host = if host.starts_with('[') {
        host.find(']').map_or(host, |end| &host[..=end])
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => host,
        }
    };
    host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase()
}

/// Routing by looking at every site and route.
fn scan<'a>(sites: &[Site<'a>], host: &str, path: &str) -> Option<Found<'a>> {
    let host = normalise(host);
    let pattern = |p: &str| p.to_ascii_lowercase();
    let exact = sites.iter().position(|s| s.hosts.iter().any(|p| pattern(p) == host));
    let wildcard = || {
        let suffixes = sites.iter().enumerate().flat_map(|(i, s)| {
            s.hosts.iter().filter_map(move |p| Some((i, p.strip_prefix('*').filter(|rest| !rest.is_empty())?)))
        });
        suffixes
            .filter(|(_, suffix)| host.len() > suffix.len() && host.ends_with(&pattern(suffix)))
            .max_by_key(|(_, suffix)| suffix.len())
            .map(|(i, _)| i)
    };
    let catch_all = || sites.iter().position(|s| s.hosts.contains(&"*"));
    let i = exact.or_else(wildcard).or_else(catch_all)?;
    let prefix = sites[i].prefixes.iter().filter(|p| path.starts_with(**p)).max_by_key(|p| p.len())?;
    Some((i, prefix))
}
