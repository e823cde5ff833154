//! `paths` and `normalize_path`: how request paths are normalized before anything judges them
//! (`gatehouse-path`; docs/security.md, "Paths"), and the checks that keep configured paths
//! reachable and guards on normalized paths only.

use crate::gateway::Acl;
use crate::model::Config;
use serde::Deserialize;

/// How every normalized request path is made (the top-level `paths` section).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Paths {
    /// Merge runs of `/` into one.
    pub merge_slashes: bool,
    /// `%2F`, `%5C` and `\`: `reject` (400), `keep`, or `decode` (each becomes `/`).
    pub escaped_slashes: EscapedSlashes,
}

impl Default for Paths {
    fn default() -> Self {
        Paths { merge_slashes: true, escaped_slashes: EscapedSlashes::Reject }
    }
}

/// What happens to an escaped slash or backslash, and to a bare backslash.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EscapedSlashes {
    /// Refuse the request (400).
    #[default]
    Reject,
    /// Keep them as they are.
    Keep,
    /// Make each a `/`.
    Decode,
}

impl Paths {
    /// The normalizer's rules.
    pub fn rules(&self) -> gatehouse_path::Rules {
        gatehouse_path::Rules {
            merge_slashes: self.merge_slashes,
            escaped_slashes: match self.escaped_slashes {
                EscapedSlashes::Reject => gatehouse_path::EscapedSlashes::Reject,
                EscapedSlashes::Keep => gatehouse_path::EscapedSlashes::Keep,
                EscapedSlashes::Decode => gatehouse_path::EscapedSlashes::Decode,
            },
        }
    }
}

/// Why `path`, configured as a prefix or a glob, could never match a normalized request path;
/// `None` when it can.
fn unreachable(path: &str, rules: gatehouse_path::Rules) -> Option<String> {
    match gatehouse_path::normalize(path, rules) {
        Ok(n) if n == path => None,
        Ok(n) => Some(format!("`{path}` is not a normalized path (requests are matched as `{n}`)")),
        Err(e) => Some(format!("`{path}` is not a path a request can have: {e}")),
    }
}

pub(crate) fn validate(c: &Config, err: &mut impl FnMut(String, String)) {
    let rules = c.paths.rules();
    for (name, site) in &c.sites {
        for (i, r) in site.routes.iter().enumerate() {
            if r.normalize_path.unwrap_or(site.normalize_path) && r.path.starts_with('/') {
                if let Some(why) = unreachable(&r.path, rules) {
                    err(format!("sites.{name}.routes[{i}].path"), why);
                }
            }
        }
    }
    for (name, s) in &c.services {
        let p = format!("services.{name}");
        if s.normalize_path {
            if s.path.starts_with('/') {
                if let Some(why) = unreachable(&s.path, rules) {
                    err(format!("{p}.path"), why);
                }
            }
            acl_globs(&s.acl, &p, rules, err);
            continue;
        }
        // Raw paths reach the backend as sent: a guard on the path would judge another path
        // than the one the backend acts on.
        if s.acl.is_some() {
            err(format!("{p}.normalize_path"), "an acl judges normalized paths only: remove it or the acl".into());
        }
        if s.rate_limits.iter().any(|l| l.per_path) {
            err(format!("{p}.normalize_path"), "a per_path rate limit needs normalized paths".into());
        }
        for (app_name, app) in &c.apps {
            let Some(Some(plan_name)) = app.grants.get(name) else { continue };
            let Some(plan) = c.plans.get(plan_name) else { continue };
            if plan.acl.is_some() || plan.rate_limits.iter().any(|l| l.per_path) {
                err(
                    format!("apps.{app_name}.grants.{name}"),
                    format!(
                        "plan `{plan_name}` has an acl or a per_path rate limit, and service `{name}` has normalize_path: false"
                    ),
                );
            }
        }
    }
    for (name, plan) in &c.plans {
        acl_globs(&plan.acl, &format!("plans.{name}"), rules, err);
    }
}

