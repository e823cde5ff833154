//! `tls.acme`: certificates issued and renewed by an ACME certificate authority (RFC 8555), kept
//! in the certificate store (`tls.store`) every node serves from.

use crate::units::Duration;
use serde::Deserialize;
use std::path::PathBuf;

/// The `tls.acme` section.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Acme {
    /// The CA's directory URL (`https://…/directory`).
    pub directory: String,
    /// PEM file with the CA certificates the directory's own TLS certificate chains to, for test
    /// CAs (Pebble, a private step-ca); without it the system's roots.
    #[serde(default)]
    pub ca: Option<PathBuf>,
    /// Contact address given to the CA for the account (expiry and policy mail).
    #[serde(default)]
    pub email: Option<String>,
    /// External account binding, for CAs that ask for one (ZeroSSL, Google, Sectigo).
    #[serde(default)]
    pub eab: Option<Eab>,
    /// The CA's certificate profile to ask for (`draft-ietf-acme-profiles`), such as
    /// `shortlived` or `tlsserver` at Let's Encrypt; the CA's default without it.
    #[serde(default)]
    pub profile: Option<String>,
    /// Challenge types, tried in this order among those the CA offers for a name.
    #[serde(default = "default_challenges")]
    pub challenges: Vec<Challenge>,
    /// DNS-01 through RFC 2136 dynamic updates: for wildcard names, and for others when
    /// `challenges` lists `dns-01`.
    #[serde(default)]
    pub dns01: Option<Dns01>,
    /// Names to hold certificates for, each on a certificate of its own.
    #[serde(default)]
    pub names: Vec<String>,
    /// How long before expiry a certificate is renewed when the CA offers no renewal information
    /// (RFC 9773).
    #[serde(default = "thirty_days")]
    pub renew_before: Duration,
    /// Certificates for names not listed, ordered at their first handshake.
    #[serde(default)]
    pub on_demand: Option<OnDemand>,
}

/// On-demand certificates: a handshake for a name without a certificate orders one, when the
/// name is allowed.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OnDemand {
    /// URL asked `GET URL?domain=NAME` for a name `allow` does not cover; 200 allows it.
    #[serde(default)]
    pub ask: Option<String>,
    /// Host patterns allowed without asking (`www.example.com`, `*.customers.example.com`).
    #[serde(default)]
    pub allow: Vec<String>,
    /// New on-demand orders allowed per interval, across the cluster.
    #[serde(default)]
    pub rate: Rate,
    /// How long an allowed answer of `ask` is remembered.
    #[serde(default = "ten_minutes")]
    pub allowed_ttl: Duration,
    /// How long a refusal (of `ask`, or by `allow` and `ask` together) is remembered.
    #[serde(default = "one_minute")]
    pub refused_ttl: Duration,
}

/// A rate of new orders.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rate {
    /// Orders per interval.
    pub limit: u32,
    /// The interval.
    pub interval: Duration,
}

impl Default for Rate {
    fn default() -> Self {
        Rate { limit: 20, interval: Duration::secs(60) }
    }
}

fn zero() -> Duration {
    Duration::secs(0)
}

fn ten_minutes() -> Duration {
    Duration::secs(600)
}

fn one_minute() -> Duration {
    Duration::secs(60)
}

/// An external account binding (RFC 8555 §7.3.4).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Eab {
    /// The key identifier the CA gave.
    pub kid: String,
    /// File holding the MAC key the CA gave, base64url as the CA shows it.
    pub hmac_key_file: PathBuf,
}

/// How DNS-01 records are published.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dns01 {
    /// RFC 2136 dynamic updates signed with TSIG (BIND, Knot, PowerDNS).
    pub rfc2136: Rfc2136,
}

