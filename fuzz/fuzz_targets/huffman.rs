//! libFuzzer entry for [`gatehouse_fuzz::huffman`]; the check and its contract live there.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gatehouse_fuzz::huffman::check(data));
