//! cargo-fuzz wrapper; the body and its invariants: `fuzz/harness/src/targets/zmtp_server.rs`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mooncake_fuzz_harness::targets::zmtp_server::run(data));
