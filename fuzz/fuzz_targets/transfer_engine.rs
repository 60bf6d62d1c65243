//! cargo-fuzz wrapper; the body and its invariants: `fuzz/harness/src/targets/transfer_engine.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mooncake_fuzz_harness::targets::transfer_engine::run(data));
