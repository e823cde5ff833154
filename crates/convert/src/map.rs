//! The hyperapi file, section by section, as the Gatehouse sections `listeners`, `upstreams`,
//! `services`, `plans` and `apps`.

use super::hyperapi::{scalar_text, Client, File, Service};
use super::plugins::{plugins, Scope};
use super::upstream::upstream;
use super::{entry, KeyFile, Report};
use gatehouse_config::IpNet;
use serde_yaml::{Mapping, Value};
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::Path;

/// Where Gatehouse listens when the file does not say (hyperapi took it from `-L`).
const DEFAULT_LISTEN: &str = "0.0.0.0:8888";

/// What a client grant needs to know about a converted service.
struct Converted {
    name: String,
    authenticated: bool,
    jwt: bool,
    /// SLA name → plan name.
    plans: HashMap<String, String>,
}

/// Unique names in the charset Gatehouse allows (letters, digits, `-`, `_`, `.`).
#[derive(Default)]
struct Names(HashSet<String>);

impl Names {
    fn claim(&mut self, wanted: &str) -> String {
        let base = sanitize(wanted);
        let mut name = base.clone();
        let mut n = 1;
        while !self.0.insert(name.clone()) {
            n += 1;
            name = format!("{base}-{n}");
        }
        name
    }
}

/// Replaces every character Gatehouse names do not allow with `_`.
pub(super) fn sanitize(s: &str) -> String {
    let out: String = s.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect();
    if out.is_empty() {
        "unnamed".into()
    } else {
        out
    }
}

/// Builds the Gatehouse document; public keys are given paths in `key_dir`.
pub(super) fn document(report: &mut Report, file: &File, key_dir: &Path, keys: &mut Vec<KeyFile>) -> Mapping {
    report.extra("", &file.extra);
    let mut root = Mapping::new();
    entry(&mut root, "listeners", listeners(report, file.listen.as_deref()));

    let mut upstreams = Mapping::new();
    let mut services = Mapping::new();
    let mut plans = Mapping::new();
    let mut converted: HashMap<String, Converted> = HashMap::new();
    let mut names = Names::default();
    let mut plan_names = Names::default();
    for (i, s, path) in kept_services(report, &file.services) {
        let p = format!("services[{i}]");
        report.extra(&p, &s.extra);
        report.extra(&format!("{p}.auth"), &s.auth.extra);
        let auth = match s.auth.kind.as_str() {
            "None" => "none",
            "AppKey" => "app_key",
            "JWT" => "jwt",
            other => {
                report
                    .note(format!("{p}.auth.type"), format!("`{other}` is not a hyperapi auth type; service dropped"));
                continue;
            }
        };
        if let Some(proto) = s.protocol.as_deref().filter(|v| *v != "http") {
            report.note(format!("{p}.protocol"), format!("`{proto}` was never read by hyperapi 0.2.2; ignored"));
        }
        let Some(pool) = upstream(report, &p, s) else { continue };
        let name = names.claim(&s.service_id);
        entry(&mut upstreams, &name, pool);

        let mut svc = Mapping::new();
        entry(&mut svc, "path", path);
        entry(&mut svc, "upstream", name.clone());
        entry(&mut svc, "strip_prefix", true);
        entry(&mut svc, "auth", auth);
        if auth == "jwt" {
            // hyperapi named the client by `sub`, required `exp` and allowed no clock skew.
            let mut jwt = Mapping::new();
            entry(&mut jwt, "app_claim", "sub");
            entry(&mut jwt, "require_exp", true);
            entry(&mut jwt, "leeway", "0s");
            entry(&mut svc, "jwt", jwt);
        }
        let authenticated = auth != "none";
        plugins(report, &format!("{p}.filters"), &s.filters, Scope::Service { authenticated }, &mut svc);
        entry(&mut services, &name, svc);

        let mut slas = HashMap::new();
        let last: HashMap<&str, usize> = s.sla.iter().enumerate().map(|(j, l)| (l.name.as_str(), j)).collect();
        for (j, level) in s.sla.iter().enumerate() {
            let lp = format!("{p}.sla[{j}]");
            report.extra(&lp, &level.extra);
            if !authenticated {
                report.note(lp, "a service without auth never applied SLAs; dropped");
                continue;
            }
            if last[level.name.as_str()] != j {
                report.note(
                    lp,
                    format!("SLA `{}` is defined again later, and hyperapi kept the last; dropped", level.name),
                );
                continue;
            }
            let plan = plan_names.claim(&format!("{name}.{}", level.name));
            let mut m = Mapping::new();
            plugins(report, &format!("{lp}.filters"), &level.filters, Scope::Plan, &mut m);
            entry(&mut plans, &plan, m);
            slas.insert(level.name.clone(), plan);
        }
        converted.insert(s.service_id.clone(), Converted { name, authenticated, jwt: auth == "jwt", plans: slas });
    }

    let apps = apps(report, &file.clients, &converted, key_dir, keys);
    for (section, m) in [("upstreams", upstreams), ("services", services), ("plans", plans), ("apps", apps)] {
        if !m.is_empty() {
            entry(&mut root, section, m);
        }
    }
    root
}

