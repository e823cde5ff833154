//! `gatehouse check`'s promise: every mistake of a file is reported in one run, each once, and
//! none is invented from another (an entry that could not be read is not also "unknown" to
//! whatever names it, nor does it leave its section "empty").

use gatehouse_config::{compile_all, name_error};

fn errors(yaml: &str) -> Vec<String> {
    compile_all(yaml).1.iter().map(ToString::to_string).collect()
}

#[test]
fn three_mistakes_make_three_errors() {
    let e = errors(
        "listeners:\n  http: {bind: \"127.0.0.1:0\", backlg: 5}\n\
         upstreams:\n  u: {targets: [\"127.0.0.1:1\"], balance: fastest}\n\
         sites:\n  s: {hosts: [\"*\"], routes: [{path: api, upstream: u}, {path: /x, upstream: u}]}\n\
         services:\n  svc: {path: /svc, upstream: u}\n",
    );
    assert_eq!(e.len(), 3, "{e:#?}");
    assert!(e[0].starts_with("listeners.http.backlg: unknown field"), "{e:#?}");
    assert!(e[1].starts_with("upstreams.u.balance: unknown variant `fastest`"), "{e:#?}");
    assert_eq!(e[2], "sites.s.routes[0].path: must start with `/`");
}

#[test]
fn references_to_unread_services_and_plans_are_not_reported_again() {
    let e = errors(
        "listeners: {http: {bind: \"127.0.0.1:0\"}}\nupstreams: {u: {targets: [\"127.0.0.1:1\"]}}\n\
         services:\n  svc: {path: /svc, upstream: u, auth: sometimes}\n\
         plans:\n  gold: {rate_limits: [{limit: ten}]}\n\
         apps:\n  a: {key: k0123456789abcdef, grants: {svc: gold, other: ~}}\n",
    );
    assert_eq!(e.len(), 3, "{e:#?}");
    assert!(e.iter().any(|m| m.starts_with("services.svc.auth: ")), "{e:#?}");
    assert!(e.iter().any(|m| m.starts_with("plans.gold.rate_limits[0].limit: ")), "{e:#?}");
    assert!(e.iter().any(|m| m == "apps.a.grants.other: unknown service `other`"), "{e:#?}");
}

#[test]
fn a_document_that_is_not_yaml_is_one_error() {
    let e = errors("listeners: [\n");
    assert_eq!(e.len(), 1, "{e:#?}");
}

#[test]
fn names_follow_one_rule_with_its_reason() {
    assert_eq!(name_error("api-v2.internal_1"), None);
    assert_eq!(name_error(".."), Some("a name needs a letter, digit, `-` or `_`"));
    assert_eq!(name_error("."), Some("a name needs a letter, digit, `-` or `_`"));
    assert_eq!(name_error(&"a".repeat(128)), None);
    assert_eq!(name_error(&"a".repeat(129)), Some("names are 1 to 128 characters long"));
    assert_eq!(name_error("a b"), Some("names may use letters, digits, `-`, `_` and `.` only"));
    let e = errors("listeners: {http: {bind: \"127.0.0.1:0\"}}\nupstreams: {\"..\": {targets: [\"127.0.0.1:1\"]}}\n");
    assert_eq!(e, ["upstreams...: a name needs a letter, digit, `-` or `_`"]);
}