/// An RFC 2136 primary server and the TSIG key it takes updates with.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rfc2136 {
    /// The primary's address, `IP:port`.
    pub server: String,
    /// The zone updated (its apex, such as `example.com`).
    pub zone: String,
    /// The TSIG key's name, as the server knows it.
    pub key_name: String,
    /// The TSIG algorithm.
    #[serde(default)]
    pub key_algorithm: TsigAlgorithm,
    /// File holding the key's secret: the base64 alone, or BIND's `key` clause, or Knot's `key:`
    /// section as `tsig-keygen` and `keymgr -t` write them.
    pub key_file: PathBuf,
    /// TTL of the TXT records.
    #[serde(default = "one_minute")]
    pub ttl: Duration,
    /// How long to wait after the update before asking the CA to validate, for secondaries to
    /// pick the change up.
    #[serde(default = "zero")]
    pub propagation_wait: Duration,
}

/// A TSIG algorithm.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum TsigAlgorithm {
    /// HMAC-SHA256.
    #[default]
    #[serde(rename = "hmac-sha256")]
    HmacSha256,
    /// HMAC-SHA384.
    #[serde(rename = "hmac-sha384")]
    HmacSha384,
    /// HMAC-SHA512.
    #[serde(rename = "hmac-sha512")]
    HmacSha512,
}

/// A challenge type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
pub enum Challenge {
    /// A TLS handshake with ALPN `acme-tls/1` on port 443 (RFC 8737).
    #[serde(rename = "tls-alpn-01")]
    TlsAlpn01,
    /// `GET /.well-known/acme-challenge/TOKEN` over plain HTTP on port 80.
    #[serde(rename = "http-01")]
    Http01,
    /// A TXT record `_acme-challenge.NAME`, published through `dns01`.
    #[serde(rename = "dns-01")]
    Dns01,
}

impl Challenge {
    /// The name RFC 8555 and RFC 8737 give it.
    pub fn as_str(self) -> &'static str {
        match self {
            Challenge::TlsAlpn01 => "tls-alpn-01",
            Challenge::Http01 => "http-01",
            Challenge::Dns01 => "dns-01",
        }
    }
}

fn default_challenges() -> Vec<Challenge> {
    vec![Challenge::TlsAlpn01, Challenge::Http01]
}

fn thirty_days() -> Duration {
    Duration::secs(30 * 86_400)
}

