//! The inputs of the codec benchmarks, built deterministically so that the Rust benches (`benches/`), the
//! allocation meter (`src/bin/peak_alloc.rs`) and the msgspec comparison (`msgspec_bench.py`, which reads the
//! files `src/bin/payloads.rs` writes) all decode the very same bytes.
//!
//! Sizes follow issue 8: *small* (1 request, 1 KV-cache group, 8 blocks, 2 registered regions), *production*
//! (64 requests, 4 groups of 256 blocks each, 122 regions with layer names) and *large* (1,024 requests,
//! otherwise as production). Each metadata message is paired with the FINISH reply that settles all its
//! requests. Shapes follow vLLM 0.33.0 `mooncake_connector.py` (`MooncakeXferMetadata`: one entry per region
//! in every `registered_*` list, one block-id list per KV-cache group in `req_blocks`).

pub mod heap;
pub mod revisions;

use mooncake_wire::codec::{Codec, Value};
use mooncake_wire::msgpack::WireInt;
use mooncake_wire::typed::{self, MooncakeXferMetadata, MooncakeXferResponse, ReqBlocks, Status};

/// How big a message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size {
    pub name: &'static str,
    pub requests: usize,
    pub groups: usize,
    pub blocks_per_group: usize,
    pub regions: usize,
}

pub const SMALL: Size = Size { name: "small", requests: 1, groups: 1, blocks_per_group: 8, regions: 2 };
pub const PRODUCTION: Size = Size { name: "production", requests: 64, groups: 4, blocks_per_group: 256, regions: 122 };
pub const LARGE: Size = Size { name: "large", requests: 1024, groups: 4, blocks_per_group: 256, regions: 122 };
pub const SIZES: [Size; 3] = [SMALL, PRODUCTION, LARGE];

/// The two messages benchmarked (names as in the spec).
pub const METADATA: &str = "MooncakeXferMetadata";
pub const RESPONSE: &str = "MooncakeXferResponse";
pub const MESSAGES: [&str; 2] = [METADATA, RESPONSE];

/// splitmix64: a fixed, dependency-free generator, so every build produces identical payloads.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// 32 lowercase hex digits, as in a uuid4 hex.
    fn hex32(&mut self) -> String {
        format!("{:016x}{:016x}", self.next(), self.next())
    }
}

/// Request ids as vLLM's OpenAI server makes them (`chatcmpl-<uuid hex>`), with the decoder / prefiller
/// suffixes of a disaggregated deployment.
fn request_ids(rng: &mut Rng, n: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|_| {
            let id = rng.hex32();
            (format!("chatcmpl-{id}-d"), format!("chatcmpl-{id}-p"))
        })
        .collect()
}

/// The pull a decoder sends for `size` (0.33.0: full layout plus a nonzero `layout_id`, as on a first pull).
pub fn metadata(size: Size) -> MooncakeXferMetadata {
    let mut rng = Rng(0x6d6f_6f6e_6361_6b65 ^ size.requests as u64);
    // A GPU block pool of some 40k blocks: ids mostly need 16 bits, as in a real deployment.
    let req_blocks = request_ids(&mut rng, size.requests)
        .into_iter()
        .map(|(req, xfer)| {
            let blocks = (0..size.groups)
                .map(|_| (0..size.blocks_per_group).map(|_| WireInt::from_u64(1 + rng.below(40_000))).collect())
                .collect();
            (req, ReqBlocks { transfer_id: xfer, blocks })
        })
        .collect();
    let r = size.regions;
    // Two regions (K and V) per attention layer; layers cycle through the KV-cache groups.
    let layer = |i: usize| i / 2;
    let u = |v: usize| WireInt::from_u64(v as u64);
    MooncakeXferMetadata {
        remote_hostname: "prefill-node-07.cluster.local".into(),
        remote_port: u(17_002),
        remote_tp_size: u(8),
        remote_tp_rank: u(3),
        req_blocks,
        kv_caches_base_addr: (0..r).map(|i| WireInt::from_u64(0x7f3a_0000_0000 + i as u64 * 0x2_4000_0000)).collect(),
        block_lens: (0..r).map(|_| u(0x2_0000)).collect(),
        kv_block_lens: (0..r).map(|_| u(0x1_0000)).collect(),
        registered_layer_names: (0..r).map(|i| format!("model.layers.{}.self_attn.attn", layer(i))).collect(),
        registered_layer_indices: (0..r).map(|i| u(layer(i))).collect(),
        registered_group_indices: (0..r).map(|i| u(layer(i) % size.groups)).collect(),
        registered_shared_group_ids: (0..r).map(|i| vec![u(layer(i) % size.groups)]).collect(),
        registered_row_offsets: (0..r).map(|i| u((i % 2) * 0x8000)).collect(),
        remote_pp_size: u(1),
        layout_id: WireInt::from_u64(0x2c6f_1d3a_9b57_e0c5 | 1),
    }
}

