//! The copies a prefiller issues for a round of ready requests: vLLM `MooncakeConnectorWorker._build_transfer_params`
//! (`mooncake_connector.py`; 0.34.0, and earlier releases where their planning rules say). The result is exactly
//! the `(src, dst, len)` lists vLLM hands to `TransferEngine.batch_transfer_sync_write`, plus the requests that
//! failed and the first failure's message.

use super::blocks::{block_ids_for_region, logical_to_kernel_block_ids, match_request_blocks, BlockMismatch};
use super::contiguous::group_concurrent_contiguous;
use super::error::PlanError;
use super::order::order_pairs;
use super::producer::ProducerConfig;
use super::region::TransferRegion;
use super::rules::PlanRules;
use super::sender_plan::{can_coalesce_block_transfers, compute_sender_transfer_plan, SenderPlanInput};
use crate::spec::behaviour::{BlockGroups, PairedBlockOrder, TpBytePlan};

/// One request whose producer blocks are ready: the consumer's request id, the producer's block ids per KV
/// group, and the consumer's (from `req_blocks[d_req_id]` of the pull).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadyRequest {
    /// The decoder's request id (the key of `req_blocks`).
    pub d_req_id: String,
    /// The prefiller's block ids of the request, one list per KV group.
    pub local_block_ids: Vec<Vec<i64>>,
    /// The decoder's block ids of the request, one list per KV group.
    pub remote_block_ids: Vec<Vec<i64>>,
}

/// One copy: `len` bytes from local address `src` to remote address `dst`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Descriptor {
    /// Source address in the prefiller's registered memory.
    pub src: u64,
    /// Destination address in the decoder's registered memory.
    pub dst: u64,
    /// Bytes to copy.
    pub len: u64,
}

/// What one round sends. Requests in `err_reqs` contributed no descriptor; `err_msg` is the first failure's
/// text (`KV group count mismatch`, `P num blocks less than D`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TransferBatch {
    /// The copies, in the order the prefiller hands them to the transfer engine.
    pub descriptors: Vec<Descriptor>,
    /// Requests that failed and are reported in the reply's `err_reqs`.
    pub err_reqs: Vec<String>,
    /// The reply's `err_msg` when some request failed.
    pub err_msg: Option<String>,
}

/// `base + block × stride + offset`, exactly. vLLM up to 0.33.0 computes it with Python integers; 0.34.0 with
/// numpy int64 (`local_ids * block_len + (base_addr + offset)`), which wraps an address past 2^63 − 1 to a
/// negative number (and raises `OverflowError` when `base_addr + offset` alone passes it) that the transfer
/// engine's binding then refuses. No registered address comes near 2^63 (user-space pointers stay below 2^57),
/// so this planner keeps the exact value, and refuses one that does not fit a `u64`.
fn address(base: i64, block: i64, stride: i64, offset: i64) -> Result<u64, PlanError> {
    let v = base as i128 + block as i128 * stride as i128 + offset as i128;
    u64::try_from(v).map_err(|_| PlanError::out_of_range("transfer address"))
}

fn length(v: i128) -> Result<u64, PlanError> {
    u64::try_from(v).map_err(|_| PlanError::out_of_range("transfer length"))
}

/// Descriptors for `requests`, region pair by region pair (`local[i]` with `remote[i]`, as aligned).
///
/// Per request: nothing when the consumer asks for no block; a group-count or block-count mismatch puts the
/// request in `err_reqs`. Otherwise each KV group's block pairs are put in the planned order (runs descending by
/// one on both sides reversed, `paired_block_order`), expanded to kernel blocks, and for every region pair the
/// region's block ids (shared regions take the local side's group set for both sides) are cut into runs
/// consecutive on both sides; the TP byte plan says whether and which slice this rank sends; a run of whole
/// blocks is one descriptor, otherwise one per block. `Err` is an exception vLLM raises mid-round (the whole
/// round then fails).
///
/// This is the newest revision's planner ([`PlanRules::newest`]); [`build_transfer_params_by`] plans under
/// another revision's rules.
pub fn build_transfer_params(
    config: &ProducerConfig,
    local: &[TransferRegion],
    remote: &[TransferRegion],
    remote_tp_rank: i64,
    remote_tp_size: i64,
    requests: &[ReadyRequest],
) -> Result<TransferBatch, PlanError> {
    build_transfer_params_by(config, &PlanRules::newest(), local, remote, remote_tp_rank, remote_tp_size, requests)
}

