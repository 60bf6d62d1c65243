//! A worker's registered regions as the pull family sees them (flat, or grouped per layer and KV group), and the
//! prefiller's `MooncakeAgentMetadata` built from them.

use serde_json::{json, Value as J};

use super::{MetadataShape, PullProfile, METADATA};
use crate::limits;

/// A worker's registered KV regions: parallel columns, one entry per region (K and V of every layer).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PullLayout {
    /// Base address of each region.
    pub base_addrs: Vec<u64>,
    /// Bytes per block of each region.
    pub block_lens: Vec<u64>,
    /// The layer index of each region (the regions of one layer, in order, are its `[K, V]`).
    pub layer_indices: Vec<i64>,
    /// The layer name of each region.
    pub layer_names: Vec<String>,
    /// The KV-cache group of each region; empty: every region in group 0.
    pub group_indices: Vec<i64>,
    /// Blocks per region.
    pub num_blocks: u64,
}

/// One layer: its index, name, KV group and regions (positions in the layout), in the layout's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Layer {
    pub(crate) index: i64,
    pub(crate) name: String,
    pub(crate) group: i64,
    pub(crate) regions: Vec<usize>,
}

/// Why a layout cannot be advertised or planned with.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MetadataError {
    /// The columns do not have one entry per region.
    #[error("layout columns differ in length: {0}")]
    Columns(String),
    /// More regions than `limits::MAX_PULL_REGIONS`.
    #[error("{0} regions (at most {max})", max = limits::MAX_PULL_REGIONS)]
    TooManyRegions(usize),
    /// A layer index is negative or past `limits::MAX_PULL_REGIONS`.
    #[error("layer index {0} is not a position in the per-layer lists")]
    LayerIndex(i64),
    /// The metadata does not encode as the revision's struct.
    #[error("{0}")]
    Encode(String),
}

impl PullLayout {
    /// Checks the columns: one entry each per region, within the limits.
    pub fn check(&self) -> Result<(), MetadataError> {
        let n = self.base_addrs.len();
        if n > limits::MAX_PULL_REGIONS {
            return Err(MetadataError::TooManyRegions(n));
        }
        let groups_ok = self.group_indices.is_empty() || self.group_indices.len() == n;
        if self.block_lens.len() != n || self.layer_indices.len() != n || self.layer_names.len() != n || !groups_ok {
            return Err(MetadataError::Columns(format!(
                "{n} base addresses, {} block lengths, {} layer indices, {} layer names, {} group indices",
                self.block_lens.len(),
                self.layer_indices.len(),
                self.layer_names.len(),
                self.group_indices.len()
            )));
        }
        match self.layer_indices.iter().find(|i| !(0..limits::MAX_PULL_REGIONS as i64).contains(i)) {
            Some(i) => Err(MetadataError::LayerIndex(*i)),
            None => Ok(()),
        }
    }

    /// The layers, by ascending index, each with its regions in the layout's order (K before V).
    pub(crate) fn layers(&self) -> Vec<Layer> {
        let mut layers: Vec<Layer> = vec![];
        for (r, &index) in self.layer_indices.iter().enumerate() {
            match layers.iter_mut().find(|l| l.index == index) {
                Some(l) => l.regions.push(r),
                None => layers.push(Layer {
                    index,
                    name: self.layer_names.get(r).cloned().unwrap_or_default(),
                    group: self.group_indices.get(r).copied().unwrap_or(0),
                    regions: vec![r],
                }),
            }
        }
        layers.sort_by_key(|l| l.index);
        layers
    }

    /// A per-layer column (`[[K, V], ...]`, position = layer index) of a per-region value.
    fn per_layer(&self, layers: &[Layer], f: impl Fn(usize) -> u64) -> Vec<Vec<u64>> {
        let len = layers.iter().map(|l| l.index as usize + 1).max().unwrap_or(0);
        let mut out = vec![vec![]; len];
        for l in layers {
            out[l.index as usize] = l.regions.iter().map(|&r| f(r)).collect();
        }
        out
    }
}

