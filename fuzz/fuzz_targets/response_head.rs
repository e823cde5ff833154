//! libFuzzer entry for [`gatehouse_fuzz::response_head`]; the check and its contract live there.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gatehouse_fuzz::response_head::check(data));
