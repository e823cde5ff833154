//! The `router` fuzz target's check (the router against a scan of every route) over its committed
//! corpus and the inputs that once crashed it (`fuzz/corpus/router/`, `fuzz/regressions/router/`).

#[path = "../../../fuzz/src/router.rs"]
mod target;

#[path = "../../../fuzz/src/replay.rs"]
mod replay;

#[test]
fn fuzz_corpus_and_regressions_pass() {
    replay::replay("router", target::check);
}
