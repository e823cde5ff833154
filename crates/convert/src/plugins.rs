//! hyperapi filters (RateLimit, Header, ACL) become the plugins of a Gatehouse service (a service's
//! own filters) or plan (an SLA's filters).

use super::hyperapi::{AclSetting, Filter, HeaderSetting, PathMatcher, RateLimitSetting};
use super::{entry, Report, Untranslatable};
use gatehouse_config::is_token;
use serde::de::DeserializeOwned;
use serde_yaml::{Mapping, Value};

/// The methods hyperapi's `*` stood for (HEAD is not among them).
const ANY_METHOD: [&str; 6] = ["GET", "POST", "DELETE", "PUT", "OPTIONS", "PATCH"];

/// Where the filters come from.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Scope {
    /// A service's own filters; hyperapi counted their rate limits for all callers together.
    Service {
        /// Whether the service has auth, so that callers are apps.
        authenticated: bool,
    },
    /// An SLA's filters, counted per client.
    Plan,
}

/// Header changes in one direction: removals, then values set (in order, each replacing).
#[derive(Default)]
struct Ops {
    remove: Vec<String>,
    set: Vec<(String, String)>,
}

#[derive(Default)]
struct Plugins {
    allow: Vec<Value>,
    deny: Vec<Value>,
    allow_lists: usize,
    rate_limits: Vec<Value>,
    request: Ops,
    response: Ops,
}

/// Converts `filters` (found at `p`, e.g. `services[0].filters`) into `acl`, `rate_limits` and
/// `headers` entries of `out`.
pub(super) fn plugins(report: &mut Report, p: &str, filters: &[Filter], scope: Scope, out: &mut Mapping) {
    let mut acc = Plugins::default();
    for (k, f) in filters.iter().enumerate() {
        let fp = format!("{p}[{k}]");
        report.extra(&fp, &f.extra);
        match f.kind.as_str() {
            "RateLimit" => {
                if let Some(s) = setting::<RateLimitSetting>(report, &fp, &f.setting) {
                    report.extra(&format!("{fp}.setting"), &s.extra);
                    rate_limit(report, &fp, &s, scope, &mut acc);
                }
            }
            "Header" => {
                if let Some(s) = setting::<HeaderSetting>(report, &fp, &f.setting) {
                    report.extra(&format!("{fp}.setting"), &s.extra);
                    headers(report, &fp, &s, &mut acc);
                }
            }
            "ACL" => {
                if let Some(s) = setting::<AclSetting>(report, &fp, &f.setting) {
                    report.extra(&format!("{fp}.setting"), &s.extra);
                    if scope == (Scope::Service { authenticated: false }) {
                        report.note(
                            &fp,
                            "hyperapi 0.2.2 applied ACL filters to authenticated callers only, so this one had no effect; Gatehouse enforces it",
                        );
                    }
                    acl(report, &fp, &s, &mut acc);
                }
            }
            other => report.note(fp, format!("filter type {other} has no Gatehouse equivalent; dropped")),
        }
    }

    if !acc.allow.is_empty() || !acc.deny.is_empty() {
        let mut acl = Mapping::new();
        for (name, rules) in [("allow", acc.allow), ("deny", acc.deny)] {
            if !rules.is_empty() {
                entry(&mut acl, name, Value::Sequence(rules));
            }
        }
        entry(out, "acl", acl);
    }
    if !acc.rate_limits.is_empty() {
        entry(out, "rate_limits", Value::Sequence(acc.rate_limits));
    }
    let mut rewrite = Mapping::new();
    for (dir, ops) in [("request", acc.request), ("response", acc.response)] {
        let mut m = Mapping::new();
        if !ops.remove.is_empty() {
            entry(&mut m, "remove", Value::Sequence(ops.remove.into_iter().map(Value::from).collect()));
        }
        if !ops.set.is_empty() {
            let set: Mapping = ops.set.into_iter().map(|(n, v)| (Value::from(n), Value::from(v))).collect();
            entry(&mut m, "set", set);
        }
        if !m.is_empty() {
            entry(&mut rewrite, dir, m);
        }
    }
    if !rewrite.is_empty() {
        entry(out, "headers", rewrite);
    }
}

fn setting<T: DeserializeOwned>(report: &mut Report, fp: &str, v: &Value) -> Option<T> {
    serde_yaml::from_value(v.clone())
        .map_err(|e| report.note(format!("{fp}.setting"), format!("{e}; filter dropped")))
        .ok()
}

