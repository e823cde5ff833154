//! JWT auth through the real binary: HS256, RS256 and ES256 tokens accepted by `kid` or by the
//! app claim; every classic bad token refused with 401 and never forwarded.

use crate::common::{head, start, targets};
use gatehouse_jwt::sign::{sign, SigningKey};
use gatehouse_jwt::Algorithm;
use gatehouse_testkit::{Backend, Gateway, TempDir};
use serde_json::{json, Value};
use std::time::{SystemTime, UNIX_EPOCH};

const HOST: &str = "api.test";
const HS_SECRET: &str = "hs-secret-of-the-app-0123456789abcdef";

struct Keys {
    rs: SigningKey,
    es: SigningKey,
    hs: SigningKey,
    _dir: TempDir,
}

fn setup(backend: &Backend) -> (Gateway, Keys) {
    let dir = TempDir::new();
    let (rs, rs_pem) = SigningKey::generate(Algorithm::Rs256).expect("RSA key");
    let (es, es_pem) = SigningKey::generate(Algorithm::Es256).expect("EC key");
    std::fs::write(dir.join("rs.pem"), rs_pem).expect("write rs.pem");
    std::fs::write(dir.join("es.pem"), es_pem).expect("write es.pem");
    let yaml = format!(
        r#"{head}upstreams:
  u: {{ targets: {t} }}
services:
  api:
    path: /api
    upstream: u
    auth: jwt
    jwt: {{ issuer: issuer.test, audience: api, leeway: 5s }}
apps:
  hs: {{ secret: "{HS_SECRET}", grants: {{ api: ~ }} }}
  rs: {{ jwt_keys: [{{ kid: rs-1, alg: RS256, public_key: "{rs}" }}], grants: {{ api: ~ }} }}
  es: {{ jwt_keys: [{{ alg: ES256, public_key: "{es}" }}], grants: {{ api: ~ }} }}
  outsider: {{ secret: "another-secret-0123456789abcdef" }}
"#,
        head = head(""),
        t = targets(&[backend]),
        rs = dir.join("rs.pem").display(),
        es = dir.join("es.pem").display(),
    );
    let gw = start(&yaml);
    let hs = SigningKey::Hmac(HS_SECRET.as_bytes().to_vec());
    (gw, Keys { rs, es, hs, _dir: dir })
}

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs() as i64
}

fn claims(sub: &str) -> Value {
    json!({ "sub": sub, "iss": "issuer.test", "aud": ["web", "api"], "exp": now() + 300, "iat": now() })
}

fn token(header: Value, claims: Value, key: &SigningKey) -> String {
    sign(&header, &claims, key).expect("sign")
}

fn call(gw: &Gateway, token: &str) -> gatehouse_testkit::Response {
    let auth = format!("Bearer {token}");
    gatehouse_testkit::http_get(gw.addr("http"), HOST, "/api/orders", &[("authorization", &auth)])
}

#[test]
fn good_tokens_of_each_algorithm_pass() {
    let backend = Backend::start("b");
    let (gw, k) = setup(&backend);
    let hs = token(json!({"alg": "HS256", "typ": "JWT"}), claims("hs"), &k.hs);
    let rs = token(json!({"alg": "RS256", "kid": "rs-1"}), claims("whoever"), &k.rs);
    let es = token(json!({"alg": "ES256"}), claims("es"), &k.es);
    for (name, t) in [("hs", &hs), ("rs", &rs), ("es", &es)] {
        let r = call(&gw, t);
        assert_eq!(r.status, 200, "{name}: {r:?}");
    }
    let apps: Vec<String> =
        backend.requests().iter().map(|r| r.header("x-app-id").unwrap_or("-").to_string()).collect();
    assert_eq!(apps, ["hs", "rs", "es"], "the app comes from the kid, else the sub claim");
    assert!(backend.requests().iter().all(|r| r.path_and_query() == "/orders"));
}

#[test]
fn bad_tokens_are_refused_and_never_forwarded() {
    let backend = Backend::start("b");
    let (gw, k) = setup(&backend);
    let good = token(json!({"alg": "HS256"}), claims("hs"), &k.hs);
    let payload = good.split('.').nth(1).expect("payload").to_string();
    let mut flipped = good.clone();
    let last = flipped.pop().expect("a character");
    flipped.push(if last == 'A' { 'B' } else { 'A' });
    let rs_public = k.rs.public_key_pem().expect("public key");
    let with = |f: &dyn Fn(&mut Value)| {
        let mut c = claims("hs");
        f(&mut c);
        token(json!({"alg": "HS256"}), c, &k.hs)
    };
    let cases: Vec<(&str, String)> = vec![
        ("expired", with(&|c| c["exp"] = json!(now() - 60))),
        ("not yet valid", with(&|c| c["nbf"] = json!(now() + 60))),
        (
            "no exp",
            with(&|c| {
                if let Some(o) = c.as_object_mut() {
                    o.remove("exp");
                }
            }),
        ),
        ("wrong issuer", with(&|c| c["iss"] = json!("evil.test"))),
        ("wrong audience", with(&|c| c["aud"] = json!("other"))),
        ("alg none", format!("eyJhbGciOiJub25lIn0.{payload}.")),
        ("bad signature", flipped),
        ("unknown kid", token(json!({"alg": "RS256", "kid": "rs-2"}), claims("rs"), &k.rs)),
        (
            // The RSA public key used as an HMAC secret: the classic algorithm confusion.
            "HS256 signed with the RS256 public key",
            token(json!({"alg": "HS256", "kid": "rs-1"}), claims("rs"), &SigningKey::Hmac(rs_public.into_bytes())),
        ),
        ("RS256 header on the HS256 app", token(json!({"alg": "RS256"}), claims("hs"), &k.rs)),
        ("unknown app", token(json!({"alg": "HS256"}), claims("nobody"), &k.hs)),
        ("garbage", "not.a.token".into()),
    ];
    for (name, t) in &cases {
        let r = call(&gw, t);
        assert_eq!(r.status, 401, "{name}: {r:?}");
        assert_eq!(r.header("www-authenticate"), Some("Bearer realm=\"api\", error=\"invalid_token\""), "{name}");
    }
    let just_expired = with(&|c| c["exp"] = json!(now() - 2));
    assert_eq!(call(&gw, &just_expired).status, 200, "within the 5 s leeway");
    let no_token = gatehouse_testkit::http_get(gw.addr("http"), HOST, "/api/orders", &[]);
    assert_eq!(no_token.status, 401);
    assert_eq!(no_token.header("www-authenticate"), Some("Bearer realm=\"api\""));
    let outsider = token(
        json!({"alg": "HS256"}),
        claims("outsider"),
        &SigningKey::Hmac(b"another-secret-0123456789abcdef".to_vec()),
    );
    assert_eq!(call(&gw, &outsider).status, 403, "valid token, no grant");
    assert_eq!(backend.request_count(), 1, "only the token within the leeway was forwarded");
}
