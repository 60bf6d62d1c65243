//! `MooncakeAgentMetadata` of vllm-ascend 0.23.0.post1: the 5 fields of `spec/pull/vllm-ascend-0.18.0.toml`
//! as edited by `spec/pull/vllm-ascend-0.23.0.post1.toml` — 11 fields (vllm-ascend 0.23.0.post1 sdist,
//! `vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake_connector.py`). A msgspec Struct with
//! `omit_defaults=True, dict=True`: a map in declaration order, `local_ip` and `handshake_port` left out at
//! their defaults.

use super::untyped::Untyped;
use crate::codec::{DecodeError, DecodeErrorKind as K};
use crate::msgpack::{Obj, WireInt, Writer};
use crate::typed::de::{De, Seg, R};

/// One `kv_group2layeridx` value: `tuple[dict[str, any], list[int]]`.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct KvGroup {
    /// The KV-cache group's spec description (`kv_cache_spec_type`, ...), keys unique, in wire order.
    pub spec: Vec<(String, Untyped)>,
    /// The group's layer indices.
    pub layer_indices: Vec<WireInt>,
}

/// Prefiller worker → decoder worker: where the prefiller's KV regions are. The reply to [`super::GetMetaMsg`].
#[derive(Clone, Debug, PartialEq, Default)]
pub struct MooncakeAgentMetadata {
    /// The prefiller's `EngineId`.
    pub engine_id: String,
    pub te_rpc_port: WireInt,
    /// KV-cache group → (spec description, layer indices); group ids unique, in wire order.
    pub kv_group2layeridx: Vec<(WireInt, KvGroup)>,
    pub block_size: WireInt,
    /// Per layer: the base address of each of its regions.
    pub kv_caches_base_addr: Vec<Vec<WireInt>>,
    pub block_size_scale: Vec<Vec<WireInt>>,
    pub num_blocks: WireInt,
    pub block_lens: Vec<Vec<WireInt>>,
    pub block_strides: Vec<Vec<WireInt>>,
    /// Default `""`.
    pub local_ip: String,
    /// Default `0`.
    pub handshake_port: WireInt,
}

/// Wire names in declaration order.
pub const FIELDS: [&str; 11] = [
    "engine_id",
    "te_rpc_port",
    "kv_group2layeridx",
    "block_size",
    "kv_caches_base_addr",
    "block_size_scale",
    "num_blocks",
    "block_lens",
    "block_strides",
    "local_ip",
    "handshake_port",
];
/// Fields without a default (the first nine).
const REQUIRED: usize = 9;

impl MooncakeAgentMetadata {
    /// Decodes as msgspec does with vllm-ascend 0.23.0.post1's class.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut d = De::new(bytes)?;
        let mut v = MooncakeAgentMetadata::default();
        let mut seen = [false; REQUIRED];
        d.struct_map(&FIELDS, |d, i| {
            if i < REQUIRED {
                seen[i] = true;
            }
            match i {
                0 => v.engine_id = d.str()?,
                1 => v.te_rpc_port = d.int()?,
                2 => v.kv_group2layeridx = kv_group2layeridx(d)?,
                3 => v.block_size = d.int()?,
                4 => v.kv_caches_base_addr = d.list_list_int()?,
                5 => v.block_size_scale = d.list_list_int()?,
                6 => v.num_blocks = d.int()?,
                7 => v.block_lens = d.list_list_int()?,
                8 => v.block_strides = d.list_list_int()?,
                9 => v.local_ip = d.str()?,
                _ => v.handshake_port = d.int()?,
            }
            Ok(())
        })?;
        if let Some(i) = seen.iter().position(|s| !s) {
            return Err(d.missing(FIELDS[i]));
        }
        d.finish()?;
        Ok(v)
    }

    /// Encodes as msgspec does (omit_defaults, declaration order).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(256 + self.engine_id.len() + self.local_ip.len());
        self.encode_into(&mut w);
        w.into_bytes()
    }

    pub fn encode_into(&self, w: &mut Writer) {
        fn ints2(w: &mut Writer, v: &[Vec<WireInt>]) {
            w.array_len(v.len());
            for l in v {
                w.array_len(l.len());
                for i in l {
                    w.int(*i);
                }
            }
        }
        let h = w.begin_struct_map(FIELDS.len());
        let mut n = REQUIRED;
        w.str("engine_id");
        w.str(&self.engine_id);
        w.str("te_rpc_port");
        w.int(self.te_rpc_port);
        w.str("kv_group2layeridx");
        w.map_len(self.kv_group2layeridx.len());
        for (group, g) in &self.kv_group2layeridx {
            w.int(*group);
            w.array_len(2);
            w.map_len(g.spec.len());
            for (k, x) in &g.spec {
                w.str(k);
                x.encode_into(w);
            }
            w.array_len(g.layer_indices.len());
            for i in &g.layer_indices {
                w.int(*i);
            }
        }
        w.str("block_size");
        w.int(self.block_size);
        w.str("kv_caches_base_addr");
        ints2(w, &self.kv_caches_base_addr);
        w.str("block_size_scale");
        ints2(w, &self.block_size_scale);
        w.str("num_blocks");
        w.int(self.num_blocks);
        w.str("block_lens");
        ints2(w, &self.block_lens);
        w.str("block_strides");
        ints2(w, &self.block_strides);
        if !self.local_ip.is_empty() {
            w.str("local_ip");
            w.str(&self.local_ip);
            n += 1;
        }
        if self.handshake_port != WireInt::ZERO {
            w.str("handshake_port");
            w.int(self.handshake_port);
            n += 1;
        }
        w.finish_struct_map(h, n);
    }
}

/// `dict[int, tuple[dict[str, any], list[int]]]`.
fn kv_group2layeridx(d: &mut De<'_>) -> R<Vec<(WireInt, KvGroup)>> {
    d.dict(
        |d, o| match o {
            Obj::Int(i) => Ok(i),
            o => Err(d.key_err(K::Expected { expected: "int".into(), got: o.kind().msgspec_name() })),
        },
        |d| {
            d.tuple_len(2)?;
            d.enter()?;
            let spec = d.with(Seg::Index(0), |d| {
                d.dict(
                    |d, o| match o {
                        Obj::Str(b) => De::utf8_ref(b).map(str::to_owned),
                        o => Err(d.key_err(K::Expected { expected: "str".into(), got: o.kind().msgspec_name() })),
                    },
                    |d| {
                        let o = d.obj()?;
                        Untyped::decode_from(d, o)
                    },
                )
            })?;
            let layer_indices = d.with(Seg::Index(1), |d| d.list_int())?;
            d.leave();
            Ok(KvGroup { spec, layer_indices })
        },
    )
}
