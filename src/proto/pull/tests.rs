//! The pull-family cores' own pieces: the profiles and the decoder's read plans against the recordings' counts.
//! Their flows with a simulated clock, and their bytes against the recorded traces, are in
//! `tests/suite/proto_pull.rs` (a core's own tests take no clock reading and read no file).

use std::time::Duration;

use super::decoder::{plan_flat, plan_per_layer, runs, RemoteMeta};
use super::*;

const OLD: &str = "vllm-ascend-0.18.0";
const NEW: &str = "vllm-ascend-0.23.0.post1";

/// Two layers, K and V each, 1 KiB blocks, 32 of them.
fn layout(bases: &[u64]) -> PullLayout {
    PullLayout {
        base_addrs: bases.to_vec(),
        block_lens: vec![1024; bases.len()],
        layer_indices: (0..bases.len() as i64).map(|i| i / 2).collect(),
        layer_names: (0..bases.len()).map(|i| format!("model.layers.{}.self_attn", i / 2)).collect(),
        group_indices: vec![],
        num_blocks: 32,
    }
}

#[test]
fn profiles_read_the_spec() {
    let old = PullProfile::builtin(OLD).unwrap();
    let new = PullProfile::builtin(NEW).unwrap();
    assert_eq!(old.get_meta_tag, b"get_meta_msg");
    assert_eq!(old.done_tag, b"done_recving_msg");
    assert_eq!(old.ack, b"ACK");
    assert_eq!(old.abort_timeout, Duration::from_secs(480));
    assert_eq!((old.shape, new.shape), (MetadataShape::Flat, MetadataShape::PerLayer));
    assert_eq!((old.failed_read, new.failed_read), (FailedRead::Silent, FailedRead::LoadErrors));
    assert!(matches!(PullProfile::builtin("vllm-0.33.0"), Err(ProfileError::WrongFamily { .. })));
    assert!(matches!(PullProfile::builtin("vllm-ascend-main@3e486e317"), Err(ProfileError::WrongGeneration { .. })));
}

#[test]
fn runs_break_where_either_side_is_not_contiguous() {
    assert_eq!(runs(&[1, 2, 3], &[4, 5, 6]), vec![(1, 4, 3)]);
    assert_eq!(runs(&[5, 6, 9], &[3, 4, 5]), vec![(5, 3, 2), (9, 5, 1)]);
    assert_eq!(runs(&[3, 2], &[1, 2]), vec![(3, 1, 1), (2, 2, 1)]);
    assert_eq!(runs(&[u64::MAX, 0], &[0, 1]), vec![(u64::MAX, 0, 1), (0, 1, 1)]);
}

fn read(local: &[u64], remote: &[u64]) -> PullRead {
    PullRead {
        d_req_id: "d-1".into(),
        remote_request_id: "req-1".into(),
        local_blocks: vec![local.to_vec()],
        remote_blocks: vec![remote.to_vec()],
        engine_id: "engine-prefill-0".into(),
        remote_host: "127.0.0.1".into(),
        remote_port: 7000,
    }
}

#[test]
fn plans_are_the_recorded_descriptor_counts() {
    let local = layout(&[0x10000, 0x20000, 0x30000, 0x40000]);
    let flat = RemoteMeta { flat: vec![0xa0000, 0xb0000, 0xc0000, 0xd0000], ..Default::default() };
    let per_layer = RemoteMeta {
        addrs: vec![vec![0xa0000, 0xb0000], vec![0xc0000, 0xd0000]],
        strides: vec![vec![1024, 1024], vec![1024, 1024]],
        ..Default::default()
    };
    for (remote, local_blocks, n, bytes) in [([1, 2, 3], [4, 5, 6], 4, 12288), ([5, 6, 9], [3, 4, 5], 8, 12288)] {
        let r = read(&local_blocks, &remote);
        for plan in [plan_flat(&local, &flat, &r).unwrap(), plan_per_layer(&local, &per_layer, &r).unwrap()] {
            assert_eq!(plan.len(), n);
            assert_eq!(plan.iter().map(|d| d.len).sum::<u64>(), bytes);
        }
    }
    let plan = plan_flat(&local, &flat, &read(&[4, 5, 6], &[1, 2, 3])).unwrap();
    assert_eq!(plan[1], ReadDescriptor { local: 0x20000 + 4 * 1024, remote: 0xb0000 + 1024, len: 3072 });
    // 0.18.0 reads the prefiller's last blocks; more local blocks than remote fails the read.
    let plan = plan_flat(&local, &flat, &read(&[4], &[1, 2, 3])).unwrap();
    assert_eq!(plan[0], ReadDescriptor { local: 0x10000 + 4 * 1024, remote: 0xa0000 + 3 * 1024, len: 1024 });
    assert!(plan_flat(&local, &flat, &read(&[4, 5], &[1])).is_err());
    // 0.23.0.post1 pairs up to the shorter list, and places the prefiller's blocks by its strides.
    let mut wide = per_layer.clone();
    wide.strides[1][1] = 2048;
    let plan = plan_per_layer(&local, &wide, &read(&[4, 5], &[1, 2, 3])).unwrap();
    assert_eq!(plan.len(), 3 + 2, "the strided region is read block by block");
    assert_eq!(plan[4], ReadDescriptor { local: 0x40000 + 5 * 1024, remote: 0xd0000 + 2 * 2048, len: 1024 });
    let short = RemoteMeta { addrs: vec![vec![1, 2]], strides: vec![vec![1024, 1024]], ..Default::default() };
    assert!(plan_per_layer(&local, &short, &read(&[4], &[1])).is_err(), "no layer 1 advertised");
    let huge = RemoteMeta { flat: vec![u64::MAX; 4], ..Default::default() };
    assert!(plan_flat(&local, &huge, &read(&[1], &[1])).is_err(), "overflow is a failed read");
}
