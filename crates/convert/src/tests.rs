//! Tests of the hyperapi conversion: the 0.2.2 sample and our example convert to configurations
//! that compile, each mapping lands where it should, and what is dropped is reported.

use super::map::sanitize;
use super::plugins::path_globs;
use super::upstream::parse_target;
use super::{hyperapi, Conversion, ConvertError};
use gatehouse_config::{compile, Balance, Config, Duration, HashKey, LimitKey};
use std::path::Path;

/// `tests/sample_config.yaml` of the hyperapi 0.2.2 crate (trailing blanks removed).
const SAMPLE: &str = r#"
services:
  - service_id: test/mws
    path: /mws
    protocol: http
    auth:
      type: AppKey
    timeout: 3
    load_balance: conn
    upstreams:
      - error_threshold: 10
        error_reset: 60
        retry_delay: 10
        weight: 100
        id: 1
        target: "http://127.0.0.1:54320/"
        max_conn: 100
        version: "1.0"
    filters:
      - type: Header
        setting:
          operate_on: "request"
          injection:
            - ['X-TEST', "test-header"]
          removal:
            - "Authorization"
      - type: Header
        setting:
          operate_on: "response"
          injection:
            - ['POWERED-BY', "hyperapi"]
          removal:
            - "Server"
            - "X-UPSTREAM-ID"
      - type: ACL
        setting:
          access_control: "allow"
          paths:
            - methods: "GET,POST,DELETE,PUT,OPTIONS,PATCH"
              path_pattern: "/api/user*"
            - methods: "GET"
              path_pattern: "/error*"

    sla:
      - name: Default
        filters:
          - type: RateLimit
            setting:
              interval: 3
              limit: 5
              burst: 10

  - service_id: test/upstream
    path: /upstream
    protocol: http
    auth:
      type: JWT
    timeout: 3
    load_balance: random
    upstreams:
      - error_threshold: 3
        error_reset: 60
        retry_delay: 3
        weight: 100
        id: 2
        target: "http://127.0.0.1:54320/"
        max_conn: 10
        version: "1.0"
    filters: []
    sla:
      - name: Default
        filters:
          - type: RateLimit
            setting:
              interval: 1
              limit: 100
              burst: 100

  - service_id: test/lb_random
    path: /lb1
    protocol: http
    auth:
      type: AppKey
    timeout: 10
    load_balance: random
    upstreams:
      - id: 11
        timeout: 10
        target: "http://127.0.0.1:54320/"
        max_conn: 100
        version: "1.0"
        weight: 100
        error_threshold: 10
        error_reset: 60
        retry_delay: 10
      - id: 12
        timeout: 10
        target: "http://127.0.0.1:54320/"
        max_conn: 100
        version: "1.0"
        weight: 10
        error_threshold: 10
        error_reset: 60
        retry_delay: 10
    filters: []
    sla:
      - name: Default
        filters:
          - type: RateLimit
            setting:
              interval: 1
              limit: 200
              burst: 200

  - service_id: test/lb_hash
    path: /lb2
    protocol: http
    auth:
      type: AppKey
    timeout: 10
    load_balance: hash
    upstreams:
      - id: 21
        timeout: 10
        target: "http://127.0.0.1:54320/"
        max_conn: 100
        version: "1.0"
        weight: 100
        error_threshold: 10
        error_reset: 60
        retry_delay: 10
      - id: 22
        timeout: 10
        target: "http://127.0.0.1:54320/"
        max_conn: 100
        version: "1.0"
        weight: 10
        error_threshold: 10
        error_reset: 60
        retry_delay: 10
    filters: []
    sla:
      - name: Default
        filters:
          - type: RateLimit
            setting:
              interval: 1
              limit: 100
              burst: 100

  - service_id: test/lb_conn
    path: /lb_conn
    protocol: http
    auth:
      type: AppKey
    timeout: 10
    load_balance: conn
    upstreams:
      - id: 31
        timeout: 10
        target: "http://127.0.0.1:54320/random/0.1"
        max_conn: 100
        version: "1.0"
        weight: 100
        error_threshold: 10
        error_reset: 60
        retry_delay: 10
      - id: 32
        timeout: 10
        target: "http://127.0.0.1:54320/random/0.2"
        max_conn: 100
        version: "1.0"
        weight: 10
        error_threshold: 10
        error_reset: 60
        retry_delay: 10
    filters: []
    sla:
      - name: Default
        filters:
          - type: RateLimit
            setting:
              interval: 1
              limit: 1000
              burst: 1000

  - service_id: test/lb_load
    path: /lb_load
    protocol: http
    auth:
      type: AppKey
    timeout: 10
    load_balance: load
    upstreams:
      - id: 41
        timeout: 10
        target: "http://127.0.0.1:54320/random/0.1"
        max_conn: 100
        version: "1.0"
        weight: 100
        error_threshold: 10
        error_reset: 60
        retry_delay: 10
      - id: 42
        timeout: 10
        target: "http://127.0.0.1:54320/random/0.2"
        max_conn: 100
        version: "1.0"
        weight: 10
        error_threshold: 10
        error_reset: 60
        retry_delay: 10
    filters: []
    sla:
      - name: Default
        filters:
          - type: RateLimit
            setting:
              interval: 1
              limit: 100
              burst: 100

