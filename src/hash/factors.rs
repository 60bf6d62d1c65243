//! vLLM's `hash_factors` (`vllm/config/utils.py`, identical in the 0.12.0 … 0.33.0 wheels): SHA-256 over the
//! UTF-8 of `json.dumps(items, sort_keys=True)`, as 64 lowercase hex digits. The NIXL connector's
//! compatibility hash and vLLM's config hashes are this function applied to a dict of factors.

use super::pyjson::dumps_sorted;
use super::pyvalue::{PyError, PyValue};

/// What `hash_factors` hashed and the digest it returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FactorsHash {
    /// `hashlib.sha256(hashed.encode()).hexdigest()`.
    pub digest: String,
    /// The exact text hashed (always ASCII, because of `ensure_ascii`).
    pub hashed: String,
}

/// `hash_factors(items)`; the error is what Python would raise from `json.dumps`.
pub fn hash_factors(items: &PyValue) -> Result<FactorsHash, PyError> {
    let hashed = dumps_sorted(items)?;
    Ok(FactorsHash { digest: super::sha256_hex(hashed.as_bytes()), hashed })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_vectors() {
        // spec/README.md, "Compatibility hashes: reference vectors", vector 8.
        assert_eq!(
            hash_factors(&PyValue::Dict(vec![])).unwrap().digest,
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
        let d = PyValue::str_dict([("b", PyValue::int(1)), ("a", PyValue::str("x"))]);
        assert_eq!(
            hash_factors(&d).unwrap().digest,
            "385820f0096fd558f4091319e7fa742cebf877dc3baca180981889f1c40eca84"
        );
        let d = PyValue::str_dict([("model", PyValue::str("modèle/é"))]);
        assert_eq!(
            hash_factors(&d).unwrap().digest,
            "208d5c9535a64fa961db8d01015a980b7f513b24c484fe88ae88d6609f61d9cf"
        );
    }
}
