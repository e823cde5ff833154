//! HTTP Strict Transport Security (RFC 6797): the `Strict-Transport-Security` header a site or a
//! TLS listener sends on its answers over TLS, telling browsers to use HTTPS only for its host.

use crate::units::Duration;
use serde::Deserialize;

/// A site's or a TLS listener's `hsts` setting.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hsts {
    /// How long a browser keeps to HTTPS for the host (`max-age`, in whole seconds).
    #[serde(default = "one_year")]
    pub max_age: Duration,
    /// The host's subdomains too (`includeSubDomains`).
    #[serde(default)]
    pub include_subdomains: bool,
    /// Ask to be put on the browsers' preload list (`preload`; the list asks for
    /// `include_subdomains` and at least a year).
    #[serde(default)]
    pub preload: bool,
}

/// A year, the `max-age` the browsers' preload list asks for at least.
pub const ONE_YEAR_SECS: u64 = 365 * 86_400;

fn one_year() -> Duration {
    Duration::secs(ONE_YEAR_SECS)
}

impl Hsts {
    /// The header's value: `max-age=N[; includeSubDomains][; preload]`.
    pub fn header_value(&self) -> String {
        let mut v = format!("max-age={}", self.max_age.0.as_secs());
        if self.include_subdomains {
            v.push_str("; includeSubDomains");
        }
        if self.preload {
            v.push_str("; preload");
        }
        v
    }

    /// What is wrong with the setting at `p`: a `max-age` that is not whole seconds, or a
    /// `preload` the list would refuse.
    pub(crate) fn check(&self, p: &str, err: &mut impl FnMut(String, String)) {
        if self.max_age.0.subsec_nanos() != 0 {
            err(format!("{p}.hsts.max_age"), "must be whole seconds".into());
        }
        if self.preload && (!self.include_subdomains || self.max_age.0.as_secs() < ONE_YEAR_SECS) {
            err(
                format!("{p}.hsts.preload"),
                "needs `include_subdomains: true` and a `max_age` of at least 365d".into(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_says_what_is_set() {
        let mut h = Hsts { max_age: one_year(), include_subdomains: false, preload: false };
        assert_eq!(h.header_value(), "max-age=31536000");
        h.include_subdomains = true;
        h.preload = true;
        assert_eq!(h.header_value(), "max-age=31536000; includeSubDomains; preload");
        h.max_age = Duration::secs(0);
        assert_eq!(h.header_value(), "max-age=0; includeSubDomains; preload");
    }
}