fn listeners(report: &mut Report, listen: Option<&str>) -> Mapping {
    let bind = match listen.map(|l| (l, l.parse::<SocketAddr>())) {
        Some((_, Ok(addr))) => addr.to_string(),
        Some((l, Err(_))) => {
            report.note("listen", format!("`{l}` is not an ip:port; {DEFAULT_LISTEN} used"));
            DEFAULT_LISTEN.to_string()
        }
        None => DEFAULT_LISTEN.to_string(),
    };
    let mut http = Mapping::new();
    entry(&mut http, "bind", bind);
    let mut m = Mapping::new();
    entry(&mut m, "http", http);
    m
}

/// The services hyperapi would have served, with their Gatehouse path: a later service with the
/// same `service_id` or path replaced an earlier one in hyperapi's maps.
fn kept_services<'a>(report: &mut Report, services: &'a [Service]) -> Vec<(usize, &'a Service, String)> {
    let last_id: HashMap<&str, usize> = services.iter().enumerate().map(|(i, s)| (s.service_id.as_str(), i)).collect();
    let mut by_path: HashMap<String, usize> = HashMap::new();
    let mut kept = Vec::new();
    for (i, s) in services.iter().enumerate() {
        let p = format!("services[{i}]");
        if last_id[s.service_id.as_str()] != i {
            report.note(
                p,
                format!("service_id `{}` appears again later, and hyperapi kept the last; dropped", s.service_id),
            );
            continue;
        }
        let Some(path) = service_path(report, &p, &s.path) else { continue };
        by_path.insert(path.clone(), i);
        kept.push((i, s, path));
    }
    kept.retain(|(i, _, path)| {
        let keep = by_path[path] == *i;
        if !keep {
            report.note(
                format!("services[{i}].path"),
                format!(
                    "`{path}` is claimed again by services[{}], and hyperapi kept the last; dropped",
                    by_path[path]
                ),
            );
        }
        keep
    });
    kept
}

/// hyperapi looked services up by the request's first path segment, so only `/segment` ever
/// matched; other paths are written as meant and reported.
fn service_path(report: &mut Report, p: &str, path: &str) -> Option<String> {
    if path.contains("/~") || path.contains(['?', '#', '*']) {
        report.note(format!("{p}.path"), format!("`{path}` is not a plain path prefix; service dropped"));
        return None;
    }
    let trimmed = path.trim_matches('/');
    let out = format!("/{trimmed}");
    if trimmed.is_empty() || trimmed.contains('/') || out != path {
        report.note(
            format!("{p}.path"),
            format!("hyperapi matched only `/segment` paths, so `{path}` never matched there; written as `{out}`"),
        );
    }
    Some(out)
}