/// What a pull prefiller advertises in its metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullPrefillerConfig {
    /// Its engine id (`kv_transfer_config.engine_id`).
    pub engine_id: String,
    /// Its IP (`local_ip`).
    pub local_ip: String,
    /// Its transfer engine's RPC port (the session decoders read from is `host:te_rpc_port`).
    pub te_rpc_port: u64,
    /// Its side-channel port (`handshake_port`; the ROUTER's port).
    pub handshake_port: u64,
    /// Tokens per block (`block_size`; 16 when not given).
    pub block_size: u64,
    /// KV heads of the whole model.
    pub total_num_kv_heads: i64,
    /// Its engine's TP size (the heads it holds are the total over it, at least 1).
    pub tp_size: i64,
    /// Its registered regions.
    pub layout: PullLayout,
}

impl PullPrefillerConfig {
    /// KV heads this worker holds.
    fn num_kv_heads(&self) -> i64 {
        (self.total_num_kv_heads / self.tp_size.max(1)).max(1)
    }

    /// vLLM's attention spec of the layer table, as the release writes it: the spec's Python repr (it holds a
    /// torch dtype msgspec cannot encode) and the head counts. The head size follows from a float16 K block.
    fn kv_cache_spec(&self, block_len: u64) -> J {
        let heads = self.num_kv_heads();
        let head_size = block_len / (self.block_size.max(1) * heads as u64 * 2).max(1);
        let repr = format!(
            "FullAttentionSpec(block_size={}, num_kv_heads={heads}, head_size={head_size}, dtype=torch.float16, \
             kv_quant_mode=<KVQuantMode.NONE: 0>, page_size_padded=None, head_size_v={head_size}, \
             sliding_window=None, attention_chunk_size=None)",
            self.block_size
        );
        json!({"repr": repr, "num_kv_heads": heads, "num_key_value_heads": heads,
               "total_num_kv_heads": self.total_num_kv_heads})
    }

    /// `kv_group2layeridx`: per KV group, its description and its layer indices.
    fn group_table(&self, layers: &[super::layout::Layer]) -> J {
        let mut groups: Vec<i64> = layers.iter().map(|l| l.group).collect();
        groups.sort_unstable();
        groups.dedup();
        let mut table = serde_json::Map::new();
        for g in groups {
            let members: Vec<&Layer> = layers.iter().filter(|l| l.group == g).collect();
            let block_len = members.first().and_then(|l| l.regions.first()).map_or(0, |&r| self.layout.block_lens[r]);
            let desc = json!({
                "layer_names": members.iter().map(|l| l.name.clone()).collect::<Vec<_>>(),
                "kv_cache_spec_type": "FullAttentionSpec",
                "kv_cache_spec": self.kv_cache_spec(block_len),
                "kv_cache_group_id": g,
            });
            let indices: Vec<i64> = members.iter().map(|l| l.index).collect();
            table.insert(g.to_string(), json!([desc, indices]));
        }
        J::Object(table)
    }

    /// The metadata as `msgspec.to_builtins` would give it, in the revision's shape.
    fn metadata_json(&self, shape: MetadataShape) -> J {
        let l = &self.layout;
        match shape {
            MetadataShape::Flat => json!({
                "engine_id": self.engine_id, "te_rpc_port": self.te_rpc_port,
                "kv_caches_base_addr": l.base_addrs, "num_blocks": l.num_blocks, "local_ip": self.local_ip,
            }),
            MetadataShape::PerLayer => {
                let layers = l.layers();
                json!({
                    "engine_id": self.engine_id, "te_rpc_port": self.te_rpc_port,
                    "kv_group2layeridx": self.group_table(&layers), "block_size": self.block_size,
                    "kv_caches_base_addr": l.per_layer(&layers, |r| l.base_addrs[r]),
                    "block_size_scale": l.per_layer(&layers, |_| 1),
                    "num_blocks": l.num_blocks,
                    "block_lens": l.per_layer(&layers, |r| l.block_lens[r]),
                    "block_strides": l.per_layer(&layers, |r| l.block_lens[r]),
                    "local_ip": self.local_ip, "handshake_port": self.handshake_port,
                })
            }
        }
    }

    /// The metadata's bytes, encoded as the revision does (once, when the prefiller starts).
    pub fn encode_metadata(&self, profile: &PullProfile) -> Result<Vec<u8>, MetadataError> {
        self.layout.check()?;
        let j = self.metadata_json(profile.shape);
        let v = profile.codec().from_json(METADATA, &j).map_err(|e| MetadataError::Encode(e.to_string()))?;
        profile.codec().encode(METADATA, &v).map_err(|e| MetadataError::Encode(e.to_string()))
    }
}
