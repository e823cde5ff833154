//! The fuzz target whose check ends in this crate, over its committed corpus and the inputs that
//! once crashed it (`fuzz/corpus/request_head/`, `fuzz/regressions/request_head/`):
//! `request_head`: a client's request head parses alike at every length, consumes exactly its own
//! bytes, and what is accepted carries no CR, LF or NUL in a header, framing that agrees with its
//! headers, no `CONNECT`, and the absolute-form authority as `Host`.

#[path = "../../../fuzz/src/request_head.rs"]
mod request_head;

#[path = "../../../fuzz/src/replay.rs"]
mod replay;

#[test]
fn request_head_fuzz_corpus_and_regressions_pass() {
    replay::replay("request_head", request_head::check);
}
