//! Target `app_key`: a request to an app-key service. The key is taken from the header, else the
//! `/~KEY` segment right after the service prefix, else the query parameter; every copy in the
//! header and the query goes, and neither the forwarded target nor the access log's shows the
//! segment taken as the key.
//!
//! The input: one byte choosing the service (its prefix and key sources), one saying whether the
//! header comes twice, then text: the request target and, on the next line if any, the header.

use gatehouse_config::AppKeySources;
use gatehouse_plugins::app_key::{PathCut, Sources};
use gatehouse_proxy::{keyless_target, upstream_target, Rewrite};
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::Uri;

/// Service prefixes, as configured (the key segment comes right after them).
const SERVICES: [&str; 8] = ["/", "/mws", "/mws/", "/api/v1", "/~", "/a.b/c", "/%7E", "/mws/~k"];
const HEADERS: [&str; 3] = ["x-app-key", "", "x-api-key"];
const PARAMS: [&str; 3] = ["_app_key", "", "k"];

/// Takes the key out of the request the input describes, builds what is forwarded and logged, and
/// checks that the key went where it must.
pub fn check(data: &[u8]) {
    let [service, twice, rest @ ..] = data else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let (target, header) = text.split_once('\n').map_or((text, None), |(t, h)| (t, Some(h)));
    let Ok(mut uri) = target.parse::<Uri>() else {
        return;
    };
    let service_path = SERVICES[usize::from(service & 7)];
    let header_name = HEADERS[usize::from((service >> 3) & 3) % 3];
    let cfg = AppKeySources {
        header: header_name.into(),
        query: PARAMS[usize::from((service >> 5) & 3) % 3].into(),
        path: service & 0x80 == 0,
    };
    let sources = Sources::new(&cfg).expect("valid sources");
    let header_name = (!header_name.is_empty()).then(|| HeaderName::from_static(header_name));
    let sent = header.and_then(|h| HeaderValue::from_str(h).ok());
    let mut headers = HeaderMap::new();
    if let (Some(name), Some(value)) = (&header_name, &sent) {
        headers.append(name, value.clone());
        if twice & 1 != 0 {
            headers.append(name, HeaderValue::from_static("second"));
        }
    }
    // The key segment sits right after the prefix without its trailing `/`.
    let prefix = service_path.trim_end_matches('/');
    let base_len = prefix.len();
    let before = uri.clone();
    let Ok((key, cut)) = sources.take(&mut uri, &mut headers, base_len) else {
        return;
    };

    let path = before.path();
    assert_eq!(uri.path(), path, "the path is left to the forwarded target");
    assert!(header_name.as_ref().is_none_or(|name| !headers.contains_key(name)), "a header copy stayed");
    let param = Some(cfg.query.as_str()).filter(|p| !p.is_empty());
    let kept: Vec<&str> = query_pairs(before.query()).filter(|pair| Some(name_of(pair)) != param).collect();
    assert_eq!(query_pairs(uri.query()).collect::<Vec<_>>(), kept, "the query without the parameter");

    let segment =
        cfg.path.then(|| path.get(base_len..)?.strip_prefix("/~").map(|s| &s[..s.find('/').unwrap_or(s.len())]));
    let segment = segment.flatten();
    assert_eq!(cut, segment.map(|s| base_len..base_len + 2 + s.len()), "the cut is the key segment");
    let expected = match (&sent, segment, param.and_then(|p| query_pairs(before.query()).find(|q| name_of(q) == p))) {
        (Some(h), _, _) if header_name.is_some() => Some(h.as_bytes().to_vec()),
        (_, Some(s), _) => Some(percent_decode(s)),
        (_, None, Some(pair)) => Some(percent_decode(pair.split_once('=').map_or("", |(_, v)| v))),
        _ => None,
    };
    assert_eq!(key.as_ref().map(|k| k.as_bytes().to_vec()), expected, "the key found");

    // The service owns the path (the router matched its prefix, then a `/` or the end).
    if path.starts_with(prefix) && matches!(path.as_bytes().get(base_len), None | Some(b'/')) {
        forwarded(&uri, &cut, prefix);
    }
}

/// The target forwarded for every rewrite, and the logged one, leave out the cut: each is what
/// the same rewrite makes of the target without the segment.
fn forwarded(uri: &Uri, cut: &PathCut, prefix: &str) {
    let Some(r) = cut else {
        return;
    };
    let path = uri.path();
    let keyless = format!("{}{}", &path[..r.start], &path[r.end..]);
    let keyless = if keyless.is_empty() { "/" } else { keyless.as_str() };
    let query = uri.query().map(|q| format!("?{q}")).unwrap_or_default();
    assert_eq!(keyless_target(uri, cut), format!("{keyless}{query}"), "the logged target");
    let Ok(without) = format!("{keyless}{query}").parse::<Uri>() else {
        panic!("the target without the key segment is not a target: {keyless}{query}");
    };
    // As the snapshot routes a service: its prefix without the trailing `/`, or `/`.
    let prefix_len = prefix.len().max(1);
    for rewrite in [Rewrite::Keep, Rewrite::Prefix(String::new()), Rewrite::Prefix("/internal/".into())] {
        let sent = upstream_target(&rewrite, prefix_len, uri, cut);
        // Rewriting the keyless target: the segment was right after the prefix, so the prefix
        // is where it was.
        let same = upstream_target(&rewrite, prefix_len, &without, &None);
        assert_eq!(sent.map(|u| u.to_string()), same.map(|u| u.to_string()), "{rewrite:?}: cut differs from keyless");
    }
}

fn query_pairs(query: Option<&str>) -> impl Iterator<Item = &str> {
    query.into_iter().flat_map(|q| q.split('&'))
}

fn name_of(pair: &str) -> &str {
    pair.split_once('=').map_or(pair, |(name, _)| name)
}

/// `%XX` escapes decoded, anything else kept as it is.
fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |j: usize| b.get(j).and_then(|&c| (c as char).to_digit(16));
        match (b[i], hex(i + 1), hex(i + 2)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}
