//! The fuzz targets whose checks end in this crate, over their committed corpora and the inputs
//! that once crashed them (`fuzz/corpus/<target>/`, `fuzz/regressions/<target>/`):
//! - `config`: `gatehouse check` on any text, and the snapshot of what it accepts
//! - `app_key`: the key taken out of a request, and the target forwarded and logged without it

#[path = "../../../fuzz/src/app_key.rs"]
mod app_key;

#[path = "../../../fuzz/src/config.rs"]
mod config;

#[path = "../../../fuzz/src/replay.rs"]
mod replay;

#[test]
fn config_fuzz_corpus_and_regressions_pass() {
    replay::replay("config", config::check);
}

#[test]
fn app_key_fuzz_corpus_and_regressions_pass() {
    replay::replay("app_key", app_key::check);
}
