//! Cases of pull-family traces (vllm-ascend's pull connector, `spec/pull/`; `conformance/TESTEE.md`, "The pull
//! family"): the decoder reads the prefiller's blocks with the engine's read, over a REQ → ROUTER side channel
//! that carries the metadata query and the completion.
//!
//! * `…/prefiller` (`as_decoder.rs`): the runner plays the recorded decoder worker(s) — each recorded message
//!   sent as recorded, to the live prefiller testee — compares each reply with the recorded one, reads the
//!   scenario's blocks from the testee's engine with the metadata it got, and compares what the prefiller freed.
//! * `…/decoder` (`as_prefiller.rs`): the runner plays the prefiller worker — its ROUTER answers each query with
//!   the recorded metadata (its own engine's port, addresses and side-channel port put in) and each completion
//!   with `ACK` — hands the decoder testee the scenario's pulls, and compares the messages it sends, its engine
//!   reads, what it reports and what landed in its memory.
//!
//! The block ids of both sides and the reads the recorder made fail are the scenario's
//! (`[pull_scenario.NAME]`, `conformance/scenarios.toml`): they never travel on the side channel.

mod as_decoder;
mod as_prefiller;

pub(crate) use as_decoder::as_decoder;
pub(crate) use as_prefiller::as_prefiller;

use mooncake_wire::codec::Codec;
use mooncake_wire::proto::memory::provenance_word;
use serde_json::Value as J;

use crate::scenarios::PullRead;
use crate::setup::pull::{ints, PullSetup};
use mooncake_trace::finding::{CheckId, Finding};

/// The raw reply to a completion.
pub(crate) const ACK: &[u8] = b"ACK";

/// Fields of the metadata whose values are the live peer's own (compared by shape, not by value).
const LIVE: [&str; 4] = ["te_rpc_port", "kv_caches_base_addr", "local_ip", "handshake_port"];

/// One engine read of a request: per region, per run of blocks contiguous on both sides, as vllm-ascend plans
/// them: (region, prefiller's first block, decoder's first block, blocks).
pub(crate) fn runs(p: &PullRead, regions: usize) -> Vec<(usize, u64, u64, u64)> {
    let mut per_region: Vec<(u64, u64, u64)> = vec![];
    for (pb, db) in p.prefiller_blocks.iter().zip(&p.decoder_blocks) {
        match per_region.last_mut() {
            Some((p0, d0, n)) if *p0 + *n == *pb && *d0 + *n == *db => *n += 1,
            _ => per_region.push((*pb, *db, 1)),
        }
    }
    (0..regions).flat_map(|r| per_region.iter().map(move |(p0, d0, n)| (r, *p0, *d0, *n))).collect()
}

/// What block `block` of region `region` of a prefiller holds (`conformance/TESTEE.md`, "The provenance
/// pattern").
pub(crate) fn provenance_block(region: usize, block: u64, block_len: u64) -> Vec<u8> {
    let words = (0..block_len).step_by(8).flat_map(|o| provenance_word(region as u64, block, o).to_le_bytes());
    words.take(block_len as usize).collect()
}

/// `REPLY-DIFF`: a live metadata reply (as JSON) against the recorded one: every field equal but the live
/// peer's own (same shape), and the layer table's descriptions compared by key where their values are the
/// prefiller's Python objects (`kv_cache_spec`, which the decoder only logs).
pub(crate) fn metadata_differences(live: &J, recorded: &J) -> Vec<String> {
    let (Some(l), Some(r)) = (live.as_object(), recorded.as_object()) else {
        return vec!["not a map".into()];
    };
    let mut out = vec![];
    let keys = |m: &serde_json::Map<String, J>| m.keys().cloned().collect::<Vec<_>>();
    if keys(l) != keys(r) {
        out.push(format!("fields {:?} vs recorded {:?}", keys(l), keys(r)));
    }
    for (k, rv) in r {
        let Some(lv) = l.get(k) else { continue };
        let same = match k.as_str() {
            "kv_caches_base_addr" => shape(lv) == shape(rv),
            k if LIVE.contains(&k) => lv.is_number() == rv.is_number() && lv.is_string() == rv.is_string(),
            "kv_group2layeridx" => without_spec_values(lv) == without_spec_values(rv),
            _ => lv == rv,
        };
        if !same {
            out.push(format!("$.{k}: {} vs recorded {}", clip(lv), clip(rv)));
        }
    }
    out
}