clients:
- app_key: 9cf3319cbd254202cf882a79a755ba6e
  client_id: test/client
  ip_whitelist: []
  pub_key: '-----BEGIN PUBLIC KEY-----

    MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAERxp2aXX0l2/y2y32hnk+TsJakjqd

    2DB414zO+kb1mdxM2rtq/j3WwoKEncd31UwOEMbNld/rpiP5o/sgiTUk9g==

    -----END PUBLIC KEY-----'
  services:
    test/mws: Default
    test/upstream: Default
    test/lb_random: Default
    test/lb_hash: Default
    test/lb_conn: Default
    test/lb_load: Default

"#;

fn convert(text: &str) -> (Conversion, Config) {
    let c = hyperapi(text, "test.yaml", Path::new("keys")).expect("converts");
    let config = compile(&c.yaml).expect("output compiles");
    (c, config)
}

fn notes(c: &Conversion) -> Vec<String> {
    c.notes.iter().map(ToString::to_string).collect()
}

fn has_note(c: &Conversion, path: &str, fragment: &str) -> bool {
    c.notes.iter().any(|n| n.path == path && n.message.contains(fragment))
}

#[test]
fn sample_converts_to_a_config_that_compiles() {
    let (c, config) = convert(SAMPLE);
    let names: Vec<&str> = config.services.keys().map(String::as_str).collect();
    assert_eq!(names, ["test_lb_conn", "test_lb_hash", "test_lb_load", "test_lb_random", "test_mws", "test_upstream"]);
    assert_eq!(config.listeners["http"].bind, "0.0.0.0:8888".parse().expect("addr"));
    let mws = &config.services["test_mws"];
    assert_eq!((mws.path.as_str(), mws.upstream.first(), mws.strip_prefix), ("/mws", "test_mws", true));
    assert_eq!(config.services["test_upstream"].jwt.0[0].leeway, Duration::secs(0));
    assert_eq!(config.upstreams["test_lb_hash"].balance, Balance::ConsistentHash);
    assert_eq!(config.upstreams["test_lb_hash"].hash_key, Some(HashKey::Header("x-lb-hash".into())));
    assert_eq!(config.upstreams["test_lb_load"].balance, Balance::Ewma);
    assert_eq!(config.upstreams["test_lb_conn"].balance, Balance::LeastConn);
    // Both lb_random endpoints are the same address: one target with both weights and limits.
    let random = &config.upstreams["test_lb_random"];
    assert_eq!(random.balance, Balance::Random);
    assert_eq!((random.targets.len(), random.targets[0].weight, random.targets[0].max_conns), (1, 110, 200));
    let app = &config.apps["test_client"];
    assert_eq!(app.key.as_deref(), Some("9cf3319cbd254202cf882a79a755ba6e"));
    assert_eq!(app.jwt_keys[0].alg, "ES256");
    assert_eq!(app.jwt_keys[0].public_key.as_deref(), Some(Path::new("keys/test_client.pem")));
    assert_eq!(app.grants.len(), 6);
    assert_eq!(app.grants["test_lb_hash"].as_deref(), Some("test_lb_hash.Default"));
    assert!(c.key_files[0].pem.starts_with("-----BEGIN PUBLIC KEY-----\nMFkw"), "{:?}", c.key_files);
    assert!(has_note(&c, "services[2].upstreams[0].timeout", "not a hyperapi 0.2.2 setting"), "{:#?}", notes(&c));
    assert!(has_note(&c, "services[4].upstreams[0].target", "path `/random/0.1`"), "{:#?}", notes(&c));
    assert!(has_note(&c, "services[2].upstreams[1].target", "merged"), "{:#?}", notes(&c));
    assert!(has_note(&c, "clients[0].client_id", "sub `test_client`"), "{:#?}", notes(&c));
    assert!(c.yaml.starts_with("# Gatehouse configuration converted from the hyperapi file test.yaml"));
}

