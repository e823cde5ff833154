//! Tokens of a real OpenID provider (`tests/oidc/provider.mjs`: oauth2-mock-server, which signs
//! with jose) through the real binary: the key set found by discovery over verified TLS, every
//! algorithm the provider signs, the classic bad tokens refused and never forwarded, claims sent
//! as headers, apps and plans from `app_claim`, key rotation followed with no failed request, and
//! a provider that stops answering costing nothing while its keys are cached (reloads included).
//! CI installs the package (`npm ci` in `tests/oidc`); elsewhere the tests say they were skipped,
//! unless `CI` is set.

use crate::common::{head, start};
use crate::tls::Pki;
use gatehouse_testkit::{http_get, metric_value, Backend, Gateway};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

const HOST: &str = "api.test";
const ALGORITHMS: [&str; 10] =
    ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"];

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/oidc")
}

/// Whether the package is installed; without it (and without `CI`) a test is skipped.
fn installed(test: &str) -> bool {
    let found = dir().join("node_modules/oauth2-mock-server").is_dir();
    if !found {
        assert!(std::env::var_os("CI").is_none(), "tests/oidc needs `npm ci` but CI is set");
        eprintln!("{test}: skipped, run `npm ci --prefix crates/gatehouse/tests/oidc`");
    }
    found
}

/// The provider process, driven by JSON lines.
struct Provider {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    port: u16,
    issuer: String,
}

impl Provider {
    /// Over https with `bundle` (a certificate for `localhost` and its key), else http on loopback.
    fn start(bundle: Option<&Path>) -> Provider {
        let mut cmd = Command::new("node");
        cmd.arg(dir().join("provider.mjs"));
        if let Some(b) = bundle {
            cmd.arg(b);
        }
        let mut child =
            cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().expect("start node");
        let stdin = child.stdin.take().expect("stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read the port");
        let port: u16 = line.trim().parse().unwrap_or_else(|_| panic!("the provider printed {line:?}"));
        let issuer = match bundle {
            Some(_) => format!("https://localhost:{port}"),
            None => format!("http://127.0.0.1:{port}"),
        };
        Provider { child, stdin, stdout, port, issuer }
    }

    fn ask(&mut self, command: Value) -> Value {
        writeln!(self.stdin, "{command}").expect("send a command");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read the answer");
        let answer: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{command}: {line:?}: {e}"));
        assert!(answer.get("error").is_none(), "{command}: {answer}");
        answer
    }

    fn keys(&mut self, algs: &[&str]) -> Vec<String> {
        let answer = self.ask(json!({"cmd": "keys", "algs": algs}));
        answer["kids"].as_array().expect("kids").iter().map(|k| k.as_str().expect("kid").to_string()).collect()
    }

    /// A token signed with `kid`, for audience `api` unless `claims` says otherwise.
    fn token(&mut self, kid: &str, claims: Value) -> String {
        let mut all = json!({"aud": "api", "sub": "user-7", "scope": "read write"});
        for (k, v) in claims.as_object().expect("claims object") {
            all[k] = v.clone();
        }
        self.token_with(json!({"cmd": "token", "kid": kid, "claims": all}))
    }

    fn token_with(&mut self, command: Value) -> String {
        self.ask(command)["token"].as_str().expect("token").to_string()
    }