/// What is wrong with `tls.acme` in `c`, each error once with its path.
pub(crate) fn validate(c: &crate::Config, err: &mut impl FnMut(String, String)) {
    let Some(a) = &c.tls.acme else { return };
    let p = "tls.acme";
    match a.directory.strip_prefix("https://") {
        Some(rest) if !rest.is_empty() && !rest.starts_with('/') => {}
        _ => err(format!("{p}.directory"), "expected the CA's https:// directory URL".into()),
    }
    if c.tls.store.is_none() {
        err(p.into(), "needs `tls.store` (dir or redis): issued certificates are kept there".into());
    }
    if let Some(email) = &a.email {
        let parts: Vec<&str> = email.split('@').collect();
        if parts.len() != 2 || parts.iter().any(|s| s.is_empty()) || email.contains([' ', ',', ':']) {
            err(format!("{p}.email"), format!("`{email}` is not a mail address"));
        }
    }
    if let Some(eab) = &a.eab {
        if eab.kid.is_empty() {
            err(format!("{p}.eab.kid"), "must not be empty".into());
        }
    }
    if a.profile.as_deref().is_some_and(|s| s.is_empty() || s.contains(char::is_whitespace)) {
        err(format!("{p}.profile"), "a profile name has no spaces and is not empty".into());
    }
    if a.challenges.is_empty() {
        err(format!("{p}.challenges"), "at least one of `tls-alpn-01`, `http-01` is required".into());
    }
    for (i, ch) in a.challenges.iter().enumerate() {
        if a.challenges[..i].contains(ch) {
            err(format!("{p}.challenges[{i}]"), format!("`{}` is listed twice", ch.as_str()));
        }
    }
    let plain = c.listeners.values().any(|l| l.tls.is_none());
    let tls = c.listeners.values().any(|l| l.tls.is_some());
    let answerable = a.challenges.iter().any(|ch| match ch {
        Challenge::Http01 => plain,
        Challenge::TlsAlpn01 => tls,
        Challenge::Dns01 => a.dns01.is_some(),
    });
    if !a.challenges.is_empty() && !answerable {
        err(
            format!("{p}.challenges"),
            "none can be answered: http-01 needs a listener without tls (port 80), tls-alpn-01 a TLS listener (port 443), dns-01 `dns01`"
                .into(),
        );
    }
    if a.challenges.contains(&Challenge::Dns01) && a.dns01.is_none() {
        err(format!("{p}.challenges"), "`dns-01` needs `dns01`".into());
    }
    if let Some(d) = &a.dns01 {
        validate_rfc2136(&d.rfc2136, &format!("{p}.dns01.rfc2136"), err);
    }
    for (i, name) in a.names.iter().enumerate() {
        let np = format!("{p}.names[{i}]");
        let dns01_zone = a.dns01.as_ref().map(|d| d.rfc2136.zone.trim_end_matches('.'));
        if name.starts_with("*.") && dns01_zone.is_none() {
            err(np, format!("`{name}`: a wildcard can only be validated by dns-01, which needs `dns01`"));
            continue;
        }
        let uses_dns01 = name.starts_with("*.") || a.challenges.first() == Some(&Challenge::Dns01);
        if let (true, Some(zone)) = (uses_dns01, dns01_zone) {
            let base = name.trim_start_matches("*.");
            if base != zone && !base.ends_with(&format!(".{zone}")) {
                err(np.clone(), format!("`{name}` is outside the dns01 zone `{zone}`"));
            }
        }
        if name != &name.to_ascii_lowercase() || crate::compile::check_host_pattern(name).is_err() || name == "*" {
            err(np, format!("`{name}` is not a lower-case host name"));
        } else if name.parse::<std::net::IpAddr>().is_ok() || !name.contains('.') {
            err(np, format!("`{name}`: public CAs issue for domain names only"));
        } else if a.names[..i].contains(name) {
            err(np, format!("`{name}` is listed twice"));
        }
    }
    if a.renew_before.0.is_zero() {
        err(format!("{p}.renew_before"), "must be more than zero".into());
    }
    if let Some(od) = &a.on_demand {
        validate_on_demand(od, &format!("{p}.on_demand"), err);
    }
}

fn validate_rfc2136(r: &Rfc2136, p: &str, err: &mut impl FnMut(String, String)) {
    if r.server.parse::<std::net::SocketAddr>().is_err() {
        err(format!("{p}.server"), format!("`{}` is not IP:port", r.server));
    }
    let zone = r.zone.trim_end_matches('.');
    if zone.is_empty() || crate::compile::check_host_pattern(zone).is_err() || zone.starts_with("*.") {
        err(format!("{p}.zone"), format!("`{}` is not a zone name", r.zone));
    }
    if r.key_name.is_empty() {
        err(format!("{p}.key_name"), "must not be empty".into());
    }
}

fn validate_on_demand(od: &OnDemand, p: &str, err: &mut impl FnMut(String, String)) {
    if od.ask.is_none() && od.allow.is_empty() {
        err(
            p.into(),
            "set `ask`, `allow` or both: without them any name pointed at this gateway would be ordered".into(),
        );
    }
    if let Some(ask) = &od.ask {
        let rest = ask.strip_prefix("http://").or_else(|| ask.strip_prefix("https://"));
        if rest.is_none_or(|r| r.is_empty() || r.starts_with('/')) {
            err(format!("{p}.ask"), "expected an http:// or https:// URL".into());
        }
    }
    for (i, pattern) in od.allow.iter().enumerate() {
        let ok = pattern == &pattern.to_ascii_lowercase()
            && pattern != "*"
            && crate::compile::check_host_pattern(pattern).is_ok();
        if !ok {
            err(format!("{p}.allow[{i}]"), format!("`{pattern}` is not a lower-case host name or `*.suffix`"));
        }
    }
    if od.rate.limit == 0 || od.rate.interval.0.is_zero() {
        err(format!("{p}.rate"), "`limit` and `interval` must be more than zero".into());
    }
}