#[test]
fn breaker_weights_and_limits() {
    let (c, config) = convert(
        r#"
services:
  - service_id: api
    path: /api
    auth: { type: AppKey }
    timeout: 7
    load_balance: random
    upstreams:
      - { target: "http://10.0.0.1:8080/", weight: 3000, max_conn: 50, error_threshold: 5, error_reset: 30, retry_delay: 4 }
      - { target: "http://10.0.0.2:8080", weight: 1500, max_conn: 0, error_threshold: 1, error_reset: 1, retry_delay: 1 }
      - { target: "http://[::1]:8081", weight: 0, error_threshold: 5, error_reset: 30, retry_delay: 4 }
  - service_id: open
    path: /open
    auth: { type: None }
    upstreams: [{ target: "http://10.0.0.3:80", error_threshold: 0 }]
"#,
    );
    let api = &config.upstreams["api"];
    let cb = api.circuit_breaker.as_ref().expect("breaker");
    // hyperapi opened on the error after `error_threshold` errors.
    assert_eq!((cb.error_threshold, cb.error_reset, cb.retry_delay), (6, Duration::secs(30), Duration::secs(4)));
    assert!(has_note(&c, "services[0].upstreams[1]", "breaker settings differ"));
    assert!(!c.notes.iter().any(|n| n.path == "services[0].upstreams[2]"));
    let weights: Vec<u32> = api.targets.iter().map(|t| t.weight).collect();
    assert_eq!(weights, [1000, 500, 1]);
    assert!(has_note(&c, "services[0].upstreams", "scaled down"));
    assert!(has_note(&c, "services[0].upstreams[2].weight", "written as 1"));
    let limits: Vec<u32> = api.targets.iter().map(|t| t.max_conns).collect();
    assert_eq!(limits, [50, 0, 0]);
    assert!(has_note(&c, "services[0].upstreams[1].max_conn", "no limit"));
    assert_eq!(api.targets[2].address, gatehouse_config::Address::parse("[::1]:8081").expect("addr"));
    assert_eq!((api.timeouts.connect, api.timeouts.read), (Duration::secs(7), Duration::secs(7)));
    assert_eq!((api.retries, api.passive_health.failures), (0, 0));
    assert_eq!(config.upstreams["open"].circuit_breaker, None);
}

#[test]
fn header_filters_become_header_rewrites() {
    let (_, config) = convert(
        r#"
services:
  - service_id: h
    path: /h
    auth: { type: AppKey }
    upstreams: [{ target: "http://127.0.0.1:9000" }]
    filters:
      - type: Header
        setting: { operate_on: request, injection: [[X-One, "1"], [X-Two, "2"]], removal: [Cookie] }
      - type: Header
        setting: { operate_on: request, injection: [[X-Cookie, "c"]], removal: [X-Two] }
      - type: Header
        setting: { operate_on: response, injection: [[Powered-By, gatehouse]], removal: [Server] }
"#,
    );
    let h = &config.services["h"].headers;
    assert_eq!(h.request.remove, ["cookie", "x-two"]);
    let set: Vec<(&str, &str)> = h.request.set.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    // X-Two is set by the first filter and removed by the second: it does not reach the backend.
    assert_eq!(set, [("x-cookie", "c"), ("x-one", "1")]);
    assert_eq!(h.response.remove, ["server"]);
    assert_eq!(h.response.set["powered-by"], "gatehouse");
}