/// hyperapi's token bucket holds `burst` tokens and gains `limit` every `interval` seconds;
/// Gatehouse's GCRA admits `limit` per `interval` with bursts of `burst`.
fn rate_limit(report: &mut Report, fp: &str, s: &RateLimitSetting, scope: Scope, acc: &mut Plugins) {
    let (interval, mut limit, burst) = (s.interval, s.limit, s.burst);
    if interval < 1 || limit < 1 || burst < 1 {
        report.note(
            fp,
            format!("interval {interval}, limit {limit}, burst {burst}: not a working limit in hyperapi (each must be at least 1); dropped"),
        );
        return;
    }
    if u128::from(interval.unsigned_abs()) * 1_000_000 < u128::from(limit.unsigned_abs()) {
        report.note(fp, format!("{limit} per {interval}s is more than one request per microsecond, which Gatehouse cannot measure; dropped"));
        return;
    }
    if burst < limit {
        report.note(
            format!("{fp}.setting.limit"),
            format!("the bucket held only {burst} (burst), so hyperapi admitted at most {burst} per interval; written as limit {burst}"),
        );
        limit = burst;
    }
    let mut m = Mapping::new();
    entry(&mut m, "limit", limit);
    entry(&mut m, "interval", format!("{interval}s"));
    entry(&mut m, "burst", burst);
    if let Scope::Service { .. } = scope {
        // hyperapi kept one bucket for all callers of the service together.
        entry(&mut m, "key", "service");
    }
    acc.rate_limits.push(Value::Mapping(m));
}

/// hyperapi removed, then inserted, filter by filter; merging removals into one list and dropping
/// earlier values a later filter removes gives the same result under Gatehouse's remove-then-set.
fn headers(report: &mut Report, fp: &str, s: &HeaderSetting, acc: &mut Plugins) {
    let ops = match s.operate_on.as_str() {
        "request" => &mut acc.request,
        "response" => &mut acc.response,
        other => {
            report.note(
                format!("{fp}.setting.operate_on"),
                format!("`{other}` is neither request nor response, so hyperapi never applied it; dropped"),
            );
            return;
        }
    };
    for (i, name) in s.removal.iter().enumerate() {
        let name = name.to_ascii_lowercase();
        if !is_token(&name) {
            report.note(format!("{fp}.setting.removal[{i}]"), format!("`{name}` is not a header name; dropped"));
            continue;
        }
        ops.set.retain(|(n, _)| *n != name);
        if !ops.remove.contains(&name) {
            ops.remove.push(name);
        }
    }
    for (i, (name, value)) in s.injection.iter().enumerate() {
        let name = name.to_ascii_lowercase();
        if !is_token(&name) || value.bytes().any(|b| (b < b' ' && b != b'\t') || b == 0x7f) {
            report.note(format!("{fp}.setting.injection[{i}]"), "not a valid header name and value; dropped");
            continue;
        }
        match ops.set.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1.clone_from(value),
            None => ops.set.push((name, value.clone())),
        }
    }
}

/// Each hyperapi ACL filter is a list that must pass on its own: an `allow` list needs one of its
/// rules to match, a `deny` list none.
fn acl(report: &mut Report, fp: &str, s: &AclSetting, acc: &mut Plugins) {
    let allow = s.access_control == "allow";
    if !allow && s.access_control != "deny" {
        report.note(
            format!("{fp}.setting.access_control"),
            format!("`{}` is not `allow`, so hyperapi treated it as deny; so does Gatehouse", s.access_control),
        );
    }
    let rules: Vec<Value> =
        s.paths.iter().enumerate().filter_map(|(j, m)| rule(report, &format!("{fp}.setting.paths[{j}]"), m)).collect();
    if !allow {
        acc.deny.extend(rules);
    } else if rules.is_empty() {
        report
            .note(fp, "an allow list with no usable rule refuses every request; written as a deny rule for everything");
        acc.deny.push(Value::Mapping(Mapping::new()));
    } else {
        acc.allow_lists += 1;
        if acc.allow_lists == 2 {
            report.note(
                fp,
                "a second allow list here: hyperapi required a match in each, Gatehouse requires a match in any; merged",
            );
        }
        acc.allow.extend(rules);
    }
}

