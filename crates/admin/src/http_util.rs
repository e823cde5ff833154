//! Small answers of the admin listener: text, JSON, redirects, and the API's error shape.

use bytes::Bytes;
use http_body_util::Full;

/// A plain answer.
pub fn text(status: u16, content_type: &'static str, body: String) -> http::Response<Full<Bytes>> {
    bytes(status, content_type, Bytes::from(body))
}

/// An answer from bytes.
pub fn bytes(status: u16, content_type: &'static str, body: Bytes) -> http::Response<Full<Bytes>> {
    let mut resp = http::Response::new(Full::new(body));
    *resp.status_mut() = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    let h = resp.headers_mut();
    h.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static(content_type));
    h.insert(http::header::CACHE_CONTROL, http::HeaderValue::from_static("no-store"));
    h.insert("x-content-type-options", http::HeaderValue::from_static("nosniff"));
    resp
}

/// A JSON answer.
pub fn json(status: u16, body: &serde_json::Value) -> http::Response<Full<Bytes>> {
    text(status, "application/json", body.to_string())
}

/// `302` to `to`.
pub fn redirect(to: &'static str) -> http::Response<Full<Bytes>> {
    let mut resp = text(302, "text/plain", String::new());
    resp.headers_mut().insert(http::header::LOCATION, http::HeaderValue::from_static(to));
    resp
}

/// Decodes `%XX` escapes in a path segment; `None` when they are broken or do not make UTF-8.
pub use gatehouse_path::percent_decode;

/// The query string as pairs, decoded.
pub fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    query
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .filter_map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            Some((percent_decode(&k.replace('+', " "))?, percent_decode(&v.replace('+', " "))?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_and_queries_decode() {
        assert_eq!(percent_decode("127.0.0.1%3A8080").as_deref(), Some("127.0.0.1:8080"));
        assert_eq!(
            query_pairs(Some("q=a+b%2Bc&bad=%zz")),
            vec![("q".into(), "a b+c".into())],
            "`+` is a space in a query, `%2B` a plus; a pair that does not decode is left out"
        );
        assert_eq!(
            query_pairs(Some("against=3&format=rows&x")),
            vec![("against".into(), "3".into()), ("format".into(), "rows".into()), ("x".into(), String::new())]
        );
    }
}
