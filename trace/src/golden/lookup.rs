//! Checker for vLLM's store lookup client and protocol (lookup/*.jsonl): the frames `LookupKeyClient` sends
//! and what it makes of a reply, against `mooncake_wire::lookup`'s codec for the header's release.

use serde_json::{json, Value as J};

use mooncake_wire::lookup::{self, Reply, Request, TailBoundary};

use super::{Checker, GoldenError, InputError};

/// The checker for a fully qualified vLLM function name, if we implement it.
pub(crate) fn checker(function: &str) -> Option<Checker> {
    match function {
        "vllm.distributed.kv_transfer.kv_connector.v1.mooncake.store.worker.LookupKeyClient._lookup" => Some(client),
        _ => None,
    }
}

fn u32_of(v: &J, k: &str) -> Result<u32, InputError> {
    v.get(k).and_then(J::as_u64).and_then(|n| u32::try_from(n).ok()).ok_or_else(|| InputError::NotInt(k.into()))
}

fn unhex(v: &J, k: &str) -> Result<Vec<u8>, InputError> {
    let s = v.get(k).and_then(J::as_str).ok_or_else(|| InputError::NotString(k.into()))?;
    hex::decode(s).map_err(|_| InputError::NotHex(s.into()))
}

/// `lookup` cases: our request frames and our reading of the reply (a reply vLLM's `decode_lookup_response`
/// rejects must be rejected by ours too; vLLM's message is fixed, so ours is reported as it). `reset`: frames,
/// and `ok` only for the byte 1, as vLLM compares `resp == RESP_OK`. `encode`: the reply bytes a worker sends.
fn client(header: &J, input: &J) -> Result<J, GoldenError> {
    let release = header.get("vllm_version").and_then(J::as_str).ok_or(InputError::NoVersion)?;
    let v = lookup::for_release(release).ok_or_else(|| InputError::NoLookupVersion(release.into()))?;
    let frames = |r: &Request| -> Result<Vec<String>, GoldenError> {
        Ok(lookup::encode_request(v, r).map_err(GoldenError::ours)?.iter().map(hex::encode).collect())
    };
    match input.get("request").and_then(J::as_str) {
        Some("lookup") => {
            let hashes = input
                .get("hashes")
                .and_then(J::as_array)
                .ok_or_else(|| InputError::NotArray("hashes".into()))?
                .iter()
                .map(|h| {
                    let s = h.as_str().unwrap_or("");
                    hex::decode(s).map_err(|_| InputError::NotHex(s.into()))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let request_frames = frames(&Request::Lookup { num_tokens: u32_of(input, "num_tokens")?, hashes })?;
            let result = match lookup::decode_reply(v, "lookup", &unhex(input, "reply_hex")?) {
                Ok(Reply::Hits { hit_tokens, tail_boundaries }) => json!({
                    "hit_length": hit_tokens,
                    "tail_key_boundaries": tail_boundaries.iter().map(|b| json!([b.group_id, b.boundary_tokens])).collect::<Vec<_>>(),
                }),
                Ok(other) => {
                    return Err(GoldenError::ours(lookup::LookupError {
                        frame: None,
                        msg: format!("a lookup read as {other:?}"),
                    }))
                }
                Err(_) => json!({ "error": "ValueError: Invalid Mooncake lookup response" }),
            };
            Ok(json!({ "request_frames": request_frames, "result": result }))
        }
        Some("reset") => {
            let ok =
                matches!(lookup::decode_reply(v, "reset", &unhex(input, "reply_hex")?), Ok(Reply::Status { ok: true }));
            Ok(json!({ "request_frames": frames(&Request::Reset)?, "ok": ok }))
        }
        Some("encode") => {
            let tail = input
                .get("tail")
                .and_then(J::as_array)
                .ok_or_else(|| InputError::NotArray("tail".into()))?
                .iter()
                .map(|t| match t.as_array().map(|a| a.iter().filter_map(J::as_u64).collect::<Vec<_>>()).as_deref() {
                    Some(&[g, n]) => Ok(TailBoundary {
                        group_id: u32::try_from(g).map_err(|_| InputError::NotInt("tail".into()))?,
                        boundary_tokens: u32::try_from(n).map_err(|_| InputError::NotInt("tail".into()))?,
                    }),
                    _ => Err(InputError::NotArray("tail".into())),
                })
                .collect::<Result<Vec<_>, _>>()?;
            let reply = Reply::Hits { hit_tokens: u32_of(input, "hit_length")?, tail_boundaries: tail };
            Ok(
                json!({ "response_hex": hex::encode(lookup::encode_reply(v, "lookup", &reply).map_err(GoldenError::ours)?) }),
            )
        }
        _ => Err(InputError::Missing("request".into()).into()),
    }
}