/// The FINISH reply that settles every request of [`metadata`]`(size)`, echoing its layout id.
pub fn response(size: Size) -> MooncakeXferResponse {
    let m = metadata(size);
    MooncakeXferResponse {
        status: Status::FINISH,
        ok_reqs: Some(m.req_blocks.iter().map(|(_, b)| b.transfer_id.clone()).collect()),
        err_reqs: None,
        err_msg: None,
        layout_id: m.layout_id,
    }
}

/// One benchmark input: a message of one size, its bytes and its spec-driven value.
pub struct Payload {
    pub message: &'static str,
    pub size: Size,
    pub bytes: Vec<u8>,
    pub value: Value,
}

impl Payload {
    /// `metadata_production`, the name used for files and benchmark groups.
    pub fn id(&self) -> String {
        let short = if self.message == METADATA { "metadata" } else { "response" };
        format!("{short}_{}", self.size.name)
    }
}

/// The 0.33.0 codec the typed structs implement.
pub fn codec() -> std::sync::Arc<Codec> {
    Codec::builtin(typed::REVISION).expect("built-in revision")
}

/// Builds one payload and checks that the typed and spec-driven codecs agree on it byte for byte.
pub fn payload(message: &'static str, size: Size) -> Payload {
    let bytes = if message == METADATA { metadata(size).encode() } else { response(size).encode() };
    let codec = codec();
    let value = codec.decode(message, &bytes).unwrap_or_else(|e| panic!("{message}/{}: {e}", size.name));
    assert_eq!(
        codec.encode(message, &value).unwrap(),
        bytes,
        "{message}/{}: spec-driven re-encoding differs",
        size.name
    );
    Payload { message, size, bytes, value }
}

/// Every payload: both messages in every size.
pub fn all() -> Vec<Payload> {
    MESSAGES.iter().flat_map(|m| SIZES.iter().map(move |s| payload(m, *s))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip_through_both_codecs() {
        for p in all() {
            let typed = if p.message == METADATA {
                MooncakeXferMetadata::decode(&p.bytes).unwrap().encode()
            } else {
                MooncakeXferResponse::decode(&p.bytes).unwrap().encode()
            };
            assert_eq!(typed, p.bytes, "{}", p.id());
        }
        let m = metadata(PRODUCTION);
        assert_eq!(m.req_blocks.len(), 64);
        assert!(m.req_blocks.iter().all(|(_, b)| b.blocks.len() == 4 && b.blocks.iter().all(|g| g.len() == 256)));
        assert_eq!(m.registered_layer_names.len(), 122);
    }

    #[test]
    fn payloads_are_deterministic() {
        assert_eq!(metadata(LARGE).encode(), metadata(LARGE).encode());
        assert_eq!(metadata(SMALL).req_blocks[0].1.blocks[0].len(), 8);
    }
}
