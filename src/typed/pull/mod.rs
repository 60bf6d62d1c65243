//! Typed messages of vllm-ascend's pull connector, newest released revision (vllm-ascend 0.23.0.post1,
//! `spec/pull/vllm-ascend-0.23.0.post1.toml`; source: vllm-ascend 0.23.0.post1 sdist,
//! `vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake_connector.py`). Hand-written and byte-identical to the
//! spec-driven codec; `tests/typed_pull_contract.rs` checks them against `spec/` row by row and
//! `tests/typed_pull_vectors.rs` against msgspec's vectors and the recorded pull traces.
//!
//! The side channel (REQ → ROUTER): the decoder worker sends [`GetMetaMsg`] and gets a
//! [`MooncakeAgentMetadata`]; after its reads it sends [`DoneRecvingMsg`] and gets the raw [`ACK`].

mod agent_metadata;
mod control;
mod remote_port_info;
mod untyped;

pub use agent_metadata::{KvGroup, MooncakeAgentMetadata, FIELDS as AGENT_METADATA_FIELDS};
pub use control::{ControlTag, DoneRecvingMsg, GetMetaMsg, Request, ACK, DONE_RECVING_FIELDS, GET_META_FIELDS};
pub use remote_port_info::{RemotePortInfo, FIELDS as REMOTE_PORT_INFO_FIELDS};
pub use untyped::Untyped;

/// The spec revision these types implement.
pub const REVISION: &str = "vllm-ascend-0.23.0.post1";
