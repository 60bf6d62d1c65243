//! What a pull-family case (vllm-ascend's pull connector, `spec/pull/`) reads off its trace and scenario before
//! anything starts: each decoder worker's recorded messages and the replies they got, the recorded metadata
//! (its regions, blocks and block lengths), and the scenario's block ids and failed reads, which never travel
//! on the side channel (`[pull_scenario.NAME]` in `conformance/scenarios.toml`).

use std::sync::Arc;
use std::time::Duration;

use mooncake_testee_protocol::LayoutConfig;
use mooncake_wire::codec::Codec;
use serde_json::Value as J;

use super::SetupError;
use crate::role::Role;
use crate::scenarios::{Model, PullRead, Scenarios};
use mooncake_trace::conversation::Conversation;
use mooncake_trace::trace::ZmqDir;

/// The reply to a metadata query (generation 1 of the family).
pub(crate) const METADATA: &str = "MooncakeAgentMetadata";
/// How far apart two synthetic regions start (room for the largest region the scenario bounds allow).
const REGION_SPAN: u64 = 0x1_0000_0000;

/// One recorded message of a decoder worker (a REQ send) and the reply it got.
#[derive(Clone, Debug)]
pub(crate) struct PullMsg {
    /// The decoder worker's conn.
    pub(crate) conn: String,
    /// The payload it sent.
    pub(crate) request: Vec<u8>,
    /// The payload it received, if any.
    pub(crate) reply: Option<Vec<u8>>,
    /// The request id a completion names (`None`: a metadata query).
    pub(crate) done_for: Option<String>,
    /// The send's seq and line.
    pub(crate) seq: u64,
    pub(crate) line: usize,
}

/// A pull case's setup.
pub(crate) struct PullSetup {
    /// The trace revision's codec.
    pub(crate) codec: Arc<Codec>,
    /// Every decoder worker's messages, in recorded order.
    pub(crate) msgs: Vec<PullMsg>,
    /// The recorded decoder workers, in the header's order (`decoder0`, `decoder1`, …).
    pub(crate) decoders: Vec<String>,
    /// The recorded prefiller workers' conns (one per recorded ROUTER).
    pub(crate) prefillers: Vec<String>,
    /// The first recorded metadata reply, as the codec reads it (in its JSON form).
    pub(crate) metadata: J,
    /// Its engine id (the prefiller's `engine_id`).
    pub(crate) engine_id: String,
    /// Its regions (every base address, flattened in order), blocks per region and block length.
    pub(crate) regions: usize,
    pub(crate) num_blocks: u64,
    pub(crate) block_len: u64,
    /// The layer name of each region's layer, from the recorded layer table where there is one.
    pub(crate) layer_names: Vec<String>,
    /// The scenario's requests.
    pub(crate) pulls: Vec<PullRead>,
    /// The abort timeout the recording ran with.
    pub(crate) abort: Duration,
}

impl PullSetup {
    /// The setup of a pull trace's case, with the scenario of the same name from `scenarios`.
    pub(crate) fn new(t: &Conversation, scenarios: &Scenarios) -> Result<PullSetup, SetupError> {
        if t.revision.generation != 1 {
            return Err(SetupError::PullTrace(
                "generation 2 of the pull family (the scheduler-level connector) has no player yet",
            ));
        }
        let name = t.scenario();
        let sc = scenarios.pull_scenario.get(name).ok_or_else(|| SetupError::NoPullScenario(name.to_string()))?;
        let codec = Codec::builtin(&t.revision.revision).ok_or(SetupError::PullTrace("the revision has no codec"))?;
        let msgs = messages(t, &codec);
        let reply = msgs.iter().find(|m| m.done_for.is_none()).and_then(|m| m.reply.clone());
        let reply = reply.ok_or(SetupError::PullTrace("no metadata reply recorded"))?;
        let decoded = codec
            .decode(METADATA, &reply)
            .map_err(|_| SetupError::PullTrace("the recorded metadata does not decode"))?;
        let j = Codec::to_json(&decoded);
        let regions = ints(&j["kv_caches_base_addr"]).len();
        let num_blocks = j["num_blocks"].as_u64().ok_or(SetupError::PullTrace("no num_blocks"))?;
        let block_len = ints(&j["block_lens"]).first().copied().unwrap_or_else(|| region_block_bytes(&scenarios.model));
        let (decoders, prefillers) = (conns(t, Role::Decoder), conns(t, Role::Prefiller));
        Ok(PullSetup {
            codec,
            msgs,
            decoders,
            prefillers,
            layer_names: layer_names(&j, regions),
            engine_id: j["engine_id"].as_str().unwrap_or_default().to_string(),
            metadata: j,
            regions,
            num_blocks,
            block_len,
            pulls: sc.pulls.clone(),
            abort: Duration::from_secs_f64(scenarios.model.abort_timeout_s),
        })
    }

