//! The compiled, immutable configuration that every request reads: router, routes, upstreams and
//! forwarding settings. Built from a validated [`Config`] off the request path, swapped whole.

use crate::request_id::{RequestIdError, RequestIds};
use gatehouse_config::{Config, Forwarding, HostHeader, Site};
use gatehouse_plugins::{Gateway, GatewayError, ServiceGate};
use gatehouse_router::{BuildError, Router};
use gatehouse_telemetry::access_log::AccessLog;
use gatehouse_telemetry::RouteStats;
use gatehouse_upstream::{Answers, Registry, TlsSetupError, Upstream};
use http::HeaderValue;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, Weak};

/// Why a validated configuration did not compile into a snapshot: an inconsistency validation
/// should have caught, reported the same way.
#[derive(Debug)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The services, apps and plans did not compile.
    Gateway(GatewayError),
    /// A route or service names an upstream that does not exist.
    UnknownUpstream {
        /// The name.
        name: String,
    },
    /// A service has no compiled gate.
    ServiceNotCompiled {
        /// The service.
        name: String,
    },
    /// A site named while placing routes is not in the configuration.
    UnknownSite {
        /// The site.
        name: String,
    },
    /// Two sites claim a host pattern, or one a prefix twice.
    Router {
        /// Where: `site `name`` or `services on `host``.
        place: String,
        /// The clash.
        source: BuildError,
    },
    /// An upstream's TLS files could not be read or used.
    UpstreamTls {
        /// The upstream.
        upstream: String,
        /// Why.
        source: TlsSetupError,
    },
    /// `forwarding.via` does not make a header value.
    Via,
    /// `forwarding.request_id` does not compile.
    RequestId(RequestIdError),
    /// A `cors` policy does not compile.
    Cors {
        /// Where: `sites.web.routes[0]`, `services.api`.
        place: String,
        /// Why.
        reason: String,
    },
}

impl std::fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SnapshotError::Gateway(e) => e.fmt(f),
            SnapshotError::UnknownUpstream { name } => write!(f, "unknown upstream `{name}`"),
            SnapshotError::ServiceNotCompiled { name } => write!(f, "service `{name}` was not compiled"),
            SnapshotError::UnknownSite { name } => write!(f, "site `{name}` vanished"),
            SnapshotError::Router { place, source } => write!(f, "{place}: {source:?}"),
            SnapshotError::UpstreamTls { upstream, source } => write!(f, "upstreams.{upstream}.{source}"),
            SnapshotError::Via => f.write_str("forwarding.via: not a valid header value"),
            SnapshotError::RequestId(e) => e.fmt(f),
            SnapshotError::Cors { place, reason } => write!(f, "{place}.cors: {reason}"),
        }
    }
}

impl std::error::Error for SnapshotError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SnapshotError::Gateway(e) => Some(e),
            SnapshotError::RequestId(e) => Some(e),
            SnapshotError::UpstreamTls { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// How a route changes the path before forwarding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rewrite {
    /// Forward the path unchanged.
    Keep,
    /// Replace the matched prefix with this (empty: strip it).
    Prefix(String),
}

