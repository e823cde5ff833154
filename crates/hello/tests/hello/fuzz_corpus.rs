//! The `client_hello` fuzz target's check over its committed corpus and the inputs that once
//! crashed it (`fuzz/corpus/client_hello/`, `fuzz/regressions/client_hello/`).

#[path = "../../../../fuzz/src/client_hello.rs"]
mod target;

#[path = "../../../../fuzz/src/replay.rs"]
mod replay;

#[test]
fn fuzz_corpus_and_regressions_pass() {
    replay::replay("client_hello", target::check);
}
