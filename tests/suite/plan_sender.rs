//! The sender pipeline of `mooncake_wire::plan` end to end, on small layouts whose descriptors are worked
//! out by hand from vLLM 0.33.0's rules (`spec/PROTOCOL.md#regions`, `spec/PROTOCOL.md#byte-plan`): typed pull →
//! admit → build.

use std::collections::HashMap;

use mooncake_wire::msgpack::WireInt;
use mooncake_wire::plan::{
    Descriptor, GroupKind, LayerSpec, PreparedRegions, Producer, ProducerConfig, Pull, ReadyRequest, Refusal,
    RegisteredLayout,
};
use mooncake_wire::typed::{MooncakeXferMetadata, ReqBlocks};

const L0: &str = "model.layers.0.attn";
const L1: &str = "model.layers.1.attn";

/// One region per layer at `bases`, `stride` bytes per block of which `kv` are payload; not packed rows.
fn layout(bases: &[i64], stride: i64, kv: i64) -> RegisteredLayout {
    let names: Vec<String> = [L0, L1].iter().take(bases.len()).map(|s| s.to_string()).collect();
    RegisteredLayout {
        kv_caches_base_addr: bases.to_vec(),
        block_lens: vec![stride; bases.len()],
        kv_block_lens: vec![kv; bases.len()],
        registered_layer_indices: (0..bases.len() as i64).collect(),
        registered_group_indices: vec![0; bases.len()],
        registered_shared_group_ids: vec![],
        registered_row_offsets: vec![-1; bases.len()],
        registered_layer_names: names,
    }
}

fn producer(tp_rank: i64, tp_size: i64, layout: RegisteredLayout) -> Producer {
    let layer_specs = layout
        .registered_layer_names
        .iter()
        .map(|n| (n.clone(), LayerSpec::Attention { padded: false, nvfp4: false }))
        .collect();
    Producer {
        config: ProducerConfig {
            tp_rank,
            tp_size,
            pp_size: 1,
            total_num_kv_heads: 8,
            use_mla: false,
            groups: vec![GroupKind::Attention],
            physical_blocks_per_logical: 1,
            blocks_first: false,
        },
        layout,
        has_opaque_packed_row: false,
        layer_groups: HashMap::new(),
        layer_specs,
        rules: mooncake_wire::plan::PlanRules::newest(),
        column_check: mooncake_wire::plan::PlanRules::newest_column_check(),
    }
}

fn wire(v: &[i64]) -> Vec<WireInt> {
    v.iter().map(|&x| WireInt::from_i64(x)).collect()
}

/// The decoder's pull as it arrives: a typed 0.33.0 message.
fn pull(tp_rank: i64, tp_size: i64, l: &RegisteredLayout, blocks: &[i64]) -> Pull {
    let m = MooncakeXferMetadata {
        remote_hostname: "10.0.0.9".into(),
        remote_port: WireInt::from_u64(17000),
        remote_tp_size: WireInt::from_i64(tp_size),
        remote_tp_rank: WireInt::from_i64(tp_rank),
        req_blocks: vec![("d0".into(), ReqBlocks { transfer_id: "t0".into(), blocks: vec![wire(blocks)] })],
        kv_caches_base_addr: wire(&l.kv_caches_base_addr),
        block_lens: wire(&l.block_lens),
        kv_block_lens: wire(&l.kv_block_lens),
        registered_layer_names: l.registered_layer_names.clone(),
        registered_layer_indices: wire(&l.registered_layer_indices),
        registered_group_indices: wire(&l.registered_group_indices),
        registered_row_offsets: wire(&l.registered_row_offsets),
        ..Default::default()
    };
    Pull::try_from(&m).unwrap()
}

fn d(src: u64, dst: u64, len: u64) -> Descriptor {
    Descriptor { src, dst, len }
}

fn send(p: &Producer, pull: &Pull, local_blocks: &[i64]) -> Vec<Descriptor> {
    let admitted = p.admit(pull).unwrap_or_else(|r| panic!("refused: {}", r.err_msg()));
    let ready = pull.ready_request("d0", vec![local_blocks.to_vec()]).unwrap();
    let batch = p.build(&admitted.regions, pull, &[ready]).unwrap();
    assert!(batch.err_reqs.is_empty() && batch.err_msg.is_none());
    batch.descriptors
}

#[test]
fn homogeneous_tp_copies_runs_of_consecutive_blocks_as_one_descriptor() {
    let p = producer(0, 1, layout(&[0x10000, 0x20000], 256, 256));
    let pl = pull(0, 1, &layout(&[0x900000, 0xA00000], 256, 256), &[10, 11, 12, 20]);
    // Runs [1,2,3]→[10,11,12] and [7]→[20], per layer; the layers are separate tensors, not merged.
    assert_eq!(
        send(&p, &pl, &[1, 2, 3, 7]),
        vec![
            d(0x10000 + 256, 0x900000 + 10 * 256, 3 * 256),
            d(0x10000 + 7 * 256, 0x900000 + 20 * 256, 256),
            d(0x20000 + 256, 0xA00000 + 10 * 256, 3 * 256),
            d(0x20000 + 7 * 256, 0xA00000 + 20 * 256, 256),
        ]
    );
    // A prefix-cache hit on the decoder: it asks for 2 blocks, the producer sends its last 2.
    let pl = pull(0, 1, &layout(&[0x900000], 256, 256), &[30, 31]);
    let p = producer(0, 1, layout(&[0x10000], 256, 256));
    assert_eq!(send(&p, &pl, &[1, 2, 5, 6]), vec![d(0x10000 + 5 * 256, 0x900000 + 30 * 256, 512)]);
}

