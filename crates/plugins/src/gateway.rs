//! The compiled gateway: apps indexed by key digest, by id and by JWT key id; plans; services.
//! Built off the request path with each configuration snapshot.

use crate::acl::Rules;
use crate::error::GatewayError;
use crate::headers::Ops;
use crate::rate_limit::gcra::Gcra;
use crate::rate_limit::Limiter;
use crate::service::{IssuerCheck, IssuerKeys, ServiceGate};
use crate::Registry;
use aws_lc_rs::constant_time::verify_slices_are_equal;
use aws_lc_rs::digest::{digest, SHA256};
use gatehouse_config::{Acl, Config, HeaderRewrite, IpNet, LimitScope, RateLimit};
use gatehouse_jwt::Validation;
use gatehouse_jwt::{Algorithm, Family, VerifyKey};
use http::{HeaderName, HeaderValue};
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};
use std::net::IpAddr;
use std::sync::Arc;

/// Everything the Admit stage reads, for one configuration.
#[derive(Debug, Default)]
pub struct Gateway {
    /// Apps by key.
    pub(crate) keys: KeyIndex,
    /// Apps by id (JWTs without `kid` name their app in a claim).
    pub(crate) by_id: HashMap<Arc<str>, Arc<AppEntry>>,
    /// JWT keys by `kid`, with their app.
    pub(crate) by_kid: HashMap<String, (Arc<AppEntry>, VerifyKey)>,
    /// Services by name.
    pub services: BTreeMap<String, Arc<ServiceGate>>,
    /// The key sets of OpenID providers the services trust, once each.
    pub key_sources: Vec<Arc<gatehouse_jwks::KeySource>>,
}

/// A compiled app.
#[derive(Debug)]
pub struct AppEntry {
    /// App id.
    pub id: Arc<str>,
    /// The id as a header value, for the backend.
    pub id_value: HeaderValue,
    /// A stable hash of the id, for rate-limit keys.
    pub(crate) hash: u64,
    allow_ips: Box<[IpNet]>,
    /// Grants by service index: `None` when not granted, else the plan (if any).
    grants: Box<[Option<Option<Arc<PlanGate>>>]>,
    /// JWT keys without a `kid` (the app's `secret` among them).
    pub(crate) jwt_keys: Box<[VerifyKey]>,
    /// OpenID issuers whose tokens may name the app.
    issuers: Box<[String]>,
}

impl AppEntry {
    /// Whether the app may call from `ip`.
    pub fn allows_ip(&self, ip: IpAddr) -> bool {
        self.allow_ips.is_empty() || self.allow_ips.iter().any(|n| n.contains(ip))
    }

    /// Whether tokens of the OpenID provider `issuer` may name this app.
    pub fn trusts_issuer(&self, issuer: &str) -> bool {
        self.issuers.iter().any(|i| i == issuer)
    }

    /// The grant for service number `index`: `None` when not granted, else its plan.
    pub fn grant(&self, index: usize) -> Option<Option<&Arc<PlanGate>>> {
        self.grants.get(index).and_then(|g| g.as_ref().map(Option::as_ref))
    }
}

/// The plugins of a service or a plan.
#[derive(Debug, Default)]
pub struct PluginSet {
    pub(crate) acl: Option<Rules>,
    pub(crate) limits: Box<[Limiter]>,
    pub(crate) request: Ops,
    pub(crate) response: Ops,
}

/// A compiled plan.
#[derive(Debug)]
pub struct PlanGate {
    /// Plan name.
    pub name: Arc<str>,
    pub(crate) plugins: PluginSet,
}

/// Apps by key. A key is looked up by a keyed hash (random per process, so its timing tells
/// nothing about stored keys) and then compared in constant time; keys given only as SHA-256
/// digests (`key_sha256`) are looked up by the digest of what the client sent.
#[derive(Debug, Default)]
pub(crate) struct KeyIndex {
    hasher: RandomState,
    /// By the keyed hash, which needs no hashing again.
    plain: HashMap<u64, Vec<KeyedApp>, BuildHasherDefault<Prehashed>>,
    digests: HashMap<[u8; 32], Arc<AppEntry>>,
    /// By `key_hmac`, under the cluster's key (none offline: such apps are then never found).
    macs: HashMap<[u8; 32], Arc<AppEntry>>,
    cluster: Option<Arc<gatehouse_cluster::Cluster>>,
}

impl KeyIndex {
    /// Adds a key; returns the app that already has it.
    fn add_plain(&mut self, key: &[u8], app: &Arc<AppEntry>) -> Option<Arc<str>> {
        if let Some(other) = self.find(key) {
            return Some(other.id.clone());
        }
        let h = self.hasher.hash_one(key);
        self.plain.entry(h).or_default().push((key.into(), app.clone()));
        None
    }

