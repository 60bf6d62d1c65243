//! The fuzz harness's tests, in one test binary: `smoke` (every target's body over its seeds, regressions,
//! minimised corpus and derived inputs), `differential` (mutated inputs against msgspec), `cross_matrix` (the
//! `cross` target's notion of a compatible pair against the compatibility matrix). `cargo test -p
//! mooncake-fuzz-harness --test suite <module>::` runs one module's tests.

mod cross_matrix;
mod differential;
mod smoke;
