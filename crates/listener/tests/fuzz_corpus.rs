//! The fuzz target whose check ends in this crate, over its committed corpus and the inputs that
//! once crashed it (`fuzz/corpus/proxy_header/`, `fuzz/regressions/proxy_header/`):
//! - `proxy_header`: a PROXY protocol header reads the same at every length of the stream, is
//!   exactly its own bytes, and a refusal or a whole header never changes with what follows

#[path = "../../../fuzz/src/replay.rs"]
mod replay;

#[path = "../../../fuzz/src/proxy_header.rs"]
mod proxy_header;

#[test]
fn proxy_header_fuzz_corpus_and_regressions_pass() {
    let inputs = replay::replay("proxy_header", proxy_header::check);
    assert!(inputs >= 20, "{inputs} inputs");
}
