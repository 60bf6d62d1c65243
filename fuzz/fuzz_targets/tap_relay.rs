//! cargo-fuzz wrapper; the body and its invariants: `fuzz/harness/src/targets/tap_relay.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mooncake_fuzz_harness::targets::tap_relay::run(data));
