//! The transfer planner of vLLM 0.34.0's `MooncakeConnector` prefiller, as pure functions: which bytes of
//! which registered regions a prefiller copies into a decoder for a pull (`spec/PROTOCOL.md#regions`,
//! `spec/PROTOCOL.md#errors`, `spec/PROTOCOL.md#tp-fan-out`); older revisions plan by their own
//! [`PlanRules`].
//!
//! Source of truth: `vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py` and
//! `TransferTopology` in `vllm/distributed/kv_transfer/kv_connector/utils.py` of the 0.34.0 release (0.33.0's
//! planner differs only in the paired block order, [`normalize_paired_block_order`]). Every function is checked
//! case by case against the outputs of vLLM's own code in `conformance/vectors/plan/*.jsonl` (0.33.0's, and
//! 0.34.0's in the files named `*_0.34.0.jsonl`; `mooncake-conformance vectors conformance/vectors/plan`).
//!
//! Typical use by a sans-IO prefiller:
//! 1. [`Pull::try_from`] the decoded [`crate::typed::MooncakeXferMetadata`];
//! 2. [`Producer::admit`] (or [`Producer::admit_stored`] for a cached layout): on `Err(refusal)` reply
//!    `ERROR` with [`Refusal::err_msg`];
//! 3. per round of ready requests, [`Producer::build`] → [`TransferBatch`]: the `(src, dst, len)`
//!    descriptors, plus `err_reqs`/`err_msg` for the reply.
//!
//! Python semantics are kept where they show: integer floor division and modulo, negative list indices,
//! numpy broadcasting in [`group_concurrent_contiguous`] and [`normalize_paired_block_order`], and the
//! exception texts ([`PlanError`]) that vLLM's generic handler sends as `err_msg`.

mod align;
mod blocks;
mod coalesce;
mod contiguous;
mod descriptors;
mod error;
mod expand;
mod order;
mod packed;
mod pipeline;
mod producer;
mod pull;
mod pyfmt;
mod region;
mod rules;
mod sender_plan;
mod topology;
mod validate;

pub use align::{align_transfer_regions, AlignError, AlignedRegions};
pub use blocks::{block_ids_for_region, GroupKind};
pub use coalesce::coalesce_contiguous_transfer_regions;
pub use contiguous::{contiguous_runs, group_concurrent_contiguous, BlockRuns};
pub(crate) use descriptors::build_whole_blocks;
pub use descriptors::{build_transfer_params, build_transfer_params_by};
pub use descriptors::{Descriptor, ReadyRequest, TransferBatch};
pub use error::{ExceptionKind, PlanError};
pub use expand::{expand_transfer_regions, RegionColumns};
pub use order::normalize_paired_block_order;
pub use packed::{has_opaque_packed_row, pp_mismatch_hides_packed_layers};
pub use pipeline::{Admission, PreparedRegions, Refusal};
pub use producer::{Producer, ProducerConfig, RegisteredLayout};
pub use pull::{Pull, PullRequest, WireRangeError};
pub use region::{TransferRegion, SHARED_REGION_GROUP_ID, UNKNOWN_ROW_OFFSET};
pub use rules::PlanRules;
pub use sender_plan::{can_coalesce_block_transfers, compute_sender_transfer_plan, SenderPlan, SenderPlanInput};
pub use topology::{tp_ratio, TransferTopology};
pub use validate::{validate_asymmetric_region_lengths, LayerSpec};