/// A nested list's shape: its lengths, nesting kept.
fn shape(j: &J) -> J {
    match j {
        J::Array(a) => J::Array(a.iter().map(shape).collect()),
        _ => J::Null,
    }
}

/// The layer table with each description's `kv_cache_spec` reduced to its keys.
fn without_spec_values(j: &J) -> J {
    let mut j = j.clone();
    for group in j.as_object_mut().into_iter().flat_map(|m| m.values_mut()) {
        if let Some(spec) = group.get_mut(0).and_then(|d| d.get_mut("kv_cache_spec")) {
            let keys: Vec<J> =
                spec.as_object().map(|m| m.keys().map(|k| J::from(k.as_str())).collect()).unwrap_or_default();
            *spec = J::Array(keys);
        }
    }
    j
}

fn clip(j: &J) -> String {
    let s = j.to_string();
    if s.chars().count() <= 200 {
        return s;
    }
    format!("{}…", s.chars().take(200).collect::<String>())
}

/// A live metadata reply's payload, decoded and checked as the recorded decoder reads it: `REPLY-DECODE`,
/// `WIRE-CANONICAL`, `REPLY-DIFF` against the recorded reply. Returns its JSON when it decodes.
pub(crate) fn check_metadata(setup: &PullSetup, payload: &[u8], out: &mut Vec<Finding>) -> Option<J> {
    let meta = crate::setup::pull::METADATA;
    let v = match setup.codec.decode(meta, payload) {
        Ok(v) => v,
        Err(e) => {
            out.push(Finding::new(CheckId::ReplyDecode, format!("{meta}: {}", e.msgspec_message())));
            return None;
        }
    };
    if let Some(detail) = mooncake_trace::canonical::mismatch(&setup.codec, meta, payload) {
        out.push(Finding::new(CheckId::WireCanonical, detail));
    }
    let live = Codec::to_json(&v);
    let diffs = metadata_differences(&live, &setup.metadata);
    if !diffs.is_empty() {
        out.push(Finding::new(CheckId::ReplyDiff, diffs.join("; ")));
    }
    Some(live)
}

