//! Checkers for vLLM's hashing functions (hash/*.jsonl).

use serde_json::{json, Value as J};

use mooncake_wire::hash::{self, tagged};

use super::{Checker, GoldenError, InputError};

/// The checker for a fully qualified vLLM function name, if we implement it.
pub(crate) fn checker(function: &str) -> Option<Checker> {
    match function {
        "vllm.config.utils.hash_factors" => Some(hash_factors),
        "vllm.distributed.kv_transfer.kv_connector.v1.nixl.metadata.compute_nixl_compatibility_hash" => {
            Some(nixl_compatibility_hash)
        }
        _ => None,
    }
}

/// The `{digest, hashed_utf8, hashed_hex}` output of `hash_factors` for a Python value.
fn factors_output(items: &hash::PyValue) -> Result<J, GoldenError> {
    let h = hash::hash_factors(items).map_err(GoldenError::ours)?;
    Ok(json!({ "digest": h.digest, "hashed_utf8": h.hashed, "hashed_hex": hex::encode(h.hashed.as_bytes()) }))
}

/// `hash_factors({items})` with the GOLDEN.md value tags.
fn hash_factors(_header: &J, input: &J) -> Result<J, GoldenError> {
    let items = input.get("items").ok_or_else(|| InputError::Missing("items".into()))?;
    factors_output(&tagged::from_tagged_json(items).map_err(GoldenError::ours)?)
}

/// `compute_nixl_compatibility_hash` of the release in the header, from the config attributes it reads.
fn nixl_compatibility_hash(header: &J, input: &J) -> Result<J, GoldenError> {
    let release = header.get("vllm_version").and_then(J::as_str).ok_or(InputError::NoVersion)?;
    let set =
        hash::compat::NixlFactorSet::for_release(release).ok_or_else(|| InputError::NoFactorSet(release.into()))?;
    let cfg: hash::compat::NixlConfig = serde_json::from_value(input.clone()).map_err(InputError::Decode)?;
    let factors = set.factors(&cfg, release).map_err(GoldenError::ours)?;
    let h = hash::hash_factors(&factors).map_err(GoldenError::ours)?;
    Ok(
        json!({ "hash": h.digest, "factors": tagged::to_output_json(&factors), "hash_factors_of_factors": factors_output(&factors)? }),
    )
}
