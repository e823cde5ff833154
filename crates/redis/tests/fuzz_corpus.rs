//! The fuzz target whose check ends in this crate, over its committed corpus and the inputs that
//! once crashed it (`fuzz/corpus/resp/`, `fuzz/regressions/resp/`): `resp`: Redis replies parse
//! alike however the reads are split, a broken stream is broken either way, a declared length is
//! not an allocation, every reply written back parses to itself, and `encode_command`'s output
//! parses as its arguments.

#[path = "../../../fuzz/src/resp.rs"]
mod resp;

#[path = "../../../fuzz/src/replay.rs"]
mod replay;

#[test]
fn resp_fuzz_corpus_and_regressions_pass() {
    replay::replay("resp", resp::check);
}
