//! Typed keys of the other store-key families, each bound to its grammar in `spec/store-keys/`:
//! vllm-ascend's original Mooncake keys and its AscendStore keys, and LMCache's cache-engine keys. Building
//! and parsing go through the grammar, so a struct's fields are exactly the parts its key has (a layer key
//! is its own type: vllm-ascend's `LayerPoolKey` drops `pp_rank`).

use super::grammar::{FieldValue, Fields};
use super::spec::StoreKeySpec;
use super::vllm_key::KeyError;

/// A key type with a grammar.
pub trait TypedKey: Sized {
    /// The grammar's name in `spec/store-keys/`.
    const GRAMMAR: &'static str;
    /// The key's parts, by the grammar's field names.
    fn to_fields(&self) -> Fields;
    /// The key from parsed parts (absent ones take their defaults).
    fn from_fields(f: &Fields) -> Self;

    /// The key string.
    fn build(&self) -> Result<String, KeyError> {
        let g = StoreKeySpec::builtin().grammar(Self::GRAMMAR).ok_or(KeyError::NoSuchGrammar(Self::GRAMMAR))?;
        g.render(&self.to_fields()).map_err(KeyError::Build)
    }

    /// Parses a key; `hints` are known field values (needed when free text contains the separator).
    fn parse(key: &str, hints: &Fields) -> Result<Self, KeyError> {
        let g = StoreKeySpec::builtin().grammar(Self::GRAMMAR).ok_or(KeyError::NoSuchGrammar(Self::GRAMMAR))?;
        g.parse(key, hints).map(|f| Self::from_fields(&f)).map_err(KeyError::Parse)
    }
}

trait FieldKind: Sized {
    fn to_value(&self) -> FieldValue;
    fn from_value(v: Option<&FieldValue>) -> Self;
}
impl FieldKind for i64 {
    fn to_value(&self) -> FieldValue {
        FieldValue::Int(*self)
    }
    fn from_value(v: Option<&FieldValue>) -> Self {
        match v {
            Some(FieldValue::Int(i)) => *i,
            _ => 0,
        }
    }
}
impl FieldKind for String {
    fn to_value(&self) -> FieldValue {
        FieldValue::Text(self.clone())
    }
    fn from_value(v: Option<&FieldValue>) -> Self {
        match v {
            Some(FieldValue::Text(s)) => s.clone(),
            _ => String::new(),
        }
    }
}
impl FieldKind for Vec<(String, String)> {
    fn to_value(&self) -> FieldValue {
        FieldValue::Tags(self.clone())
    }
    fn from_value(v: Option<&FieldValue>) -> Self {
        match v {
            Some(FieldValue::Tags(t)) => t.clone(),
            _ => vec![],
        }
    }
}

