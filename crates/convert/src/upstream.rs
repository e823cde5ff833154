//! A hyperapi service's endpoints become one Gatehouse upstream: targets, balancing, timeouts and
//! the circuit breaker.

use super::hyperapi::{Service, Upstream};
use super::{entry, Report, Untranslatable};
use serde_yaml::{Mapping, Value};
use std::net::{IpAddr, SocketAddr};

/// Gatehouse's largest target weight.
const MAX_WEIGHT: u64 = 1000;

/// A target URL taken apart.
#[derive(Debug, PartialEq)]
pub(super) struct TargetUrl {
    /// Lower-case scheme.
    pub scheme: String,
    /// Host as written (brackets removed from IPv6).
    pub host: String,
    /// Port, or the scheme's default.
    pub port: u16,
    /// Path after the authority, `""` when none.
    pub path: String,
}

/// Parses `scheme://host[:port][/path]`.
pub(super) fn parse_target(url: &str) -> Result<TargetUrl, Untranslatable> {
    let (scheme, rest) = url.split_once("://").ok_or_else(|| Untranslatable::NotAUrl { url: url.into() })?;
    let scheme = scheme.to_ascii_lowercase();
    let (authority, path) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
    if authority.contains('@') {
        return Err(Untranslatable::UrlCredentials { url: url.into() });
    }
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (host, after) =
                v6.split_once(']').ok_or_else(|| Untranslatable::UnclosedBracket { url: url.into() })?;
            (host, after.strip_prefix(':'))
        }
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let port = match port {
        Some(p) => p.parse::<u16>().map_err(|_| Untranslatable::InvalidPort { url: url.into() })?,
        None if scheme == "https" => 443,
        None => 80,
    };
    if host.is_empty() {
        return Err(Untranslatable::NoHost { url: url.into() });
    }
    Ok(TargetUrl { scheme, host: host.to_string(), port, path: path.to_string() })
}

/// One Gatehouse target being assembled.
struct Target {
    /// `ip:port` or `name:port`.
    address: String,
    weight: u64,
    max_conns: u64,
}

/// A target URL made into a Gatehouse address, and whether it is reached over TLS.
struct Endpoint {
    address: String,
    tls: bool,
}

/// Builds the upstream of service `s` (at `p`, e.g. `services[2]`); `None` when no endpoint is left.
pub(super) fn upstream(report: &mut Report, p: &str, s: &Service) -> Option<Mapping> {
    let (mut targets, tls) = targets(report, p, s)?;
    scale_weights(report, p, &mut targets);
    let mut out = Mapping::new();
    balance(report, p, s, &targets, &mut out);
    entry(&mut out, "targets", target_list(&targets));
    if tls {
        upstream_tls(report, p, &mut out);
    }
    timeouts(report, p, s, &mut out);
    // hyperapi never sent a request twice, and took endpoints out only through the breaker.
    entry(&mut out, "retries", 0u64);
    let mut passive = Mapping::new();
    entry(&mut passive, "failures", 0u64);
    entry(&mut out, "passive_health", passive);
    if let Some(cb) = breaker(report, p, &s.upstreams) {
        entry(&mut out, "circuit_breaker", cb);
    }
    Some(out)
}

/// The targets of service `s`, one per address, and whether they are reached over TLS; `None`
/// when no endpoint is usable.
fn targets(report: &mut Report, p: &str, s: &Service) -> Option<(Vec<Target>, bool)> {
    let mut targets: Vec<Target> = Vec::new();
    let mut labels = false;
    // One Gatehouse upstream is all TLS or all plain: the first usable target decides.
    let mut tls = None;
    for (k, u) in s.upstreams.iter().enumerate() {
        let up = format!("{p}.upstreams[{k}]");
        report.extra(&up, &u.extra);
        labels |= u.id.is_some() || u.version.is_some();
        let Some(Endpoint { address, tls: this_tls }) = address(report, &up, &u.target) else { continue };
        if !same_scheme(report, &up, *tls.get_or_insert(this_tls), this_tls) {
            continue;
        }
        let weight = weight(report, &up, u);
        let max_conns = max_conns(report, &up, u);
        add_target(report, &up, &mut targets, Target { address, weight, max_conns });
    }
    if targets.is_empty() {
        report.note(format!("{p}.upstreams"), "no usable endpoint; service dropped");
        return None;
    }
    if labels {
        report.note(
            format!("{p}.upstreams"),
            "`id` and `version` (the X-UPSTREAM-ID and X-UPSTREAM-VERSION response headers, metric labels) have no Gatehouse equivalent; dropped",
        );
    }
    Some((targets, tls == Some(true)))
}

