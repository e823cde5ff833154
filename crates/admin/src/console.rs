//! The web console: a page, a script, a chart drawer and a style sheet compiled into the binary
//! and served under `/console/`. They talk to the API with the token the operator signs in with;
//! a strict content security policy lets them load nothing else.

use super::http_util;
use bytes::Bytes;
use http_body_util::Full;

const INDEX: &str = include_str!("console/index.html");
const APP: &str = include_str!("console/app.js");
const CHART: &str = include_str!("console/chart.js");
const STYLE: &str = include_str!("console/app.css");

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; \
                   form-action 'none'; frame-ancestors 'none'; base-uri 'none'";

/// Answers `GET /console/...`: the assets by name, the page for anything else (its routes are
/// `#/…` fragments).
pub fn serve(path: &str) -> http::Response<Full<Bytes>> {
    let (ctype, body) = match path.strip_prefix("/console/").unwrap_or("") {
        "app.js" => ("text/javascript; charset=utf-8", APP),
        "chart.js" => ("text/javascript; charset=utf-8", CHART),
        "app.css" => ("text/css; charset=utf-8", STYLE),
        _ => ("text/html; charset=utf-8", INDEX),
    };
    let mut resp = http_util::bytes(200, ctype, Bytes::from_static(body.as_bytes()));
    let h = resp.headers_mut();
    h.insert(http::header::CONTENT_SECURITY_POLICY, http::HeaderValue::from_static(CSP));
    h.insert(http::header::X_FRAME_OPTIONS, http::HeaderValue::from_static("DENY"));
    h.insert(http::header::REFERRER_POLICY, http::HeaderValue::from_static("no-referrer"));
    resp
}
