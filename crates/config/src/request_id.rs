//! Configuration stage: `forwarding.request_id`, the id each proxied request carries to its upstream,
//! back to the client and into the access log. `off`, or a map whose defaults live here.

use crate::model::Config;
use crate::upstream::is_token;
use serde::de::{self, value::MapAccessDeserializer, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::fmt;

/// How each proxied request gets its id.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RequestId {
    /// The header that carries the id, to the upstream and back to the client.
    pub header: String,
    /// Keep a well-formed id the client sent (as Envoy's `preserve_external_request_id`); when
    /// false every request gets a new id.
    pub trust_incoming: bool,
    /// Put the id on the response to the client too.
    pub echo: bool,
}

impl Default for RequestId {
    fn default() -> Self {
        RequestId { header: "X-Request-Id".into(), trust_incoming: true, echo: true }
    }
}

/// Headers that the proxy or HTTP itself manages: an id in one of them would be overwritten,
/// stripped, or would change how the request is framed.
const RESERVED: &[&str] = &[
    "connection",
    "content-length",
    "expect",
    "host",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "via",
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-real-ip",
];

/// Reads `forwarding.request_id`: the word `off` (no ids) or a map of [`RequestId`] settings.
pub(crate) fn off_or_settings<'de, D: Deserializer<'de>>(d: D) -> Result<Option<RequestId>, D::Error> {
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Option<RequestId>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("`off` or a map with `header`, `trust_incoming`, `echo`")
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            match v {
                "off" => Ok(None),
                _ => Err(E::custom("expected `off` or a map with `header`, `trust_incoming`, `echo`")),
            }
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            RequestId::deserialize(MapAccessDeserializer::new(map)).map(Some)
        }
    }
    d.deserialize_any(V)
}

/// Checks the header name: a token, and not one the proxy manages.
pub(crate) fn validate(c: &Config, err: &mut impl FnMut(String, String)) {
    let Some(r) = &c.forwarding.request_id else { return };
    let path = "forwarding.request_id.header".to_string();
    if !is_token(&r.header) {
        err(path, format!("`{}` is not a header name", r.header));
    } else if RESERVED.iter().any(|h| h.eq_ignore_ascii_case(&r.header)) {
        err(path, format!("`{}` is managed by the proxy; choose another header", r.header));
    }
}

#[cfg(test)]
mod tests {
    use crate::{compile, ConfigErrors};

    const LISTENER: &str = "listeners: {http: {bind: \"127.0.0.1:0\"}}\n";

    fn forwarding(yaml: &str) -> Result<crate::Forwarding, ConfigErrors> {
        compile(&format!("{LISTENER}forwarding: {yaml}\n")).map(|c| c.forwarding)
    }

    #[test]
    fn defaults_keep_trusted_ids_and_echo_them() {
        let c = compile(LISTENER).expect("compiles");
        let r = c.forwarding.request_id.expect("on by default");
        assert_eq!((r.header.as_str(), r.trust_incoming, r.echo), ("X-Request-Id", true, true));
        let partial = forwarding("{request_id: {echo: false}}").expect("compiles");
        let r = partial.request_id.expect("on");
        assert_eq!((r.header.as_str(), r.trust_incoming, r.echo), ("X-Request-Id", true, false));
    }

    #[test]
    fn off_turns_ids_off() {
        assert_eq!(forwarding("{request_id: off}").expect("compiles").request_id, None);
    }

    #[test]
    fn bad_settings_are_reported_with_their_path() {
        let e = forwarding("{request_id: {header: \"X Id\"}}").expect_err("a space").to_string();
        assert!(e.starts_with("forwarding.request_id.header: "), "{e}");
        let e = forwarding("{request_id: {header: Content-Length}}").expect_err("reserved").to_string();
        assert!(e.contains("managed by the proxy"), "{e}");
        let e = forwarding("{request_id: {trust: true}}").expect_err("unknown field").to_string();
        assert!(e.starts_with("forwarding.request_id"), "{e}");
        assert!(e.contains("unknown field `trust`"), "{e}");
        let e = forwarding("{request_id: on}").expect_err("not a setting").to_string();
        assert!(e.contains("expected `off` or a map"), "{e}");
    }
}
