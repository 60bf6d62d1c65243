//! The role of a case's testee: what the implementation under test plays (the runner plays the others).

use serde::Serialize;

/// The testee's role in a case (`…/prefiller`, `…/decoder`, `…/bootstrap` in case ids).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Prefiller,
    Decoder,
    Bootstrap,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Prefiller => "prefiller",
            Role::Decoder => "decoder",
            Role::Bootstrap => "bootstrap",
        }
    }
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "prefiller" => Some(Role::Prefiller),
            "decoder" => Some(Role::Decoder),
            "bootstrap" => Some(Role::Bootstrap),
            _ => None,
        }
    }
}
