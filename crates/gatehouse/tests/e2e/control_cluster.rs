//! Three nodes on loopback sharing one Redis: a release reaches all of them, a staged revision
//! only the labelled one, a rollback restores the earlier behaviour, a node started later comes
//! up on the released revision, and a revision a node cannot apply leaves it running what it
//! ran, with the error in the API — while load runs on every node and no request fails.

use crate::common::{start, targets, Cluster, APPLY_WAIT, HOST};
use crate::control::{admin_section, Api};
use gatehouse_testkit::{http_get, Backend, Gateway, Load, TempDir};
use serde_json::{json, Value};

fn node(c: &Cluster, dir: &TempDir, a: &Backend, id: &str, labels: &str, api: bool) -> String {
    let admin = if api { admin_section("") } else { "admin: {bind: \"127.0.0.1:0\"}\n".to_string() };
    format!(
        "workers: 1\n{admin}{}node: {{id: {id}, labels: [{labels}]}}\ncontrol: {{dir: \"{}\", poll_interval: 500ms}}\nlisteners:\n  http: {{bind: \"127.0.0.1:0\"}}\nupstreams:\n  u: {{targets: {}}}\nsites:\n  main:\n    hosts: [\"{HOST}\"]\n    routes: [{{path: /, upstream: u}}]\n",
        c.redis_section(),
        dir.join(id).display(),
        targets(&[a])
    )
}

