//! vLLM's prefix-cache block hash, the `{hash}` of every MooncakeStoreConnector key
//! (`vllm/v1/core/kv_cache_utils.py`: `hash_block_tokens`, `init_none_hash`, `get_request_block_hasher`,
//! `generate_block_hash_extra_keys`; `vllm/utils/hashing.py`: `sha256`, `sha256_cbor`).
//!
//! `h_i = H((h_{i-1} or NONE_HASH, tuple(tokens of block i), extra_keys))` where `H` is SHA-256 of the value's
//! pickle (protocol 5, [`super::pickle`]) or canonical CBOR (`cbor`), and `NONE_HASH = H(seed)`.
//! Which seed, and how extra keys are shaped, differ by release: `spec/store-keys/vllm.toml`
//! (`[[block_hash]]`) holds that, read through [`BlockHashRules`].

use super::KeysError;
use crate::hash::{sha256, PyError, PyInt, PyValue};

/// `--prefix-caching-hash-algo` values this crate computes. (`xxhash` / `xxhash_cbor` use the same
/// serializations through xxh3-128 and a random seed unless PYTHONHASHSEED is set; not implemented.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HashAlgo {
    /// SHA-256 of `pickle.dumps(obj, protocol=5)`.
    Sha256,
    /// SHA-256 of `cbor2.dumps(obj, canonical=True)`.
    Sha256Cbor,
}

impl HashAlgo {
    /// The algorithm of vLLM's `prefix_caching_hash_algo` option (`sha256`, `sha256_cbor`).
    pub fn parse(name: &str) -> Result<HashAlgo, KeysError> {
        match name {
            "sha256" => Ok(HashAlgo::Sha256),
            "sha256_cbor" => Ok(HashAlgo::Sha256Cbor),
            "xxhash" | "xxhash_cbor" => Err(KeysError::UnimplementedHash(name.to_string())),
            other => Err(PyError::value_error(format!("Unsupported hash function: {other}")).into()),
        }
    }
    /// The exact bytes vLLM hashes for a value.
    pub fn serialize(self, value: &PyValue) -> Result<Vec<u8>, KeysError> {
        match self {
            HashAlgo::Sha256 => super::pickle::dumps(value).map_err(|e| KeysError::Serialize(e.to_string())),
            HashAlgo::Sha256Cbor => super::cbor::dumps(value).map_err(|e| KeysError::Serialize(e.to_string())),
        }
    }
    /// `hash_fn(value)`: 32 raw bytes.
    pub(crate) fn hash(self, value: &PyValue) -> Result<[u8; 32], KeysError> {
        Ok(sha256(&self.serialize(value)?))
    }
}

/// `NONE_HASH` = `hash_fn(seed)` for a seed string.
pub fn none_hash(algo: HashAlgo, seed: &str) -> Result<[u8; 32], KeysError> {
    algo.hash(&PyValue::str(seed))
}

/// One block's hash input and result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HashedBlock {
    /// The bytes hashed (pickle or CBOR).
    pub serialized: Vec<u8>,
    /// SHA-256 of `serialized`.
    pub hash: [u8; 32],
}

/// `hash_block_tokens(hash_fn, parent, tokens, extra_keys)`: a missing or empty parent means `NONE_HASH`.
pub fn hash_block_tokens(
    algo: HashAlgo,
    none_hash: &[u8],
    parent: Option<&[u8]>,
    tokens: &[PyInt],
    extra_keys: &PyValue,
) -> Result<HashedBlock, KeysError> {
    let parent = match parent {
        Some(p) if !p.is_empty() => p,
        _ => none_hash,
    };
    let value = PyValue::Tuple(vec![
        PyValue::Bytes(parent.to_vec()),
        PyValue::Tuple(tokens.iter().cloned().map(PyValue::Int).collect()),
        extra_keys.clone(),
    ]);
    let serialized = algo.serialize(&value)?;
    Ok(HashedBlock { hash: sha256(&serialized), serialized })
}

