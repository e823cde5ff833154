//! libFuzzer entry for [`gatehouse_fuzz::path`]; the check and its contract live there.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gatehouse_fuzz::path::check(data));
