//! Typed messages of vllm-ascend's pull connector, generated from `spec/pull/` like the push family's
//! ([`crate::typed::generated::pull`], one module per revision). This module re-exports the newest released
//! revision (vllm-ascend 0.23.0.post1): [`MooncakeAgentMetadata`], [`GetMetaMsg`], [`DoneRecvingMsg`],
//! [`RemotePortInfo`], the raw [`ACK`], and [`ControlMsg`] (a decoder → prefiller payload matched to its
//! message by its tag, as the prefiller does). Every other revision is in
//! [`crate::typed::generated::pull`] (`vllm_ascend_0_18_0`, `vllm_ascend_main_3e486e317`, …).
//!
//! The side channel (REQ → ROUTER): the decoder worker sends [`GetMetaMsg`] and gets a
//! [`MooncakeAgentMetadata`]; after its reads it sends [`DoneRecvingMsg`] and gets the raw [`ACK`].

pub use super::generated::pull::newest_released::*;
pub use super::generated::pull::ControlTag;
pub use super::Untyped;