macro_rules! typed_key {
    ($(#[$doc:meta])* $name:ident = $grammar:literal { $($(#[$fdoc:meta])* $field:ident: $ty:ty),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        pub struct $name {
            $(#[doc = concat!("The key's `", stringify!($field), "` part.")] $(#[$fdoc])* pub $field: $ty,)*
        }
        impl TypedKey for $name {
            const GRAMMAR: &'static str = $grammar;
            fn to_fields(&self) -> Fields {
                let mut f = Fields::new();
                $(f.insert(stringify!($field).to_string(), FieldKind::to_value(&self.$field));)*
                f
            }
            fn from_fields(f: &Fields) -> Self {
                $name { $($field: FieldKind::from_value(f.get(stringify!($field))),)* }
            }
        }
    };
}

typed_key! {
    /// vllm-ascend `MooncakeEngineKey`: `{model}@{world_size}@{worker_id}@{hash}`; the model is the full
    /// `model_config.model`, the hash its own chain ([`super::block_hash::ascend_chunk_hashes`]).
    AscendMooncakeKey = "ascend-mooncake-key" { model_name: String, world_size: i64, worker_id: i64, chunk_hash: String }
}
typed_key! {
    /// vllm-ascend `LayerMooncakeEngineKey`: `…@{hash}@{layer_id}`.
    AscendMooncakeLayerKey = "ascend-mooncake-layer-key" { model_name: String, world_size: i64, worker_id: i64, chunk_hash: String, layer_id: i64 }
}
typed_key! {
    /// vllm-ascend AscendStore `PoolKey`.
    AscendStoreKey = "ascend-store-key" {
        model_name: String, pcp_rank: i64, dcp_rank: i64, head_or_tp_rank: i64, pp_rank: i64,
        kv_cache_group_id: i64, cache_role: String, cache_family: String, chunk_hash: String,
    }
}
typed_key! {
    /// vllm-ascend AscendStore `LayerPoolKey` (no `pp_rank`).
    AscendStoreLayerKey = "ascend-store-layer-key" {
        model_name: String, pcp_rank: i64, dcp_rank: i64, head_or_tp_rank: i64,
        kv_cache_group_id: i64, cache_role: String, cache_family: String, layer_id: i64, chunk_hash: String,
    }
}
typed_key! {
    /// LMCache `CacheEngineKey`: `{model}@{world_size}@{worker_id}@{hash}@{dtype}[@tag%value…]`.
    LmcacheKey = "lmcache-key" {
        model_name: String, world_size: i64, worker_id: i64,
        /// `f"{int:x}"` of an int hash, or `bytes.hex()`.
        chunk_hash: String,
        dtype: String,
        /// `request_configs` entries `lmcache.tag.<name>`, in insertion order.
        tags: Vec<(String, String)>,
    }
}
typed_key! {
    /// LMCache `LayerCacheEngineKey`: `…@{dtype}@{layer_id}[@tag%value…]`.
    LmcacheLayerKey = "lmcache-layer-key" { model_name: String, world_size: i64, worker_id: i64, chunk_hash: String, dtype: String, layer_id: i64, tags: Vec<(String, String)> }
}

/// LMCache's `chunk_hash_hex` of an integer hash: `f"{value:x}"` (no padding; negative values get `-`).
pub fn lmcache_int_hash_hex(value: i128) -> String {
    if value < 0 {
        format!("-{:x}", value.unsigned_abs())
    } else {
        format!("{value:x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::grammar::KeyParseError;

    #[test]
    fn ascend_keys() {
        let k = AscendStoreKey {
            model_name: "llama".into(),
            dcp_rank: 3,
            head_or_tp_rank: 1,
            cache_role: "kv".into(),
            cache_family: "default".into(),
            chunk_hash: "ab12".into(),
            ..Default::default()
        };
        let s = k.build().unwrap();
        assert_eq!(s, "llama@pcp0@dcp3@head_or_tp_rank:1@pp_rank:0@group:0@cache_role:kv@cache_family:default@ab12");
        assert_eq!(AscendStoreKey::parse(&s, &Fields::new()).unwrap(), k);
        let l = AscendStoreLayerKey {
            model_name: "llama".into(),
            layer_id: 7,
            cache_role: "kv".into(),
            cache_family: "c4".into(),
            chunk_hash: "ff".into(),
            ..Default::default()
        };
        assert_eq!(
            l.build().unwrap(),
            "llama@pcp0@dcp0@head_or_tp_rank:0@group:0@cache_role:kv@cache_family:c4@layer_id:7@ff"
        );
        // A pool key is not a layer key and vice versa.
        assert!(matches!(
            AscendStoreLayerKey::parse(&s, &Fields::new()),
            Err(KeyError::Parse(KeyParseError::NoMatch { .. }))
        ));
        let m = AscendMooncakeKey {
            model_name: "/models/Qwen/Qwen3".into(),
            world_size: 8,
            worker_id: 3,
            chunk_hash: "abc".into(),
        };
        assert_eq!(m.build().unwrap(), "/models/Qwen/Qwen3@8@3@abc");
        assert_eq!(AscendMooncakeKey::parse("/models/Qwen/Qwen3@8@3@abc", &Fields::new()).unwrap(), m);
        // The layer key's extra part makes it a different shape, never a misread.
        assert!(AscendMooncakeKey::parse("m@8@3@abc@2", &Fields::new()).is_err());
        assert_eq!(AscendMooncakeLayerKey::parse("m@8@3@abc@2", &Fields::new()).unwrap().layer_id, 2);
    }

    #[test]
    fn lmcache_keys() {
        let k = LmcacheKey {
            model_name: "meta-llama/Llama-3.1-8B".into(),
            world_size: 1,
            worker_id: 0,
            chunk_hash: lmcache_int_hash_hex(-0x1f),
            dtype: "bfloat16".into(),
            tags: vec![("user".into(), "a%b".into())],
        };
        let s = k.build().unwrap();
        assert_eq!(s, "meta-llama/Llama-3.1-8B@1@0@-1f@bfloat16@user%a%b");
        assert_eq!(LmcacheKey::parse(&s, &Fields::new()).unwrap(), k);
        let l = LmcacheLayerKey {
            model_name: "m".into(),
            world_size: 2,
            worker_id: 1,
            chunk_hash: "00ff".into(),
            dtype: "half".into(),
            layer_id: 3,
            tags: vec![],
        };
        assert_eq!(l.build().unwrap(), "m@2@1@00ff@half@3");
        assert_eq!(LmcacheLayerKey::parse("m@2@1@00ff@half@3", &Fields::new()).unwrap(), l);
        assert!(LmcacheKey::parse("m@2@1@00ff@half@3", &Fields::new()).is_err(), "a layer key is not a chunk key");
        assert!(LmcacheKey { dtype: "float16".into(), ..k }.build().is_err(), "LMCache writes float16 as half");
    }
}
