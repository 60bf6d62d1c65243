//! A generation-1 setup read off the recorded messages: the recorded request ids as transfers (ready before,
//! or never when no reply names them), failed writes, and — where the recorded transfer-engine calls are fewer
//! than the messages answered — which messages were answered without a write, chosen by dry runs.

use std::collections::BTreeMap;

use mooncake_wire::proto::gen1::{unsigned_int, Gen1Profile};

use super::{combinations, dry_run, finish, transfers_how, Derived, Unresolved};
use crate::role::Role;
use crate::scenarios::{Model, Ready, Scenario, Transfer};
use crate::setup::gen1::{messages, Msg};
use crate::setup::SetupError;
use mooncake_trace::conversation::Conversation;

/// The recorded messages and what a scenario is built from.
struct Gen1<'t> {
    t: &'t Conversation,
    model: &'t Model,
    profile: Gen1Profile,
    msgs: Vec<Msg>,
    /// Request ids in first-named order, with the blocks of the first message naming them.
    ids: Vec<(String, Vec<Vec<u64>>)>,
}

pub(super) fn derive_gen1(t: &Conversation, model: &Model) -> Result<Derived, SetupError> {
    let profile = Gen1Profile::new(t.revision.clone())?;
    let msgs = messages(t, &profile)?;
    let mut ids: Vec<(String, Vec<Vec<u64>>)> = vec![];
    for m in &msgs {
        for (d, b) in m.meta.request_ids.iter().zip(m.meta.block_ids.iter().map(Some).chain(std::iter::repeat(None))) {
            if !ids.iter().any(|(x, _)| x == d) {
                let blocks = b.map(|b| b.iter().map(|x| unsigned_int(*x)).collect()).unwrap_or_default();
                ids.push((d.clone(), vec![blocks]));
            }
        }
    }
    let g = Gen1 { t, model, profile, msgs, ids };
    let mut unresolved = vec![];
    // Messages answered without a write: as many per decoder session as the recorded calls are fewer than the
    // answered messages; which ones, the dry run decides (an unknown id's `trans_done`, or a `trans_error`
    // before any write).
    let (mut unknown, mut no_write_errors) = (vec![], vec![]);
    for s in g.sessions() {
        if let Some(what) = g.choose_unwritten(&s, &mut unknown, &mut no_write_errors) {
            unresolved.push(Unresolved { what, roles: vec![Role::Prefiller, Role::Decoder] });
        }
    }
    let scenario = g.build(&unknown, &no_write_errors);
    let how = g.how(&scenario);
    Ok(finish(t, model, scenario, how, unresolved))
}

fn session(m: &Msg) -> String {
    format!("{}:{}", m.meta.remote_hostname, m.meta.remote_port)
}

impl Gen1<'_> {
    /// Whether a message other than those of `skip` that got a reply names request `d`.
    fn answered(&self, d: &str, skip: &[usize]) -> bool {
        self.msgs
            .iter()
            .enumerate()
            .any(|(k, m)| !skip.contains(&k) && m.reply.is_some() && m.meta.request_ids.iter().any(|x| x == d))
    }

    /// The scenario where the messages of `unknown` were answered `trans_done` for ids the prefiller did not
    /// hold, and those of `no_write_errors` `trans_error` before any write.
    fn build(&self, unknown: &[usize], no_write_errors: &[usize]) -> Scenario {
        let mut transfers = vec![];
        for (d, blocks) in &self.ids {
            let in_unknown = unknown.iter().any(|k| self.msgs[*k].meta.request_ids.contains(d));
            if in_unknown && !self.answered(d, unknown) {
                continue;
            }
            let ready = if self.answered(d, &[]) { Ready::Before } else { Ready::Never };
            transfers.push(Transfer { p_req_id: d.clone(), transfer_id: d.clone(), blocks: blocks.clone(), ready });
        }
        let mut fails: BTreeMap<String, usize> = BTreeMap::new();
        for (k, m) in self.msgs.iter().enumerate() {
            if m.reply.as_ref() == Some(&self.profile.error) && !no_write_errors.contains(&k) {
                *fails.entry(m.endpoint.clone()).or_default() += 1;
            }
        }
        Scenario { transfers, fail_transfers: fails.values().copied().max().unwrap_or(0), ..Scenario::default() }
    }

    /// The decoder sessions, in first-seen order (none where the recording did not observe the transfer-engine
    /// calls: which messages were answered without a write cannot be told then).
    fn sessions(&self) -> Vec<String> {
        if !self.t.trace.header.observed("transfer_engine_calls") {
            return vec![];
        }
        let mut sessions: Vec<String> = vec![];
        for m in &self.msgs {
            if !sessions.contains(&session(m)) {
                sessions.push(session(m));
            }
        }
        sessions
    }

    /// Adds to `unknown` and `no_write_errors` the messages of session `s` answered without a write, the first
    /// choice whose dry run reproduces the recorded calls; what is unresolved when none does.
    fn choose_unwritten(&self, s: &str, unknown: &mut Vec<usize>, no_write_errors: &mut Vec<usize>) -> Option<String> {
        let answered_here: Vec<usize> = self
            .msgs
            .iter()
            .enumerate()
            .filter(|(_, m)| session(m) == s && m.reply.is_some())
            .map(|(k, _)| k)
            .collect();
        let calls = self.t.trace.header.transfer_engine_calls.iter().filter(|c| c.session == s).count();
        let excess = answered_here.len().saturating_sub(calls);
        if excess == 0 {
            return None;
        }
        for pick in combinations(&answered_here, excess, 256) {
            let (u, e): (Vec<usize>, Vec<usize>) =
                pick.iter().partition(|k| self.msgs[**k].reply.as_ref() == Some(&self.profile.done));
            let (mut u2, mut e2) = (unknown.clone(), no_write_errors.clone());
            u2.extend(u);
            e2.extend(e);
            let Ok(run) = dry_run(self.t, self.model, &self.build(&u2, &e2)) else { continue };
            if run.writes.iter().filter(|w| w.0 == s).count() == calls && run.replies.is_empty() {
                (*unknown, *no_write_errors) = (u2, e2);
                return None;
            }
        }
        Some(format!("{} messages of decoder session {s} were answered and {calls} transfer-engine calls recorded: which were answered without a write, no choice reproduces", answered_here.len()))
    }

    /// How the scenario was derived.
    fn how(&self, scenario: &Scenario) -> Vec<String> {
        let dropped: Vec<String> = self
            .ids
            .iter()
            .map(|(d, _)| d.clone())
            .filter(|d| !scenario.transfers.iter().any(|t| &t.transfer_id == d))
            .collect();
        let never: Vec<String> =
            scenario.transfers.iter().filter(|t| t.ready == Ready::Never).map(|t| t.transfer_id.clone()).collect();
        let mut how = vec![transfers_how(
            &scenario.transfers,
            &[],
            &never,
            &dropped,
            "`trans_done` with no write: an id the prefiller did not hold",
        )];
        if scenario.fail_transfers > 0 {
            how.push(format!(
                "{} failed write{} injected (`trans_error` after a recorded transfer-engine call)",
                scenario.fail_transfers,
                if scenario.fail_transfers == 1 { "" } else { "s" }
            ));
        }
        how
    }
}
