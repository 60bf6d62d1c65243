//! `conformance/scenarios.toml`: what a trace cannot show about its scenario (prefiller request ids and
//! blocks, when each becomes ready, injected faults), and the recorded model. The recorder (`tools/record`)
//! reads the same file and also needs the keys only recording uses (the decoder's pulls, TP sizes, which
//! generations and releases a scenario applies to); they are parsed here so that one file serves both and a
//! misspelt key is an error on both sides.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::load_error::LoadError;
pub use crate::load_error::ScenariosError;

pub mod bounds;

/// The model the traces were recorded with (`[model]`): what sizes a case's KV caches.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    /// KV heads over all TP ranks.
    pub total_num_kv_heads: u64,
    /// Elements per head.
    pub head_size: u64,
    /// Tokens per block.
    pub block_size: u64,
    /// Bytes per element (2: fp16).
    pub dtype_bytes: u64,
    /// Blocks of each layer's KV cache.
    pub num_blocks: u64,
    /// Layers of the model (one KV-cache group over all of them unless a scenario says otherwise).
    #[serde(default = "two")]
    pub num_layers: u64,
    /// The prefiller's abort timeout the recordings ran with, in seconds.
    pub abort_timeout_s: f64,
    /// The recordings' attention KV caches are blocks-first (`[blocks, 2, block, heads, head]`, or from 0.26.0
    /// `[blocks, heads, block, 2·head]`): a prefiller of a revision that splits K/V halves does.
    #[serde(default)]
    pub blocks_first: bool,
}

fn two() -> u64 {
    2
}

fn one() -> u64 {
    1
}

impl Model {
    /// Bytes of one block of one layer on a rank of a `tp_size`-way engine.
    pub fn block_bytes(&self, tp_size: u64) -> u64 {
        self.block_size * 2 * self.head_size * self.dtype_bytes * (self.total_num_kv_heads / tp_size.max(1)).max(1)
    }
}

/// When a transfer becomes ready on the prefiller (`ready` in `scenarios.toml`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ready {
    /// Before the decoder pulls (`before`, the default).
    Before,
    /// Once the case has received this many replies (`after_reply:N`).
    AfterReply(usize),
    /// Never: the transfer is never scheduled (`never`).
    Never,
}

impl<'de> Deserialize<'de> for Ready {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.as_str() {
            "before" => Ok(Ready::Before),
            "never" => Ok(Ready::Never),
            _ => {
                s.strip_prefix("after_reply:").and_then(|n| n.parse().ok()).map(Ready::AfterReply).ok_or_else(|| {
                    serde::de::Error::custom(format!("ready: {s:?} is not before, never or after_reply:N"))
                })
            }
        }
    }
}

fn before() -> Ready {
    Ready::Before
}

/// One prefiller-side request of a scenario.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transfer {
    /// The prefiller's request id.
    pub p_req_id: String,
    /// The transfer id the decoder pulls it by.
    pub transfer_id: String,
    /// The prefiller's block ids, one list per KV-cache group (they decide how writes coalesce).
    pub blocks: Vec<Vec<u64>>,
    /// When it becomes ready.
    #[serde(default = "before")]
    pub ready: Ready,
}

/// One request of a decoder pull batch (recording only).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pull {
    /// The decoder's request id.
    pub d_req_id: String,
    /// The transfer it pulls.
    pub transfer_id: String,
    /// The decoder's destination blocks, one list per KV-cache group.
    pub blocks: Vec<Vec<u64>>,
}

/// A KV-cache group of the recorded model (recording only).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvGroup {
    /// `"full"` or `"sliding_window"`.
    pub kind: String,
    /// The model's layers in the group.
    pub layers: Vec<u64>,
    /// The window, in tokens, of a `sliding_window` group.
    #[serde(default)]
    pub sliding_window: Option<u64>,
}

