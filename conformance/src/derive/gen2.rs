//! A generation-2 setup read off the recorded conversation: which transfers each pull asks for and when each
//! became ready (before the pull, after the N-th reply, never), failed writes, forgotten layouts, transfers
//! that expired before their pull, and the scenario's timing ([`Timing`](super::Timing)).

use std::collections::{BTreeMap, HashSet};

use mooncake_wire::msgpack::WireInt;
use mooncake_wire::typed::{MooncakeXferMetadata, MooncakeXferResponse, Status};

use super::{
    event_t, finish, reply_index, transfers_how, wire_blocks, Derived, Pulled, Timing, Unresolved, BLOCK_COUNT_MSG,
    SPREAD_FROM, TE_FAILED, TIMEOUT_MSG,
};
use crate::role::Role;
use crate::scenarios::{Model, Ready, Scenario, Transfer};
use mooncake_trace::conversation::{Conversation, Exchange};

/// What the exchanges say, read one after the other.
struct Reading<'t> {
    t: &'t Conversation,
    model: &'t Model,
    /// 1-based index of each reply the decoder side received, by `seq`.
    index: BTreeMap<u64, usize>,
    /// The revision's answer to a pull of an expired transfer.
    expired_msg: Option<String>,
    pulled: Pulled,
    late_expired: Vec<String>,
    unresolved: Vec<Unresolved>,
    /// Replies reporting a failed write, per prefiller.
    failed_rounds: BTreeMap<String, usize>,
    /// The reply counts after which a LAYOUT_MISS answered an acknowledged pull.
    forget: Vec<usize>,
    /// Transfers of pulls that got no reply.
    unanswered: Vec<String>,
    /// (prefiller endpoint, decoder conn, layout_id) a CONTINUE/FINISH echoed.
    acked: HashSet<(String, String, WireInt)>,
}

pub(super) fn derive_gen2(t: &Conversation, model: &Model) -> Derived {
    let expired_msg = t.revision.behaviour.expired_pull.as_ref().and_then(|i| i.value.get()).map(|x| x.message.clone());
    let mut r = Reading {
        t,
        model,
        index: reply_index(t),
        expired_msg,
        pulled: Pulled::default(),
        late_expired: vec![],
        unresolved: vec![],
        failed_rounds: BTreeMap::new(),
        forget: vec![],
        unanswered: vec![],
        acked: HashSet::new(),
    };
    for x in &t.exchanges {
        r.exchange(x);
    }
    r.finish()
}

