//! A strict initiator's record of what it found wrong with its targets (the conformance runner's engine): each
//! handshake that gave no usable descriptor, each descriptor field that differs from what a real engine target
//! writes (`mooncake_wire::te::audit`) and each write it refused because no advertised buffer covers it.

use std::sync::{Arc, Mutex};

/// Which step of reaching a target an [`Issue`] concerns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The handshake exchange: no answer, a frame of the wrong type, a body that is not JSON.
    Handshake,
    /// The segment descriptor the target answered with.
    Descriptor,
}

/// One thing a strict initiator found wrong with a target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issue {
    /// The segment (session) it concerns.
    pub session: String,
    /// The step.
    pub step: Step,
    /// What is wrong, and what the real engine does with it.
    pub detail: String,
    /// Whether the strict initiator refused the transfer because of it (else it wrote, as the real engine does).
    pub refused: bool,
}

/// What the real engine's initiator does when the handshake fails (measured, pinned 0.3.13.post1).
pub const REAL_ON_HANDSHAKE: &str = "the real engine refuses the transfer too: -1, nothing sent (measured with no \
                                     answer, a Connection frame for the Metadata one, a body that is not JSON)";
/// What the real engine's initiator does with a descriptor it cannot use (measured, pinned 0.3.13.post1).
pub const REAL_ON_DESCRIPTOR: &str = "the real engine refuses the transfer too: -1, nothing sent (measured with a \
                                      buffer whose name is empty, address 0 or length 0 — \"Corrupted segment \
                                      descriptor\"; protocol missing or \"rdma\"; tcp_data_port missing; a \
                                      tcp_proto_version that is not an integer)";

/// The issues of a strict client, shared by its clones; each is kept once.
#[derive(Clone, Debug, Default)]
pub(crate) struct Issues(Arc<Mutex<Vec<Issue>>>);

/// At most this many distinct issues are kept.
const MAX_ISSUES: usize = 64;

impl Issues {
    pub(crate) fn note(&self, session: &str, step: Step, detail: String, refused: bool) {
        let issue = Issue { session: session.to_string(), step, detail, refused };
        let mut v = self.0.lock().expect("issues");
        if v.len() < MAX_ISSUES && !v.contains(&issue) {
            v.push(issue);
        }
    }

    pub(crate) fn all(&self) -> Vec<Issue> {
        self.0.lock().expect("issues").clone()
    }
}
