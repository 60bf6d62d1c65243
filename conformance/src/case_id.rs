//! Case ids: `<revision>/<scenario>/<role>`, unique over the traces of a run. A spec revision covers several
//! vLLM releases (`vllm-0.13.0..0.15.1`), so two traces can share a revision and a scenario — the bundled
//! generation-1 traces were recorded from both 0.13.0 and 0.15.1. Their cases then carry the release after the
//! revision (`vllm-0.13.0..0.15.1@0.13.0/a_single_success/decoder`); every other id stays as it was, since
//! ids are referenced by expected-failures files, testee log names and reports. A recording of another
//! implementation (`spec/implementations/`) always carries it there:
//! `vllm-0.13.0..0.15.1@mooncake-0.3.13.post1/a_single_success/decoder`.

use mooncake_trace::conversation::Conversation;
use mooncake_trace::trace::Trace;

/// What names a trace's cases.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceKey {
    /// The spec revision that reads it.
    pub revision: String,
    /// Its header's `scenario`.
    pub scenario: String,
    /// What it was recorded from: its header's `vllm_version`, or `<implementation>-<release>`
    /// ([`mooncake_trace::trace::Header::source`]).
    pub release: String,
    /// A recording of another implementation than vLLM's own connector: its ids always name it.
    pub implementation: bool,
}

impl TraceKey {
    /// The key of a push-family trace read as a conversation.
    pub fn of(model: &Conversation) -> TraceKey {
        TraceKey::with(model.revision.revision.clone(), &model.trace)
    }

    /// The key of a trace of either family (`family` in its header), its revision resolved in that family.
    pub fn of_trace(trace: &Trace) -> Result<TraceKey, mooncake_wire::spec::ResolveError> {
        let family = trace.header.family.as_deref().unwrap_or("push");
        let r = mooncake_trace::trace::revision_in(mooncake_wire::spec::Spec::builtin(), family, &trace.header)?;
        Ok(TraceKey::with(r.revision.clone(), trace))
    }

    fn with(revision: String, trace: &Trace) -> TraceKey {
        TraceKey {
            revision,
            scenario: trace.header.scenario.clone(),
            release: trace.header.source(),
            implementation: trace.header.implementation.is_some(),
        }
    }
}

/// The id prefix of each trace's cases (`<revision>/<scenario>`, or `<revision>@<release>/<scenario>` where
/// another trace shares the revision and the scenario but was recorded from another release, or where it is a
/// recording of another implementation), in order.
pub fn bases(keys: &[TraceKey]) -> Vec<String> {
    keys.iter()
        .map(|k| {
            // Another implementation's recordings never rename vLLM's: they always carry their own name.
            let shared = k.implementation
                || keys.iter().any(|o| {
                    !o.implementation && o.revision == k.revision && o.scenario == k.scenario && o.release != k.release
                });
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

#[cfg(test)]
mod tests {
    use super::*;

    fn key(release: &str, implementation: bool) -> TraceKey {
        TraceKey {
            revision: "vllm-0.13.0..0.15.1".into(),
            scenario: "a_single_success".into(),
            release: release.into(),
            implementation,
        }
    }

    #[test]
    fn a_release_is_named_only_when_shared_an_implementation_always() {
        assert_eq!(bases(&[key("0.13.0", false)]), ["vllm-0.13.0..0.15.1/a_single_success"]);
        assert_eq!(
            bases(&[key("0.13.0", false), key("0.15.1", false)]),
            ["vllm-0.13.0..0.15.1@0.13.0/a_single_success", "vllm-0.13.0..0.15.1@0.15.1/a_single_success"]
        );
        // Alone or not, a recording of another implementation says so, and vLLM's own stays as it was.
        assert_eq!(
            bases(&[key("mooncake-0.3.13.post1", true)]),
            ["vllm-0.13.0..0.15.1@mooncake-0.3.13.post1/a_single_success"]
        );
        assert_eq!(
            bases(&[key("0.15.1", false), key("mooncake-0.3.13.post1", true)]),
            ["vllm-0.13.0..0.15.1/a_single_success", "vllm-0.13.0..0.15.1@mooncake-0.3.13.post1/a_single_success"]
        );
    }
}