fn apps(
    report: &mut Report,
    clients: &[Client],
    services: &HashMap<String, Converted>,
    key_dir: &Path,
    keys: &mut Vec<KeyFile>,
) -> Mapping {
    // hyperapi kept the last client of each id, and gave each app key to the last client holding it.
    let last_id: HashMap<&str, usize> = clients.iter().enumerate().map(|(i, c)| (c.client_id.as_str(), i)).collect();
    let last_key: HashMap<&str, usize> = clients
        .iter()
        .enumerate()
        .filter(|(i, c)| last_id[c.client_id.as_str()] == *i && !c.app_key.is_empty())
        .map(|(i, c)| (c.app_key.as_str(), i))
        .collect();
    let mut names = Names::default();
    let mut apps = Mapping::new();
    for (i, c) in clients.iter().enumerate() {
        let p = format!("clients[{i}]");
        report.extra(&p, &c.extra);
        if last_id[c.client_id.as_str()] != i {
            report.note(
                p,
                format!("client_id `{}` appears again later, and hyperapi kept the last; dropped", c.client_id),
            );
            continue;
        }
        let name = names.claim(&c.client_id);
        let mut app = Mapping::new();
        if !c.app_key.is_empty() {
            if last_key[c.app_key.as_str()] != i {
                report
                    .note(format!("{p}.app_key"), "the same key as a later client, which hyperapi gave it to; dropped");
            } else if !valid_app_key(&c.app_key) {
                report
                    .note(format!("{p}.app_key"), "not a valid Gatehouse app key (1-512 URL-safe characters); dropped");
            } else {
                entry(&mut app, "key", c.app_key.clone());
            }
        }
        let grants = grants(report, &p, c, services);
        if !c.pub_key.trim().is_empty() {
            if c.pub_key.contains("-----BEGIN") {
                let path = key_dir.join(format!("{name}.pem"));
                let mut key = Mapping::new();
                entry(&mut key, "alg", "ES256");
                entry(&mut key, "public_key", path.display().to_string());
                entry(&mut app, "jwt_keys", Value::Sequence(vec![Value::Mapping(key)]));
                keys.push(KeyFile { source: format!("{p}.pub_key"), path, pem: c.pub_key.trim().to_string() + "\n" });
                let uses_jwt =
                    grants.keys().any(|s| services.values().any(|v| v.jwt && s.as_str() == Some(v.name.as_str())));
                if name != c.client_id && uses_jwt {
                    report.note(
                        format!("{p}.client_id"),
                        format!(
                            "`{}` is not a Gatehouse app id; renamed `{name}`: JWTs must carry sub `{name}`",
                            c.client_id
                        ),
                    );
                }
            } else {
                report.note(format!("{p}.pub_key"), "not a PEM public key; dropped");
            }
        }
        allow_ips(report, &p, c, &mut app);
        if !app.contains_key("key") && !app.contains_key("jwt_keys") {
            report.note(p, "no usable credential (app_key or pub_key); client dropped");
            continue;
        }
        if !grants.is_empty() {
            entry(&mut app, "grants", grants);
        }
        entry(&mut apps, &name, app);
    }
    apps
}

fn grants(report: &mut Report, p: &str, c: &Client, services: &HashMap<String, Converted>) -> Mapping {
    let mut grants = Mapping::new();
    for (sid, sla) in &c.services {
        let (Some(sid), Some(sla)) = (scalar_text(sid), scalar_text(sla)) else {
            report.note(format!("{p}.services"), "an entry is not `service_id: SLA`; dropped");
            continue;
        };
        let gp = format!("{p}.services.{sid}");
        match services.get(&sid) {
            None => report.note(gp, "no such service (or it was dropped); grant dropped"),
            Some(s) if !s.authenticated => {
                report.note(gp, "the service has no auth, so a grant means nothing; dropped")
            }
            Some(s) => match s.plans.get(&sla) {
                Some(plan) => entry(&mut grants, &s.name, plan.clone()),
                None => report.note(
                    gp,
                    format!("the service has no SLA `{sla}`, so hyperapi refused this client there; dropped"),
                ),
            },
        }
    }
    grants
}

/// hyperapi 0.2.2 parsed `ip_whitelist` but never checked it; Gatehouse does.
fn allow_ips(report: &mut Report, p: &str, c: &Client, app: &mut Mapping) {
    let mut nets = Vec::new();
    for (j, text) in c.ip_whitelist.iter().enumerate() {
        match IpNet::parse(text) {
            Ok(_) => nets.push(Value::from(text.clone())),
            Err(msg) => report.note(format!("{p}.ip_whitelist[{j}]"), format!("{msg}; dropped")),
        }
    }
    if !nets.is_empty() {
        report.note(format!("{p}.ip_whitelist"), "never checked by hyperapi 0.2.2; Gatehouse enforces it (allow_ips)");
        entry(app, "allow_ips", Value::Sequence(nets));
    }
}

/// The characters Gatehouse accepts in an app key: it travels in headers, queries and paths.
fn valid_app_key(k: &str) -> bool {
    (1..=512).contains(&k.len()) && k.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~+=!$'()*,;:@".contains(&b))
}
