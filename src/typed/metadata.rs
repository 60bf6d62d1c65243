//! `MooncakeXferMetadata` of vLLM 0.33.0: the 15 fields of `spec/push/vllm-0.16.0..0.18.1.toml` as edited by
//! every later revision up to `vllm-0.33.0.toml`.

use std::collections::HashMap;

use super::de::{De, Seg, WireStr, R};
use crate::codec::{DecodeError, DecodeErrorKind as K};
use crate::msgpack::{Obj, WireInt, Writer};

/// One `req_blocks` value: `(transfer_id, block ids per KV transfer group)`, with its strings held as `S`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ReqBlocksOf<S> {
    pub transfer_id: S,
    /// `[]` (not `[[]]`) when nothing is to be written.
    pub blocks: Vec<Vec<WireInt>>,
}

/// One `req_blocks` value with owned strings.
pub type ReqBlocks = ReqBlocksOf<String>;
/// One `req_blocks` value borrowing its strings from the decoded input.
pub type ReqBlocksRef<'a> = ReqBlocksOf<&'a str>;

/// Decoder → prefiller pull request, with its strings held as `S` (see [`MooncakeXferMetadata`] and
/// [`MooncakeXferMetadataRef`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MooncakeXferMetadataOf<S> {
    pub remote_hostname: S,
    pub remote_port: WireInt,
    pub remote_tp_size: WireInt,
    pub remote_tp_rank: WireInt,
    /// Decoder request id → blocks, in the decoder's order. Keys are unique.
    pub req_blocks: Vec<(S, ReqBlocksOf<S>)>,
    pub kv_caches_base_addr: Vec<WireInt>,
    pub block_lens: Vec<WireInt>,
    pub kv_block_lens: Vec<WireInt>,
    pub registered_layer_names: Vec<S>,
    pub registered_layer_indices: Vec<WireInt>,
    pub registered_group_indices: Vec<WireInt>,
    pub registered_shared_group_ids: Vec<Vec<WireInt>>,
    pub registered_row_offsets: Vec<WireInt>,
    pub remote_pp_size: WireInt,
    pub layout_id: WireInt,
}

/// Decoder → prefiller pull request (owned strings).
pub type MooncakeXferMetadata = MooncakeXferMetadataOf<String>;
/// Decoder → prefiller pull request whose strings borrow from the decoded bytes: the same decoder without an
/// allocation per string (request ids, transfer ids, layer names).
pub type MooncakeXferMetadataRef<'a> = MooncakeXferMetadataOf<&'a str>;

/// Wire names in declaration order.
pub const FIELDS: [&str; 15] = [
    "remote_hostname",
    "remote_port",
    "remote_tp_size",
    "remote_tp_rank",
    "req_blocks",
    "kv_caches_base_addr",
    "block_lens",
    "kv_block_lens",
    "registered_layer_names",
    "registered_layer_indices",
    "registered_group_indices",
    "registered_shared_group_ids",
    "registered_row_offsets",
    "remote_pp_size",
    "layout_id",
];
/// Fields without a default.
const REQUIRED: usize = 8;

impl<S: Default> Default for MooncakeXferMetadataOf<S> {
    fn default() -> Self {
        MooncakeXferMetadataOf {
            remote_hostname: S::default(),
            remote_port: WireInt::ZERO,
            remote_tp_size: WireInt::from_u64(1),
            remote_tp_rank: WireInt::ZERO,
            req_blocks: vec![],
            kv_caches_base_addr: vec![],
            block_lens: vec![],
            kv_block_lens: vec![],
            registered_layer_names: vec![],
            registered_layer_indices: vec![],
            registered_group_indices: vec![],
            registered_shared_group_ids: vec![],
            registered_row_offsets: vec![],
            remote_pp_size: WireInt::from_u64(1),
            layout_id: WireInt::ZERO,
        }
    }
}

