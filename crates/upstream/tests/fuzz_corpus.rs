//! The fuzz targets whose checks end in this crate, over their committed corpora and the inputs that
//! once crashed them (`fuzz/corpus/<target>/`, `fuzz/regressions/<target>/`):
//! - `body_framing`: an HTTP/1.1 body decodes to the same bytes however its reads are split
//! - `response_head`: an endpoint's response head parses alike at every length, and what is
//!   forwarded of it carries no hop-by-hop header and no length beside chunked coding

#[path = "../../../fuzz/src/body_framing.rs"]
mod body_framing;

#[path = "../../../fuzz/src/replay.rs"]
mod replay;

#[test]
fn body_framing_fuzz_corpus_and_regressions_pass() {
    replay::replay("body_framing", body_framing::check);
}

#[path = "../../../fuzz/src/response_head.rs"]
mod response_head;

#[test]
fn response_head_fuzz_corpus_and_regressions_pass() {
    replay::replay("response_head", response_head::check);
}