/// Whether a target (at `up`) is reached as the service's first usable one is (over TLS, `first`,
/// or not); one that is not is reported and dropped.
fn same_scheme(report: &mut Report, up: &str, first: bool, this_tls: bool) -> bool {
    if first == this_tls {
        return true;
    }
    let (kind, other) = if first { ("https", "http") } else { ("http", "https") };
    report.note(
        format!("{up}.target"),
        format!("{other} target in a service whose first target is {kind}: one Gatehouse upstream is all TLS or all plain; target dropped (give it a service of its own)"),
    );
    false
}

/// A target's weight; hyperapi's 0 (never chosen) becomes 1.
fn weight(report: &mut Report, up: &str, u: &Upstream) -> u64 {
    match u.weight {
        Some(0) => {
            report.note(
                format!("{up}.weight"),
                "0 (never chosen by weighted random) is not a Gatehouse weight; written as 1",
            );
            1
        }
        w => w.unwrap_or(1),
    }
}

/// A target's connection limit (0: none).
fn max_conns(report: &mut Report, up: &str, u: &Upstream) -> u64 {
    if u.max_conn == Some(0) {
        report.note(format!("{up}.max_conn"), "0 admitted no request in hyperapi; Gatehouse reads 0 as no limit");
    }
    u.max_conn.unwrap_or(0)
}

/// Adds `target` (from `up`) to `targets`, merged into the one with the same address if there is one.
fn add_target(report: &mut Report, up: &str, targets: &mut Vec<Target>, target: Target) {
    let Some(same) = targets.iter_mut().find(|t| t.address == target.address) else {
        targets.push(target);
        return;
    };
    report.note(
        format!("{up}.target"),
        format!("{} is already a target of this service; merged into it (weights and max_conn added)", target.address),
    );
    same.weight += target.weight;
    same.max_conns = if same.max_conns == 0 || target.max_conns == 0 { 0 } else { same.max_conns + target.max_conns };
}

/// The `targets` list of the upstream.
fn target_list(targets: &[Target]) -> Value {
    let list = targets
        .iter()
        .map(|t| {
            let mut m = Mapping::new();
            entry(&mut m, "address", t.address.to_string());
            entry(&mut m, "weight", t.weight);
            if t.max_conns > 0 {
                entry(&mut m, "max_conns", t.max_conns.min(u64::from(u32::MAX)));
            }
            Value::Mapping(m)
        })
        .collect();
    Value::Sequence(list)
}

/// TLS for https targets, verified against the system's roots for the target's host name (or IP
/// address).
fn upstream_tls(report: &mut Report, p: &str, out: &mut Mapping) {
    entry(out, "tls", Mapping::new());
    report.note(
        format!("{p}.upstreams"),
        "https targets: TLS verified against the system's roots for each target's host; set `tls.ca` for a private CA, or `tls.server_name`",
    );
}

/// hyperapi's one `timeout` (seconds) becomes the connect, read and write timeouts.
fn timeouts(report: &mut Report, p: &str, s: &Service, out: &mut Mapping) {
    match s.timeout {
        Some(0) => {
            report.note(format!("{p}.timeout"), "0 failed every request in hyperapi; Gatehouse's default timeouts used")
        }
        Some(t) => {
            let mut m = Mapping::new();
            for field in ["connect", "read", "write"] {
                entry(&mut m, field, format!("{t}s"));
            }
            entry(out, "timeouts", m);
        }
        None => {}
    }
}

