//! The `path` fuzz target's check (idempotent, no dot segment, no `//`) over its committed corpus
//! and the inputs that once crashed it (`fuzz/corpus/path/`, `fuzz/regressions/path/`).

#[path = "../../../fuzz/src/path.rs"]
mod target;

#[path = "../../../fuzz/src/replay.rs"]
mod replay;

#[test]
fn fuzz_corpus_and_regressions_pass() {
    replay::replay("path", target::check);
}