impl Reading<'_> {
    fn exchange(&mut self, x: &Exchange) {
        let Some(m) = x.request.value() else {
            let what = format!(
                "exchange {}: the recorded request does not decode at {}",
                x.index + 1,
                self.t.revision.revision
            );
            self.unresolved.push(Unresolved { what, roles: vec![Role::Prefiller, Role::Decoder] });
            return;
        };
        for (_, rb) in &m.req_blocks {
            self.pulled.get(&rb.transfer_id, wire_blocks(&rb.blocks));
        }
        if x.replies.is_empty() {
            for (_, rb) in &m.req_blocks {
                if !self.unanswered.contains(&rb.transfer_id) {
                    self.unanswered.push(rb.transfer_id.clone());
                }
            }
        }
        let mut prev: Option<usize> = None;
        for reply in &x.replies {
            let n = reply.seq.and_then(|seq| self.index.get(&seq).copied());
            let Some(r) = reply.payload.value() else { continue };
            self.reply(x, m, r, prev.map(Ready::AfterReply).unwrap_or(Ready::Before));
            if n.is_some() {
                prev = n;
            }
        }
    }

    /// Reply `r` to pull `m` of exchange `x`, received `when` (before any reply of the exchange, or after the
    /// N-th reply).
    fn reply(&mut self, x: &Exchange, m: &MooncakeXferMetadata, r: &MooncakeXferResponse, when: Ready) {
        let tid = |d: &str| m.req_blocks.iter().find(|(k, _)| k == d).map(|(_, rb)| rb.transfer_id.clone());
        for d in r.ok_reqs.iter().flatten() {
            if let Some(id) = tid(d) {
                self.pulled.get(&id, vec![]).mark(when.clone());
            }
        }
        let msg = r.err_msg.as_deref().unwrap_or("");
        // A pull that came after its transfer expired (0.34.0 answers it at once; earlier revisions time out on
        // it, which a recording with times tells apart from a transfer never scheduled).
        let pulled_late = x.seq.and_then(|s| event_t(self.t, s)).is_some_and(|at| at >= self.model.abort_timeout_s);
        let expired = self.expired_msg.as_deref() == Some(msg) || (msg == TIMEOUT_MSG && pulled_late);
        for d in r.err_reqs.iter().flatten() {
            let Some(id) = tid(d) else { continue };
            let s = self.pulled.get(&id, vec![]);
            if expired {
                s.mark(Ready::Before);
                self.late_expired.push(id.clone());
            } else if msg == TIMEOUT_MSG {
                s.timeout = true;
            } else {
                // The prefiller holds fewer blocks than asked (any fewer: one fewer is taken).
                s.short |= msg == BLOCK_COUNT_MSG;
                s.mark(when.clone());
            }
        }
        if r.err_reqs.as_ref().is_some_and(|e| !e.is_empty()) && msg.starts_with(TE_FAILED) {
            *self.failed_rounds.entry(x.prefiller.clone().unwrap_or_default()).or_default() += 1;
        }
        if r.status == Status::ERROR {
            for (_, rb) in &m.req_blocks {
                self.pulled.get(&rb.transfer_id, vec![]).refused = true;
            }
        }
        let key = (x.endpoint.clone(), x.decoder.clone(), m.layout_id);
        if r.status == Status::LAYOUT_MISS && m.kv_caches_base_addr.is_empty() && self.acked.contains(&key) {
            self.forget.push(self.index.range(..x.send_seq()).count());
        }
        if (r.status == Status::CONTINUE || r.status == Status::FINISH) && r.layout_id != WireInt::ZERO {
            self.acked.insert((x.endpoint.clone(), x.decoder.clone(), r.layout_id));
        }
    }

    /// The transfers, when each became ready; and how they were derived (`later`, `never`, `dropped`).
    fn transfers(&self) -> (Vec<Transfer>, Vec<String>, Vec<String>, Vec<String>) {
        let mut transfers = vec![];
        let (mut later, mut never, mut dropped) = (vec![], vec![], vec![]);
        for s in &self.pulled.order {
            let ready = match (&s.ready, s.timeout, s.refused, self.unanswered.contains(&s.transfer_id)) {
                (Some(r), _, _, _) => r.clone(),
                (None, true, _, _) => {
                    dropped.push(s.transfer_id.clone());
                    continue;
                }
                (None, false, true, _) => Ready::Before,
                (None, false, false, true) => Ready::Never,
                (None, false, false, false) => Ready::Before,
            };
            match &ready {
                Ready::AfterReply(n) => later.push(format!("{} after reply {n}", s.transfer_id)),
                Ready::Never => never.push(s.transfer_id.clone()),
                Ready::Before => {}
            }
            let (p_req_id, transfer_id) = (s.transfer_id.clone(), s.transfer_id.clone());
            let blocks = if s.blocks.iter().all(|g| g.is_empty()) {
                // A free-only pull: nothing is written, so any blocks do; a prefiller needs some to be ready.
                vec![vec![SPREAD_FROM]]
            } else if s.short {
                // One block fewer than the decoder asks for, in every KV group that asks for any.
                s.blocks.iter().map(|g| g[..g.len().saturating_sub(1)].to_vec()).collect()
            } else {
                s.blocks.clone()
            };
            transfers.push(Transfer { p_req_id, transfer_id, blocks, ready });
        }
        (transfers, later, never, dropped)
    }

    fn finish(mut self) -> Derived {
        let timing = Timing::of(self.t, self.model);
        let (transfers, later, never, dropped) = self.transfers();
        let mut how = vec![transfers_how(&transfers, &later, &never, &dropped, "the timeout")];
        let fail = self.failed_rounds.values().copied().max().unwrap_or(0);
        if fail > 0 {
            how.push(format!(
                "{fail} failed write{} injected (replies `{TE_FAILED}-1`)",
                if fail == 1 { "" } else { "s" }
            ));
        }
        let forget = &self.forget;
        if forget.len() > 1 {
            self.unresolved.push(Unresolved {
                what: format!("the prefiller forgot the decoder's layout {} times (LAYOUT_MISS after acknowledged pulls, after replies {forget:?}); a scenario forgets layouts once", forget.len()),
                roles: vec![Role::Prefiller, Role::Decoder],
            });
        }
        if let Some(n) = forget.first() {
            how.push(format!(
                "layouts forgotten after reply {n} (a LAYOUT_MISS answers a pull the prefiller had acknowledged)"
            ));
        }
        if !self.late_expired.is_empty() {
            how.push(format!(
                "{} ready before and expired before the pull (the pull came {} s after the start)",
                self.late_expired.join(", "),
                timing.pull_delay_s
            ));
        }
        how.extend(timing.how.iter().cloned());
        for what in &timing.unresolved {
            self.unresolved.push(Unresolved { what: what.clone(), roles: vec![Role::Prefiller, Role::Decoder] });
        }
        let scenario = Scenario {
            transfers,
            fail_transfers: fail,
            forget_layouts_after_reply: forget.first().copied(),
            prefiller_kv_lease_s: timing.prefiller_lease,
            decoder_kv_lease_s: timing.decoder_lease,
            announce: timing.announce,
            pull_delay_s: timing.pull_delay_s,
            ..Scenario::default()
        };
        finish(self.t, self.model, scenario, how, self.unresolved)
    }
}