/// A request's (local, remote) block ids for every region, by the revision's `block_groups` rule; `Ok(Err(_))`
/// is a per-request failure.
enum RequestBlocks {
    /// One list per KV group; each region takes its own group's.
    PerGroup(Vec<Vec<i64>>, Vec<Vec<i64>>),
    /// One list for every region.
    Flat(Vec<i64>, Vec<i64>),
}

fn request_blocks(
    config: &ProducerConfig,
    rules: &PlanRules,
    req: &ReadyRequest,
) -> Result<Result<Option<RequestBlocks>, BlockMismatch>, PlanError> {
    let kinds = &config.groups;
    match rules.block_groups {
        BlockGroups::PerGroup => {
            let (l, r) = match match_request_blocks(kinds, &req.local_block_ids, &req.remote_block_ids)? {
                Ok(pair) => pair,
                Err(m) => return Ok(Err(m)),
            };
            if l.iter().all(Vec::is_empty) {
                return Ok(Ok(None));
            }
            let (mut l, mut r) = (l, r);
            // Before the kernel expansion, so a reversed run expands into one ascending run of kernel blocks.
            for (lg, rg) in l.iter_mut().zip(r.iter_mut()) {
                if !lg.is_empty() {
                    order_pairs(rules.paired_block_order, lg, rg);
                }
            }
            let n = config.physical_blocks_per_logical;
            Ok(Ok(Some(RequestBlocks::PerGroup(
                logical_to_kernel_block_ids(kinds, l, n)?,
                logical_to_kernel_block_ids(kinds, r, n)?,
            ))))
        }
        BlockGroups::Single => {
            let l = req.local_block_ids.first().cloned().unwrap_or_default();
            let r = req.remote_block_ids.first().cloned().unwrap_or_default();
            if l.len() < r.len() {
                return Ok(Err(BlockMismatch::ProducerHasFewer));
            }
            let (mut l, mut r) = (l[l.len() - r.len()..].to_vec(), r);
            order_pairs(rules.paired_block_order, &mut l, &mut r);
            Ok(Ok(Some(RequestBlocks::Flat(l, r))))
        }
        BlockGroups::Flattened => {
            let (local, remote) = (&req.local_block_ids, &req.remote_block_ids);
            if local.len() != remote.len() {
                return Ok(Err(BlockMismatch::GroupCount));
            }
            if local.iter().zip(remote).any(|(l, r)| l.len() < r.len()) {
                return Ok(Err(BlockMismatch::ProducerHasFewer));
            }
            // vLLM trims with `ids[-n:]`: a group the consumer wants nothing of keeps all its producer ids.
            let (mut l, mut r) = (Vec::new(), Vec::new());
            for (lg, rg) in local.iter().zip(remote) {
                let (mut lg, mut rg) =
                    (if rg.is_empty() { lg.clone() } else { lg[lg.len() - rg.len()..].to_vec() }, rg.clone());
                order_pairs(rules.paired_block_order, &mut lg, &mut rg);
                l.extend(lg);
                r.extend(rg);
            }
            Ok(Ok(Some(RequestBlocks::Flat(l, r))))
        }
    }
}

