//! KV leases (0.34.0, `spec/PROTOCOL.md#kv-leases`): the decoder side's bookkeeping of the requests it renews,
//! and the error both cores give for a lease duration they cannot take. The prefiller side lives in its core
//! (`PrefillerCore::set_kv_lease_duration`): deadlines are entries of its transfer table.
//!
//! A decoder renews the lease of every request from its arrival (`announce`, vLLM's `on_new_request`) until the
//! pull settles (or the pull frees only, or the request ends): every `duration × interval` it sends one
//! `MooncakeLeaseHeartbeat` per prefiller engine naming every leased transfer of that engine, to each worker the
//! pull would use, each on a DEALER of its own that waits `duration × reply_timeout` for the reply.

use std::time::{Duration, Instant};

use crate::limits;
use crate::spec::LeaseRenewal;

/// Why a lease duration cannot be set on a core.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LeaseError {
    /// The revision has no KV leases (`behaviour.kv_leases` / `lease_renewal` is `false`).
    #[error("{0} has no KV leases (kv_lease_duration is read from vLLM 0.34.0 on)")]
    NotInRevision(String),
    /// Zero: vLLM refuses a duration that is not positive.
    #[error("kv_lease_duration must be positive, got {0:?}")]
    NotPositive(Duration),
}

/// A request whose lease a decoder renews (the three `kv_transfer_params` a lease needs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRequest {
    /// The decoder's request id.
    pub d_req_id: String,
    /// The transfer the prefiller holds it under.
    pub transfer_id: String,
    /// The prefiller engine (`remote_engine_id`).
    pub engine_id: String,
    /// Its bootstrap server (`remote_bootstrap_addr`).
    pub bootstrap_addr: String,
}

/// One heartbeat to send: the transfers one prefiller engine holds under a lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Heartbeat {
    pub(crate) engine_id: String,
    pub(crate) bootstrap_addr: String,
    pub(crate) transfer_ids: Vec<String>,
}

/// The decoder's leased requests and its renewal timer.
#[derive(Debug)]
pub(crate) struct LeaseBook {
    rule: LeaseRenewal,
    duration: Duration,
    /// Leased requests in arrival order (vLLM's dict order decides the order of ids in a heartbeat).
    reqs: Vec<LeaseRequest>,
    last: Option<Instant>,
}

impl LeaseBook {
    pub(crate) fn new(rule: LeaseRenewal, duration: Duration) -> LeaseBook {
        LeaseBook { rule, duration, reqs: vec![], last: None }
    }

    fn part(&self, f: [u32; 2]) -> Duration {
        self.duration * f[0] / f[1]
    }

    /// How long a heartbeat's DEALER waits for its reply.
    pub(crate) fn reply_timeout(&self) -> Duration {
        self.part(self.rule.reply_timeout)
    }

    /// A request arrived with everything a lease needs: renew it from now on. Requests missing an engine id,
    /// a bootstrap address or a transfer id are not leased (vLLM computes them locally).
    pub(crate) fn add(&mut self, r: LeaseRequest) {
        let complete = !(r.transfer_id.is_empty() || r.engine_id.is_empty() || r.bootstrap_addr.is_empty());
        if !complete || self.reqs.len() >= limits::MAX_LEASED_REQUESTS {
            return;
        }
        match self.reqs.iter_mut().find(|x| x.d_req_id == r.d_req_id) {
            Some(x) => *x = r,
            None => self.reqs.push(r),
        }
    }

    /// Stops renewing a request (its pull settled, freed only, or the request ended).
    pub(crate) fn remove(&mut self, d_req_id: &str) {
        self.reqs.retain(|x| x.d_req_id != d_req_id);
    }

    /// Requests leased now.
    pub(crate) fn len(&self) -> usize {
        self.reqs.len()
    }

    /// When the next heartbeats are due, if any request is leased. `None` also before the first heartbeat: the
    /// core sends that one from the input that leased a request (vLLM's clock starts at 0, so the first
    /// scheduler step with a leased request renews at once).
    pub(crate) fn due(&self) -> Option<Instant> {
        let last = self.last?;
        (!self.reqs.is_empty()).then(|| last + self.part(self.rule.interval))
    }

    /// The heartbeats due at `now`, one per engine in order of first appearance; the clock restarts at `now`.
    pub(crate) fn take_due(&mut self, now: Instant) -> Vec<Heartbeat> {
        if self.reqs.is_empty() || self.last.is_some_and(|t| now < t + self.part(self.rule.interval)) {
            return vec![];
        }
        self.last = Some(now);
        let mut out: Vec<Heartbeat> = vec![];
        for r in &self.reqs {
            match out.iter_mut().find(|h| h.engine_id == r.engine_id) {
                Some(h) => h.transfer_ids.push(r.transfer_id.clone()),
                None => out.push(Heartbeat {
                    engine_id: r.engine_id.clone(),
                    bootstrap_addr: r.bootstrap_addr.clone(),
                    transfer_ids: vec![r.transfer_id.clone()],
                }),
            }
        }
        out
    }
}