fn backend_of(gw: &Gateway) -> String {
    let r = http_get(gw.addr("http"), HOST, "/", &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    r.header("x-backend").unwrap_or("-").to_string()
}

fn applied(gw: &mut Gateway, revision: u64) {
    loop {
        let ev = gw.wait_event("applied", APPLY_WAIT);
        if ev["revision"].as_u64() == Some(revision) {
            return;
        }
    }
}

/// Commits and releases a revision no node can apply (its site's CA, given inline, holds no
/// certificate); returns its number once `nodes` have each refused it.
fn release_refused<const N: usize>(api: &Api, nodes: [&mut Gateway; N]) -> u64 {
    let ca = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    let site = json!({ "hosts": [HOST], "routes": [{ "path": "/", "upstream": "u" }], "client_auth": { "ca": ca } });
    assert_eq!(api.call("PUT", "/draft/sites/main", Some(api.version()), site).0, 200);
    let n = api.commit("require client certificates");
    assert_eq!(api.call("POST", &format!("/revisions/{n}/release"), None, Value::Null).0, 200);
    for gw in nodes {
        let ev = gw.wait_event("apply_failed", APPLY_WAIT);
        assert_eq!(ev["revision"].as_u64(), Some(n), "{ev}");
    }
    n
}

fn revisions_by_node(api: &Api) -> Vec<(String, Option<u64>)> {
    let (_, v) = api.call("GET", "/nodes", None, Value::Null);
    v["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| (n["id"].as_str().unwrap_or("").to_string(), n["revision"].as_u64()))
        .collect()
}

#[test]
fn releases_stages_rollbacks_and_late_nodes_follow_through_redis_under_load() {
    let c = Cluster::new();
    let a = Backend::start("a");
    let dir = TempDir::new();
    let (y1, y2, y3) = (
        node(&c, &dir, &a, "n1", "", true),
        node(&c, &dir, &a, "n2", "canary", false),
        node(&c, &dir, &a, "n3", "", false),
    );
    let (mut n1, mut n2, mut n3) = (start(&y1), start(&y2), start(&y3));
    let api = Api::new(&n1);
    let mut loads: Vec<Load> =
        [&n1, &n2, &n3].iter().map(|g| Load::start(g.addr("http"), HOST, "/", 2, 1_000_000)).collect();

    // Revision 1 is what the files say; released, every node runs it.
    let r1 = api.commit("baseline");
    assert_eq!(api.call("POST", &format!("/revisions/{r1}/release"), None, Value::Null).0, 200);
    for gw in [&mut n1, &mut n2, &mut n3] {
        applied(gw, r1);
    }

    // Revision 2 sends traffic to the other backend; staged to `canary`, only n2 takes it.
    let to_b = json!({ "targets": [c.backend.addr().to_string()] });
    assert_eq!(api.call("PUT", "/draft/upstreams/u", Some(api.version()), to_b).0, 200);
    let r2 = api.commit("move to b");
    assert_eq!(api.call("POST", &format!("/revisions/{r2}/stage"), None, json!({ "label": "canary" })).0, 200);
    applied(&mut n2, r2);
    assert_eq!((backend_of(&n1), backend_of(&n2), backend_of(&n3)), ("a".into(), "b".into(), "a".into()));
    crate::tls::eventually("every node reports its revision", || {
        revisions_by_node(&api) == [("n1".into(), Some(r1)), ("n2".into(), Some(r2)), ("n3".into(), Some(r1))]
    });

    // Released, every node runs it.
    assert_eq!(api.call("POST", &format!("/revisions/{r2}/release"), None, Value::Null).0, 200);
    applied(&mut n1, r2);
    applied(&mut n3, r2);
    assert_eq!((backend_of(&n1), backend_of(&n2), backend_of(&n3)), ("b".into(), "b".into(), "b".into()));

    // The stage removed and revision 1 rolled back to: every node back on `a`.
    assert_eq!(api.call("DELETE", "/stages/canary", None, Value::Null).0, 200);
    assert_eq!(api.call("POST", &format!("/revisions/{r1}/rollback"), None, Value::Null).0, 200);
    for gw in [&mut n1, &mut n2, &mut n3] {
        applied(gw, r1);
    }
    assert_eq!((backend_of(&n1), backend_of(&n2), backend_of(&n3)), ("a".into(), "a".into(), "a".into()));

    // A node that was down during a release starts on it, though its file says otherwise.
    let report3 = loads.pop().expect("n3's load").stop();
    n3.terminate();
    assert_eq!(api.call("POST", &format!("/revisions/{r2}/release"), None, Value::Null).0, 200);
    applied(&mut n1, r2);
    applied(&mut n2, r2);
    let n3 = start(&y3);
    assert_eq!(backend_of(&n3), "b");

    // A revision the nodes cannot apply (a CA file none of them has) is refused everywhere, with the
    // error in the API, and they keep serving revision 2.
    let r3 = release_refused(&api, [&mut n1, &mut n2]);
    crate::tls::eventually("the refusals show in the API", || {
        let (_, v) = api.call("GET", "/nodes", None, Value::Null);
        v["nodes"].as_array().is_some_and(|nodes| {
            nodes.len() == 3
                && nodes.iter().all(|n| {
                    n["revision"].as_u64() == Some(r2)
                        && n["last_error"]["revision"].as_u64() == Some(r3)
                        && n["last_error"]["errors"].to_string().contains("sites.main.client_auth.ca")
                        && n["health"] == "degraded"
                })
        })
    });
    assert_eq!((backend_of(&n1), backend_of(&n2), backend_of(&n3)), ("b".into(), "b".into(), "b".into()));

    let reports: Vec<_> = loads.into_iter().map(Load::stop).chain([report3]).collect();
    for (name, report) in ["n1", "n2", "n3"].iter().zip(reports) {
        assert!(report.ok > 0, "{name}: {report:?}");
        assert_eq!(report.failed, 0, "{name}: {report:?}");
        assert_eq!(report.ok, report.responses(), "{name}: every answer is 2xx: {report:?}");
    }
}

#[test]
fn nodes_keep_serving_while_redis_is_away_and_follow_again_when_it_returns_empty() {
    let mut c = Cluster::new();
    let a = Backend::start("a");
    let dir = TempDir::new();
    let (y1, y2) = (node(&c, &dir, &a, "n1", "", true), node(&c, &dir, &a, "n2", "", false));
    let (mut n1, mut n2) = (start(&y1), start(&y2));
    let api = Api::new(&n1);
    let load = Load::start(n2.addr("http"), HOST, "/", 2, 1_000_000);
    let to_b = json!({ "targets": [c.backend.addr().to_string()] });
    assert_eq!(api.call("PUT", "/draft/upstreams/u", Some(api.version()), to_b).0, 200);
    let r1 = api.commit("to b");
    assert_eq!(api.call("POST", &format!("/revisions/{r1}/release"), None, Value::Null).0, 200);
    applied(&mut n1, r1);
    applied(&mut n2, r1);
    // Each node has polled since it applied, so it has checked revision 1 against the store's
    // releases (which a Redis that loses its data numbers from 1 again).
    let applied_at = gatehouse_control::now_secs();
    crate::tls::eventually("both nodes report after applying", || {
        let (_, v) = api.call("GET", "/nodes", None, Value::Null);
        v["nodes"].as_array().is_some_and(|nodes| {
            nodes.len() == 2 && nodes.iter().all(|n| n["updated"].as_i64().is_some_and(|t| t > applied_at))
        })
    });

    // Redis away: traffic goes on with what runs; the API says the store is unavailable.
    c.redis.stop();
    for gw in [&n1, &n2] {
        assert_eq!(backend_of(gw), "b");
    }
    let (s, e) = api.call("GET", "/revisions", None, Value::Null);
    assert_eq!(s, 503, "{e}");
    assert!(e["error"].as_str().is_some_and(|m| m.contains("unavailable")), "{e}");
    let status = gatehouse_testkit::http_get(n1.admin(), "127.0.0.1", "/status", &[]);
    assert_eq!(status.status, 200);

    // Redis back, empty: the nodes keep revision 1 (nothing is released any more); a new
    // revision 1 with other content is a different revision, and they take it when released.
    c.redis.restart();
    crate::tls::eventually("the API reaches Redis again", || api.call("GET", "/revisions", None, Value::Null).0 == 200);
    assert_eq!((backend_of(&n1), backend_of(&n2)), ("b".into(), "b".into()));
    assert_eq!(api.version(), 0, "the draft starts again from the file");
    let again = api.commit("back to a, in a new Redis");
    assert_eq!(again, r1, "numbering starts again");
    assert_eq!(api.call("POST", &format!("/revisions/{again}/release"), None, Value::Null).0, 200);
    crate::tls::eventually("both nodes run the new revision 1", || backend_of(&n1) == "a" && backend_of(&n2) == "a");

    // A refusal does not outlive the store's history either: revision 2 is refused (a CA file
    // none of the nodes has), Redis comes back empty again, and a new revision 2 is applied.
    let refused = release_refused(&api, [&mut n1, &mut n2]);
    c.redis.stop();
    c.redis.restart();
    crate::tls::eventually("the API reaches Redis once more", || {
        api.call("GET", "/revisions", None, Value::Null).0 == 200
    });
    assert_eq!(api.commit("as the file, in the third Redis"), r1);
    let to_b = json!({ "targets": [c.backend.addr().to_string()] });
    assert_eq!(api.call("PUT", "/draft/upstreams/u", Some(api.version()), to_b).0, 200);
    assert_eq!(api.commit("to b, in the third Redis"), refused, "the refused revision's number, new content");
    assert_eq!(api.call("POST", &format!("/revisions/{refused}/release"), None, Value::Null).0, 200);
    crate::tls::eventually("both nodes run the new revision 2", || backend_of(&n1) == "b" && backend_of(&n2) == "b");
    let report = load.stop();
    assert_eq!(report.failed, 0, "{report:?}");
    assert_eq!(report.ok, report.responses(), "{report:?}");
}