#[test]
fn wider_producer_writes_its_half_of_each_decoder_block() {
    // P tp 2 rank 1 (512 bytes of heads per block) → D tp 1 (1024). The second half of D's block is P rank 1's.
    let p = producer(1, 2, layout(&[0x1000], 512, 512));
    let pl = pull(0, 1, &layout(&[0x100000], 1024, 1024), &[8, 9]);
    assert_eq!(p.check_pairing(&pl).unwrap(), vec![0]);
    assert_eq!(
        send(&p, &pl, &[4, 5]),
        vec![d(0x1000 + 4 * 512, 0x100000 + 8 * 1024 + 512, 512), d(0x1000 + 5 * 512, 0x100000 + 9 * 1024 + 512, 512)]
    );
    assert_eq!(p.need_send(&[0], 1), 1);
}

#[test]
fn narrower_producer_sends_each_decoder_rank_its_slice() {
    // P tp 1 (1024) → D tp 2 (512 each): D rank 1 receives the second half of P's block.
    let p = producer(0, 1, layout(&[0x1000], 1024, 1024));
    let pl = pull(1, 2, &layout(&[0x200000], 512, 512), &[3]);
    let admitted = p.admit(&pl).unwrap();
    assert_eq!(admitted.target_ranks, vec![0, 1]);
    assert_eq!(p.need_send(&admitted.target_ranks, 1), 2);
    assert_eq!(p.need_send(&admitted.target_ranks, 2), 4, "a decoder with another PP size pulls every stage");
    assert_eq!(send(&p, &pl, &[6]), vec![d(0x1000 + 6 * 1024 + 512, 0x200000 + 3 * 512, 512)]);
}

#[test]
fn refusals_carry_vllms_error_texts() {
    let ours = layout(&[0x1000, 0x2000], 256, 256);
    // Unpaired: P tp 2 rank 1 serves D tp 1 rank 0 only.
    let p = producer(1, 2, layout(&[0x1000], 128, 128));
    let r = p.admit(&pull(1, 1, &layout(&[0x9000], 256, 256), &[1])).unwrap_err();
    assert_eq!(r.err_msg(), "This D tp_rank 1 is not paired with P tp_rank 1; expected one of [0].");

    // PP sizes differ and the decoder's single region is an opaque whole row at offset 0.
    let mut p = producer(0, 1, ours.clone());
    p.config.pp_size = 2;
    let mut theirs = layout(&[0x9000], 256, 256);
    theirs.registered_row_offsets = vec![0];
    let r = p.admit(&pull(0, 1, &theirs, &[1])).unwrap_err();
    assert_eq!(
        r.err_msg(),
        "Mooncake non-page-contiguous packed regions keep only the first layer name, so they cannot be aligned \
         across PP sizes 2 and 1."
    );

    // Same PP, the decoder registered layer 1 under another index.
    let p = producer(0, 1, ours.clone());
    let mut theirs = layout(&[0x9000, 0xA000], 256, 256);
    theirs.registered_layer_indices = vec![0, 7];
    let r = p.admit(&pull(0, 1, &theirs, &[1])).unwrap_err();
    assert!(matches!(r, Refusal::Layout(_)));
    assert_eq!(r.err_msg(), format!("Mooncake registered layer index mismatch for {L1}: producer=1, consumer=7."));

    // Homogeneous TP with a longer decoder payload.
    let r = p.admit(&pull(0, 1, &layout(&[0x9000, 0xA000], 512, 512), &[1])).unwrap_err();
    assert_eq!(
        r.err_msg(),
        "Mooncake KV region length mismatch for homogeneous TP at region 0: local=256, remote=512."
    );

    // A decoder layout without layer indices: vLLM's assertion text becomes the err_msg.
    let mut theirs = layout(&[0x9000, 0xA000], 256, 256);
    theirs.registered_layer_indices.clear();
    let r = p.admit(&pull(0, 1, &theirs, &[1])).unwrap_err();
    assert!(matches!(r, Refusal::Exception(_)));
    assert_eq!(
        r.err_msg(),
        "Mooncake transfer regions require matching metadata lengths, got base_addrs=2, block_lens=2, \
         kv_block_lens=2, layer_names=2, layer_indices=0."
    );
}

