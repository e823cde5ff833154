//! The fuzz target whose check ends in this crate, over its committed corpus and the inputs that
//! once crashed it (`fuzz/corpus/body_framing/`, `fuzz/regressions/body_framing/`):
//! - `body_framing`: an HTTP/1.1 body decodes to the same bytes however its reads are split

#[path = "../../../fuzz/src/body_framing.rs"]
mod body_framing;

#[path = "../../../fuzz/src/replay.rs"]
mod replay;

#[test]
fn body_framing_fuzz_corpus_and_regressions_pass() {
    replay::replay("body_framing", body_framing::check);
}
