//! The `jwt` fuzz target's check over its committed corpus and the inputs that once crashed it
//! (`fuzz/corpus/jwt/`, `fuzz/regressions/jwt/`).

#[path = "../../../fuzz/src/jwt.rs"]
mod target;

#[path = "../../../fuzz/src/replay.rs"]
mod replay;

#[test]
fn fuzz_corpus_and_regressions_pass() {
    replay::replay("jwt", target::check);
}
