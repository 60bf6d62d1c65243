//! cargo-fuzz wrapper; the body and its invariants: `fuzz/harness/src/targets/spec_decode.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mooncake_fuzz_harness::targets::spec_decode::run(data));
