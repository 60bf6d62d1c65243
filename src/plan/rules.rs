//! The planning rules of a revision (spec `[behaviour]`, `src/spec/behaviour.rs`; prose in `spec/PROTOCOL.md`,
//! "Prefiller: planning"): which regions a prefiller
//! pairs, how it splits and places blocks, which bytes each TP rank copies, in which order it plans block pairs.
//! The planner's functions follow vLLM 0.34.0 ([`PlanRules::newest`]); older revisions differ only where these
//! values say.

use crate::spec::behaviour::*;

/// The planning values (what the prefiller copies for a pull).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PlanRules {
    /// How regions of both sides are paired (behaviour item `region_alignment`).
    pub region_alignment: RegionAlignment,
    /// Whether attention regions are split into K and V halves (`kv_half_split`).
    pub kv_half_split: KvHalfSplit,
    /// Which block ids a region copies (`block_groups`).
    pub block_groups: BlockGroups,
    /// Which stride places a block in the decoder's region (`destination_stride`).
    pub destination_stride: DestinationStride,
    /// Which bytes of a block each TP rank copies (`tp_byte_plan`).
    pub tp_byte_plan: TpBytePlan,
    /// When the prefiller's cache counts as replicated across its TP ranks (`replicated_producer`).
    pub replicated_producer: ReplicatedProducer,
    /// Whether adjacent copies are merged (`region_coalescing`).
    pub region_coalescing: RegionCoalescing,
    /// Which TP rank the prefiller tests against the ranks it pairs with (`pairing_check`).
    pub pairing_check: PairingCheck,
    /// Which requests the prefiller writes at all (`need_send`).
    pub need_send: NeedSend,
    /// In which order a request's block pairs are planned (`paired_block_order`).
    pub paired_block_order: PairedBlockOrder,
}

impl PlanRules {
    /// The newest revision's planning rules, vLLM 0.34.0's (the release of the newest golden plan vectors,
    /// `conformance/vectors/plan/*_0.34.0.jsonl`; the unsuffixed files there are 0.33.0's, whose rules differ
    /// only in `paired_block_order`). Equal to what the spec's newest push revision states (a test checks).
    pub fn newest() -> PlanRules {
        PlanRules {
            region_alignment: RegionAlignment::ByLayerNamePartialAcrossPp,
            kv_half_split: KvHalfSplit::Never,
            block_groups: BlockGroups::PerGroup,
            destination_stride: DestinationStride::EachSidesBlockLen,
            tp_byte_plan: TpBytePlan::SenderPlanHeadResharding,
            replicated_producer: ReplicatedProducer::ClampedToHeads,
            region_coalescing: RegionCoalescing::AdjacentInRow,
            pairing_check: PairingCheck::Remote,
            need_send: NeedSend::TpTargetsTimesDecoderPp,
            paired_block_order: PairedBlockOrder::DescendingRunsReversed,
        }
    }
}

impl PlanRules {
    /// The newest revision's layout column check (`behaviour.equal_length_fields`), to go with [`Self::newest`].
    pub fn newest_column_check() -> Option<EqualLengthFields> {
        crate::spec::Spec::builtin()
            .push()
            .newest()
            .and_then(|r| r.behaviour.equal_length_fields.as_ref())
            .map(|i| i.value.clone())
    }

    /// Whether layers the decoder lacks may be skipped for this pull (`allow_partial_layers`).
    pub(crate) fn partial_layers(&self, local_pp: i64, remote_pp: i64) -> bool {
        match self.region_alignment {
            RegionAlignment::ByLayerNamePartialAcrossDecoderPp => remote_pp > 1 && remote_pp != local_pp,
            RegionAlignment::ByLayerNamePartialAcrossPp => remote_pp != local_pp,
            _ => false,
        }
    }

    /// Whether a producer with this configuration splits attention regions into K and V halves.
    pub(crate) fn splits_halves(&self, blocks_first: bool, has_mamba: bool) -> bool {
        match self.kv_half_split {
            KvHalfSplit::Never => false,
            KvHalfSplit::WhenBlocksFirst => blocks_first,
            KvHalfSplit::MambaHybridOnly => has_mamba,
        }
    }
}
