//! Case ids: `<revision>/<scenario>/<role>`, unique over the traces of a run. A spec revision covers several
//! vLLM releases (`vllm-0.13.0..0.15.1`), so two traces can share a revision and a scenario — the bundled
//! generation-1 traces were recorded from both 0.13.0 and 0.15.1. Their cases then carry the release after the
//! revision (`vllm-0.13.0..0.15.1@0.13.0/a_single_success/decoder`); every other id stays as it was, since
//! ids are referenced by expected-failures files, testee log names and reports.

use mooncake_trace::conversation::Conversation;
use mooncake_trace::trace::Trace;

/// What names a trace's cases.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceKey {
    /// The spec revision that reads it.
    pub revision: String,
    /// Its header's `scenario`.
    pub scenario: String,
    /// The release it was recorded from: its header's `vllm_version`.
    pub release: String,
}

impl TraceKey {
    /// The key of a push-family trace read as a conversation.
    pub fn of(model: &Conversation) -> TraceKey {
        TraceKey::with(model.revision.revision.clone(), &model.trace)
    }

    /// The key of a trace of either family (`family` in its header), its revision resolved in that family.
    pub fn of_trace(trace: &Trace) -> Result<TraceKey, mooncake_wire::spec::ResolveError> {
        let family = trace.header.family.as_deref().unwrap_or("push");
        let spec = mooncake_wire::spec::Spec::builtin();
        let r = spec.resolve_in_family(family, &trace.header.vllm_version)?;
        Ok(TraceKey::with(r.revision.revision.clone(), trace))
    }

    fn with(revision: String, trace: &Trace) -> TraceKey {
        TraceKey { revision, scenario: trace.header.scenario.clone(), release: trace.header.vllm_version.clone() }
    }
}

/// The id prefix of each trace's cases (`<revision>/<scenario>`, or `<revision>@<release>/<scenario>` where
/// another trace shares the revision and the scenario but was recorded from another release), in order.
pub fn bases(keys: &[TraceKey]) -> Vec<String> {
    keys.iter()
        .map(|k| {
            let shared =
                keys.iter().any(|o| o.revision == k.revision && o.scenario == k.scenario && o.release != k.release);
            if shared {
                format!("{}@{}/{}", k.revision, k.release, k.scenario)
            } else {
                format!("{}/{}", k.revision, k.scenario)
            }
        })
        .collect()
}

/// Two cases with the same id (sorted by id): the id and both traces. Traces of one revision, scenario and
/// release cannot be told apart by id.
pub fn duplicate(cases: &[crate::play::Case]) -> Option<(String, String, String)> {
    cases
        .windows(2)
        .find(|w| w[0].id == w[1].id)
        .map(|w| (w[0].id.clone(), w[0].model.trace.path.clone(), w[1].model.trace.path.clone()))
}