    /// Adds a key by its digest; returns the app that already has that key.
    fn add_digest(&mut self, digest: [u8; 32], app: &Arc<AppEntry>) -> Option<Arc<str>> {
        let plain = self.plain.values().flatten().find(|(k, _)| key_digest(k) == digest);
        if let Some((_, other)) = plain {
            return Some(other.id.clone());
        }
        self.digests.insert(digest, app.clone()).map(|other| other.id.clone())
    }

    /// Adds a key by its `key_hmac`; returns the app that already has that key.
    fn add_mac(&mut self, mac: [u8; 32], app: &Arc<AppEntry>) -> Option<Arc<str>> {
        if let Some(c) = &self.cluster {
            let plain = self.plain.values().flatten().find(|(k, _)| c.app_key_mac(k) == mac);
            if let Some((_, other)) = plain {
                return Some(other.id.clone());
            }
        }
        self.macs.insert(mac, app.clone()).map(|other| other.id.clone())
    }

    fn find(&self, key: &[u8]) -> Option<&Arc<AppEntry>> {
        let h = self.hasher.hash_one(key);
        let found = self.plain.get(&h).and_then(|candidates| {
            candidates.iter().find(|(k, _)| verify_slices_are_equal(k, key).is_ok()).map(|(_, app)| app)
        });
        if found.is_some() {
            return found;
        }
        let by_digest = match self.digests.is_empty() {
            true => None,
            false => self.digests.get(&key_digest(key)),
        };
        if self.macs.is_empty() {
            return by_digest;
        }
        by_digest.or_else(|| self.macs.get(&self.cluster.as_ref()?.app_key_mac(key)))
    }
}

/// A key and its app.
type KeyedApp = (Box<[u8]>, Arc<AppEntry>);