/// The region base addresses of a metadata reply, flattened in order (region `r` of the provenance pattern).
pub(crate) fn bases(meta: &J) -> Vec<u64> {
    ints(&meta["kv_caches_base_addr"])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundled::Data;
    use mooncake_trace::conversation::Conversation;
    use mooncake_trace::trace::Trace;

    /// The bundled pull recordings of released revisions, as conversations, with their setups.
    fn recorded() -> Vec<(Conversation, PullSetup)> {
        let scenarios = crate::bundled::scenarios();
        let mut out = vec![];
        for input in Data::Embedded.traces("traces-pull").unwrap() {
            let c = Conversation::new(Trace::load_input(&input).unwrap()).unwrap();
            if c.revision.generation == 1 {
                let setup = PullSetup::new(&c, &scenarios).unwrap();
                out.push((c, setup));
            }
        }
        assert_eq!(out.len(), 6, "3 scenarios × 2 released revisions");
        out
    }

    /// The scenarios' block ids reproduce every recorded engine read: as many descriptors and bytes per batch
    /// as vllm-ascend's decoder read (its runs of blocks contiguous on both sides, per region).
    #[test]
    fn scenario_blocks_reproduce_the_recorded_reads() {
        for (c, setup) in recorded() {
            let reads = c.trace.header.transfer_engine_reads.as_ref().and_then(J::as_array).cloned().unwrap();
            let mut want = vec![];
            for p in &setup.pulls {
                let plan = runs(p, setup.regions);
                let bytes: u64 = plan.iter().map(|(_, _, _, n)| n * setup.block_len).sum();
                want.push((format!("decoder{}", p.decoder), plan.len() as u64, bytes));
            }
            let got: Vec<_> = reads
                .iter()
                .map(|r| {
                    (r["conn"].as_str().unwrap().to_string(), r["n"].as_u64().unwrap(), r["bytes"].as_u64().unwrap())
                })
                .collect();
            assert_eq!(got, want, "{}", c.trace.path);
        }
    }

    /// A completion names its request; a metadata query names none.
    #[test]
    fn messages_are_told_apart() {
        for (c, setup) in recorded() {
            let done: Vec<&str> = setup.msgs.iter().filter_map(|m| m.done_for.as_deref()).collect();
            let want: Vec<&str> = setup.pulls.iter().map(|p| p.request.as_str()).collect();
            assert_eq!(done, want, "{}", c.trace.path);
            assert_eq!(setup.msgs.len(), 2 * want.len());
            assert!(setup.msgs.iter().all(|m| m.reply.is_some()));
        }
    }

    /// `REPLY-DIFF` compares what a decoder reads and leaves the live peer's own values and the prefiller's
    /// Python objects to their shape.
    #[test]
    fn metadata_differences_keep_to_what_matters() {
        let (_, setup) = recorded().into_iter().find(|(c, _)| c.revision.revision.contains("0.23.0")).unwrap();
        let rec = setup.metadata.clone();
        assert!(metadata_differences(&rec, &rec).is_empty());
        let differs = |edit: &dyn Fn(&mut J)| {
            let mut live = rec.clone();
            edit(&mut live);
            metadata_differences(&live, &rec)
        };
        assert!(differs(&|j| j["te_rpc_port"] = J::from(1)).is_empty());
        assert!(differs(&|j| j["handshake_port"] = J::from(2)).is_empty());
        assert!(differs(&|j| j["kv_caches_base_addr"][0][1] = J::from(7)).is_empty());
        assert!(differs(&|j| j["kv_group2layeridx"]["0"][0]["kv_cache_spec"]["repr"] = J::from("x")).is_empty());
        assert_eq!(differs(&|j| j["num_blocks"] = J::from(31)).len(), 1);
        assert_eq!(differs(&|j| j["block_lens"][1][0] = J::from(512)).len(), 1);
        assert_eq!(differs(&|j| j["kv_caches_base_addr"][0] = J::from(vec![1u64])).len(), 1);
        assert_eq!(differs(&|j| j["kv_group2layeridx"]["0"][1] = J::from(vec![0u64])).len(), 1);
        assert_eq!(differs(&|j| j["kv_group2layeridx"]["0"][0]["kv_cache_spec_type"] = J::from("X")).len(), 1);
        assert_eq!(differs(&|j| _ = j.as_object_mut().unwrap().remove("block_size")).len(), 1);
    }

    /// A prefiller's blocks as the provenance pattern lays them out.
    #[test]
    fn provenance_blocks_name_their_region_and_block() {
        // The blocks of a region as the prefiller's memory lays them out, a block length not a multiple of 8
        // included (its last word cut short).
        for bl in [64u64, 12] {
            let region = mooncake_wire::proto::memory::provenance_bytes(3, bl, (6 * bl) as usize);
            assert_eq!(provenance_block(3, 5, bl), region[(5 * bl) as usize..].to_vec(), "block length {bl}");
        }
        let b = provenance_block(3, 5, 64);
        assert_eq!(b.len(), 64);
        let word = u64::from_le_bytes(b[8..16].try_into().unwrap());
        assert_eq!(mooncake_wire::proto::memory::decode_provenance(word), Some((3, 5, 8)));
    }
}