/// A compiled route.
#[derive(Debug)]
pub struct RouteEntry {
    /// `site:prefix`, used in metrics and logs.
    pub id: Arc<str>,
    /// Length of the matched prefix.
    pub prefix_len: usize,
    /// Where requests go (with a split: the first upstream of the list).
    pub upstream: Arc<Upstream>,
    /// A weighted choice among several upstreams, made per request in place of `upstream`.
    pub split: Option<Arc<crate::split::Split>>,
    /// A copy of the requests sent to another upstream.
    pub mirror: Option<Arc<crate::mirror::Mirror>>,
    /// Path rewrite.
    pub rewrite: Rewrite,
    /// Host header policy.
    pub host_header: HostHeader,
    /// Largest accepted request body.
    pub max_body: u64,
    /// Longest a request may take, head to the end of the response.
    pub stream_timeout: Option<std::time::Duration>,
    /// Counters, kept across reloads.
    pub stats: Arc<RouteStats>,
    /// The site's name.
    pub site: Arc<str>,
    /// Redirect plain HTTP to HTTPS on this port.
    pub https_redirect: Option<u16>,
    /// The site's `Strict-Transport-Security`, sent on answers over TLS.
    pub hsts: Option<http::HeaderValue>,
    /// Client certificates: `Some(required)` when the site verifies them.
    pub client_auth: Option<bool>,
    /// The API service this route is, with its Admit stage.
    pub service: Option<Arc<ServiceGate>>,
    /// Whether the normalized path is forwarded (`false`: the client's, as sent).
    pub normalize_path: bool,
    /// Its CORS policy: preflights answered, answers given `Access-Control-*` headers.
    pub cors: Option<Arc<gatehouse_plugins::cors::Policy>>,
    /// Its compression (its own, else its site's): endpoints' answers compressed.
    pub compression: Option<Arc<crate::compress::Policy>>,
    /// What its requests' server spans say of it (`http.route`, the route, the service),
    /// encoded once on its first traced request.
    pub trace_attributes: std::sync::OnceLock<Box<[u8]>>,
}

/// The compiled `cors` of the route or service at `place`, if it has one.
fn cors_policy(
    cors: Option<&gatehouse_config::Cors>,
    place: impl FnOnce() -> String,
) -> Result<Option<Arc<gatehouse_plugins::cors::Policy>>, SnapshotError> {
    match cors.map(gatehouse_plugins::cors::Policy::new) {
        None => Ok(None),
        Some(Ok(p)) => Ok(Some(Arc::new(p))),
        Some(Err(reason)) => Err(SnapshotError::Cors { place: place(), reason }),
    }
}

/// The compiled `compression`; `None` when it is turned off.
fn compression_policy(c: &gatehouse_config::Compression) -> Option<Arc<crate::compress::Policy>> {
    crate::compress::Policy::new(c).map(Arc::new)
}

/// Route counters by route id, so a reload that keeps a route keeps its counts.
#[derive(Debug, Default)]
pub struct RouteStatsRegistry(Mutex<HashMap<String, Weak<RouteStats>>>);

impl RouteStatsRegistry {
    /// Forgets the counters no snapshot holds any more; once per build, not per route (a
    /// sweep per route made building 10,000 routes quadratic: 0.4 s).
    fn sweep(&self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).retain(|_, w| w.strong_count() > 0);
    }

    fn get(&self, id: &str) -> Arc<RouteStats> {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = map.get(id).and_then(Weak::upgrade) {
            return s;
        }
        let s = Arc::new(RouteStats::default());
        map.insert(id.to_string(), Arc::downgrade(&s));
        s
    }
}

/// The whole compiled configuration.
#[derive(Debug)]
pub struct Snapshot {
    /// Increases by one with each applied configuration.
    pub generation: u64,
    /// The configuration it was built from.
    pub config: Arc<Config>,
    /// Host and path lookup.
    pub router: Router<Arc<RouteEntry>>,
    /// Every route, for metrics.
    pub routes: Vec<Arc<RouteEntry>>,
    /// Upstreams by name.
    pub upstreams: BTreeMap<String, Arc<Upstream>>,
    /// Forwarding header settings.
    pub forwarding: Forwarding,
    /// Precomputed `Via` values for HTTP/1.1 and HTTP/2 requests.
    pub via: Option<(HeaderValue, HeaderValue)>,
    /// Request ids, unless `forwarding.request_id` is `off`.
    pub request_ids: Option<RequestIds>,
    /// Access log, when enabled.
    pub access_log: Option<AccessLog>,
    /// Services, apps and plans.
    pub gateway: Gateway,
    /// How request paths are normalized.
    pub paths: gatehouse_path::Rules,
    /// Whether some route forwards the client's path as sent (`normalize_path: false`), so a
    /// path the normalizer refuses must be routed as sent before it is refused.
    pub raw_routes: bool,
    /// HTTP-01 answers, when `tls.acme` is on (set by the node after building).
    pub acme: Option<Arc<dyn crate::acme::Http01>>,
    /// Traces, when `tracing` is on (set by the node after building, kept across reloads that
    /// leave `tracing` as it was).
    pub tracer: Option<Arc<gatehouse_otel::Tracer>>,
}

