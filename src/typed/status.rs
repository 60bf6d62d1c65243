//! `MooncakeXferResponseStatus` as an open newtype: named constants for the members vLLM 0.33.0 defines,
//! any other value representable (so a runner can show what a peer really sent).
//! Spec: `spec/push/vllm-0.16.0..0.18.1.toml` `[enums.MooncakeXferResponseStatus]`, LAYOUT_MISS from
//! `spec/push/vllm-0.33.0.toml`.

use std::fmt;

#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Status(pub i64);

impl Status {
    /// Last reply for the message; per-request outcome in `ok_reqs` / `err_reqs`.
    pub const FINISH: Status = Status(0);
    /// More replies follow on the same socket.
    pub const CONTINUE: Status = Status(1);
    /// The whole message failed; `err_msg` says why.
    pub const ERROR: Status = Status(2);
    /// The prefiller does not hold the layout for this `layout_id` (vLLM 0.33.0).
    pub const LAYOUT_MISS: Status = Status(3);

    /// Members defined by vLLM 0.33.0, in declaration order.
    pub const KNOWN: [(Status, &'static str); 4] = [
        (Status::FINISH, "FINISH"),
        (Status::CONTINUE, "CONTINUE"),
        (Status::ERROR, "ERROR"),
        (Status::LAYOUT_MISS, "LAYOUT_MISS"),
    ];

    pub fn name(self) -> Option<&'static str> {
        Self::KNOWN.iter().find(|(s, _)| *s == self).map(|(_, n)| *n)
    }
    pub fn is_known(self) -> bool {
        self.name().is_some()
    }
    /// Whether this status ends a reply stream.
    pub fn is_terminal(self) -> bool {
        self != Status::CONTINUE
    }
}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "Status({})", self.0),
        }
    }
}
impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}
