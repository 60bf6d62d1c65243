//! The prefiller side of a case, whoever plays it: a testee (driven through the testee protocol) or the
//! runner's own prefiller (`crate::counterpart`). The scenario's prefiller steps — allocate each transfer, make
//! the early ones ready, fail the next writes, then the steps keyed on replies received — are applied here,
//! once, for every player.

use mooncake_testee_protocol::{Command, Done};
use mooncake_wire::proto::WireProfile;

use crate::counterpart::OwnPrefiller;
use crate::scenarios::{Ready, ReplyActions, Step, Transfer};
use crate::testee::{Testee, TesteeError};

/// One prefiller worker of a case.
#[allow(clippy::large_enum_variant)] // a few per case, never moved in a loop
pub(crate) enum PrefillerSide {
    /// The runner's own prefiller, whose wire log lets it compare every request.
    Ours(OwnPrefiller),
    /// A testee (the implementation under test, or a second one against a decoder testee).
    Testee(Testee),
}

/// What the scenario's steps tell a prefiller, whoever plays it.
pub(crate) trait PrefillerControl {
    /// Transfer `tr` is allocated (not ready yet).
    async fn allocate(&mut self, tr: &Transfer) -> Result<(), TesteeError>;
    /// Transfer `tr` is ready: its blocks may be sent.
    async fn ready(&mut self, tr: &Transfer) -> Result<(), TesteeError>;
    /// The next `n` transfer-engine writes fail.
    async fn fail(&mut self, n: usize) -> Result<(), TesteeError>;
    /// Forget every decoder layout learnt so far (the scenario's `forget_layouts_after_reply`).
    async fn forget(&mut self) -> Result<(), TesteeError>;

    /// The scenario's steps before any pull: every transfer allocated, those ready `before` made ready, the
    /// next `fail_transfers` writes failed. `transfers` are the scenario's, with the ids this prefiller knows
    /// them by.
    async fn prepare(&mut self, transfers: &[Transfer], fail_transfers: usize) -> Result<(), TesteeError> {
        for tr in transfers {
            self.allocate(tr).await?;
            if tr.ready == Ready::Before {
                self.ready(tr).await?;
            }
        }
        if fail_transfers > 0 {
            self.fail(fail_transfers).await?;
        }
        Ok(())
    }
}

impl PrefillerControl for Testee {
    async fn allocate(&mut self, tr: &Transfer) -> Result<(), TesteeError> {
        let c = Command::Allocate { p_req_id: tr.p_req_id.clone(), transfer_id: tr.transfer_id.clone() };
        self.send::<Done>(&c).await.map(drop)
    }
    async fn ready(&mut self, tr: &Transfer) -> Result<(), TesteeError> {
        let c = Command::Ready {
            p_req_id: tr.p_req_id.clone(),
            transfer_id: tr.transfer_id.clone(),
            blocks: tr.blocks.clone(),
        };
        self.send::<Done>(&c).await.map(drop)
    }
    async fn fail(&mut self, n: usize) -> Result<(), TesteeError> {
        self.send::<Done>(&Command::FailNextTransfer { count: n as u64, ret: -1 }).await.map(drop)
    }
    async fn forget(&mut self) -> Result<(), TesteeError> {
        self.send::<Done>(&Command::ForgetLayouts).await.map(drop)
    }
}

impl PrefillerControl for OwnPrefiller {
    async fn allocate(&mut self, tr: &Transfer) -> Result<(), TesteeError> {
        self.allocated(&tr.p_req_id, &tr.transfer_id);
        Ok(())
    }
    async fn ready(&mut self, tr: &Transfer) -> Result<(), TesteeError> {
        self.finished(&tr.p_req_id, &tr.transfer_id, tr.blocks.clone());
        Ok(())
    }
    async fn fail(&mut self, n: usize) -> Result<(), TesteeError> {
        self.fail_next_writes(n, -1);
        Ok(())
    }
    async fn forget(&mut self) -> Result<(), TesteeError> {
        self.forget_layouts();
        Ok(())
    }
}

impl PrefillerControl for PrefillerSide {
    async fn allocate(&mut self, tr: &Transfer) -> Result<(), TesteeError> {
        match self {
            PrefillerSide::Ours(x) => x.allocate(tr).await,
            PrefillerSide::Testee(x) => x.allocate(tr).await,
        }
    }
    async fn ready(&mut self, tr: &Transfer) -> Result<(), TesteeError> {
        match self {
            PrefillerSide::Ours(x) => x.ready(tr).await,
            PrefillerSide::Testee(x) => x.ready(tr).await,
        }
    }
    async fn fail(&mut self, n: usize) -> Result<(), TesteeError> {
        match self {
            PrefillerSide::Ours(x) => x.fail(n).await,
            PrefillerSide::Testee(x) => x.fail(n).await,
        }
    }
    async fn forget(&mut self) -> Result<(), TesteeError> {
        match self {
            PrefillerSide::Ours(x) => x.forget().await,
            PrefillerSide::Testee(x) => x.forget().await,
        }
    }
}

