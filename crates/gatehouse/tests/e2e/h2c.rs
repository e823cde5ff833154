//! Cleartext HTTP/2: from clients (prior knowledge) and to upstreams (`protocol: http2`).

use crate::common::{simple, start, targets, HOST};
use gatehouse_testkit::{curl, Backend};
use http::Version;

#[test]
fn h2c_prior_knowledge_is_served() {
    let b = Backend::start("a");
    let gw = start(&simple(&format!("targets: {}", targets(&[&b]))));
    let url = format!("http://{}/h2", gw.addr("http"));
    let resp = curl(&["--http2-prior-knowledge", &url, "-H", &format!("Host: {HOST}")]);
    assert_eq!(resp.version, "HTTP/2", "{resp:?}");
    assert_eq!(resp.status, 200, "{resp:?}");
    assert_eq!(resp.text(), "a");
    let reqs = b.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].version, Version::HTTP_11, "the upstream speaks HTTP/1.1 by default");
    assert_eq!(reqs[0].path_and_query(), "/h2");
    assert_eq!(reqs[0].header("host"), Some(HOST), "the :authority becomes Host upstream: {:?}", reqs[0]);
}

#[test]
fn http2_upstream_is_reached_over_h2c() {
    let b = Backend::start("a");
    let gw = start(&simple(&format!("targets: {}, protocol: http2", targets(&[&b]))));
    let url = format!("http://{}/up?x=1", gw.addr("http"));
    for _ in 0..10 {
        let resp = curl(&[&url, "-H", &format!("Host: {HOST}")]);
        assert_eq!(resp.status, 200, "{resp:?}");
        assert_eq!(resp.text(), "a");
    }
    let reqs = b.requests();
    assert_eq!(reqs.len(), 10);
    for r in &reqs {
        assert_eq!(r.version, Version::HTTP_2, "{r:?}");
        assert_eq!(r.path_and_query(), "/up?x=1");
        let authority = r.uri.parse::<http::Uri>().ok().and_then(|u| u.authority().map(|a| a.to_string()));
        assert_eq!(authority.as_deref(), Some(HOST), "Host is preserved as :authority: {r:?}");
    }
    // One multiplexed connection per worker (the configuration runs 2), never one per request.
    assert!(b.connections() <= 2, "{} connections for 10 requests", b.connections());
}
