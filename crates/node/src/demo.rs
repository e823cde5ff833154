//! The built-in demo backend of the quick start: answers every request with a short greeting and
//! the request line and headers it received, so a new user sees at once what the proxy sent.

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::fmt::Write;

/// Serves the demo backend on `listener` until the task ends.
pub async fn serve(listener: tokio::net::TcpListener) {
    loop {
        let (stream, _) = gatehouse_admin::accept(&listener, "demo").await;
        tokio::spawn(async move {
            let service = service_fn(|req: http::Request<hyper::body::Incoming>| async move {
                let host =
                    req.headers().get(http::header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("-").to_string();
                let xff = req.headers().get("x-forwarded-for").and_then(|v| v.to_str().ok()).unwrap_or("-").to_string();
                let mut body = format!(
                    "Hello from the Gatehouse demo backend.\nYou asked for {} {} (Host: {host}, X-Forwarded-For: {xff}).\nHeaders received:\n",
                    req.method(),
                    req.uri()
                );
                for (name, value) in req.headers() {
                    let _ = writeln!(body, "  {name}: {}", String::from_utf8_lossy(value.as_bytes()));
                }
                let mut resp = http::Response::new(Full::new(Bytes::from(body)));
                resp.headers_mut()
                    .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain; charset=utf-8"));
                Ok::<_, Infallible>(resp)
            });
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
        });
    }
}