impl PrefillerSide {
    /// The runner's own prefiller, when it plays this side.
    pub(crate) fn own(&self) -> Option<&OwnPrefiller> {
        match self {
            PrefillerSide::Ours(x) => Some(x),
            PrefillerSide::Testee(_) => None,
        }
    }

    /// The testee, when a testee plays this side.
    pub(crate) fn testee(&mut self) -> Option<&mut Testee> {
        match self {
            PrefillerSide::Testee(te) => Some(te),
            PrefillerSide::Ours(_) => None,
        }
    }

    /// Every ROUTER message of the pulls, when the runner owns the prefiller (lease heartbeats and their
    /// replies left out: [`PrefillerSide::heartbeats`]).
    pub(crate) async fn wire(&self, profile: &WireProfile) -> Option<Vec<(bool, Vec<Vec<u8>>)>> {
        Some(split_heartbeats(profile, self.all_wire().await?).0)
    }

    /// The lease heartbeats that reached the runner's prefiller (their payloads), when it owns it.
    pub(crate) async fn heartbeats(&self, profile: &WireProfile) -> Option<Vec<Vec<u8>>> {
        let (_, beats) = split_heartbeats(profile, self.all_wire().await?);
        Some(beats.into_iter().filter(|(inbound, _)| *inbound).filter_map(|(_, f)| f.get(1).cloned()).collect())
    }

    async fn all_wire(&self) -> Option<Vec<(bool, Vec<Vec<u8>>)>> {
        match self {
            PrefillerSide::Ours(x) => x.status().await.ok().map(|s| s.wire),
            PrefillerSide::Testee(_) => None,
        }
    }

    /// Stops a testee; the runner's own prefiller stops when dropped.
    pub(crate) async fn stop(self) {
        if let PrefillerSide::Testee(te) = self {
            te.stop().await;
        }
    }
}

/// A ROUTER wire log split into the pulls' traffic and the lease heartbeats' (0.34.0): a payload the
/// revision's prefiller reads as a heartbeat, and what was sent back to its routing id (each heartbeat comes on
/// a DEALER of its own).
#[allow(clippy::type_complexity)]
pub(crate) fn split_heartbeats(
    profile: &WireProfile,
    wire: Vec<(bool, Vec<Vec<u8>>)>,
) -> (Vec<(bool, Vec<Vec<u8>>)>, Vec<(bool, Vec<Vec<u8>>)>) {
    if !profile.has_heartbeat() {
        return (wire, vec![]);
    }
    let beat_rids: std::collections::HashSet<Vec<u8>> = wire
        .iter()
        .filter(|(inbound, f)| {
            *inbound
                && f.len() == 2
                && matches!(profile.read_inbound(&f[1]), mooncake_wire::proto::Inbound::Heartbeat(_))
        })
        .filter_map(|(_, f)| f.first().cloned())
        .collect();
    wire.into_iter().partition(|(_, f)| f.first().is_none_or(|rid| !beat_rids.contains(rid)))
}

/// Takes the scenario's steps due once `replies` replies were received (`ReplyActions::due`) on every
/// prefiller of `sides`.
pub(crate) async fn fire(
    actions: &mut ReplyActions<'_>,
    replies: usize,
    sides: &mut [(String, PrefillerSide)],
) -> Result<(), TesteeError> {
    for step in actions.due(replies) {
        for (_, side) in sides.iter_mut() {
            apply(&step, side).await?;
        }
    }
    Ok(())
}

/// Tells prefiller `p` a step of the scenario.
pub(crate) async fn apply(step: &Step<'_>, p: &mut impl PrefillerControl) -> Result<(), TesteeError> {
    match step {
        Step::Ready(tr) => p.ready(tr).await,
        Step::Forget => p.forget().await,
    }
}

/// `TE-CALLS`: the prefiller testees' transfer-engine writes against the recorded calls, as a multiset of
/// (session, descriptors, bytes); `recorded_session` names a write's live session as the recording does.
pub(crate) async fn check_te_calls(
    ctx: &mut super::CaseCtx<'_>,
    sides: &mut [(String, PrefillerSide)],
    recorded_session: impl Fn(&str) -> Option<String>,
) -> Result<(), super::PlayError> {
    use mooncake_trace::finding::{CheckId, Finding};
    let mut got: Vec<(String, u64, u64)> = vec![];
    for te in sides.iter_mut().filter_map(|(_, s)| s.testee()) {
        let s: mooncake_testee_protocol::PrefillerStatus = te.status().await?;
        for w in s.writes {
            let session = recorded_session(&w.session).unwrap_or(w.session);
            got.push((session, w.descriptors, w.bytes));
        }
    }
    let mut want: Vec<(String, u64, u64)> =
        ctx.t.trace.header.transfer_engine_calls.iter().map(|c| (c.session.clone(), c.n, c.bytes)).collect();
    got.sort();
    want.sort();
    if got != want && ctx.applies(CheckId::TeCalls) {
        let detail = format!("(session, descriptors, bytes) {got:?} vs recorded {want:?}");
        ctx.found(Finding::new(CheckId::TeCalls, detail).about("transfer-engine writes"));
    }
    Ok(())
}
