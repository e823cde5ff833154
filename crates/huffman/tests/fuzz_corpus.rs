//! The `huffman` fuzz target's check over its committed corpus and the inputs that once crashed
//! it (`fuzz/corpus/huffman/`, `fuzz/regressions/huffman/`).

#[path = "../../../fuzz/src/huffman.rs"]
mod target;

#[path = "../../../fuzz/src/replay.rs"]
mod replay;

#[test]
fn fuzz_corpus_and_regressions_pass() {
    replay::replay("huffman", target::check);
}
