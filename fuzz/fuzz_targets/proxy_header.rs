//! libFuzzer entry for [`gatehouse_fuzz::proxy_header`]; the check and its contract live there.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gatehouse_fuzz::proxy_header::check(data));