/// The Gatehouse address of one target URL (`ip:port`, `[v6]:port` or `name:port`) and whether it
/// is HTTPS.
fn address(report: &mut Report, up: &str, url: &str) -> Option<Endpoint> {
    let at = format!("{up}.target");
    let t = match parse_target(url) {
        Ok(t) => t,
        Err(msg) => {
            report.note(at, format!("{msg}; target dropped"));
            return None;
        }
    };
    if !t.path.trim_end_matches('/').is_empty() {
        report.note(
            &at,
            format!(
                "path `{}` of the target has no Gatehouse equivalent (the path below the service prefix is sent as it is); dropped",
                t.path
            ),
        );
    }
    let tls = match t.scheme.as_str() {
        "http" => false,
        "https" => true,
        other => {
            report.note(at, format!("scheme `{other}` is not HTTP; target dropped"));
            return None;
        }
    };
    let address = match t.host.parse::<IpAddr>() {
        Ok(ip) => SocketAddr::new(ip, t.port).to_string(),
        Err(_) if gatehouse_config::valid_dns_name(&t.host) => format!("{}:{}", t.host.to_ascii_lowercase(), t.port),
        Err(_) => {
            report.note(at, format!("host `{}` is neither an IP address nor a DNS name; target dropped", t.host));
            return None;
        }
    };
    Some(Endpoint { address, tls })
}

/// Gatehouse weights go from 1 to 1000; larger ones are scaled down together.
fn scale_weights(report: &mut Report, p: &str, targets: &mut [Target]) {
    let max = targets.iter().map(|t| t.weight).max().unwrap_or(1);
    if max <= MAX_WEIGHT {
        return;
    }
    for t in targets.iter_mut() {
        t.weight = (t.weight * MAX_WEIGHT / max).max(1);
    }
    report.note(format!("{p}.upstreams"), format!("weights above {MAX_WEIGHT} scaled down by {max}/{MAX_WEIGHT}"));
}

fn balance(report: &mut Report, p: &str, s: &Service, targets: &[Target], out: &mut Mapping) {
    let lb = s.load_balance.as_deref().unwrap_or("random");
    let policy = match lb {
        "conn" => "least_conn",
        "load" => "ewma",
        "hash" => "consistent_hash",
        "random" => "random",
        other => {
            report.note(
                format!("{p}.load_balance"),
                format!("`{other}` is not a hyperapi policy; it fell back to weighted random, and so does Gatehouse"),
            );
            "random"
        }
    };
    entry(out, "balance", policy);
    if lb == "hash" {
        // hyperapi hashed the `x-lb-hash` header (modulo the endpoint count).
        entry(out, "hash_key", "header:x-lb-hash");
    }
    let uneven = targets.windows(2).any(|w| w[0].weight != w[1].weight);
    if uneven && policy != "random" {
        report.note(
            format!("{p}.load_balance"),
            format!("hyperapi ignored weights with `{lb}`; Gatehouse's {policy} uses them"),
        );
    }
}

/// hyperapi 0.2.2 gave every endpoint of a service the breaker settings of its first upstream, so
/// those are carried over; different settings on the others had no effect and are reported.
fn breaker(report: &mut Report, p: &str, upstreams: &[Upstream]) -> Option<Mapping> {
    let first = upstreams.first()?;
    let settings = |u: &Upstream| (u.error_threshold, u.error_reset, u.retry_delay);
    for (k, u) in upstreams.iter().enumerate().skip(1) {
        if settings(u) != settings(first) {
            report.note(
                format!("{p}.upstreams[{k}]"),
                "breaker settings differ from upstreams[0]'s, which hyperapi applied to every endpoint (as Gatehouse does); ignored",
            );
        }
    }
    let threshold = first.error_threshold.filter(|t| *t > 0)?;
    let at = format!("{p}.upstreams[0]");
    let reset = match first.error_reset {
        Some(0) => {
            report.note(format!("{at}.error_reset"), "0: the breaker never opened in hyperapi; not carried over");
            return None;
        }
        r => r.unwrap_or(10),
    };
    let delay = match first.retry_delay {
        Some(0) => {
            report.note(format!("{at}.retry_delay"), "0 is not a Gatehouse delay; written as 1s");
            1
        }
        d => d.unwrap_or(10),
    };
    let mut cb = Mapping::new();
    // hyperapi opened on the error after `error_threshold` errors; Gatehouse opens on the
    // `error_threshold`-th.
    entry(&mut cb, "error_threshold", threshold.saturating_add(1).min(u64::from(u32::MAX)));
    entry(&mut cb, "error_reset", format!("{reset}s"));
    entry(&mut cb, "retry_delay", format!("{delay}s"));
    Some(cb)
}