#[test]
fn stored_regions_are_validated_again_and_block_mismatches_fail_only_their_request() {
    let p = producer(0, 1, layout(&[0x1000], 256, 256));
    let pl = pull(0, 1, &layout(&[0x9000], 256, 256), &[1, 2]);
    let stored = p.admit(&pl).unwrap().regions;
    assert_eq!(p.admit_stored(&pl, &stored).unwrap().regions, stored);
    let mut bad = stored.clone();
    bad.remote[0].kv_block_len = 128;
    assert!(matches!(p.admit_stored(&pl, &bad), Err(Refusal::RegionLengths(_))));
    assert!(p.admit_stored(&pl, &PreparedRegions::default()).is_ok(), "no regions: nothing to compare");

    let ok = ReadyRequest { d_req_id: "ok".into(), local_block_ids: vec![vec![5]], remote_block_ids: vec![vec![6]] };
    let few =
        ReadyRequest { d_req_id: "few".into(), local_block_ids: vec![vec![5]], remote_block_ids: vec![vec![6, 7]] };
    let groups = ReadyRequest {
        d_req_id: "groups".into(),
        local_block_ids: vec![vec![5], vec![]],
        remote_block_ids: vec![vec![6]],
    };
    let batch = p.build(&stored, &pl, &[few, ok, groups]).unwrap();
    assert_eq!(batch.descriptors, vec![d(0x1000 + 5 * 256, 0x9000 + 6 * 256, 256)]);
    assert_eq!(batch.err_reqs, vec!["few".to_string(), "groups".to_string()]);
    assert_eq!(batch.err_msg.as_deref(), Some("P num blocks less than D"), "the first failure's message");
}

/// A packed block row of `stride` bytes at `row`, holding one view per name at `offsets`, `kv` bytes each.
fn packed(row: i64, stride: i64, names: &[&str], offsets: &[i64], kv: i64) -> RegisteredLayout {
    RegisteredLayout {
        kv_caches_base_addr: offsets.iter().map(|o| row + o).collect(),
        block_lens: vec![stride; names.len()],
        kv_block_lens: vec![kv; names.len()],
        registered_layer_names: names.iter().map(|s| s.to_string()).collect(),
        registered_layer_indices: (0..names.len() as i64).collect(),
        registered_group_indices: vec![0; names.len()],
        registered_shared_group_ids: vec![],
        registered_row_offsets: offsets.to_vec(),
    }
}

#[test]
fn packed_views_merge_and_widen_to_the_row_only_when_alignment_dropped_nothing() {
    // Two 480-byte views at offsets 0 and 512 of a 1024-byte row, on both sides: one span of 992 bytes,
    // widened to the full row, so blocks 1,2 → 5,6 are a single 2048-byte copy.
    let p = producer(0, 1, packed(0x10000, 1024, &[L0, L1], &[0, 512], 480));
    let pl = pull(0, 1, &packed(0x80000, 1024, &[L0, L1], &[0, 512], 480), &[5, 6]);
    assert_eq!(send(&p, &pl, &[1, 2]), vec![d(0x10000 + 1024, 0x80000 + 5 * 1024, 2048)]);

    // PP stage 0 of 2 (layers 0 and 1) against a one-stage decoder with layers 0..2: layer 2 is skipped, the
    // two views still merge (656 bytes), but the row is not widened, so each block is its own copy.
    let mut p = producer(0, 1, packed(0x10000, 1024, &[L0, L1], &[0, 336], 320));
    p.config.pp_size = 2;
    let pl = pull(0, 1, &packed(0x80000, 1024, &[L0, L1, "model.layers.2.attn"], &[0, 336, 672], 320), &[5, 6]);
    let admitted = p.admit(&pl).unwrap();
    assert_eq!(admitted.regions.local.len(), 1);
    assert_eq!(admitted.regions.remote[0].kv_block_len, 656);
    assert_eq!(
        send(&p, &pl, &[1, 2]),
        vec![d(0x10000 + 1024, 0x80000 + 5 * 1024, 656), d(0x10000 + 2048, 0x80000 + 6 * 1024, 656)]
    );
}

#[test]
fn a_replicated_producer_coalesces_even_across_a_tp_ratio() {
    // MLA: every rank holds the whole cache. P tp 2 rank 0 → D tp 1: ratio 2, yet views merge and widen.
    let mut p = producer(0, 2, packed(0x10000, 1024, &[L0, L1], &[0, 512], 480));
    p.config.use_mla = true;
    let pl = pull(0, 1, &packed(0x80000, 1024, &[L0, L1], &[0, 512], 480), &[5, 6]);
    assert_eq!(send(&p, &pl, &[1, 2]), vec![d(0x10000 + 1024, 0x80000 + 5 * 1024, 2048)]);
    // Rank 1 holds the same bytes; only rank 0 of each pair sends.
    p.config.tp_rank = 1;
    let admitted = p.admit(&pl).unwrap();
    let ready = pl.ready_request("d0", vec![vec![1, 2]]).unwrap();
    assert!(p.build(&admitted.regions, &pl, &[ready]).unwrap().descriptors.is_empty());
}