#[test]
fn acl_filters_become_acl_rules() {
    let (c, config) = convert(
        r#"
services:
  - service_id: a
    path: /a
    auth: { type: AppKey }
    upstreams: [{ target: "http://127.0.0.1:9000" }]
    filters:
      - type: ACL
        setting:
          access_control: allow
          paths:
            - { methods: "GET, POST", path_pattern: "/users*" }
            - { methods: "*", path_pattern: "/files/*/meta" }
            - { methods: "GET", path_pattern: "/v*/x" }
            - { methods: "get", path_pattern: "/lower" }
            - { methods: "GET", path_pattern: "/[ab]" }
            - { methods: "GET", path_pattern: ".*" }
      - type: ACL
        setting: { access_control: deny, paths: [{ methods: DELETE, path_pattern: "/admin" }] }
  - service_id: open
    path: /open
    auth: { type: None }
    upstreams: [{ target: "http://127.0.0.1:9001" }]
    filters:
      - type: ACL
        setting: { access_control: allow, paths: [] }
"#,
    );
    let acl = config.services["a"].acl.as_ref().expect("acl");
    let allow: Vec<(Vec<&str>, Vec<&str>)> = acl
        .allow
        .iter()
        .map(|r| (r.methods.iter().map(String::as_str).collect(), r.paths.iter().map(String::as_str).collect()))
        .collect();
    let any = vec!["GET", "POST", "DELETE", "PUT", "OPTIONS", "PATCH"];
    assert_eq!(
        allow,
        [
            (vec!["GET", "POST"], vec!["/users**"]),
            (any, vec!["/files/**/meta"]),
            (vec!["GET"], vec!["/v**/x"]),
            (vec!["GET"], vec![]),
        ]
    );
    assert_eq!(
        (acl.deny[0].methods.as_slice(), acl.deny[0].paths.as_slice()),
        (&["DELETE".to_string()][..], &["/admin".to_string()][..])
    );
    assert!(has_note(&c, "services[0].filters[0].setting.paths[3]", "never matched"));
    assert!(has_note(&c, "services[0].filters[0].setting.paths[4].path_pattern", "rule dropped"));
    assert!(has_note(&c, "services[0].filters[0].setting.paths[5].path_pattern", "regular expression"));
    // An empty allow list refused everything; hyperapi skipped ACLs without auth, Gatehouse does not.
    let open = config.services["open"].acl.as_ref().expect("acl");
    assert!(open.allow.is_empty() && open.deny.len() == 1 && open.deny[0].paths.is_empty());
    assert!(has_note(&c, "services[1].filters[0]", "authenticated callers only"));
}

#[test]
fn slas_become_plans_and_clients_become_apps() {
    let (c, config) = convert(
        r#"
services:
  - service_id: billing/api
    path: /billing
    auth: { type: AppKey }
    upstreams: [{ target: "http://127.0.0.1:9000" }]
    filters:
      - type: RateLimit
        setting: { interval: 1, limit: 1000, burst: 2000 }
    sla:
      - name: Gold
        filters:
          - { type: RateLimit, setting: { interval: 60, limit: 600, burst: 100 } }
          - { type: Header, setting: { operate_on: request, injection: [[X-Plan, gold]], removal: [] } }
      - name: Free
        filters:
          - { type: RateLimit, setting: { interval: 0, limit: 1, burst: 1 } }
clients:
  - client_id: acme
    app_key: acme-key-1
    pub_key: ""
    ip_whitelist: ["10.0.0.0/8", "not-an-ip"]
    services: { billing/api: Gold, nowhere: Gold }
  - client_id: beta
    app_key: beta-key-1
    pub_key: ""
    ip_whitelist: []
    services: { billing/api: Platinum }
"#,
    );
    let svc = &config.services["billing_api"];
    assert_eq!(svc.rate_limits[0].key, LimitKey::Service, "one count for the whole service, as hyperapi");
    assert!(!c.notes.iter().any(|n| n.path == "services[0].filters[0]"), "{:?}", c.notes);
    let gold = &config.plans["billing_api.Gold"];
    let rl = &gold.rate_limits[0];
    // The bucket held 100, so hyperapi never admitted more than 100 a minute.
    assert_eq!((rl.limit, rl.interval, rl.burst, &rl.key), (100, Duration::secs(60), Some(100), &LimitKey::App));
    assert_eq!(gold.headers.request.set["x-plan"], "gold");
    assert!(config.plans["billing_api.Free"].rate_limits.is_empty());
    assert!(has_note(&c, "services[0].sla[1].filters[0]", "interval 0"));
    let acme = &config.apps["acme"];
    assert_eq!(acme.grants.len(), 1);
    assert_eq!(acme.grants["billing_api"].as_deref(), Some("billing_api.Gold"));
    assert_eq!(acme.allow_ips.len(), 1);
    assert!(has_note(&c, "clients[0].ip_whitelist[1]", "dropped"));
    assert!(has_note(&c, "clients[0].ip_whitelist", "never checked"));
    assert!(has_note(&c, "clients[0].services.nowhere", "no such service"));
    assert!(config.apps["beta"].grants.is_empty());
    assert!(has_note(&c, "clients[1].services.billing/api", "no SLA `Platinum`"));
}

