//! MooncakeStoreConnector's lookup channel (scheduler ⇄ global rank 0 worker, ZMQ REQ/REP over IPC): the
//! frames of every release from the data in `spec/store-lookup/vllm.toml`, and a codec that builds and reads
//! them exactly as vLLM's `LookupKeyClient` / `LookupKeyServer` do (vLLM 0.21.0 … 0.33.0 wheels,
//! `vllm/distributed/kv_transfer/kv_connector/v1/mooncake/store/worker.py`, `protocol.py`).
//!
//! The codec is driven by the frame list of the release; no release has code of its own.

pub(crate) mod codec;
pub(crate) mod spec;

pub use codec::{
    decode_reply, decode_request, encode_reply, encode_request, LookupError, Reply, Request, TailBoundary,
};
pub use spec::{for_release, FrameDef, FrameKind, History, LookupVersion, RequestDef};