    fn jwks_hits(&mut self) -> u64 {
        self.ask(json!({"cmd": "hits"}))["jwks"].as_u64().expect("hits")
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn call(gw: &Gateway, path: &str, token: &str, extra: &[(&str, &str)]) -> gatehouse_testkit::Response {
    let auth = format!("Bearer {token}");
    let mut headers = vec![("authorization", auth.as_str())];
    headers.extend_from_slice(extra);
    http_get(gw.addr("http"), HOST, path, &headers)
}

/// A gateway whose service `api` trusts `issuer` by discovery (the CA file given), forwards
/// `sub` and `scope`, strips the token, names apps by `azp`; `jwks` is more of the key set's
/// settings.
fn gateway(backend: &Backend, issuer: &str, ca: Option<&Path>, jwks: &str) -> String {
    let ca = ca.map(|c| format!("ca: \"{}\", ", c.display())).unwrap_or_default();
    format!(
        r#"{head}upstreams:
  u: {{ targets: ["{backend}"] }}
plans:
  anonymous: {{ headers: {{ request: {{ set: {{ x-plan: anonymous }} }} }} }}
  gold: {{ headers: {{ request: {{ set: {{ x-plan: gold }} }} }} }}
services:
  api:
    path: /api
    upstream: u
    auth: [app_key, jwt]
    jwt:
      issuer: "{issuer}"
      audience: api
      discovery: true
      jwks: {{ {ca}{jwks} }}
      app_claim: azp
      forward_claims: {{ sub: x-user-id, scope: x-scopes }}
      strip_token: true
      plan: anonymous
apps:
  shop: {{ key: "shop-key-0123456789abcdef", issuers: ["{issuer}"], grants: {{ api: gold }} }}
  partner: {{ key: "partner-key-0123456789abcdef", grants: {{ api: gold }} }}
  outsider: {{ issuers: ["{issuer}"] }}
"#,
        head = head(""),
        backend = backend.addr(),
    )
}

#[test]
fn every_algorithm_of_a_real_provider_verifies_and_bad_tokens_never_pass() {
    if !installed("every_algorithm_of_a_real_provider_verifies_and_bad_tokens_never_pass") {
        return;
    }
    let pki = Pki::new();
    let bundle = pki.issue(&["localhost"], gatehouse_tls::issue::Algorithm::EcdsaP256, "idp.pem", None);
    let mut idp = Provider::start(Some(&bundle));
    let kids = idp.keys(&ALGORITHMS);
    let backend = Backend::start("b");
    let gw = start(&gateway(&backend, &idp.issuer, Some(&pki.ca_file()), ""));

    // Each algorithm, the client's own x-user-id replaced by the token's.
    for kid in &kids {
        let token = idp.token(kid, json!({"azp": "shop"}));
        let r = call(&gw, "/api/orders", &token, &[("x-user-id", "admin")]);
        assert_eq!(r.status, 200, "{kid}: {r:?}");
    }
    let seen = backend.requests();
    assert_eq!(seen.len(), kids.len());
    for r in &seen {
        assert_eq!(
            (r.header("x-user-id"), r.header("x-scopes"), r.header("x-app-id"), r.header("x-plan")),
            (Some("user-7"), Some("read write"), Some("shop"), Some("gold"))
        );
        assert_eq!(r.header("authorization"), None, "strip_token");
        assert_eq!(r.path_and_query(), "/orders");
    }
    assert_eq!(idp.jwks_hits(), 1, "one fetch serves every key");

    // Over HTTP/2 (h2c) as over HTTP/1.1.
    let token = idp.token(&kids[9], json!({"azp": "shop"}));
    let url = format!("http://{}/api/h2", gw.addr("http"));
    let auth = format!("authorization: Bearer {token}");
    let r = gatehouse_testkit::curl(&["--http2-prior-knowledge", "-H", "host: api.test", "-H", &auth, &url]);
    assert_eq!((r.status, r.version.as_str()), (200, "HTTP/2"), "{r:?}");
    let last = backend.requests().pop().expect("forwarded");
    assert_eq!((last.header("x-user-id"), last.header("authorization")), (Some("user-7"), None));

    // A token naming no app gets the issuer's plan; one naming an app without a grant is refused.
    let anonymous = idp.token(&kids[6], json!({}));
    assert_eq!(call(&gw, "/api/a", &anonymous, &[]).status, 200);
    let last = backend.requests().pop().expect("forwarded");
    assert_eq!((last.header("x-app-id"), last.header("x-plan")), (None, Some("anonymous")));
    let outsider = idp.token(&kids[6], json!({"azp": "outsider"}));
    assert_eq!(call(&gw, "/api/a", &outsider, &[]).status, 403);
    // An app that does not trust this issuer cannot be named by its tokens: such a token names no
    // app (the issuer's plan), and gets none of the app's grant or plan.
    let posing = idp.token(&kids[6], json!({"azp": "partner"}));
    assert_eq!(call(&gw, "/api/a", &posing, &[]).status, 200);
    let last = backend.requests().pop().expect("forwarded");
    assert_eq!((last.header("x-app-id"), last.header("x-plan")), (None, Some("anonymous")));
    // With an app key, claim headers and a bearer token the client made up never pass either.
    let r = call(&gw, "/api/a", "made.up.token", &[("x-app-key", "shop-key-0123456789abcdef"), ("x-user-id", "admin")]);
    assert_eq!(r.status, 200, "{r:?}");
    let last = backend.requests().pop().expect("forwarded");
    assert_eq!(
        (last.header("x-app-id"), last.header("x-user-id"), last.header("authorization")),
        (Some("shop"), None, None)
    );

    let forwarded = backend.requests().len();
    let good = idp.token(&kids[0], json!({}));
    let payload = good.split('.').nth(1).expect("payload").to_string();
    let mut flipped = good.clone();
    let c = flipped.pop().expect("a character");
    flipped.push(if c == 'A' { 'B' } else { 'A' });
    let header_of = |alg: &str, kid: &str| {
        use base64::Engine as _;
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json!({"alg": alg, "kid": kid}).to_string())
    };
    // Another provider's key, under a kid this one also uses: the signature decides.
    let mut stranger = Provider::start(None);
    stranger.keys(&["RS256"]);
    let foreign =
        stranger.token_with(json!({"cmd": "token", "kid": "rs256-1", "iss": idp.issuer, "claims": {"aud": "api"}}));
    let cases: Vec<(&str, String)> = vec![
        ("tampered signature", flipped),
        (
            "expired",
            idp.token_with(json!({"cmd": "token", "kid": kids[7], "expires_in": -120, "claims": {"aud": "api"}})),
        ),
        ("wrong audience", idp.token(&kids[9], json!({"aud": "other"}))),
        ("no audience", idp.token_with(json!({"cmd": "token", "kid": kids[9]}))),
        (
            "another issuer",
            idp.token_with(
                json!({"cmd": "token", "kid": kids[9], "iss": "https://evil.test", "claims": {"aud": "api"}}),
            ),
        ),
        ("alg none", format!("{}.{payload}.", header_of("none", &kids[0]))),
        (
            "RS256 key claimed for HS256",
            format!("{}.{payload}.{}", header_of("HS256", &kids[0]), good.rsplit('.').next().expect("sig")),
        ),
        (
            "PS256 header on an RS256 signature",
            format!("{}.{payload}.{}", header_of("PS256", &kids[0]), good.rsplit('.').next().expect("sig")),
        ),
        ("signed by a stranger", foreign),
        ("unknown kid", format!("{}.{payload}.{}", header_of("RS256", "nope"), good.rsplit('.').next().expect("sig"))),
    ];
    for (name, token) in &cases {
        let r = call(&gw, "/api/x", token, &[]);
        assert_eq!(r.status, 401, "{name}: {r:?}");
        assert!(r.header("www-authenticate").is_some_and(|v| v.contains("invalid_token")), "{name}: {r:?}");
    }
    assert_eq!(backend.requests().len(), forwarded, "nothing refused was forwarded");
}

#[test]
fn rotation_is_followed_and_a_stopped_provider_costs_nothing_while_keys_are_cached() {
    if !installed("rotation_is_followed_and_a_stopped_provider_costs_nothing_while_keys_are_cached") {
        return;
    }
    let mut idp = Provider::start(None);
    let first = idp.keys(&["ES256"]).remove(0);
    let backend = Backend::start("b");
    // min_refetch 1s (the least): an unknown kid may fetch again a second later, so the
    // provider's failure is seen below.
    let yaml = gateway(&backend, &idp.issuer, None, "min_refetch: 1s");
    let mut gw = start(&yaml);

    // Rotation as providers do it: a new key, used at once, the old one withdrawn. Every request
    // around it succeeds: the first token naming the new key brings one fetch.
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(call(&gw, "/api/a", &idp.token(&first, json!({})), &[]).status);
    }
    let second = idp.keys(&["EdDSA"]).remove(0);
    idp.ask(json!({"cmd": "remove", "kid": first}));
    for _ in 0..5 {
        statuses.push(call(&gw, "/api/a", &idp.token(&second, json!({})), &[]).status);
    }
    assert_eq!(statuses, [200; 10]);
    assert_eq!(idp.jwks_hits(), 2);
    assert_eq!(idp.ask(json!({"cmd": "hits"}))["discovery"], 2);
    let metrics = gw.metrics();
    let issuer = idp.issuer.clone();
    let series = |name: &str| format!("{name}{{provider=\"{issuer}\"");
    assert_eq!(
        metric_value(&metrics, &format!("{},result=\"ok\"}}", series("gatehouse_jwks_fetches_total"))),
        Some(2.0)
    );
    assert_eq!(metric_value(&metrics, &format!("{}}}", series("gatehouse_jwks_unknown_kid_fetches_total"))), Some(1.0));
    // The withdrawn key is gone from the gateway too.
    assert_eq!(call(&gw, "/api/a", &idp.token(&first, json!({})), &[]).status, 401);