/// One `[scenario.NAME]` entry.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// The prefiller-side requests.
    #[serde(default)]
    pub transfers: Vec<Transfer>,
    /// How many transfer-engine writes fail first (return code -1).
    #[serde(default)]
    pub fail_transfers: usize,
    /// The prefiller forgets its cached layouts once the case has received this many replies.
    #[serde(default)]
    pub forget_layouts_after_reply: Option<usize>,
    // Recording only (tools/record); the replay ignores these.
    /// The trace header's one-sentence summary.
    #[serde(default)]
    pub description: Option<String>,
    /// Connector generations the scenario exists in; empty means every generation.
    #[serde(default)]
    pub generations: Vec<u32>,
    /// First release that can produce the scenario.
    #[serde(default)]
    pub since: Option<String>,
    /// The prefiller's TP size (one worker per rank).
    #[serde(default = "one")]
    pub prefiller_tp: u64,
    /// The decoder's TP size.
    #[serde(default = "one")]
    pub decoder_tp: u64,
    /// The decoder's head size when it differs from the model's.
    #[serde(default)]
    pub decoder_head_size: Option<u64>,
    /// The KV-cache groups, registered in this order; empty: one full-attention group over every layer.
    #[serde(default)]
    pub kv_groups: Vec<KvGroup>,
    /// Decoder pull batches, in order.
    #[serde(default)]
    pub pulls: Vec<Vec<Pull>>,
    /// One more prefiller worker registers this TP rank again, from another address.
    #[serde(default)]
    pub duplicate_register_tp_rank: Option<u64>,
    /// The decoder only queries the bootstrap server and pulls nothing.
    #[serde(default)]
    pub query_only: bool,
    /// The prefiller's `kv_lease_duration` in seconds (`kv_connector_extra_config`); absent: leases off.
    #[serde(default)]
    pub prefiller_kv_lease_s: Option<f64>,
    /// The decoder's `kv_lease_duration` in seconds; absent: it never renews.
    #[serde(default)]
    pub decoder_kv_lease_s: Option<f64>,
    /// The decoder's scheduler learns of every pulled request when the case starts (vLLM's `on_new_request`),
    /// before its first pull: with a lease duration it renews them from then on.
    #[serde(default)]
    pub announce: bool,
    /// Seconds between the case's start (transfers readied "before") and the first pull batch.
    #[serde(default)]
    pub pull_delay_s: f64,
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            transfers: Vec::new(),
            fail_transfers: 0,
            forget_layouts_after_reply: None,
            description: None,
            generations: Vec::new(),
            since: None,
            prefiller_tp: 1,
            decoder_tp: 1,
            decoder_head_size: None,
            kv_groups: Vec::new(),
            pulls: Vec::new(),
            duplicate_register_tp_rank: None,
            query_only: false,
            prefiller_kv_lease_s: None,
            decoder_kv_lease_s: None,
            announce: false,
            pull_delay_s: 0.0,
        }
    }
}

/// One `[pull_scenario.NAME]` entry: what a pull-family recording (`conformance/traces-pull/`, vllm-ascend) cannot
/// show — the block ids on both sides never travel on the side channel, and which engine reads the recorder made
/// fail. `tools/ascend` records the same entries.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PullScenario {
    /// The trace header's one-sentence summary (recording only).
    #[serde(default)]
    pub description: Option<String>,
    /// The decoder instances (each TP 1), `decoder0`, `decoder1`, … (recording only).
    #[serde(default = "one")]
    pub decoders: u64,
    /// The requests pulled, in order.
    pub pulls: Vec<PullRead>,
}

/// One request of a pull scenario.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PullRead {
    /// The decoder instance that pulls it (0 for `decoder0`).
    pub decoder: u64,
    /// The prefiller's request id (`remote_request_id`), which the decoder's completion names.
    pub request: String,
    /// The prefiller's block ids (`remote_block_ids`).
    pub prefiller_blocks: Vec<u64>,
    /// The decoder's destination block ids, read pairwise with `prefiller_blocks`.
    pub decoder_blocks: Vec<u64>,
    /// The decoder's engine read of it returns -1 without reading (injected in the decoder process).
    #[serde(default)]
    pub fail_read: bool,
}

/// A whole `scenarios.toml`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenarios {
    /// Always [`FORMAT`].
    pub format: String,
    /// The recorded model.
    pub model: Model,
    /// The scenarios, by id.
    #[serde(default)]
    pub scenario: BTreeMap<String, Scenario>,
    /// The pull family's scenarios, by id.
    #[serde(default)]
    pub pull_scenario: BTreeMap<String, PullScenario>,
}