/// A hasher for keys that are already uniform keyed hashes.
#[derive(Debug, Default)]
pub(crate) struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// The SHA-256 of an app key.
pub(crate) fn key_digest(key: &[u8]) -> [u8; 32] {
    let d = digest(&SHA256, key);
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

impl Gateway {
    /// The app whose key is `key`.
    pub fn app_by_key(&self, key: &[u8]) -> Option<&Arc<AppEntry>> {
        self.keys.find(key)
    }

    /// Compiles the gateway part of a validated configuration. Reads JWT public key files.
    pub fn build(config: &Config, registry: &Registry) -> Result<Gateway, GatewayError> {
        let plans: HashMap<&str, Arc<PlanGate>> = config
            .plans
            .iter()
            .map(|(name, p)| {
                let plugins = plugin_set(registry, &format!("plan.{name}"), &p.acl, &p.rate_limits, &p.headers)
                    .map_err(|e| GatewayError::Plan { plan: name.clone(), source: Box::new(e) })?;
                Ok((name.as_str(), Arc::new(PlanGate { name: name.as_str().into(), plugins })))
            })
            .collect::<Result<_, GatewayError>>()?;
        let index: HashMap<&str, usize> = config.services.keys().enumerate().map(|(i, n)| (n.as_str(), i)).collect();

        let mut gw = Gateway::default();
        // For `key_hmac` apps: lookups ask it only when there are some.
        gw.keys.cluster.clone_from(&registry.redis);
        // Key material comes from files: every app's failures are gathered, so one run names
        // every unreadable key.
        let mut key_errors = Vec::new();
        for (id, app) in &config.apps {
            let app_id = || id.clone();
            let mut grants = vec![None; index.len()];
            for (service, plan) in &app.grants {
                let i = *index
                    .get(service.as_str())
                    .ok_or_else(|| GatewayError::UnknownService { app: app_id(), service: service.clone() })?;
                let plan = match plan {
                    Some(name) => Some(
                        plans
                            .get(name.as_str())
                            .ok_or_else(|| GatewayError::UnknownPlan { app: app_id(), plan: name.clone() })?
                            .clone(),
                    ),
                    None => None,
                };
                grants[i] = Some(plan);
            }
            let (unnamed, named) = match verify_keys(id, app) {
                Ok(keys) => keys,
                Err(errors) => {
                    key_errors.extend(errors);
                    continue;
                }
            };
            let entry = Arc::new(AppEntry {
                id: id.as_str().into(),
                id_value: HeaderValue::try_from(id.as_str())
                    .map_err(|_| GatewayError::AppIdNotHeaderValue { app: app_id() })?,
                hash: crate::rate_limit::fnv1a(id.as_bytes()),
                allow_ips: app.allow_ips.clone().into(),
                grants: grants.into(),
                jwt_keys: unnamed.into(),
                issuers: app.issuers.clone().into(),
            });
            let clash = match (&app.key, &app.key_sha256, &app.key_hmac) {
                (Some(k), _, _) => gw.keys.add_plain(k.as_bytes(), &entry),
                (None, Some(hex), _) => gw.keys.add_digest(
                    parse_sha256_hex(hex).ok_or_else(|| GatewayError::KeySha256NotHex { app: app_id() })?,
                    &entry,
                ),
                (None, None, Some(hex)) => gw.keys.add_mac(
                    parse_sha256_hex(hex).ok_or_else(|| GatewayError::KeySha256NotHex { app: app_id() })?,
                    &entry,
                ),
                (None, None, None) => None,
            };
            if let Some(other) = clash {
                return Err(GatewayError::SameKey { app: app_id(), other });
            }
            for (kid, key) in named {
                gw.by_kid.insert(kid, (entry.clone(), key));
            }
            gw.by_id.insert(entry.id.clone(), entry);
        }
        match key_errors.len() {
            0 => {}
            1 => return Err(key_errors.remove(0)),
            _ => return Err(GatewayError::Several(key_errors)),
        }
        for (i, (name, s)) in config.services.iter().enumerate() {
            let in_service = |e| GatewayError::Service { service: name.clone(), source: Box::new(e) };
            let plugins = plugin_set(registry, &format!("service.{name}"), &s.acl, &s.rate_limits, &s.headers)
                .map_err(in_service)?;
            let issuers = issuer_checks(registry, s, &plans, &mut gw.key_sources).map_err(in_service)?;
            let gate = ServiceGate::new(name, i, s, plugins, registry.stats(name), issuers).map_err(in_service)?;
            gw.services.insert(name.clone(), Arc::new(gate));
        }
        Ok(gw)
    }
}

/// How a service checks the tokens of each of its issuers (none unless it accepts JWTs). Key sets
/// come from the registry, so a reload keeps the ones already fetched.
fn issuer_checks(
    registry: &Registry,
    s: &gatehouse_config::Service,
    plans: &HashMap<&str, Arc<PlanGate>>,
    sources: &mut Vec<Arc<gatehouse_jwks::KeySource>>,
) -> Result<Vec<IssuerCheck>, GatewayError> {
    if !s.auth.0.contains(&gatehouse_config::AuthMethod::Jwt) {
        return Ok(Vec::new());
    }
    s.jwt
        .0
        .iter()
        .map(|j| {
            let keys = match j.uses_key_set() {
                true => {
                    let source = registry.key_source(j)?;
                    if !sources.iter().any(|s| Arc::ptr_eq(s, &source)) {
                        sources.push(source.clone());
                    }
                    IssuerKeys::Set(source)
                }
                false => IssuerKeys::Apps,
            };
            let forward = j
                .forward_claims
                .iter()
                .map(|(claim, header)| {
                    HeaderName::from_bytes(header.as_bytes())
                        .map(|h| (claim.clone(), h))
                        .map_err(|_| GatewayError::NotAHeaderName { name: header.clone() })
                })
                .collect::<Result<_, _>>()?;
            let plan = match &j.plan {
                Some(name) => Some(
                    plans
                        .get(name.as_str())
                        .cloned()
                        .ok_or_else(|| GatewayError::UnknownJwtPlan { plan: name.clone() })?,
                ),
                None => None,
            };
            Ok(IssuerCheck {
                issuer: j.issuer.clone(),
                validation: Validation {
                    leeway_secs: j.leeway.0.as_secs(),
                    issuer: j.issuer.clone(),
                    audience: j.audience.clone(),
                    require_exp: j.require_exp,
                },
                app_claim: j.app_claim.clone(),
                keys,
                forward,
                strip_token: j.strip_token,
                plan,
            })
        })
        .collect()
}

/// The keys that verify app `id`'s JWTs: those without a `kid` (its `secret` first), and those
/// with one. Every key that cannot be read or used is an error of its own.
type AppKeys = (Vec<VerifyKey>, Vec<(String, VerifyKey)>);

fn verify_keys(id: &str, app: &gatehouse_config::App) -> Result<AppKeys, Vec<GatewayError>> {
    let app_id = || id.to_string();
    let (mut unnamed, mut named, mut errors) = (Vec::new(), Vec::new(), Vec::new());
    if let Some(secret) = &app.secret {
        match VerifyKey::hmac(secret.as_bytes()) {
            Ok(k) => unnamed.push(k),
            Err(source) => errors.push(GatewayError::Secret { app: app_id(), source }),
        }
    }
    for (i, k) in app.jwt_keys.iter().enumerate() {
        let Ok(alg) = k.alg.parse::<Algorithm>() else {
            errors.push(GatewayError::UnsupportedAlgorithm { app: app_id(), key: i, alg: k.alg.clone() });
            continue;
        };
        let key = match (alg, &k.secret, &k.public_key) {
            (alg, Some(s), None) if alg.family() == Family::Hmac => VerifyKey::secret(alg, s.as_bytes()),
            (alg, None, Some(path)) if alg.family() != Family::Hmac => match gatehouse_files::read(path) {
                Ok(pem) => VerifyKey::from_pem(alg, &pem),
                Err(source) => {
                    errors.push(GatewayError::ReadPublicKey { app: app_id(), key: i, path: path.clone(), source });
                    continue;
                }
            },
            _ => {
                errors.push(GatewayError::KeyMaterial { app: app_id(), key: i });
                continue;
            }
        };
        match (key, &k.kid) {
            (Ok(key), Some(kid)) => named.push((kid.clone(), key)),
            (Ok(key), None) => unnamed.push(key),
            (Err(source), _) => errors.push(GatewayError::JwtKey { app: app_id(), key: i, source }),
        }
    }
    if errors.is_empty() {
        Ok((unnamed, named))
    } else {
        Err(errors)
    }
}

/// A SHA-256 digest written as 64 hex digits (`key_sha256`, admin token hashes).
pub fn parse_sha256_hex(hex: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    if hex.len() != 64 {
        return None;
    }
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

fn plugin_set(
    registry: &Registry,
    owner: &str,
    acl: &Option<Acl>,
    limits: &[RateLimit],
    headers: &HeaderRewrite,
) -> Result<PluginSet, GatewayError> {
    let limits = limits
        .iter()
        .enumerate()
        .map(|(i, l)| {
            // Offline (`gatehouse check`), cluster limits are compiled as local ones.
            let cluster = l.scope == LimitScope::Cluster && !registry.offline;
            if !cluster {
                let g = Gcra::new(l);
                let id = format!(
                    "{owner}#{i}:{}/{}/{}/{}/{:?}/{}",
                    g.emission_us, g.tolerance_us, g.block_us, l.max_keys, l.key, l.per_path
                );
                return Ok(Limiter::local(l, registry.table(&id, l.max_keys)));
            }
            let cluster = registry.redis.as_ref().ok_or(GatewayError::ClusterLimitWithoutRedis { limit: i })?;
            Ok(Limiter::cluster(l, cluster.client().clone(), cluster.key(&format!("rl:{owner}#{i}:"))))
        })
        .collect::<Result<_, GatewayError>>()?;
    let headers_of = |direction| move |e| GatewayError::Headers { direction, source: Box::new(e) };
    Ok(PluginSet {
        acl: acl.as_ref().map(Rules::new),
        limits,
        request: Ops::new(&headers.request).map_err(headers_of("request"))?,
        response: Ops::new(&headers.response).map_err(headers_of("response"))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    fn config(extra: &str) -> Config {
        let text = format!(
            "listeners: {{ main: {{ bind: \"127.0.0.1:0\" }} }}\n\
             upstreams: {{ api: {{ targets: [\"127.0.0.1:9001\"] }} }}\n\
             {extra}"
        );
        gatehouse_config::compile(&text).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn errors_name_their_place_in_the_file_and_keep_their_cause() {
        let c = config(
            "services: { mws: { path: /mws, upstream: api, auth: jwt } }\n\
             apps: { shop: { jwt_keys: [{ alg: RS256, public_key: /nonexistent/key.pem }], grants: { mws: ~ } } }\n",
        );
        let e = Gateway::build(&c, &Registry::offline()).expect_err("no key file");
        assert!(matches!(e, GatewayError::ReadPublicKey { key: 0, .. }), "{e:?}");
        let text = e.to_string();
        assert!(text.starts_with("apps.shop.jwt_keys[0].public_key: cannot read /nonexistent/key.pem: "), "{text}");
        assert!(e.source().is_some_and(|s| s.is::<std::io::Error>()));
    }

    #[test]
    fn a_cluster_limit_without_redis_is_refused_in_its_plan() {
        let c = config(
            "redis: { url: \"redis://127.0.0.1:1\", secret_file: /nonexistent/secret }\n\
             plans: { gold: { rate_limits: [{ limit: 5, scope: cluster }] } }\n",
        );
        let e = Gateway::build(&c, &Registry::new(None)).expect_err("no Redis");
        assert_eq!(e.to_string(), "plans.gold: rate_limits[0]: `cluster` needs Redis");
        assert!(Gateway::build(&c, &Registry::offline()).is_ok(), "offline, cluster limits compile as local ones");
    }
}
