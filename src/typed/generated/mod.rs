//! Generated from `spec/` by `generate::typed_rs` (the `generate` feature); committed, and checked for
//! staleness by `tests/generated.rs` (`BLESS=1 cargo test --test generated` regenerates). Nothing here is
//! edited by hand.

#[rustfmt::skip]
pub mod push;
#[rustfmt::skip]
pub mod via_newest;
#[rustfmt::skip]
pub mod pull;
