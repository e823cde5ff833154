//! The fuzz targets whose checks end in this crate, over their committed corpora and the inputs that
//! once crashed them (`fuzz/corpus/<target>/`, `fuzz/regressions/<target>/`):
//! - `request_head`: a client's request head parses alike at every length, consumes exactly its
//!   own bytes, and what is accepted carries no CR, LF or NUL in a header, framing that agrees
//!   with its headers, no `CONNECT`, and the absolute-form authority as `Host`
//! - `response_head`: an endpoint's response head parses alike at every length, and what is
//!   forwarded of it carries no hop-by-hop header and no length beside chunked coding
//! - `body_framing`: an HTTP/1.1 body decodes to the same bytes however its reads are split

#[path = "../../../fuzz/src/replay.rs"]
mod replay;

#[path = "../../../fuzz/src/request_head.rs"]
mod request_head;

#[test]
fn request_head_fuzz_corpus_and_regressions_pass() {
    replay::replay("request_head", request_head::check);
}

#[path = "../../../fuzz/src/response_head.rs"]
mod response_head;

#[test]
fn response_head_fuzz_corpus_and_regressions_pass() {
    replay::replay("response_head", response_head::check);
}

#[path = "../../../fuzz/src/body_framing.rs"]
mod body_framing;

#[test]
fn body_framing_fuzz_corpus_and_regressions_pass() {
    replay::replay("body_framing", body_framing::check);
}
