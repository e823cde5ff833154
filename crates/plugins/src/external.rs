//! Admit stage, `auth: external`: an authorization service asked about each request (nginx
//! `auth_request`, Traefik `forwardAuth`, Envoy `ext_authz`). The gateway sends `GET url` with the
//! request's method, target, host and client address in `X-Forwarded-*` headers and the headers
//! it is told to forward; a 2xx admits (its chosen headers go upstream), any other answer goes
//! back to the client as it came. 2xx answers may be kept for a while.

use crate::denial::{Denial, ExternalAnswer};
use crate::error::GatewayError;
use crate::stats::ServiceStats;
use gatehouse_config::External;
use gatehouse_jwks::callout::{self, Client};
use http::header::{HeaderMap, HeaderName, HeaderValue, HOST};
use http::request::Parts;
use http::Uri;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The largest answer body passed back to a client (a refusal's page or JSON).
const MAX_ANSWER: usize = 64 * 1024;

static X_FORWARDED_METHOD: HeaderName = HeaderName::from_static("x-forwarded-method");
static X_FORWARDED_URI: HeaderName = HeaderName::from_static("x-forwarded-uri");
static X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// A compiled `external:`.
#[derive(Debug)]
pub(crate) struct ExternalCheck {
    uri: Uri,
    timeout: Duration,
    forward: Box<[HeaderName]>,
    copy: Box<[HeaderName]>,
    cache: Option<Cache>,
    fail_open: bool,
    roots: Option<rustls::RootCertStore>,
    /// Made on first use, on the runtime of the request that needs it.
    client: OnceLock<Result<Client, String>>,
}

#[derive(Debug)]
struct Cache {
    ttl: Duration,
    key: Box<[HeaderName]>,
    max_entries: usize,
    /// Key → when the answer expires, and the headers it adds upstream.
    entries: Mutex<HashMap<Box<[u8]>, Kept>>,
}

/// A kept answer: until when, and what it adds upstream.
type Kept = (Instant, Headers);

/// Headers an answer adds upstream.
type Headers = Vec<(HeaderName, HeaderValue)>;

impl ExternalCheck {
    pub(crate) fn new(e: &External) -> Result<Self, GatewayError> {
        let bad = |what: String| GatewayError::External { reason: what };
        let uri: Uri = e.url.parse().map_err(|_| bad(format!("`{}` is not a URL", e.url)))?;
        let names = |list: &[String]| -> Result<Box<[HeaderName]>, GatewayError> {
            list.iter()
                .map(|h| HeaderName::from_bytes(h.as_bytes()).map_err(|_| bad(format!("`{h}` is not a header name"))))
                .collect()
        };
        let roots = match &e.ca {
            Some(path) => {
                let pem = gatehouse_files::read(path).map_err(|err| bad(format!("ca: {err}")))?;
                Some(crate::read_roots(&pem).map_err(|err| bad(format!("ca: {err}")))?)
            }
            None => None,
        };
        let cache = match &e.cache {
            Some(c) => Some(Cache {
                ttl: c.ttl.0,
                key: names(&c.key)?,
                max_entries: c.max_entries,
                entries: Mutex::new(HashMap::new()),
            }),
            None => None,
        };
        Ok(ExternalCheck {
            uri,
            timeout: e.timeout.0,
            forward: names(&e.forward_headers)?,
            copy: names(&e.copy_response_headers)?,
            cache,
            fail_open: e.fail_open,
            roots,
            client: OnceLock::new(),
        })
    }

    /// Asks the service about the request; on `Ok` the request carries the answer's headers.
    pub(crate) async fn ask(&self, parts: &mut Parts, client_ip: IpAddr, stats: &ServiceStats) -> Result<(), Denial> {
        // Whatever the client sent under these names never reaches the backend.
        for name in self.copy.iter() {
            parts.headers.remove(name);
        }
        let key = self.cache.as_ref().map(|c| c.key_of(parts));
        if let (Some(cache), Some(key)) = (&self.cache, &key) {
            if let Some(headers) = cache.get(key) {
                stats.external_cached.inc();
                add(&mut parts.headers, headers);
                return Ok(());
            }
        }
        let client = match self.client.get_or_init(|| callout::client(self.roots.clone())) {
            Ok(c) => c,
            Err(e) => return self.unavailable(stats, e),
        };
        let answer =
            match callout::call(client, self.uri.clone(), self.question(parts, client_ip), self.timeout, MAX_ANSWER)
                .await
            {
                Ok(a) => a,
                Err(e) => return self.unavailable(stats, &e.to_string()),
            };
        if answer.status.is_success() {
            let headers: Headers = self
                .copy
                .iter()
                .flat_map(|name| answer.headers.get_all(name).iter().map(move |v| (name.clone(), v.clone())))
                .collect();
            if let (Some(cache), Some(key)) = (&self.cache, key) {
                cache.put(key, headers.clone());
            }
            add(&mut parts.headers, headers);
            return Ok(());
        }
        stats.external_refused.inc();
        Err(Denial::External(Box::new(ExternalAnswer {
            status: answer.status,
            headers: answer.headers,
            body: answer.body,
        })))
    }

    /// The headers of the question: the ones to forward, and what the request is.
    fn question(&self, parts: &Parts, client_ip: IpAddr) -> HeaderMap {
        let mut h = HeaderMap::new();
        for name in self.forward.iter() {
            for v in parts.headers.get_all(name) {
                h.append(name.clone(), v.clone());
            }
        }
        h.insert(
            X_FORWARDED_METHOD.clone(),
            HeaderValue::from_str(parts.method.as_str()).unwrap_or(HeaderValue::from_static("GET")),
        );
        if let Some(target) = parts.uri.path_and_query().and_then(|t| HeaderValue::from_str(t.as_str()).ok()) {
            h.insert(X_FORWARDED_URI.clone(), target);
        }
        let host = parts
            .uri
            .authority()
            .map(|a| a.as_str().to_string())
            .or_else(|| parts.headers.get(HOST).and_then(|v| v.to_str().ok()).map(str::to_string));
        if let Some(v) = host.and_then(|h| HeaderValue::from_str(&h).ok()) {
            h.insert(X_FORWARDED_HOST.clone(), v);
        }
        if let Ok(v) = HeaderValue::from_str(&client_ip.to_string()) {
            h.insert(X_FORWARDED_FOR.clone(), v);
        }
        h
    }

    fn unavailable(&self, stats: &ServiceStats, why: &str) -> Result<(), Denial> {
        stats.external_unavailable.inc();
        tracing::warn!(service_url = %self.uri, error = why, fail_open = self.fail_open, "authorization service not reached");
        match self.fail_open {
            true => Ok(()),
            false => Err(Denial::ExternalUnavailable),
        }
    }
}

fn add(headers: &mut HeaderMap, add: Headers) {
    for (name, value) in add {
        headers.append(name, value);
    }
}

impl Cache {
    /// Method, target and the key headers' values, each ended by a byte no header value holds.
    fn key_of(&self, parts: &Parts) -> Box<[u8]> {
        let mut key = Vec::with_capacity(128);
        key.extend_from_slice(parts.method.as_str().as_bytes());
        key.push(0);
        key.extend_from_slice(parts.uri.path_and_query().map_or("", |p| p.as_str()).as_bytes());
        for name in self.key.iter() {
            key.push(0);
            for v in parts.headers.get_all(name) {
                key.extend_from_slice(v.as_bytes());
                key.push(b'\n');
            }
        }
        key.into_boxed_slice()
    }

    fn get(&self, key: &[u8]) -> Option<Headers> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.get(key).filter(|(until, _)| Instant::now() < *until).map(|(_, h)| h.clone())
    }

    fn put(&self, key: Box<[u8]>, headers: Headers) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= self.max_entries {
            let now = Instant::now();
            entries.retain(|_, (until, _)| now < *until);
            if entries.len() >= self.max_entries {
                // Full of live answers: start afresh rather than grow.
                entries.clear();
            }
        }
        entries.insert(key, (Instant::now() + self.ttl, headers));
    }
}
