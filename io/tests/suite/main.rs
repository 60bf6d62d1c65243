//! `mooncake-io`'s integration tests, one binary (each file a module: `cargo test -p mooncake-io --test suite
//! signals::`). Most of the crate is exercised through the reference peer's and the runner's suites.

mod signals;