/// The `format` of a scenarios file.
pub const FORMAT: &str = "mooncake-conformance-scenarios/1";

impl Scenarios {
    /// Reads and parses the file at `path` (errors name it).
    pub fn load(path: &Path) -> Result<Scenarios, LoadError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read { name: name.clone(), source })?;
        Self::parse(&text).map_err(|source| LoadError::Scenarios { name, source })
    }
    /// Parses a scenarios file's text; an unknown key or another `format` is an error.
    pub fn parse(text: &str) -> Result<Scenarios, ScenariosError> {
        let s: Scenarios = toml::from_str(text)?;
        if s.format != FORMAT {
            return Err(ScenariosError::Format { found: s.format, expected: FORMAT });
        }
        bounds::check(&s)?;
        Ok(s)
    }
    /// `text` (a `--scenarios` file) over these scenarios: its `[scenario.NAME]` entries are added, replacing
    /// an entry of the same name; its `[model]`, when it has one, replaces the model. `format` may be left out
    /// (a file holding just the entry a `CASE-SETUP` finding prints is enough).
    pub fn overlay(mut self, text: &str) -> Result<Scenarios, ScenariosError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Overlay {
            #[serde(default)]
            format: Option<String>,
            #[serde(default)]
            model: Option<Model>,
            #[serde(default)]
            scenario: BTreeMap<String, Scenario>,
            #[serde(default)]
            pull_scenario: BTreeMap<String, PullScenario>,
        }
        let o: Overlay = toml::from_str(text)?;
        if let Some(f) = o.format.filter(|f| f != FORMAT) {
            return Err(ScenariosError::Format { found: f, expected: FORMAT });
        }
        if let Some(m) = o.model {
            self.model = m;
        }
        self.scenario.extend(o.scenario);
        self.pull_scenario.extend(o.pull_scenario);
        bounds::check(&self)?;
        Ok(self)
    }
    /// [`Scenarios::overlay`] with a file.
    pub fn overlay_file(self, path: &Path) -> Result<Scenarios, LoadError> {
        let name = format!("--scenarios {}", path.display());
        let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read { name: name.clone(), source })?;
        self.overlay(&text).map_err(|source| LoadError::Scenarios { name, source })
    }
}

/// The scenario's steps keyed on the replies a case has received (`ready = "after_reply:N"`,
/// `forget_layouts_after_reply`), each taken once, as soon as that many replies were seen: what the players,
/// the matrix and the setup's dry run all take the same way.
pub(crate) struct ReplyActions<'a> {
    transfers: &'a [Transfer],
    forget_after: Option<usize>,
    /// Indexes into `transfers` already made ready; whether layouts were forgotten.
    readied: Vec<usize>,
    forgotten: bool,
}

impl<'a> ReplyActions<'a> {
    /// The steps of `scenario` over `transfers` (its transfers, with the ids the prefillers know them by).
    pub(crate) fn new(scenario: &Scenario, transfers: &'a [Transfer]) -> ReplyActions<'a> {
        ReplyActions { transfers, forget_after: scenario.forget_layouts_after_reply, readied: vec![], forgotten: false }
    }

    /// The steps due once `replies` replies were received that were not taken yet (each is taken once).
    pub(crate) fn due(&mut self, replies: usize) -> Vec<Step<'a>> {
        let mut out = vec![];
        for (i, tr) in self.transfers.iter().enumerate() {
            if matches!(tr.ready, Ready::AfterReply(n) if replies >= n) && !self.readied.contains(&i) {
                self.readied.push(i);
                out.push(Step::Ready(tr));
            }
        }
        if self.forget_after.is_some_and(|n| replies >= n) && !self.forgotten {
            self.forgotten = true;
            out.push(Step::Forget);
        }
        out
    }
}