/// How a release derives `NONE_HASH` and shapes extra keys (`spec/store-keys/vllm.toml`, `[[block_hash]]`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct BlockHashRules {
    pub(crate) releases: Vec<String>,
    pub(crate) source: String,
    /// The seed when PYTHONHASHSEED is unset, for sha256 and sha256_cbor; `None`: 32 random bytes are used
    /// directly as NONE_HASH, so processes agree only with an identical PYTHONHASHSEED.
    #[serde(default)]
    pub(crate) default_seed: Option<String>,
    /// `untagged` (`lora_name`, `(mm_id, offset)`, `cache_salt`, prompt-embeds digest) or `tagged`
    /// (`("lora", name, path)`, `("mm", id, offset)`, `("cache_salt", salt)`, `("prompt_embeds", digest)`).
    pub(crate) extra_keys: String,
    #[serde(default)]
    pub(crate) doc: String,
}

/// One extra key of a block, in vLLM's order: LoRA, multimodal features, cache salt (block 0), prompt embeds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ExtraKey {
    Lora { name: String, path: String },
    CacheSalt(String),
}

impl BlockHashRules {
    /// The NONE_HASH seed: PYTHONHASHSEED when set, else the release's default (an error when the release
    /// uses random bytes, which no other process can reproduce).
    pub fn seed<'a>(&'a self, pythonhashseed: Option<&'a str>) -> Result<&'a str, KeysError> {
        match (pythonhashseed, &self.default_seed) {
            (Some(s), _) => Ok(s),
            (None, Some(d)) => Ok(d),
            (None, None) => Err(KeysError::RandomSeed { releases: self.releases.join("/") }),
        }
    }

    /// The `extra_keys` value for a block: `None` when there are none, else a tuple in the release's style.
    pub(crate) fn extra_keys_value(&self, keys: &[ExtraKey]) -> PyValue {
        if keys.is_empty() {
            return PyValue::None;
        }
        let tagged = self.extra_keys == "tagged";
        let s = |x: &str| PyValue::str(x);
        PyValue::Tuple(
            keys.iter()
                .map(|k| match (k, tagged) {
                    (ExtraKey::Lora { name, path }, true) => PyValue::Tuple(vec![s("lora"), s(name), s(path)]),
                    (ExtraKey::Lora { name, .. }, false) => s(name),
                    (ExtraKey::CacheSalt(salt), true) => PyValue::Tuple(vec![s("cache_salt"), s(salt)]),
                    (ExtraKey::CacheSalt(salt), false) => s(salt),
                })
                .collect(),
        )
    }
}

/// A text-only request as `get_request_block_hasher` sees it (no multimodal features, no prompt embeds).
#[derive(Clone, Debug, Default)]
pub struct TextRequest {
    /// The prompt's token ids.
    pub token_ids: Vec<PyInt>,
    /// `(lora_name, lora_path)` of the request's LoRA adapter.
    pub lora: Option<(String, String)>,
    /// The request's `cache_salt`, hashed into block 0 only.
    pub cache_salt: Option<String>,
}

/// One full block of a request's chain.
#[derive(Clone, Debug, PartialEq)]
pub struct ChainBlock {
    /// Index of the block's first token.
    pub tokens_start: usize,
    /// Index after the block's last token.
    pub tokens_end: usize,
    /// The block's extra keys as vLLM hashes them (`None` when there are none).
    pub extra_keys: PyValue,
    /// The hash input and the hash.
    pub hashed: HashedBlock,
}

/// The hashes of every full `block_size` block of a request, chained from NONE_HASH.
pub fn request_block_hashes(
    rules: &BlockHashRules,
    algo: HashAlgo,
    none_hash: &[u8],
    block_size: usize,
    req: &TextRequest,
) -> Result<Vec<ChainBlock>, KeysError> {
    if block_size == 0 {
        return Err(KeysError::NotPositive("block_size"));
    }
    let mut out: Vec<ChainBlock> = Vec::new();
    let mut start = 0;
    while start + block_size <= req.token_ids.len() {
        let end = start + block_size;
        let mut keys = Vec::new();
        if let Some((name, path)) = &req.lora {
            keys.push(ExtraKey::Lora { name: name.clone(), path: path.clone() });
        }
        if let Some(salt) = req.cache_salt.as_ref().filter(|s| start == 0 && !s.is_empty()) {
            keys.push(ExtraKey::CacheSalt(salt.clone()));
        }
        let extra_keys = rules.extra_keys_value(&keys);
        let parent = out.last().map(|b| b.hashed.hash);
        let hashed = hash_block_tokens(
            algo,
            none_hash,
            parent.as_ref().map(|p| &p[..]),
            &req.token_ids[start..end],
            &extra_keys,
        )?;
        out.push(ChainBlock { tokens_start: start, tokens_end: end, extra_keys, hashed });
        start = end;
    }
    Ok(out)
}