impl Snapshot {
    /// Compiles `config`. Errors here are internal inconsistencies that validation should have
    /// caught; they are reported the same way.
    pub fn build(
        config: Arc<Config>,
        generation: u64,
        registry: &Registry,
        route_stats: &RouteStatsRegistry,
        plugins: &gatehouse_plugins::Registry,
        access_log: Option<AccessLog>,
        answers: &Answers,
    ) -> Result<Snapshot, SnapshotError> {
        route_stats.sweep();
        let gateway = Gateway::build(&config, plugins).map_err(SnapshotError::Gateway)?;
        let upstreams: BTreeMap<String, Arc<Upstream>> = config
            .upstreams
            .iter()
            .map(|(name, u)| match Upstream::new(name, u, registry, answers) {
                Ok(u) => Ok((name.clone(), Arc::new(u))),
                Err(source) => Err(SnapshotError::UpstreamTls { upstream: name.clone(), source }),
            })
            .collect::<Result<_, _>>()?;
        let mut table = RouteTable::new(&config, &upstreams, route_stats);
        table.add_sites()?;
        let site_of: HashMap<String, &str> = config
            .sites
            .iter()
            .flat_map(|(name, site)| site.hosts.iter().map(move |h| (h.to_ascii_lowercase(), name.as_str())))
            .collect();
        for (name, svc) in &config.services {
            let gate =
                gateway.services.get(name).ok_or_else(|| SnapshotError::ServiceNotCompiled { name: name.clone() })?;
            table.add_service(name, svc, gate, &site_of)?;
        }
        let (router, routes) = table.build()?;
        let raw_routes = routes.iter().any(|r| !r.normalize_path);
        let via = via_values(&config.forwarding)?;
        let request_ids = config
            .forwarding
            .request_id
            .as_ref()
            .map(RequestIds::build)
            .transpose()
            .map_err(SnapshotError::RequestId)?;
        Ok(Snapshot {
            paths: config.paths.rules(),
            generation,
            request_ids,
            forwarding: config.forwarding.clone(),
            via,
            config,
            router,
            routes,
            upstreams,
            access_log,
            gateway,
            raw_routes,
            acme: None,
            tracer: None,
        })
    }
}

/// The `Via` values for HTTP/1.1 and HTTP/2 requests, when `forwarding.via` names this proxy.
fn via_values(forwarding: &Forwarding) -> Result<Option<(HeaderValue, HeaderValue)>, SnapshotError> {
    let Some(name) = &forwarding.via else { return Ok(None) };
    let value = |version: &str| HeaderValue::try_from(format!("{version} {name}")).map_err(|_| SnapshotError::Via);
    Ok(Some((value("1.1")?, value("2.0")?)))
}

/// The router of a snapshot.
type RouteRouter = Router<Arc<RouteEntry>>;

/// Route entries as they are compiled: each site's routes, then each service placed on the sites
/// whose hosts it names (or all of them) and on host patterns of its own.
struct RouteTable<'a> {
    config: &'a Config,
    upstreams: &'a BTreeMap<String, Arc<Upstream>>,
    route_stats: &'a RouteStatsRegistry,
    /// Every route once, for metrics.
    routes: Vec<Arc<RouteEntry>>,
    by_site: BTreeMap<&'a str, Vec<(String, Arc<RouteEntry>)>>,
    by_host: BTreeMap<String, Vec<(String, Arc<RouteEntry>)>>,
    /// Each site's compiled `compression`, for its routes and the services placed on it.
    site_compression: HashMap<&'a str, Option<Arc<crate::compress::Policy>>>,
}

impl<'a> RouteTable<'a> {
    fn new(
        config: &'a Config,
        upstreams: &'a BTreeMap<String, Arc<Upstream>>,
        route_stats: &'a RouteStatsRegistry,
    ) -> Self {
        RouteTable {
            config,
            upstreams,
            route_stats,
            routes: Vec::new(),
            by_site: BTreeMap::new(),
            by_host: BTreeMap::new(),
            site_compression: HashMap::new(),
        }
    }