impl<'a, S: WireStr<'a> + Default> MooncakeXferMetadataOf<S> {
    /// Decodes as msgspec does with vLLM 0.33.0's class.
    pub fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {
        let mut d = De::new(bytes)?;
        let mut v = MooncakeXferMetadataOf::<S>::default();
        let mut seen = [false; REQUIRED];
        d.struct_map(&FIELDS, |d, i| {
            if i < REQUIRED {
                seen[i] = true;
            }
            match i {
                0 => v.remote_hostname = d.str()?,
                1 => v.remote_port = d.int()?,
                2 => v.remote_tp_size = d.int()?,
                3 => v.remote_tp_rank = d.int()?,
                4 => v.req_blocks = req_blocks(d)?,
                5 => v.kv_caches_base_addr = d.list_int()?,
                6 => v.block_lens = d.list_int()?,
                7 => v.kv_block_lens = d.list_int()?,
                8 => v.registered_layer_names = d.list_str()?,
                9 => v.registered_layer_indices = d.list_int()?,
                10 => v.registered_group_indices = d.list_int()?,
                11 => v.registered_shared_group_ids = d.list_list_int()?,
                12 => v.registered_row_offsets = d.list_int()?,
                13 => v.remote_pp_size = d.int()?,
                _ => v.layout_id = d.int()?,
            }
            Ok(())
        })?;
        if let Some(i) = seen.iter().position(|s| !s) {
            return Err(d.missing(FIELDS[i]));
        }
        d.finish()?;
        Ok(v)
    }
}

impl MooncakeXferMetadataRef<'_> {
    /// The same message with owned strings.
    pub fn to_owned_message(&self) -> MooncakeXferMetadata {
        MooncakeXferMetadataOf {
            remote_hostname: self.remote_hostname.to_owned(),
            remote_port: self.remote_port,
            remote_tp_size: self.remote_tp_size,
            remote_tp_rank: self.remote_tp_rank,
            req_blocks: self
                .req_blocks
                .iter()
                .map(|(k, b)| {
                    (k.to_string(), ReqBlocks { transfer_id: b.transfer_id.to_owned(), blocks: b.blocks.clone() })
                })
                .collect(),
            kv_caches_base_addr: self.kv_caches_base_addr.clone(),
            block_lens: self.block_lens.clone(),
            kv_block_lens: self.kv_block_lens.clone(),
            registered_layer_names: self.registered_layer_names.iter().map(|s| s.to_string()).collect(),
            registered_layer_indices: self.registered_layer_indices.clone(),
            registered_group_indices: self.registered_group_indices.clone(),
            registered_shared_group_ids: self.registered_shared_group_ids.clone(),
            registered_row_offsets: self.registered_row_offsets.clone(),
            remote_pp_size: self.remote_pp_size,
            layout_id: self.layout_id,
        }
    }
}

impl<S: AsRef<str>> MooncakeXferMetadataOf<S> {
    /// Whether this pull carries no layout (0.33.0 layout caching: a nonzero `layout_id`, no base addresses).
    pub fn is_layout_less(&self) -> bool {
        self.layout_id != WireInt::ZERO && self.kv_caches_base_addr.is_empty()
    }

