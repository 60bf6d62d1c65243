//! The role of a case's testee: what the implementation under test plays (the runner plays the others). It is
//! the testee protocol's own role (`start`'s `role`), so a case's role and the command that starts it cannot
//! disagree.

pub use mooncake_testee_protocol::Role;