/// vllm-ascend's original Mooncake store chain (vllm-project/vllm-ascend@0733a3cd90dab465d1d03e130dfdfb885aaead25
/// `vllm_ascend/distributed/mooncake/config_data.py`, `ChunkedTokenDatabase._hash`): the hex digest of
/// SHA-256 over the previous hex digest (ASCII, `""` for the first chunk) followed by the chunk's tokens as
/// native unsigned 32-bit ints (`array("I", tokens)`, little-endian on the x86 and Arm hosts it runs on).
pub fn ascend_chunk_hashes(tokens: &[i64], chunk_size: usize) -> Result<Vec<String>, KeysError> {
    if chunk_size == 0 {
        return Err(KeysError::NotPositive("chunk size"));
    }
    let mut prefix = String::new();
    let mut out = Vec::new();
    for chunk in tokens.chunks(chunk_size) {
        let mut data = prefix.clone().into_bytes();
        for t in chunk {
            let v = u32::try_from(*t)
                .map_err(|_| PyError::new("OverflowError", format!("token {t} does not fit array('I')")))?;
            data.extend_from_slice(&v.to_le_bytes());
        }
        prefix = crate::hash::sha256_hex(&data);
        out.push(prefix.clone());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hex::encode as hex;

    fn rules_033() -> BlockHashRules {
        BlockHashRules {
            releases: vec!["0.33.0".into()],
            source: String::new(),
            default_seed: Some("vllm-none-hash".into()),
            extra_keys: "tagged".into(),
            doc: String::new(),
        }
    }

    #[test]
    fn reference_worked_example() {
        // spec/README.md, "Store keys: a worked example".
        let nh = none_hash(HashAlgo::Sha256, "vllm-none-hash").unwrap();
        assert_eq!(hex(nh), "066b1e8987e027138e98701c46128929378935f9b6cd1549105ae6b4f0d71198");
        assert_eq!(
            hex(none_hash(HashAlgo::Sha256, "0").unwrap()),
            "1973e23848344dc43a988a9b478663803cfffe1243480253f9a3cf004b14aa7c"
        );
        let req = TextRequest { token_ids: (0..32).map(PyInt::from).collect(), ..Default::default() };
        let blocks = request_block_hashes(&rules_033(), HashAlgo::Sha256, &nh, 16, &req).unwrap();
        assert_eq!(hex(blocks[0].hashed.hash), "fe8fa5dda3210d0ca2031e37cbe3b001186773cd1c710beb2d45fcb51d434798");
        assert_eq!(hex(blocks[1].hashed.hash), "8be7aaa33831156d316f1f463ae57e643deb63f42e633e2d631df88815cc4629");
        let nh = none_hash(HashAlgo::Sha256Cbor, "vllm-none-hash").unwrap();
        let blocks = request_block_hashes(&rules_033(), HashAlgo::Sha256Cbor, &nh, 16, &req).unwrap();
        assert_eq!(hex(blocks[0].hashed.hash), "dc918a88b139e5afe60b88eda27508d4aee16c10fdc354791efea06206ac0749");
        assert_eq!(hex(blocks[1].hashed.hash), "c300ec275d7bf08af8fc63e76cdc0086911bbc7091e03c5cf892553bef84ef0c");
        assert!(rules_033().seed(None).is_ok());
        let old = BlockHashRules { default_seed: None, ..rules_033() };
        assert!(old.seed(None).is_err());
        assert_eq!(old.seed(Some("7")).unwrap(), "7");
    }

    #[test]
    fn ascend_chain() {
        // sha256("" + b"\x01\x00\x00\x00\x02\x00\x00\x00") then chained on the hex digest.
        let h = ascend_chunk_hashes(&[1, 2, 3], 2).unwrap();
        assert_eq!(h[0], crate::hash::sha256_hex(&[1, 0, 0, 0, 2, 0, 0, 0]));
        assert_eq!(h[1], crate::hash::sha256_hex(&[h[0].as_bytes(), &[3, 0, 0, 0]].concat()));
        assert!(ascend_chunk_hashes(&[-1], 2).is_err());
    }
}