    // The provider stops: cached keys keep working, through a reload too; the failed fetch (asked
    // for by an unknown kid) is counted and the old set stays in use.
    let token = idp.token(&second, json!({}));
    let stray = idp.token(&first, json!({}));
    idp.ask(json!({"cmd": "stop"}));
    // Tokens naming the withdrawn key: refused, and once min_refetch has passed since the last
    // fetch one of them asks the stopped provider again, which fails.
    let failed = format!("{},result=\"failed\"}}", series("gatehouse_jwks_fetches_total"));
    let seen = gatehouse_testkit::wait_until(std::time::Duration::from_secs(10), || {
        assert_eq!(call(&gw, "/api/a", &stray, &[]).status, 401);
        (metric_value(&gw.metrics(), &failed) >= Some(1.0)).then_some(())
    });
    assert!(seen.is_some(), "no failed fetch counted\n{}", gw.metrics());
    assert_eq!(call(&gw, "/api/a", &token, &[]).status, 200);
    gw.write_config(&yaml.replace("shutdown_grace: 10s", "shutdown_grace: 9s"));
    assert_eq!(gw.reload()["event"], "reloaded");
    for _ in 0..3 {
        assert_eq!(call(&gw, "/api/a", &token, &[]).status, 200);
    }
    let metrics = gw.metrics();
    assert!(
        metric_value(&metrics, &format!("{},result=\"failed\"}}", series("gatehouse_jwks_fetches_total"))) >= Some(1.0),
        "{metrics}"
    );
    assert_eq!(metric_value(&metrics, &format!("{}}}", series("gatehouse_jwks_stale"))), Some(1.0));
    assert_eq!(metric_value(&metrics, &format!("{}}}", series("gatehouse_jwks_keys"))), Some(1.0));
}

