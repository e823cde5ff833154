//! The `sites` section: virtual hosts, their routes to upstreams, and client certificates.

use super::defaults;
use crate::units::{ByteSize, Duration};
use serde::de::Deserializer;
use serde::Deserialize;
use std::path::PathBuf;

/// A site: a set of host names and its routes.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Site {
    /// Host names: exact (`example.com`), wildcard (`*.example.com`) or `*` for any host.
    pub hosts: Vec<String>,
    /// Routes, matched by longest path prefix.
    pub routes: Vec<Route>,
    /// Answer plain-HTTP requests with a `308` to the same URL over HTTPS.
    #[serde(default)]
    pub https_redirect: bool,
    /// Port in redirect URLs (omitted when 443).
    #[serde(default = "defaults::https_port")]
    pub https_port: u16,
    /// `Strict-Transport-Security` on the site's answers over TLS (over the listener's own).
    #[serde(default)]
    pub hsts: Option<crate::Hsts>,
    /// Client certificates (mutual TLS) for handshakes naming this site.
    #[serde(default)]
    pub client_auth: Option<ClientAuth>,
    /// Route and forward normalized paths (`false`: each route of the site gets the client's
    /// path as sent, unless the route says otherwise).
    #[serde(default = "defaults::yes")]
    pub normalize_path: bool,
    /// Answers compressed for clients that accept it, on every route and service of the site
    /// that has no `compression` of its own.
    #[serde(default)]
    pub compression: Option<crate::Compression>,
}

/// Client-certificate verification for a site.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientAuth {
    /// PEM file with the CA certificates client certificates must chain to.
    pub ca: PathBuf,
    /// Refuse handshakes without a certificate (`true`); with `false` a handshake without one is
    /// accepted (any certificate sent is still verified) and the backend is told in
    /// `X-Client-Verify`.
    #[serde(default = "defaults::yes")]
    pub required: bool,
}

/// A route: a path prefix sent to an upstream.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// Path prefix, starting with `/`.
    pub path: String,
    /// Upstream name, or a weighted list of upstreams (a split).
    pub upstream: crate::Destination,
    /// How a client is kept on the upstream of a split it got.
    #[serde(default)]
    pub sticky: Option<crate::Sticky>,
    /// A copy of its requests sent to another upstream, the answer discarded.
    #[serde(default)]
    pub mirror: Option<crate::Mirror>,
    /// Remove the prefix before forwarding (a path that becomes empty is sent as `/`).
    #[serde(default)]
    pub strip_prefix: bool,
    /// Replace the prefix with this before forwarding.
    #[serde(default)]
    pub rewrite: Option<String>,
    /// Host header sent upstream: `preserve` (default), `upstream` (the endpoint address) or a literal.
    #[serde(default)]
    pub host_header: HostHeader,
    /// Largest request body accepted (413 beyond it).
    #[serde(default = "defaults::max_body")]
    pub max_body: ByteSize,
    /// Longest a request may take, from its head to the end of the response (a long-lived
    /// stream's bound); none by default. A gRPC call's `grpc-timeout` may shorten it.
    #[serde(default)]
    pub stream_timeout: Option<Duration>,
    /// Forward the normalized path (`true`) or the client's path as sent (`false`); the site's
    /// `normalize_path` when absent.
    #[serde(default)]
    pub normalize_path: Option<bool>,
    /// Which other origins' pages may read its answers (CORS); preflights answered here.
    #[serde(default)]
    pub cors: Option<crate::Cors>,
    /// Answers compressed for clients that accept it (in place of the site's `compression`).
    #[serde(default)]
    pub compression: Option<crate::Compression>,
}

/// Host header policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum HostHeader {
    /// Forward the client's Host.
    #[default]
    Preserve,
    /// Send the endpoint's `ip:port`.
    Upstream,
    /// Send this value.
    Literal(String),
}

impl<'de> Deserialize<'de> for HostHeader {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(match s.as_str() {
            "preserve" => HostHeader::Preserve,
            "upstream" => HostHeader::Upstream,
            _ => HostHeader::Literal(s),
        })
    }
}