fn rule(report: &mut Report, rp: &str, m: &PathMatcher) -> Option<Value> {
    report.extra(rp, &m.extra);
    let methods = methods(report, rp, &m.methods)?;
    let globs = match path_globs(&m.path_pattern) {
        Ok((globs, approximation)) => {
            if let Some(why) = approximation {
                report.note(format!("{rp}.path_pattern"), format!("`{}` {why}", m.path_pattern));
            }
            globs
        }
        Err(why) => {
            report.note(format!("{rp}.path_pattern"), format!("`{}` {why}; rule dropped", m.path_pattern));
            return None;
        }
    };
    let mut r = Mapping::new();
    entry(&mut r, "methods", Value::Sequence(methods.into_iter().map(Value::from).collect()));
    if !globs.is_empty() {
        entry(&mut r, "paths", Value::Sequence(globs.into_iter().map(Value::from).collect()));
    }
    Some(Value::Mapping(r))
}

/// hyperapi compared methods case-sensitively, so only upper-case names ever matched.
fn methods(report: &mut Report, rp: &str, text: &str) -> Option<Vec<String>> {
    if text.trim() == "*" {
        return Some(ANY_METHOD.iter().map(|m| m.to_string()).collect());
    }
    let mut out = Vec::new();
    for m in text.split(',').map(str::trim).filter(|m| !m.is_empty()) {
        if is_token(m) && !m.bytes().any(|b| b.is_ascii_lowercase()) {
            out.push(m.to_string());
        } else {
            report.note(
                format!("{rp}.methods"),
                format!("`{m}` is not an upper-case method name, so it never matched; dropped"),
            );
        }
    }
    if out.is_empty() {
        report.note(rp, "no method left, so the rule never matched; dropped");
        return None;
    }
    Some(out)
}

/// Translates a hyperapi `path_pattern` into Gatehouse globs (none: any path), with a remark when
/// the pattern was read as a regular expression.
///
/// hyperapi 0.2.2 matched patterns with the `glob` crate, where `*` matches any characters, `/`
/// included: Gatehouse's `**`. The path below the service prefix starts with `/`, so a pattern
/// that starts with neither `/` nor `*` never matched.
pub(super) fn path_globs(pattern: &str) -> Result<(Vec<String>, Option<String>), Untranslatable> {
    let (glob, why) = match regex_as_glob(pattern) {
        Some(glob) => (
            glob?,
            Some(
                "reads as a regular expression (older hyperapi); 0.2.2 matched it as a glob, where it matched nothing; translated as the regular expression"
                    .to_string(),
            ),
        ),
        None => (pattern.to_string(), None),
    };
    if !glob.is_empty() && glob.bytes().all(|b| b == b'*') {
        return Ok((Vec::new(), why));
    }
    if glob.contains(['?', '[', ']']) {
        return Err(Untranslatable::GlobClass);
    }
    if glob.starts_with('/') {
        return Ok((vec![any_run(&glob)], why));
    }
    let Some(rest) = glob.strip_prefix('*').map(|r| r.trim_start_matches('*')) else {
        return Err(Untranslatable::NotRooted);
    };
    // The leading `*` covers the path's own leading `/`, and may match nothing when `rest` starts
    // with `/`.
    let mut globs = vec![format!("/**{}", any_run(rest))];
    if rest.starts_with('/') {
        globs.push(any_run(rest));
    }
    Ok((globs, why))
}

/// A pattern written as a regular expression: `None` when it does not look like one, else the
/// hyperapi-style glob it stands for, or why it has none.
fn regex_as_glob(p: &str) -> Option<Result<String, Untranslatable>> {
    let regex = p.starts_with('^') || p.ends_with('$') || ["\\", "(", "|", ".*", ".+"].iter().any(|s| p.contains(s));
    if !regex {
        return None;
    }
    let body = p.strip_prefix('^').unwrap_or(p);
    let body = body.strip_suffix('$').unwrap_or(body).replace(".*", "*");
    if body.contains(['.', '+', '?', '(', ')', '[', ']', '{', '}', '|', '\\', '^', '$']) {
        return Some(Err(Untranslatable::Regex));
    }
    Some(Ok(body))
}

/// Every run of `*` as `**`.
fn any_run(glob: &str) -> String {
    let mut out = String::with_capacity(glob.len() + 4);
    for c in glob.chars() {
        if c != '*' {
            out.push(c);
        } else if !out.ends_with('*') {
            out.push_str("**");
        }
    }
    out
}