/// A step of the scenario keyed on replies.
pub(crate) enum Step<'a> {
    /// The transfer becomes ready.
    Ready(&'a Transfer),
    /// Prefillers forget the decoder layouts they learnt.
    Forget,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `conformance/scenarios.toml`, read here rather than through `bundled` (which is built on this module).
    fn bundled() -> Scenarios {
        Scenarios::parse(include_str!("../scenarios.toml")).expect("conformance/scenarios.toml parses")
    }

    #[test]
    fn bundled_file_parses_with_recording_keys() {
        let s = bundled();
        assert_eq!(s.model.num_layers, 2);
        let d1 = &s.scenario["d1_hetero_tp_d2_p1"];
        assert_eq!((d1.prefiller_tp, d1.decoder_tp), (1, 2));
        assert_eq!(d1.pulls.len(), 1);
        assert_eq!(d1.pulls[0][0].d_req_id, "d-req-1");
        let h1 = &s.scenario["h1_layout_reuse_and_miss"];
        assert_eq!(h1.since.as_deref(), Some("0.33.0"));
        assert_eq!(h1.pulls.len(), 3);
        assert_eq!(s.scenario["h2_layout_mismatch_error"].decoder_head_size, Some(16));
        assert_eq!(s.scenario["c_multigroup_hybrid"].kv_groups.len(), 2);
        assert_eq!(s.scenario["d0_gen1_homogeneous_tp2"].generations, vec![1]);
        assert!(s.scenario["i_bootstrap_register_query"].query_only);
        // Every scenario the recorder drives says what it is and where it applies.
        for (name, sc) in &s.scenario {
            assert!(sc.description.is_some(), "{name}: no description");
            assert!(!sc.generations.is_empty(), "{name}: no generations");
            assert!(sc.query_only || !sc.pulls.is_empty(), "{name}: no pulls");
        }
    }

    #[test]
    fn a_scenarios_file_adds_to_the_bundled_entries() {
        let base = bundled();
        let n = base.scenario.len();
        let s = base.clone().overlay("[scenario.mine]\ntransfers = [{ p_req_id = \"p\", transfer_id = \"t\", blocks = [[1, 2]], ready = \"after_reply:1\" }]\n").unwrap();
        assert_eq!(s.scenario.len(), n + 1);
        assert_eq!(s.scenario["mine"].transfers[0].ready, Ready::AfterReply(1));
        assert_eq!(s.model.num_blocks, base.model.num_blocks, "the model stays without a [model]");
        // Same name: replaced; a [model]: replaced; a wrong format or key: refused.
        let s = base.clone().overlay("[scenario.a_single_success]\nfail_transfers = 3\n").unwrap();
        assert_eq!(s.scenario["a_single_success"].fail_transfers, 3);
        assert!(s.scenario["a_single_success"].transfers.is_empty());
        let m = "[model]\ntotal_num_kv_heads = 8\nhead_size = 8\nblock_size = 16\ndtype_bytes = 2\nnum_blocks = 64\nabort_timeout_s = 2\n";
        assert_eq!(base.clone().overlay(m).unwrap().model.num_blocks, 64);
        assert!(base.clone().overlay("format = \"other/1\"\n").is_err());
        assert!(base.clone().overlay("[scenario.x]\ntransferz = []\n").is_err());
    }

    #[test]
    fn unknown_scenario_keys_are_rejected() {
        let base = "format = \"mooncake-conformance-scenarios/1\"\n[model]\ntotal_num_kv_heads = 4\nhead_size = 8\n\
                    block_size = 16\ndtype_bytes = 2\nnum_blocks = 32\nabort_timeout_s = 2\n";
        let ok = format!("{base}[scenario.x]\ndecoder_tp = 2\n");
        let parsed = Scenarios::parse(&ok).unwrap();
        assert_eq!(parsed.model.num_layers, 2, "num_layers defaults to 2");
        assert_eq!(parsed.scenario["x"].prefiller_tp, 1);
        let bad = format!("{base}[scenario.x]\ndecoder_tpp = 2\n");
        assert!(Scenarios::parse(&bad).is_err());
        let bad_pull = format!(
            "{base}[scenario.x]\npulls = [[{{ d_req_id = \"a\", transfer_id = \"b\", blocks = [[1]], x = 1 }}]]\n"
        );
        assert!(Scenarios::parse(&bad_pull).is_err());
    }
}
