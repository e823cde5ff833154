//! Select stage, who is in the pool: an upstream's targets made into endpoints. An IP literal is one
//! endpoint; a host name is one endpoint per address its DNS answer gives, and an SRV name one per
//! record and address. The answers come from the discovery task ([`Answers`]); this module only
//! turns them into [`Members`], which the upstream publishes whole.

use crate::balance::Balancer;
use crate::endpoint::Endpoint;
use crate::registry::{Registry, Transport};
use gatehouse_config as config;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// A name a target is resolved by.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Query {
    /// A and AAAA records of a host name.
    Host(String),
    /// SRV records of a service name.
    Srv(String),
}

impl Query {
    /// The query a target needs, if it is not an IP literal.
    pub fn of(address: &config::Address) -> Option<Query> {
        match address {
            config::Address::Ip(_) => None,
            config::Address::Name { host, .. } => Some(Query::Host(host.clone())),
            config::Address::Srv(name) => Some(Query::Srv(name.clone())),
        }
    }

    /// The name asked.
    pub fn name(&self) -> &str {
        match self {
            Query::Host(n) | Query::Srv(n) => n,
        }
    }
}

/// One SRV record, with its host's addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceRecord {
    /// The record's target host.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// Its weight (0 is taken as 1).
    pub weight: u16,
    /// The host's addresses.
    pub addrs: Vec<IpAddr>,
}

/// The last good answer to a [`Query`], or why there has never been one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The addresses of a host name, in a stable order.
    Addresses(Vec<IpAddr>),
    /// The records of an SRV name (those of the lowest priority).
    Services(Vec<ServiceRecord>),
    /// No answer yet: the last lookup's error.
    Unresolved(String),
}

/// The answers known now, by query.
pub type Answers = HashMap<Query, Answer>;

/// An upstream's endpoints as now known, and their balancer.
#[derive(Debug, Default)]
pub struct Members {
    /// The endpoints, targets in configuration order, a name's addresses in answer order.
    pub endpoints: Box<[Endpoint]>,
    /// Balancing policy with its tables for these endpoints.
    pub balancer: Balancer,
    /// Targets that have no endpoint because their name never resolved, with why
    /// (`api.internal:8080: no answer yet`).
    pub unresolved: Box<[String]>,
}

impl Members {
    /// Whether `other` has the same endpoints with the same weights and limits.
    pub(crate) fn same_as(&self, other: &Members) -> bool {
        self.unresolved == other.unresolved
            && self.endpoints.len() == other.endpoints.len()
            && self
                .endpoints
                .iter()
                .zip(other.endpoints.iter())
                .all(|(a, b)| Arc::ptr_eq(&a.state, &b.state) && a.weight == b.weight && a.max_conns == b.max_conns)
    }
}

/// The endpoints `targets` stand for, given `answers`.
pub(crate) fn compile(
    upstream: &str,
    targets: &[config::Target],
    transport: Transport<'_>,
    balance: config::Balance,
    hash_key: &Option<config::HashKey>,
    registry: &Registry,
    answers: &Answers,
) -> Members {
    let mut endpoints = Vec::with_capacity(targets.len());
    let mut unresolved = Vec::new();
    let mut add = |addr: SocketAddr, host: Option<&str>, weight: u32, max_conns: u32| {
        endpoints.push(Endpoint {
            state: registry.endpoint(upstream, addr, host, transport),
            weight: weight.clamp(1, 1000),
            max_conns,
        });
    };
    for t in targets {
        let query = match &t.address {
            config::Address::Ip(addr) => {
                add(*addr, None, t.weight, t.max_conns);
                continue;
            }
            _ => Query::of(&t.address),
        };
        match (&t.address, query.as_ref().and_then(|q| answers.get(q))) {
            (config::Address::Name { host, port }, Some(Answer::Addresses(ips))) => {
                for ip in ips {
                    add(SocketAddr::new(*ip, *port), Some(host), t.weight, t.max_conns);
                }
            }
            (config::Address::Srv(_), Some(Answer::Services(records))) => {
                for r in records {
                    for ip in &r.addrs {
                        add(SocketAddr::new(*ip, r.port), Some(&r.host), u32::from(r.weight.max(1)), t.max_conns);
                    }
                }
            }
            (_, Some(Answer::Unresolved(why))) => unresolved.push(format!("{}: {why}", t.address)),
            _ => unresolved.push(format!("{}: no answer yet", t.address)),
        }
    }
    let balancer = Balancer::new(balance, hash_key.clone(), &endpoints);
    Members { endpoints: endpoints.into(), balancer, unresolved: unresolved.into() }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: Transport<'static> = Transport { tls: None, proxy_protocol: None };

    fn target(text: &str) -> config::Target {
        config::Target { address: config::Address::parse(text).expect("address"), weight: 2, max_conns: 0 }
    }

    #[test]
    fn names_become_one_endpoint_per_address_and_state_is_kept() {
        let registry = Registry::new(1);
        let targets = [target("127.0.0.1:80"), target("api.internal:8080")];
        let compile =
            |answers: &Answers| compile("u", &targets, PLAIN, config::Balance::RoundRobin, &None, &registry, answers);
        let none = compile(&Answers::new());
        assert_eq!(none.endpoints.len(), 1);
        assert_eq!(&*none.unresolved, ["api.internal:8080: no answer yet"]);

        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        let mut answers = Answers::new();
        answers.insert(Query::Host("api.internal".into()), Answer::Addresses(vec![ip("10.0.0.1"), ip("10.0.0.2")]));
        let two = compile(&answers);
        let addrs: Vec<&str> = two.endpoints.iter().map(|e| &*e.state.addr_text).collect();
        assert_eq!(addrs, ["127.0.0.1:80", "10.0.0.1:8080", "10.0.0.2:8080"]);
        assert!(two.endpoints.iter().all(|e| e.weight == 2));
        assert_eq!(&*two.endpoints[1].state.authority, "api.internal:8080");
        assert!(!two.same_as(&none));

        // One address stays, one goes, one comes: the one that stays is the same state.
        answers.insert(Query::Host("api.internal".into()), Answer::Addresses(vec![ip("10.0.0.2"), ip("10.0.0.3")]));
        let moved = compile(&answers);
        assert!(Arc::ptr_eq(&moved.endpoints[1].state, &two.endpoints[2].state));
        assert!(Arc::ptr_eq(&moved.endpoints[0].state, &two.endpoints[0].state));
        assert!(compile(&answers).same_as(&moved));
    }

    #[test]
    fn srv_records_give_port_and_weight() {
        let registry = Registry::new(1);
        let srv = config::Target { address: config::Address::Srv("_http._tcp.api".into()), weight: 1, max_conns: 5 };
        let mut answers = Answers::new();
        let record = |host: &str, port, weight, ip: &str| ServiceRecord {
            host: host.into(),
            port,
            weight,
            addrs: vec![ip.parse().expect("ip")],
        };
        answers.insert(
            Query::Srv("_http._tcp.api".into()),
            Answer::Services(vec![record("a.api", 8001, 10, "10.0.0.1"), record("b.api", 8002, 0, "10.0.0.2")]),
        );
        let m = compile("u", &[srv], PLAIN, config::Balance::RoundRobin, &None, &registry, &answers);
        let got: Vec<(&str, u32, u32)> =
            m.endpoints.iter().map(|e| (&*e.state.authority, e.weight, e.max_conns)).collect();
        assert_eq!(got, [("a.api:8001", 10, 5), ("b.api:8002", 1, 5)]);
    }
}