    /// The scenario's request a completion names.
    pub(crate) fn pull(&self, request: &str) -> Option<&PullRead> {
        self.pulls.iter().find(|p| p.request == request)
    }

    /// A side's registered regions at `base`: `regions` regions of `num_blocks × block_len` bytes, each layer's
    /// K and V in order (region `r` is layer `r / 2`'s).
    pub(crate) fn layout(&self, base: u64) -> LayoutConfig {
        let n = self.regions;
        LayoutConfig {
            kv_caches_base_addr: (0..n as u64).map(|r| base + r * REGION_SPAN).collect(),
            block_lens: vec![self.block_len; n],
            kv_block_lens: vec![self.block_len; n],
            registered_layer_names: self.layer_names.clone(),
            registered_layer_indices: (0..n as i64).map(|r| r / 2).collect(),
            registered_group_indices: vec![0; n],
            registered_shared_group_ids: vec![],
            registered_row_offsets: vec![],
            num_blocks: self.num_blocks,
        }
    }
}

/// Bytes of one block of one layer's K (or V) region on the recording's one rank.
fn region_block_bytes(m: &Model) -> u64 {
    m.block_bytes(1) / 2
}

/// Every integer of a (nested) list, in order.
pub(crate) fn ints(j: &J) -> Vec<u64> {
    match j {
        J::Array(a) => a.iter().flat_map(ints).collect(),
        J::Number(n) => n.as_u64().into_iter().collect(),
        _ => vec![],
    }
}

/// The layer name of each region: from the recorded layer table (`kv_group2layeridx`), else
/// `model.layers.N.self_attn`, two regions (K, V) per layer.
fn layer_names(j: &J, regions: usize) -> Vec<String> {
    let recorded: Vec<String> = j
        .get("kv_group2layeridx")
        .and_then(J::as_object)
        .into_iter()
        .flat_map(|groups| groups.values())
        .filter_map(|g| g.get(0)?.get("layer_names")?.as_array().cloned())
        .flatten()
        .filter_map(|n| n.as_str().map(String::from))
        .collect();
    (0..regions)
        .map(|r| recorded.get(r / 2).cloned().unwrap_or_else(|| format!("model.layers.{}.self_attn", r / 2)))
        .collect()
}

/// The conns of one role, in the header's order.
fn conns(t: &Conversation, role: Role) -> Vec<String> {
    t.trace.header.roles.iter().filter(|(_, r)| **r == role).map(|(c, _)| c.clone()).collect()
}

/// Each decoder worker's sends, with the reply its REQ received next.
fn messages(t: &Conversation, codec: &Codec) -> Vec<PullMsg> {
    let mut out: Vec<PullMsg> = vec![];
    for z in t.trace.zmq().filter(|z| z.side == Role::Decoder) {
        let payload = z.frames.last().cloned().unwrap_or_default();
        match z.dir {
            ZmqDir::Send => out.push(PullMsg {
                conn: z.conn.clone(),
                done_for: completion_of(codec, &payload),
                request: payload,
                reply: None,
                seq: z.seq,
                line: z.line,
            }),
            ZmqDir::Recv => {
                if let Some(m) = out.iter_mut().rev().find(|m| m.conn == z.conn && m.reply.is_none()) {
                    m.reply = Some(payload);
                }
            }
        }
    }
    out
}

/// The request id of a completion (`DoneRecvingMsg`), as the revision's codec reads it; `None` for anything else.
pub(crate) fn completion_of(codec: &Codec, payload: &[u8]) -> Option<String> {
    let j = Codec::to_json(&codec.decode("DoneRecvingMsg", payload).ok()?);
    let id = j.get("request_id").or_else(|| j.get(1))?;
    id.as_str().map(String::from)
}