#[test]
fn what_cannot_be_carried_over_is_reported() {
    let (c, config) = convert(
        r#"
listen: "127.0.0.1:9999"
metrics: true
services:
  - service_id: s
    path: /s
    protocol: grpc
    auth: { type: AppKey }
    upstreams:
      - { target: "http://backend.internal:8080/v1", id: 1, version: "1.0" }
      - { target: "https://10.0.0.9" }
      - { target: "ftp://10.0.0.10" }
    filters:
      - { type: Header, setting: { operate_on: request, injection: [], removal: [] } }
      - { type: Cache, setting: { ttl: 60 } }
      - { type: RateLimit, setting: { interval: 1, limit: 5000000, burst: 5000000 } }
  - service_id: gone
    path: /g
    auth: { type: OAuth }
    upstreams: [{ target: "http://10.0.0.1:80" }]
  - service_id: empty
    path: /e
    auth: { type: None }
    upstreams: []
clients:
  - client_id: c
    app_key: "has space"
    pub_key: ""
    ip_whitelist: []
    services: {}
    filters: []
"#,
    );
    assert_eq!(config.listeners["http"].bind, "127.0.0.1:9999".parse().expect("addr"));
    let targets: Vec<String> = config.upstreams["s"].targets.iter().map(|t| t.address.to_string()).collect();
    assert_eq!(targets, ["backend.internal:8080"]);
    for (path, fragment) in [
        ("metrics", "not a hyperapi 0.2.2 setting"),
        ("services[0].protocol", "never read"),
        ("services[0].upstreams[0].target", "path `/v1`"),
        ("services[0].upstreams[1].target", "all TLS or all plain"),
        ("services[0].upstreams[2].target", "scheme `ftp`"),
        ("services[0].upstreams", "X-UPSTREAM-ID"),
        ("services[1].auth.type", "service dropped"),
        ("services[2].upstreams", "service dropped"),
        ("services[0].filters[2]", "more than one request per microsecond"),
        ("clients[0].filters", "not a hyperapi 0.2.2 setting"),
        ("clients[0].app_key", "dropped"),
        ("clients[0]", "client dropped"),
    ] {
        assert!(has_note(&c, path, fragment), "no `{fragment}` at {path} in {:#?}", notes(&c));
    }
    let cache = c.notes.iter().find(|n| n.path == "services[0].filters[1]").expect("cache note");
    assert_eq!(cache.to_string(), "services[0].filters[1]: filter type Cache has no Gatehouse equivalent; dropped");
    assert!(config.services.len() == 1 && config.apps.is_empty());
    assert!(c.yaml.contains("#   services[0].filters[1]: filter type Cache has no Gatehouse equivalent; dropped\n"));
}

#[test]
fn https_targets_become_a_tls_upstream_and_names_named_targets() {
    let (c, config) = convert(
        r#"
services:
  - service_id: pay
    path: /pay
    auth: { type: None }
    upstreams:
      - { target: "https://Pay.Internal" }
      - { target: "https://10.0.0.9:8443" }
  - service_id: web
    path: /web
    auth: { type: None }
    upstreams: [{ target: "http://web.internal:8080" }]
"#,
    );
    let pay = &config.upstreams["pay"];
    let targets: Vec<String> = pay.targets.iter().map(|t| t.address.to_string()).collect();
    assert_eq!(targets, ["pay.internal:443", "10.0.0.9:8443"]);
    let tls = pay.tls.as_ref().expect("a TLS upstream");
    assert!(tls.verify && tls.ca.is_none());
    assert!(has_note(&c, "services[0].upstreams", "set `tls.ca` for a private CA"));
    let web = &config.upstreams["web"];
    assert!(web.tls.is_none());
    assert_eq!(web.targets[0].address.host(), Some("web.internal"));
    assert!(!c.yaml.contains("192.0.2."), "no placeholder: {}", c.yaml);
}

