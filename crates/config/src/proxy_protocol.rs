//! Configuration stage, listeners behind a balancer: which peers may open a connection with a
//! PROXY protocol header that names the client (`listeners.NAME.proxy_protocol`).

use crate::gateway::IpNet;
use crate::model::Config;
use serde::Deserialize;

/// A listener whose connections come through balancers that send a PROXY protocol header (v1 or
/// v2) first: the address in the header is the client's.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyProtocol {
    /// The balancers' addresses: networks (`10.0.0.0/8`, `2001:db8::/32`) or single addresses.
    /// Every connection from one of them must open with a header; any other peer is refused.
    /// Kept as written so that validation can report every entry that is not a network, each at
    /// its own path; [`ProxyProtocol::networks`] reads them.
    pub trusted: Vec<String>,
}

impl ProxyProtocol {
    /// The trusted networks. An entry that does not parse is left out: validation refuses a
    /// configuration that has one, so a compiled configuration has none.
    pub fn networks(&self) -> Vec<IpNet> {
        self.trusted.iter().filter_map(|t| IpNet::parse(t.trim()).ok()).collect()
    }
}

/// Checks every listener's `proxy_protocol`: at least one trusted entry, each a network.
pub(crate) fn validate(c: &Config, err: &mut impl FnMut(String, String)) {
    for (name, l) in &c.listeners {
        let Some(pp) = &l.proxy_protocol else { continue };
        let p = format!("listeners.{name}.proxy_protocol.trusted");
        if pp.trusted.is_empty() {
            err(
                p.clone(),
                "at least one balancer address or network is required; with none, every connection would be refused"
                    .into(),
            );
        }
        for (i, entry) in pp.trusted.iter().enumerate() {
            if let Err(e) = IpNet::parse(entry.trim()) {
                err(format!("{p}[{i}]"), e.to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::compile;

    fn listener(pp: &str) -> String {
        format!("listeners:\n  lb: {{ bind: \"127.0.0.1:0\", proxy_protocol: {pp} }}\n")
    }

    #[test]
    fn networks_and_single_addresses_of_both_families_are_trusted() {
        let c =
            compile(&listener(r#"{ trusted: ["10.0.0.0/8", "127.0.0.1", "2001:db8::/32", "::1"] }"#)).expect("valid");
        let nets = c.listeners["lb"].proxy_protocol.as_ref().expect("proxy_protocol").networks();
        assert_eq!(nets.len(), 4);
        for (ip, trusted) in [("10.9.8.7", true), ("127.0.0.1", true), ("127.0.0.2", false), ("2001:db8::5", true)] {
            let ip = ip.parse().expect("ip");
            assert_eq!(nets.iter().any(|n| n.contains(ip)), trusted, "{ip}");
        }
        assert_eq!(compile(&listener("~")).expect("valid").listeners["lb"].proxy_protocol, None);
    }

    #[test]
    fn every_bad_entry_is_reported_at_its_own_path() {
        let text = listener(r#"{ trusted: ["10.0.0.0/8", "10.0.0.0/33", "balancer", "::/129", "127.0.0.1"] }"#);
        let errs = compile(&text).expect_err("invalid").0;
        let got: Vec<(&str, &str)> = errs.iter().map(|e| (e.path.as_str(), e.message.as_str())).collect();
        assert_eq!(
            got,
            [
                (
                    "listeners.lb.proxy_protocol.trusted[1]",
                    "invalid network `10.0.0.0/33`: expected e.g. 10.0.0.0/8, 2001:db8::/32 or 192.0.2.7"
                ),
                (
                    "listeners.lb.proxy_protocol.trusted[2]",
                    "invalid network `balancer`: expected e.g. 10.0.0.0/8, 2001:db8::/32 or 192.0.2.7"
                ),
                (
                    "listeners.lb.proxy_protocol.trusted[3]",
                    "invalid network `::/129`: expected e.g. 10.0.0.0/8, 2001:db8::/32 or 192.0.2.7"
                ),
            ]
        );
    }

    #[test]
    fn an_empty_list_and_unknown_keys_are_refused() {
        let errs = compile(&listener("{ trusted: [] }")).expect_err("invalid").0;
        assert_eq!(errs[0].path, "listeners.lb.proxy_protocol.trusted");
        let errs = compile(&listener(r#"{ trusted: ["10.0.0.1"], versions: [1] }"#)).expect_err("invalid").0;
        assert!(errs[0].path.starts_with("listeners.lb.proxy_protocol"), "{errs:?}");
        assert!(errs[0].message.contains("versions"), "{errs:?}");
    }
}