    /// Encodes as msgspec does (omit_defaults, declaration order).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(self.encoded_len_hint());
        self.encode_into(&mut w);
        w.into_bytes()
    }

    fn encoded_len_hint(&self) -> usize {
        let ints = |v: &[WireInt]| 5 + 9 * v.len();
        let blocks: usize = self
            .req_blocks
            .iter()
            .map(|(k, b)| {
                k.as_ref().len() + b.transfer_id.as_ref().len() + 12 + b.blocks.iter().map(|g| ints(g)).sum::<usize>()
            })
            .sum();
        let names: usize = self.registered_layer_names.iter().map(|s| s.as_ref().len() + 3).sum();
        320 + self.remote_hostname.as_ref().len()
            + blocks
            + names
            + ints(&self.kv_caches_base_addr)
            + ints(&self.block_lens)
            + ints(&self.kv_block_lens)
            + ints(&self.registered_layer_indices)
            + ints(&self.registered_group_indices)
            + ints(&self.registered_row_offsets)
            + self.registered_shared_group_ids.iter().map(|g| ints(g)).sum::<usize>()
    }

    pub fn encode_into(&self, w: &mut Writer) {
        fn ints(w: &mut Writer, v: &[WireInt]) {
            w.int_list(v);
        }
        let h = w.begin_struct_map(FIELDS.len());
        let mut n = REQUIRED;
        w.str("remote_hostname");
        w.str(self.remote_hostname.as_ref());
        w.str("remote_port");
        w.int(self.remote_port);
        w.str("remote_tp_size");
        w.int(self.remote_tp_size);
        w.str("remote_tp_rank");
        w.int(self.remote_tp_rank);
        w.str("req_blocks");
        w.map_len(self.req_blocks.len());
        for (k, b) in &self.req_blocks {
            w.str(k.as_ref());
            w.array_len(2);
            w.str(b.transfer_id.as_ref());
            w.array_len(b.blocks.len());
            for g in &b.blocks {
                ints(w, g);
            }
        }
        w.str("kv_caches_base_addr");
        ints(w, &self.kv_caches_base_addr);
        w.str("block_lens");
        ints(w, &self.block_lens);
        w.str("kv_block_lens");
        ints(w, &self.kv_block_lens);
        if !self.registered_layer_names.is_empty() {
            w.str("registered_layer_names");
            w.array_len(self.registered_layer_names.len());
            for s in &self.registered_layer_names {
                w.str(s.as_ref());
            }
            n += 1;
        }
        for (name, v) in [
            ("registered_layer_indices", &self.registered_layer_indices),
            ("registered_group_indices", &self.registered_group_indices),
        ] {
            if !v.is_empty() {
                w.str(name);
                ints(w, v);
                n += 1;
            }
        }
        if !self.registered_shared_group_ids.is_empty() {
            w.str("registered_shared_group_ids");
            w.array_len(self.registered_shared_group_ids.len());
            for g in &self.registered_shared_group_ids {
                ints(w, g);
            }
            n += 1;
        }
        if !self.registered_row_offsets.is_empty() {
            w.str("registered_row_offsets");
            ints(w, &self.registered_row_offsets);
            n += 1;
        }
        if self.remote_pp_size != WireInt::from_u64(1) {
            w.str("remote_pp_size");
            w.int(self.remote_pp_size);
            n += 1;
        }
        if self.layout_id != WireInt::ZERO {
            w.str("layout_id");
            w.int(self.layout_id);
            n += 1;
        }
        w.finish_struct_map(h, n);
    }
}

/// `dict[ReqId, tuple[TransferId, list[list[int]]]]`: last duplicate wins, first position stays.
fn req_blocks<'a, S: WireStr<'a>>(d: &mut De<'a>) -> R<Vec<(S, ReqBlocksOf<S>)>> {
    let n = match d.obj()? {
        Obj::Map(n) => n,
        o => return Err(d.expected("object", o.kind())),
    };
    d.enter()?;
    let mut out: Vec<(S, ReqBlocksOf<S>)> = Vec::with_capacity(d.cap(n / 2));
    // Every key seen, borrowed from the input, and past a small batch (where a linear scan is cheaper than
    // hashing) their positions by key.
    let mut keys: Vec<&'a str> = Vec::with_capacity(out.capacity());
    let mut index: HashMap<&'a str, usize> = HashMap::new();
    for _ in 0..n {
        let key: &'a str = match d.r.try_str() {
            Some(b) => De::utf8_ref(b)?,
            None => match d.obj()? {
                Obj::Str(b) => De::utf8_ref(b)?,
                o => return Err(d.key_err(K::Expected { expected: "str".into(), got: o.kind().msgspec_name() })),
            },
        };
        let value = d.with(Seg::DictValue, |d| {
            let n = d.array("array")?;
            if n != 2 {
                return Err(d.err(K::ArrayLength { expected: 2, got: n }));
            }
            d.enter()?;
            let transfer_id = d.with(Seg::Index(0), |d| d.str())?;
            let blocks = d.with(Seg::Index(1), |d| d.list_list_int())?;
            d.leave();
            Ok(ReqBlocksOf { transfer_id, blocks })
        })?;
        const SCAN: usize = 16;
        let existing = if keys.len() < SCAN { keys.iter().position(|k| *k == key) } else { index.get(key).copied() };
        match existing {
            Some(i) => out[i].1 = value,
            None => {
                if keys.len() + 1 >= SCAN {
                    if index.is_empty() {
                        index.extend(keys.iter().enumerate().map(|(i, k)| (*k, i)));
                    }
                    index.insert(key, keys.len());
                }
                keys.push(key);
                out.push((S::from_wire(key), value));
            }
        }
    }
    d.leave();
    Ok(out)
}