#[test]
fn duplicate_services_keep_the_last_like_hyperapi() {
    let (c, config) = convert(
        r#"
services:
  - { service_id: a, path: /x, auth: { type: None }, upstreams: [{ target: "http://10.0.0.1:80" }] }
  - { service_id: a, path: /y, auth: { type: None }, upstreams: [{ target: "http://10.0.0.2:80" }] }
  - { service_id: b, path: /y, auth: { type: None }, upstreams: [{ target: "http://10.0.0.3:80" }] }
  - { service_id: c, path: z/, auth: { type: None }, upstreams: [{ target: "http://10.0.0.4:80" }] }
"#,
    );
    let paths: Vec<(&str, &str)> = config.services.iter().map(|(n, s)| (n.as_str(), s.path.as_str())).collect();
    assert_eq!(paths, [("b", "/y"), ("c", "/z")]);
    assert!(has_note(&c, "services[0]", "appears again"));
    assert!(has_note(&c, "services[1].path", "claimed again by services[2]"));
    assert!(has_note(&c, "services[3].path", "written as `/z`"));
}

#[test]
fn unusable_input_is_an_error() {
    let missing = "services:\n  - { service_id: a, auth: { type: None }, upstreams: [] }\n";
    assert!(matches!(hyperapi(missing, "x", Path::new("keys")), Err(ConvertError::Parse(_))));
    assert!(matches!(hyperapi("[1, 2", "x", Path::new("keys")), Err(ConvertError::Parse(_))));
}

#[test]
fn glob_translation() {
    let ok = |p: &str| path_globs(p).expect("translates");
    // hyperapi's `*` crossed `/`: Gatehouse's `**`.
    assert_eq!(ok("/api/user*").0, ["/api/user**"]);
    assert_eq!(ok("/api/*").0, ["/api/**"]);
    assert_eq!(ok("/a*b/c").0, ["/a**b/c"]);
    assert_eq!(ok("/api/**/x").0, ["/api/**/x"]);
    assert_eq!(ok("/exact"), (vec!["/exact".to_string()], None));
    assert_eq!(ok("*.json").0, ["/**.json"]);
    assert_eq!(ok("*/admin").0, ["/**/admin", "/admin"]);
    assert!(ok("*").0.is_empty() && ok("*").1.is_none());
    assert!(ok(".*").0.is_empty() && ok(".*").1.is_some());
    assert_eq!(ok("^/api/.*$").0, ["/api/**"]);
    for bad in ["api/x", "/a?", "/[ab]", "^/a\\.json$", "/a(b|c)"] {
        assert!(path_globs(bad).is_err(), "{bad}");
    }
}

#[test]
fn target_urls_and_names() {
    let t = parse_target("http://127.0.0.1:54320/random/0.1").expect("url");
    assert_eq!(
        (t.scheme.as_str(), t.host.as_str(), t.port, t.path.as_str()),
        ("http", "127.0.0.1", 54320, "/random/0.1")
    );
    assert_eq!(parse_target("HTTPS://[2001:db8::1]/").expect("url").port, 443);
    assert_eq!(parse_target("http://h").expect("url").port, 80);
    for bad in ["127.0.0.1:80", "http://:80", "http://h:99999", "http://u:p@h"] {
        assert!(parse_target(bad).is_err(), "{bad}");
    }
    assert_eq!(sanitize("test/mws"), "test_mws");
    assert_eq!(sanitize("a.b-c_d"), "a.b-c_d");
    assert_eq!(sanitize(""), "unnamed");
}

/// The committed example output is what the command writes today, and it compiles.
#[test]
fn example_converts_to_the_committed_output() {
    let input = include_str!("../../../examples/hyperapi/hyperapi.yaml");
    let expected = include_str!("../../../examples/hyperapi/gatehouse.yaml");
    let c = hyperapi(input, "examples/hyperapi/hyperapi.yaml", Path::new("examples/hyperapi/keys")).expect("converts");
    compile(&c.yaml).expect("example output compiles");
    assert!(
        c.yaml == expected,
        "examples/hyperapi/gatehouse.yaml is stale; regenerate it with\n  gatehouse convert --from hyperapi \
         examples/hyperapi/hyperapi.yaml -o examples/hyperapi/gatehouse.yaml"
    );
}
