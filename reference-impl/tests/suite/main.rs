//! The reference peer's integration tests, in one test binary: each module is what was a file of its own
//! under `tests/`; `common` is the raw ZMTP client several share, `engine` a real Transfer Engine process.
//! `cargo test -p mooncake-reference --test suite <module>::` runs one module's tests.

mod backend;
mod common;
mod engine;
mod engine_interop;
mod engine_pool;
mod hostile;
mod live;
mod pull;
mod router;