/// Every path glob of `acl` (at `p`.acl) that could never match a normalized path.
fn acl_globs(acl: &Option<Acl>, p: &str, rules: gatehouse_path::Rules, err: &mut impl FnMut(String, String)) {
    for (side, list) in acl.iter().flat_map(|a| [("allow", &a.allow), ("deny", &a.deny)]) {
        for (j, rule) in list.iter().enumerate() {
            for (k, glob) in rule.paths.iter().enumerate() {
                if let Some(why) = glob_unreachable(glob, rules) {
                    err(format!("{p}.acl.{side}[{j}].paths[{k}]"), why);
                }
            }
        }
    }
}

/// [`unreachable`] for an ACL glob: its `*` and `**` stand for segment text.
fn glob_unreachable(glob: &str, rules: gatehouse_path::Rules) -> Option<String> {
    if !glob.starts_with('/') {
        return None;
    }
    let plain = glob.replace('*', "x");
    unreachable(&plain, rules).map(|_| format!("`{glob}` could never match a normalized path"))
}

#[cfg(test)]
mod tests {
    use crate::{compile, EscapedSlashes};

    const HEAD: &str = "listeners: {http: {bind: \"127.0.0.1:0\"}}\nupstreams: {u: {targets: [\"127.0.0.1:1\"]}}\n";

    fn errors(yaml: &str) -> Vec<String> {
        match compile(&format!("{HEAD}{yaml}")) {
            Ok(_) => Vec::new(),
            Err(e) => e.0.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn defaults_merge_slashes_and_reject_escaped_ones() {
        let c = compile(HEAD).expect("compiles");
        assert!(c.paths.merge_slashes);
        assert_eq!(c.paths.escaped_slashes, EscapedSlashes::Reject);
        let c =
            compile(&format!("{HEAD}paths: {{merge_slashes: false, escaped_slashes: decode}}\n")).expect("compiles");
        assert_eq!((c.paths.merge_slashes, c.paths.escaped_slashes), (false, EscapedSlashes::Decode));
        let e = errors("paths: {escaped_slashes: maybe}\n");
        assert!(e.len() == 1 && e[0].starts_with("paths.escaped_slashes: "), "{e:?}");
    }

    #[test]
    fn prefixes_no_normalized_path_can_match_are_errors() {
        let e = errors(
            "sites: {s: {hosts: [\"*\"], routes: [{path: /a//b, upstream: u}, {path: /c/../d, upstream: u}, {path: /%61, upstream: u}, {path: /raw//x, upstream: u, normalize_path: false}]}}\n\
             services: {api: {path: /api/./v1, upstream: u, acl: {deny: [{paths: [\"/x/../admin/**\"]}]}}}\n",
        );
        let want = [
            "sites.s.routes[0].path: `/a//b` is not a normalized path (requests are matched as `/a/b`)",
            "sites.s.routes[1].path: `/c/../d` is not a normalized path (requests are matched as `/d`)",
            "sites.s.routes[2].path: `/%61` is not a normalized path (requests are matched as `/a`)",
            "services.api.path: `/api/./v1` is not a normalized path (requests are matched as `/api/v1`)",
            "services.api.acl.deny[0].paths[0]: `/x/../admin/**` could never match a normalized path",
        ];
        assert_eq!(e, want);
    }

    #[test]
    fn guards_on_raw_paths_are_refused() {
        let e = errors(
            "services: {raw: {path: /raw, upstream: u, normalize_path: false, acl: {deny: [{paths: [\"/admin/**\"]}]}, rate_limits: [{limit: 5, key: client_ip, per_path: true}]}}\n\
             plans: {p: {acl: {allow: [{paths: [\"/**\"]}]}}}\n\
             apps: {a: {key: k0123456789abcdef, grants: {raw: p}}}\n",
        );
        assert!(e.iter().any(|m| m.starts_with("services.raw.normalize_path: an acl")), "{e:?}");
        assert!(e.iter().any(|m| m.starts_with("services.raw.normalize_path: a per_path")), "{e:?}");
        assert!(e.iter().any(|m| m.starts_with("apps.a.grants.raw: plan `p`")), "{e:?}");
    }
}