#[test]
fn a_provider_never_reached_is_a_503_and_a_bad_key_set_url_is_refused_by_check() {
    if !installed("a_provider_never_reached_is_a_503_and_a_bad_key_set_url_is_refused_by_check") {
        return;
    }
    let mut idp = Provider::start(None);
    let kid = idp.keys(&["ES384"]).remove(0);
    let token = idp.token(&kid, json!({}));
    let issuer = idp.issuer.clone();
    let port = idp.port;
    drop(idp);
    let backend = Backend::start("b");
    let gw = start(&gateway(&backend, &issuer, None, ""));
    let r = call(&gw, "/api/a", &token, &[]);
    assert_eq!(r.status, 503, "{r:?}");
    assert!(backend.requests().is_empty());
    let metrics = gw.metrics();
    assert_eq!(
        metric_value(&metrics, "gatehouse_gateway_denied_total{service=\"api\",reason=\"keys_unavailable\"}"),
        Some(1.0)
    );
    assert!(gw.stderr().contains("key set fetch failed"), "{}", gw.stderr());

    // A discovery document naming another issuer than the one configured is not followed
    // (OpenID Connect Discovery §4.3): the provider answers, yet its tokens cannot be verified.
    let mut idp = Provider::start(None);
    let kid = idp.keys(&["ES256"]).remove(0);
    let other = format!("http://localhost:{}", idp.port);
    let token = idp.token_with(json!({"cmd": "token", "kid": kid, "iss": other, "claims": {"aud": "api"}}));
    let gw = start(&gateway(&backend, &other, None, ""));
    assert_eq!(call(&gw, "/api/a", &token, &[]).status, 503);
    assert_eq!(idp.ask(json!({"cmd": "hits"}))["jwks"], 0, "the key set was fetched");
    assert!(gw.stderr().contains("discovery document names issuer"), "{}", gw.stderr());
    assert!(backend.requests().is_empty());

    // Keys over plain http from anywhere but loopback are refused before anything runs.
    let yaml = gateway(&backend, &format!("http://10.0.0.1:{port}"), None, "");
    let file = gatehouse_testkit::TempDir::new();
    std::fs::write(file.join("g.yaml"), yaml).expect("write");
    let out =
        Command::new(env!("CARGO_BIN_EXE_gatehouse")).arg("check").arg(file.join("g.yaml")).output().expect("check");
    let text = String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("services.api.jwt.issuer") && text.contains("https"), "{text}");
}