    fn upstream(&self, name: &str) -> Result<Arc<Upstream>, SnapshotError> {
        self.upstreams.get(name).cloned().ok_or_else(|| SnapshotError::UnknownUpstream { name: name.to_string() })
    }

    /// The compiled split of `dest` (its sticky cookie scoped to `cookie_path`) and `mirror` of a
    /// route or service.
    #[allow(clippy::type_complexity)]
    fn split_and_mirror(
        &self,
        dest: &gatehouse_config::Destination,
        sticky: Option<&gatehouse_config::Sticky>,
        mirror: Option<&gatehouse_config::Mirror>,
        cookie_path: &str,
        host: &HostHeader,
        stats: &RouteStats,
    ) -> Result<(Option<Arc<crate::split::Split>>, Option<Arc<crate::mirror::Mirror>>), SnapshotError> {
        for name in dest.names() {
            self.upstream(name)?;
        }
        let split = crate::split::Split::new(dest, sticky, cookie_path, stats, |n| self.upstreams.get(n).cloned())
            .map(Arc::new);
        let mirror = match mirror {
            Some(m) => Some(Arc::new(crate::mirror::Mirror::new(m, self.upstream(&m.upstream)?, host, stats))),
            None => None,
        };
        Ok((split, mirror))
    }

    /// The routes of every site.
    fn add_sites(&mut self) -> Result<(), SnapshotError> {
        let config = self.config;
        for (site_name, site) in &config.sites {
            let site_id: Arc<str> = site_name.as_str().into();
            let mut entries = Vec::new();
            let site_compression = site.compression.as_ref().and_then(compression_policy);
            self.site_compression.insert(site_name, site_compression.clone());
            for (i, r) in site.routes.iter().enumerate() {
                let id = format!("{site_name}:{}", r.path);
                let stats = self.route_stats.get(&id);
                let (split, mirror) = self.split_and_mirror(
                    &r.upstream,
                    r.sticky.as_ref(),
                    r.mirror.as_ref(),
                    crate::split::cookie_path(&r.path, false),
                    &r.host_header,
                    &stats,
                )?;
                let rewrite = match (&r.rewrite, r.strip_prefix) {
                    (Some(to), _) => Rewrite::Prefix(to.clone()),
                    (None, true) => Rewrite::Prefix(String::new()),
                    (None, false) => Rewrite::Keep,
                };
                let entry = Arc::new(RouteEntry {
                    stats,
                    id: id.into(),
                    prefix_len: r.path.len(),
                    upstream: self.upstream(r.upstream.first())?,
                    split,
                    mirror,
                    rewrite,
                    host_header: r.host_header.clone(),
                    max_body: r.max_body.0,
                    stream_timeout: r.stream_timeout.map(|d| d.0),
                    site: site_id.clone(),
                    https_redirect: site.https_redirect.then_some(site.https_port),
                    hsts: hsts_of(site.hsts.as_ref()),
                    client_auth: site.client_auth.as_ref().map(|c| c.required),
                    service: None,
                    normalize_path: r.normalize_path.unwrap_or(site.normalize_path),
                    cors: cors_policy(r.cors.as_ref(), || format!("sites.{site_name}.routes[{i}]"))?,
                    compression: r.compression.as_ref().map_or_else(|| site_compression.clone(), compression_policy),
                    trace_attributes: std::sync::OnceLock::new(),
                });
                self.routes.push(entry.clone());
                entries.push((r.path.clone(), entry));
            }
            self.by_site.insert(site_name, entries);
        }
        Ok(())
    }

