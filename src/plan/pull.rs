//! The part of a decoder's pull (`MooncakeXferMetadata`, `spec/PROTOCOL.md#pull-request`) the prefiller plans with, as
//! plain integers, and its conversion from the typed 0.33.0 message.

use std::fmt;
use std::sync::Arc;

use super::descriptors::ReadyRequest;
use super::producer::RegisteredLayout;
use crate::msgpack::WireInt;
use crate::typed::MooncakeXferMetadata;

/// One `req_blocks` entry: the decoder's request id, the shared transfer id, the decoder's blocks per group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullRequest {
    /// The decoder's request id.
    pub d_req_id: String,
    /// The id the router gave both engines for the request (`kv_transfer_params`).
    pub transfer_id: String,
    /// The decoder's block ids, one list per KV group (empty for a free-only pull).
    pub blocks: Vec<Vec<i64>>,
}

/// A pull, reduced to what planning reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pull {
    /// The decoder's tensor-parallel size.
    pub remote_tp_size: i64,
    /// The decoder worker's tensor-parallel rank.
    pub remote_tp_rank: i64,
    /// The decoder's pipeline-parallel size (1 before 0.30.0).
    pub remote_pp_size: i64,
    /// In the decoder's order.
    pub req_blocks: Vec<PullRequest>,
    /// The decoder's registered layout (empty columns for a layout-less pull); shared, so that a prefiller
    /// can keep it as the key of the regions it prepared from it without copying it.
    pub layout: Arc<RegisteredLayout>,
}

impl Pull {
    /// The request ready to send: this producer's blocks for `d_req_id` paired with the blocks the decoder
    /// listed for it. `None` when the pull does not name `d_req_id`.
    pub fn ready_request(&self, d_req_id: &str, local_block_ids: Vec<Vec<i64>>) -> Option<ReadyRequest> {
        let r = self.req_blocks.iter().find(|r| r.d_req_id == d_req_id)?;
        Some(ReadyRequest { d_req_id: r.d_req_id.clone(), local_block_ids, remote_block_ids: r.blocks.clone() })
    }
}

/// An integer of the pull that does not fit `i64` (the planner's domain; vLLM would compute with it as a
/// Python integer).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireRangeError {
    /// Field path, e.g. `block_lens[3]` or `req_blocks["d0"][0][2]`.
    pub field: String,
    /// The value.
    pub value: i128,
}

impl fmt::Display for WireRangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} = {} is outside the planner's 64-bit signed range", self.field, self.value)
    }
}

impl std::error::Error for WireRangeError {}

fn int(v: WireInt, field: impl FnOnce() -> String) -> Result<i64, WireRangeError> {
    v.as_i64().ok_or_else(|| WireRangeError { field: field(), value: v.get() })
}

/// `name` builds the field path, only for an error.
fn ints(vs: &[WireInt], name: &dyn Fn() -> String) -> Result<Vec<i64>, WireRangeError> {
    vs.iter().enumerate().map(|(i, &v)| int(v, || format!("{}[{i}]", name()))).collect()
}

fn int_lists(vs: &[Vec<WireInt>], name: &dyn Fn() -> String) -> Result<Vec<Vec<i64>>, WireRangeError> {
    vs.iter().enumerate().map(|(i, row)| ints(row, &|| format!("{}[{i}]", name()))).collect()
}

impl TryFrom<&MooncakeXferMetadata> for Pull {
    type Error = WireRangeError;

    fn try_from(m: &MooncakeXferMetadata) -> Result<Self, WireRangeError> {
        Ok(Pull {
            remote_tp_size: int(m.remote_tp_size, || "remote_tp_size".into())?,
            remote_tp_rank: int(m.remote_tp_rank, || "remote_tp_rank".into())?,
            remote_pp_size: int(m.remote_pp_size, || "remote_pp_size".into())?,
            req_blocks: m
                .req_blocks
                .iter()
                .map(|(id, rb)| {
                    Ok(PullRequest {
                        d_req_id: id.clone(),
                        transfer_id: rb.transfer_id.clone(),
                        blocks: int_lists(&rb.blocks, &|| format!("req_blocks[{id:?}]"))?,
                    })
                })
                .collect::<Result<_, _>>()?,
            layout: Arc::new(RegisteredLayout {
                kv_caches_base_addr: ints(&m.kv_caches_base_addr, &|| "kv_caches_base_addr".into())?,
                block_lens: ints(&m.block_lens, &|| "block_lens".into())?,
                kv_block_lens: ints(&m.kv_block_lens, &|| "kv_block_lens".into())?,
                registered_layer_names: m.registered_layer_names.clone(),
                registered_layer_indices: ints(&m.registered_layer_indices, &|| "registered_layer_indices".into())?,
                registered_group_indices: ints(&m.registered_group_indices, &|| "registered_group_indices".into())?,
                registered_shared_group_ids: int_lists(&m.registered_shared_group_ids, &|| {
                    "registered_shared_group_ids".into()
                })?,
                registered_row_offsets: ints(&m.registered_row_offsets, &|| "registered_row_offsets".into())?,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::typed::ReqBlocks;

    #[test]
    fn converts_the_typed_message_and_names_a_value_out_of_range() {
        let mut m = MooncakeXferMetadata {
            remote_tp_size: WireInt::from_u64(2),
            remote_tp_rank: WireInt::from_u64(1),
            req_blocks: vec![(
                "d0".into(),
                ReqBlocks { transfer_id: "t0".into(), blocks: vec![vec![WireInt::from_u64(4)]] },
            )],
            kv_caches_base_addr: vec![WireInt::from_u64(4096)],
            block_lens: vec![WireInt::from_u64(64)],
            kv_block_lens: vec![WireInt::from_u64(32)],
            registered_layer_names: vec!["l0".into()],
            registered_row_offsets: vec![WireInt::from_i64(-1)],
            ..Default::default()
        };
        let p = Pull::try_from(&m).unwrap();
        assert_eq!((p.remote_tp_size, p.remote_tp_rank, p.remote_pp_size), (2, 1, 1));
        assert_eq!(p.layout.registered_row_offsets, vec![-1]);
        assert_eq!(p.ready_request("d0", vec![vec![9]]).unwrap().remote_block_ids, vec![vec![4]]);
        assert!(p.ready_request("d1", vec![]).is_none());
        m.req_blocks[0].1.blocks[0].push(WireInt::from_u64(u64::MAX));
        let e = Pull::try_from(&m).unwrap_err();
        assert_eq!(e.field, "req_blocks[\"d0\"][0][1]");
    }
}