/// [`build_transfer_params`] under a revision's planning rules (`behaviour.block_groups`, `tp_byte_plan`,
/// `replicated_producer`, `paired_block_order`; the rules' other values are read by the stages before).
pub fn build_transfer_params_by(
    config: &ProducerConfig,
    rules: &PlanRules,
    local: &[TransferRegion],
    remote: &[TransferRegion],
    remote_tp_rank: i64,
    remote_tp_size: i64,
    requests: &[ReadyRequest],
) -> Result<TransferBatch, PlanError> {
    let mut out = TransferBatch::default();
    let per_group = rules.block_groups == BlockGroups::PerGroup;
    for req in requests {
        if req.remote_block_ids.iter().all(Vec::is_empty) {
            continue;
        }
        let blocks = match request_blocks(config, rules, req)? {
            Ok(Some(b)) => b,
            Ok(None) => continue,
            Err(mismatch) => {
                out.err_reqs.push(req.d_req_id.clone());
                out.err_msg.get_or_insert_with(|| mismatch.err_msg().to_string());
                continue;
            }
        };
        for (l, r) in local.iter().zip(remote) {
            if per_group && l.group_index != r.group_index {
                return Err(PlanError::assertion(
                    "Aligned Mooncake transfer regions must belong to the same KV group.",
                ));
            }
            let (l_blocks, r_blocks) = match &blocks {
                RequestBlocks::PerGroup(lg, rg) => (
                    block_ids_for_region(lg, l.group_index, &l.shared_group_ids)?,
                    block_ids_for_region(rg, r.group_index, &l.shared_group_ids)?,
                ),
                RequestBlocks::Flat(lf, rf) => (lf.clone(), rf.clone()),
            };
            if l_blocks.is_empty() {
                continue;
            }
            let (l_runs, r_runs) = group_concurrent_contiguous(&l_blocks, &r_blocks)?;
            let heads =
                if rules.tp_byte_plan == TpBytePlan::SenderPlanHeadResharding { config.known_kv_heads() } else { None };
            let plan = compute_sender_transfer_plan(&SenderPlanInput {
                local_tp_rank: config.tp_rank,
                local_tp_size: config.tp_size,
                remote_tp_rank,
                remote_tp_size,
                local_kv_block_len: l.kv_block_len,
                remote_kv_block_len: r.kv_block_len,
                producer_cache_replicated: config.cache_replicated_by(rules.replicated_producer),
                total_num_kv_heads: heads,
            })?;
            if !plan.should_transfer {
                continue;
            }
            let len = plan.transfer_len as i128;
            if plan.src_offset as i128 + len > l.kv_block_len as i128 {
                return Err(PlanError::assertion("Computed source transfer region exceeds local KV block size."));
            }
            if plan.dst_offset as i128 + len > r.kv_block_len as i128 {
                return Err(PlanError::assertion(if per_group {
                    "Destination transfer region exceeds remote KV block size."
                } else {
                    "Computed destination transfer region exceeds remote KV block size."
                }));
            }
            let whole_blocks = can_coalesce_block_transfers(
                l.block_len,
                r.block_len,
                plan.src_offset,
                plan.dst_offset,
                plan.transfer_len,
            );
            for (l_run, r_run) in l_runs.iter().zip(&r_runs) {
                if whole_blocks {
                    let (Some(&lb), Some(&rb)) = (l_run.first(), r_run.first()) else {
                        return Err(PlanError::list_index());
                    };
                    out.descriptors.push(Descriptor {
                        src: address(l.base_addr, lb, l.block_len, plan.src_offset)?,
                        dst: address(r.base_addr, rb, r.block_len, plan.dst_offset)?,
                        len: length(len * l_run.len() as i128)?,
                    });
                } else {
                    for (&lb, &rb) in l_run.iter().zip(r_run) {
                        out.descriptors.push(Descriptor {
                            src: address(l.base_addr, lb, l.block_len, plan.src_offset)?,
                            dst: address(r.base_addr, rb, r.block_len, plan.dst_offset)?,
                            len: length(len)?,
                        });
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Copies before 0.19.0 (`destination_stride = producer-block-len`): for each region pair, one descriptor per
/// run of blocks consecutive on both sides, whole blocks of the producer's block length on both sides. A
/// request whose producer holds fewer blocks than the consumer asks for fails; with more, the last ones go.
/// The pairs are planned in `order` (`as-given` in every revision that places blocks this way).
pub(crate) fn build_whole_blocks(
    order: PairedBlockOrder,
    local: &[TransferRegion],
    remote: &[TransferRegion],
    requests: &[ReadyRequest],
) -> TransferBatch {
    let mut out = TransferBatch::default();
    for req in requests {
        let r = req.remote_block_ids.first().cloned().unwrap_or_default();
        if r.is_empty() {
            continue;
        }
        let l = req.local_block_ids.first().cloned().unwrap_or_default();
        if l.len() < r.len() {
            out.err_reqs.push(req.d_req_id.clone());
            out.err_msg.get_or_insert_with(|| BlockMismatch::ProducerHasFewer.err_msg().to_string());
            continue;
        }
        let (mut l, mut r) = (l[l.len() - r.len()..].to_vec(), r);
        order_pairs(order, &mut l, &mut r);
        let runs = runs_of(&l, &r);
        for (lr, rr) in local.iter().zip(remote) {
            let b = lr.block_len as i128;
            for (lb, rb, n) in &runs {
                let (Ok(src), Ok(dst), Ok(len)) = (
                    u64::try_from(lr.base_addr as i128 + *lb as i128 * b),
                    u64::try_from(rr.base_addr as i128 + *rb as i128 * b),
                    u64::try_from(b * *n as i128),
                ) else {
                    continue;
                };
                out.descriptors.push(Descriptor { src, dst, len });
            }
        }
    }
    out
}

/// Maximal runs where both id lists step by exactly one: (first local, first remote, length).
fn runs_of(l: &[i64], r: &[i64]) -> Vec<(i64, i64, usize)> {
    let mut out: Vec<(i64, i64, usize)> = vec![];
    for (i, (&a, &b)) in l.iter().zip(r).enumerate() {
        match out.last_mut() {
            Some((_, _, n)) if i > 0 && a.wrapping_sub(l[i - 1]) == 1 && b.wrapping_sub(r[i - 1]) == 1 => *n += 1,
            _ => out.push((a, b, 1)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::GroupKind;

    fn config(tp_rank: i64, tp_size: i64, groups: Vec<GroupKind>) -> ProducerConfig {
        ProducerConfig {
            tp_rank,
            tp_size,
            pp_size: 1,
            total_num_kv_heads: 8,
            use_mla: false,
            groups,
            physical_blocks_per_logical: 1,
            blocks_first: false,
        }
    }

    fn region(base: i64, stride: i64, kv: i64, group: i64) -> TransferRegion {
        TransferRegion {
            layer_name: "l".into(),
            layer_index: 0,
            base_addr: base,
            block_len: stride,
            kv_block_len: kv,
            group_index: group,
            shared_group_ids: vec![],
            row_offset: -1,
        }
    }

    fn req(local: Vec<Vec<i64>>, remote: Vec<Vec<i64>>) -> ReadyRequest {
        ReadyRequest { d_req_id: "d".into(), local_block_ids: local, remote_block_ids: remote }
    }

    #[test]
    fn impossible_pairings_raise_vllms_assertions() {
        let cfg = config(0, 1, vec![GroupKind::Attention, GroupKind::Attention]);
        let e = build_transfer_params(
            &cfg,
            &[region(0, 64, 64, 0)],
            &[region(0, 64, 64, 1)],
            0,
            1,
            &[req(vec![vec![1], vec![2]], vec![vec![3], vec![4]])],
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "AssertionError: Aligned Mooncake transfer regions must belong to the same KV group."
        );
        // P tp 2 rank 1 writes at +64 into a decoder block that only holds 64 bytes.
        let cfg = config(1, 2, vec![GroupKind::Attention]);
        let e = build_transfer_params(
            &cfg,
            &[region(0, 64, 64, 0)],
            &[region(0, 64, 64, 0)],
            0,
            1,
            &[req(vec![vec![1]], vec![vec![3]])],
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "AssertionError: Destination transfer region exceeds remote KV block size.");
    }

    fn d(src: u64, dst: u64, len: u64) -> Descriptor {
        Descriptor { src, dst, len }
    }

    /// The descriptors under the newest rules with `order` for the paired block order.
    fn plan(
        order: PairedBlockOrder,
        cfg: &ProducerConfig,
        local: &[TransferRegion],
        remote: &[TransferRegion],
        reqs: &[ReadyRequest],
    ) -> Vec<Descriptor> {
        let rules = PlanRules { paired_block_order: order, ..PlanRules::newest() };
        build_transfer_params_by(cfg, &rules, local, remote, 0, 1, reqs).unwrap().descriptors
    }

    const AS_GIVEN: PairedBlockOrder = PairedBlockOrder::AsGiven;
    const REVERSED: PairedBlockOrder = PairedBlockOrder::DescendingRunsReversed;

    #[test]
    fn descending_runs_on_both_sides_become_one_descriptor_only_when_the_rule_says() {
        let cfg = config(0, 1, vec![GroupKind::Attention]);
        let (l, r) = ([region(1000, 10, 10, 0)], [region(2000, 10, 10, 0)]);
        let down = [req(vec![vec![4, 3, 2]], vec![vec![9, 8, 7]])];
        assert_eq!(plan(REVERSED, &cfg, &l, &r, &down), vec![d(1020, 2070, 30)]);
        assert_eq!(plan(AS_GIVEN, &cfg, &l, &r, &down), vec![d(1040, 2090, 10), d(1030, 2080, 10), d(1020, 2070, 10)]);
        // Mixed: an ascending run, then a descending one.
        let mixed = [req(vec![vec![1, 2, 6, 5]], vec![vec![3, 4, 9, 8]])];
        assert_eq!(plan(REVERSED, &cfg, &l, &r, &mixed), vec![d(1010, 2030, 20), d(1050, 2080, 20)]);
        assert_eq!(plan(AS_GIVEN, &cfg, &l, &r, &mixed), vec![d(1010, 2030, 20), d(1060, 2090, 10), d(1050, 2080, 10)]);
        // Descending on one side only: both rules plan the same single-block copies.
        let one_side = [req(vec![vec![3, 2]], vec![vec![7, 8]])];
        for order in [REVERSED, AS_GIVEN] {
            assert_eq!(plan(order, &cfg, &l, &r, &one_side), vec![d(1030, 2070, 10), d(1020, 2080, 10)]);
            assert_eq!(plan(order, &cfg, &l, &r, &[req(vec![vec![5]], vec![vec![6]])]), vec![d(1050, 2060, 10)]);
        }
        // A prefix hit on the decoder: the producer's tail is paired, then ordered.
        let hit = [req(vec![vec![20, 4, 3]], vec![vec![9, 8]])];
        assert_eq!(plan(REVERSED, &cfg, &l, &r, &hit), vec![d(1030, 2080, 20)]);
    }

    #[test]
    fn pairs_are_ordered_before_the_kernel_expansion() {
        // Two kernel blocks per logical block; Mamba group 1 loses its NULL blocks first, then descends on both.
        let mut cfg = config(0, 1, vec![GroupKind::Attention, GroupKind::Mamba]);
        cfg.physical_blocks_per_logical = 2;
        let local = [region(1000, 10, 10, 0), region(5000, 100, 100, 1)];
        let remote = [region(2000, 10, 10, 0), region(9000, 100, 100, 1)];
        let reqs = [req(vec![vec![5, 4], vec![0, 7, 6]], vec![vec![9, 8], vec![3, 0, 2]])];
        // Logical 4,5 → kernel 8..=11, to logical 8,9 → kernel 16..=19: one run; Mamba 6,7 → 2,3.
        assert_eq!(plan(REVERSED, &cfg, &local, &remote, &reqs), vec![d(1080, 2160, 40), d(5600, 9200, 200)]);
        // As given, the kernel ids 10,11,8,9 → 18,19,16,17 are two runs.
        assert_eq!(
            plan(AS_GIVEN, &cfg, &local, &remote, &reqs),
            vec![d(1100, 2180, 20), d(1080, 2160, 20), d(5700, 9300, 100), d(5600, 9200, 100)]
        );
    }

    #[test]
    fn without_coalescing_only_the_order_of_the_copies_changes() {
        // Prefiller rank 1 of TP 2 into a TP-1 decoder: each block lands at +10 in a 20-byte decoder block.
        let cfg = config(1, 2, vec![GroupKind::Attention]);
        let (l, r) = ([region(1000, 10, 10, 0)], [region(2000, 20, 20, 0)]);
        let reqs = [req(vec![vec![3, 2]], vec![vec![6, 5]])];
        assert_eq!(plan(REVERSED, &cfg, &l, &r, &reqs), vec![d(1020, 2110, 10), d(1030, 2130, 10)]);
        assert_eq!(plan(AS_GIVEN, &cfg, &l, &r, &reqs), vec![d(1030, 2130, 10), d(1020, 2110, 10)]);
    }

    #[test]
    fn the_order_applies_to_single_and_flattened_block_lists_and_whole_blocks() {
        let cfg = config(0, 1, vec![GroupKind::Attention, GroupKind::Attention]);
        let (l, r) = ([region(1000, 10, 10, 0)], [region(2000, 10, 10, 0)]);
        let single = PlanRules { block_groups: BlockGroups::Single, ..PlanRules::newest() };
        let reqs = [req(vec![vec![9, 4, 3]], vec![vec![8, 7]])];
        let b = build_transfer_params_by(&cfg, &single, &l, &r, 0, 1, &reqs).unwrap();
        assert_eq!(b.descriptors, vec![d(1030, 2070, 20)]);
        // Flattened: each group ordered on its own, then concatenated.
        let flat = PlanRules { block_groups: BlockGroups::Flattened, ..PlanRules::newest() };
        let reqs = [req(vec![vec![5, 4], vec![2, 1], vec![7]], vec![vec![8, 7], vec![3, 2], vec![9]])];
        let b = build_transfer_params_by(&cfg, &flat, &l, &r, 0, 1, &reqs).unwrap();
        assert_eq!(b.descriptors, vec![d(1040, 2070, 20), d(1010, 2020, 20), d(1070, 2090, 10)]);
        let whole = build_whole_blocks(REVERSED, &l, &r, &[req(vec![vec![4, 3]], vec![vec![8, 7]])]);
        assert_eq!(whole.descriptors, vec![d(1030, 2070, 20)]);
        let whole = build_whole_blocks(AS_GIVEN, &l, &r, &[req(vec![vec![4, 3]], vec![vec![8, 7]])]);
        assert_eq!(whole.descriptors, vec![d(1040, 2080, 10), d(1030, 2070, 10)]);
    }

    #[test]
    fn kernel_blocks_and_mamba_groups_address_their_own_strides() {
        // Attention group 0 with 2 kernel blocks per logical block; Mamba group 1 keeps logical ids and drops 0s.
        let mut cfg = config(0, 1, vec![GroupKind::Attention, GroupKind::Mamba]);
        cfg.physical_blocks_per_logical = 2;
        let local = [region(1000, 10, 10, 0), region(5000, 100, 100, 1)];
        let remote = [region(2000, 10, 10, 0), region(9000, 100, 100, 1)];
        let b = build_transfer_params(
            &cfg,
            &local,
            &remote,
            0,
            1,
            &[req(vec![vec![3], vec![0, 4]], vec![vec![7], vec![6, 0]])],
        )
        .unwrap();
        // Logical 3 → kernel 6,7 (one run of 20 bytes) to logical 7 → kernel 14,15; Mamba 4 → 6.
        assert_eq!(
            b.descriptors,
            vec![
                Descriptor { src: 1000 + 60, dst: 2000 + 140, len: 20 },
                Descriptor { src: 5000 + 400, dst: 9000 + 600, len: 100 }
            ]
        );
    }
}
