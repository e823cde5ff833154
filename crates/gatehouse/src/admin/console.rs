//! The web console: static files compiled into the binary, served under `/console/`.

use super::http_util;
use bytes::Bytes;
use http_body_util::Full;

/// Answers `GET /console/...`.
pub fn serve(path: &str) -> http::Response<Full<Bytes>> {
    let _ = path;
    http_util::text(404, "text/plain", "404 Not Found\n".into())
}
