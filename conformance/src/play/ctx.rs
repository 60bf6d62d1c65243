//! One case as its player sees it ([`CaseCtx`]): the recorded conversation, the run's options, the revisions
//! the runner and the testee speak, the prefiller-side setup resolved once (`crate::derive::case_setup`), and
//! what the checks found so far.

use std::time::Duration;

use mooncake_wire::proto::WireProfile;

use super::{Case, CaseSink, PlayError, PlayOptions};
use crate::crossver::Pairing;
use crate::scenarios::{Model, Scenario};
use mooncake_trace::conversation::{Conversation, PrefillerConn};
use mooncake_trace::finding::{CheckId, Finding};

/// A case being played.
pub(crate) struct CaseCtx<'a> {
    /// The case's id (`<revision>/<scenario>/<role>`).
    pub(crate) id: &'a str,
    /// The recorded conversation the case replays.
    pub(crate) t: &'a Conversation,
    /// The run's options.
    pub(crate) opts: &'a PlayOptions,
    /// The revision the runner's side speaks and the one the testee was started at.
    pub(crate) pairing: &'a Pairing,
    /// The case's prefiller-side setup.
    pub(crate) scenario: Scenario,
    /// What could not be checked, and why the case is broken.
    pub(crate) sink: CaseSink,
    /// What the checks found, in the order they ran.
    pub(crate) findings: Vec<Finding>,
}

impl<'a> CaseCtx<'a> {
    /// The context of `case`, played with the prefiller-side `scenario` (`crate::derive::case_setup`: the
    /// scenarios file's entry, else the setup derived from the trace).
    pub(crate) fn new(case: &'a Case, opts: &'a PlayOptions, pairing: &'a Pairing, scenario: Scenario) -> CaseCtx<'a> {
        CaseCtx { id: &case.id, t: &case.model, opts, pairing, scenario, sink: CaseSink::default(), findings: vec![] }
    }

    /// The recorded model's numbers (block sizes, the abort timeout).
    pub(crate) fn model(&self) -> &'a Model {
        &self.opts.scenarios.model
    }

    /// The prefiller's abort timeout of the recording.
    pub(crate) fn abort(&self) -> Duration {
        Duration::from_secs_f64(self.model().abort_timeout_s)
    }

    /// How long to wait for a reply or an outcome: the abort timeout and the run's slack.
    pub(crate) fn wait(&self) -> Duration {
        self.abort() + self.opts.slack
    }

    /// The trace revision's wire profile (how the recorded side reads and writes).
    pub(crate) fn profile(&self) -> Result<WireProfile, PlayError> {
        self.t.profile.clone().ok_or(PlayError::NoProfile)
    }

    /// Whether `check` can run on this trace (`super::applies`).
    pub(crate) fn applies(&self, check: CheckId) -> bool {
        super::applies(&self.t.trace.header, check)
    }

    /// The recorded prefiller workers in the order they registered with the bootstrap server (those that
    /// never did last): the order the runner starts their stand-ins in.
    pub(crate) fn prefillers_in_register_order(&self) -> Vec<&'a PrefillerConn> {
        let t = self.t;
        let registered_at = |p: &PrefillerConn| {
            t.http.iter().position(|(r, _)| p.register.is_some() && r.body == p.register).unwrap_or(usize::MAX)
        };
        let mut order: Vec<&PrefillerConn> = t.prefillers.iter().collect();
        order.sort_by_key(|p| registered_at(p));
        order
    }

    /// Records a finding.
    pub(crate) fn found(&mut self, f: Finding) {
        self.findings.push(f);
    }

    /// Records findings.
    pub(crate) fn found_all(&mut self, fs: impl IntoIterator<Item = Finding>) {
        self.findings.extend(fs);
    }
}
