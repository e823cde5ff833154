//! Integration tests of gatehouse-hello, linked into one binary so they build once.
//!
//! - `built`: hellos built field by field, every field read back, every rejection
//! - `records`: framing, fragmentation, protocol sniffing and limits
//! - `corpus`: hellos captured from openssl and curl, committed under `tests/data/`
//! - `live`: the same clients run now against a listener on 127.0.0.1:0 (skipped without them)
//! - `mutate`: 200 000 deterministic mutations of the corpus: no panic, consistent answers
//! - `fuzz_corpus`: the fuzz target's check over `fuzz/corpus/client_hello/` and its regressions

// Tests state their expectations with unwrap and indexing; a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod builder;
mod built;
mod corpus;
mod fuzz_corpus;
mod live;
mod mutate;
mod records;