    /// Service `name`, placed on the sites `site_of` finds for its hosts (every site when it
    /// names none) and on the host patterns no site serves.
    fn add_service(
        &mut self,
        name: &str,
        svc: &gatehouse_config::Service,
        gate: &Arc<ServiceGate>,
        site_of: &HashMap<String, &'a str>,
    ) -> Result<(), SnapshotError> {
        let config = self.config;
        let upstream = self.upstream(svc.upstream.first())?;
        let path = match svc.path.trim_end_matches('/') {
            "" => "/",
            p => p,
        };
        let id = format!("service:{name}");
        let stats = self.route_stats.get(&id);
        let (split, mirror) = self.split_and_mirror(
            &svc.upstream,
            svc.sticky.as_ref(),
            svc.mirror.as_ref(),
            crate::split::cookie_path(path, true),
            &svc.host_header,
            &stats,
        )?;
        let cors = cors_policy(svc.cors.as_ref(), || format!("services.{name}"))?;
        // `Some(None)`: the service turns compression off on every site.
        let compression = svc.compression.as_ref().map(compression_policy);
        let entry = |site: Option<(&str, &Site)>| {
            Arc::new(RouteEntry {
                id: id.as_str().into(),
                prefix_len: path.len(),
                upstream: upstream.clone(),
                split: split.clone(),
                mirror: mirror.clone(),
                rewrite: if svc.strip_prefix { Rewrite::Prefix(String::new()) } else { Rewrite::Keep },
                host_header: svc.host_header.clone(),
                max_body: svc.max_body.0,
                stream_timeout: svc.stream_timeout.map(|d| d.0),
                stats: stats.clone(),
                site: site.map_or("", |(n, _)| n).into(),
                https_redirect: site.and_then(|(_, s)| s.https_redirect.then_some(s.https_port)),
                hsts: hsts_of(site.and_then(|(_, s)| s.hsts.as_ref())),
                client_auth: site.and_then(|(_, s)| s.client_auth.as_ref().map(|c| c.required)),
                service: Some(gate.clone()),
                normalize_path: svc.normalize_path,
                cors: cors.clone(),
                compression: match &compression {
                    Some(own) => own.clone(),
                    None => site.and_then(|(n, _)| self.site_compression.get(n).cloned().flatten()),
                },
                trace_attributes: std::sync::OnceLock::new(),
            })
        };
        let mut sites: Vec<&'a str> = Vec::new();
        let mut hosts: Vec<String> = Vec::new();
        if svc.hosts.is_empty() {
            sites.extend(config.sites.keys().map(String::as_str));
            if !site_of.contains_key("*") {
                hosts.push("*".into());
            }
        }
        for h in &svc.hosts {
            let h = h.to_ascii_lowercase();
            match site_of.get(&h) {
                Some(site) if !sites.contains(site) => sites.push(site),
                Some(_) => {}
                None => hosts.push(h),
            }
        }
        // One entry per placement (site settings differ); they share counters, and the metrics
        // list each route id once.
        let mut placed = Vec::new();
        for site in sites {
            let cfg = config.sites.get(site).ok_or_else(|| SnapshotError::UnknownSite { name: site.to_string() })?;
            let e = entry(Some((site, cfg)));
            placed.push(e.clone());
            self.by_site.entry(site).or_default().push((path.to_string(), e));
        }
        for h in hosts {
            let e = entry(None);
            placed.push(e.clone());
            self.by_host.entry(h).or_default().push((path.to_string(), e));
        }
        self.routes.extend(placed.into_iter().next());
        Ok(())
    }

    /// The router over every placed entry, and every route once.
    fn build(self) -> Result<(RouteRouter, Vec<Arc<RouteEntry>>), SnapshotError> {
        let mut builder = Router::builder();
        for (site_name, entries) in self.by_site {
            let site = self
                .config
                .sites
                .get(site_name)
                .ok_or_else(|| SnapshotError::UnknownSite { name: site_name.to_string() })?;
            builder
                .site(site.hosts.iter().map(String::as_str), entries)
                .map_err(|source| SnapshotError::Router { place: format!("site `{site_name}`"), source })?;
        }
        for (host, entries) in self.by_host {
            builder
                .site([host.as_str()], entries)
                .map_err(|source| SnapshotError::Router { place: format!("services on `{host}`"), source })?;
        }
        Ok((builder.build(), self.routes))
    }
}

/// A `Strict-Transport-Security` value, made once per snapshot (or per listener).
pub fn hsts_of(hsts: Option<&gatehouse_config::Hsts>) -> Option<http::HeaderValue> {
    hsts.and_then(|h| http::HeaderValue::try_from(h.header_value()).ok())
}
