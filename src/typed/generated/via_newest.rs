// @generated from spec/push/ by mooncake-wire (src/generate/typed_rs/). Do not edit: change spec/ and
// regenerate with `BLESS=1 cargo test --test generated`.
//! Every push revision's messages to and from the newest revision's (generated from `spec/push/`): the
//! conversions, and per revision the codecs the sans-IO cores speak it with.
#![allow(clippy::all, missing_docs)]
use super::push::*;
use crate::codec::convert::ConvertError;
use crate::msgpack::WireInt;
use crate::typed::blocks::{flatten_req_blocks, group_req_blocks};
use crate::typed::ViaNewest;
/// `vllm-0.16.0..0.18.1` through the newest revision's structs.
pub mod vllm_0_16_0_to_0_18_1 {
    use super::*;
    use super::super::push::vllm_0_16_0_to_0_18_1::*;
    impl MooncakeXferMetadata {
        /// This revision's `MooncakeXferMetadata` holding what the newest revision's `n` holds. `Err` names what
        /// cannot be said here: a field this revision lacks that is off its default, an enum value it does not
        /// define, more than one block group where block lists are flat.
        pub fn from_newest(
            n: &newest::MooncakeXferMetadata,
        ) -> Result<Self, ConvertError> {
            if !(n.block_lens.is_empty()) {
                return Err(ConvertError::Lacking {
                    field: "block_lens".into(),
                    value: format!("{:?}", n.block_lens),
                });
            }
            if !(n.kv_block_lens.is_empty()) {
                return Err(ConvertError::Lacking {
                    field: "kv_block_lens".into(),
                    value: format!("{:?}", n.kv_block_lens),
                });
            }
            if !(n.registered_layer_names.is_empty()) {
                return Err(ConvertError::Lacking {
                    field: "registered_layer_names".into(),
                    value: format!("{:?}", n.registered_layer_names),
                });
            }
            if !(n.registered_layer_indices.is_empty()) {
                return Err(ConvertError::Lacking {
                    field: "registered_layer_indices".into(),
                    value: format!("{:?}", n.registered_layer_indices),
                });
            }
            if !(n.registered_group_indices.is_empty()) {
                return Err(ConvertError::Lacking {
                    field: "registered_group_indices".into(),
                    value: format!("{:?}", n.registered_group_indices),
                });
            }
            if !(n.registered_shared_group_ids.is_empty()) {
                return Err(ConvertError::Lacking {
                    field: "registered_shared_group_ids".into(),
                    value: format!("{:?}", n.registered_shared_group_ids),
                });
            }
            if !(n.registered_row_offsets.is_empty()) {
                return Err(ConvertError::Lacking {
                    field: "registered_row_offsets".into(),
                    value: format!("{:?}", n.registered_row_offsets),
                });
            }
            if !(n.remote_pp_size == WireInt::from_u64(1)) {
                return Err(ConvertError::Lacking {
                    field: "remote_pp_size".into(),
                    value: format!("{:?}", n.remote_pp_size),
                });
            }
            if !(n.layout_id == WireInt::from_u64(0)) {
                return Err(ConvertError::Lacking {
                    field: "layout_id".into(),
                    value: format!("{:?}", n.layout_id),
                });
            }
            Ok(MooncakeXferMetadataOf {
                remote_hostname: n.remote_hostname.clone(),
                remote_port: n.remote_port.clone(),
                remote_tp_size: n.remote_tp_size.clone(),
                remote_tp_rank: n.remote_tp_rank.clone(),
                req_blocks: flatten_req_blocks(&n.req_blocks)?,
                kv_caches_base_addr: n.kv_caches_base_addr.clone(),
            })
        }
        /// The newest revision's `MooncakeXferMetadata` holding this message's values; the fields this revision
        /// lacks at their defaults.
        pub fn to_newest(&self) -> newest::MooncakeXferMetadata {
            let mut m = newest::MooncakeXferMetadata::default();
            m.remote_hostname = self.remote_hostname.clone();
            m.remote_port = self.remote_port.clone();
            m.remote_tp_size = self.remote_tp_size.clone();
            m.remote_tp_rank = self.remote_tp_rank.clone();
            m.req_blocks = group_req_blocks(&self.req_blocks);
            m.kv_caches_base_addr = self.kv_caches_base_addr.clone();
            m
        }
    }
    impl MooncakeXferResponse {
        /// This revision's `MooncakeXferResponse` holding what the newest revision's `n` holds. `Err` names what
        /// cannot be said here: a field this revision lacks that is off its default, an enum value it does not
        /// define, more than one block group where block lists are flat.
        pub fn from_newest(
            n: &newest::MooncakeXferResponse,
        ) -> Result<Self, ConvertError> {
            if !(n.layout_id == WireInt::from_u64(0)) {
                return Err(ConvertError::Lacking {
                    field: "layout_id".into(),
                    value: format!("{:?}", n.layout_id),
                });
            }
            if !MOONCAKE_XFER_RESPONSE_STATUS_MEMBERS.contains(&n.status) {
                return Err(ConvertError::NotAMember {
                    enum_name: "MooncakeXferResponseStatus".into(),
                    value: n.status.to_string(),
                });
            }
            Ok(MooncakeXferResponseOf {
                status: n.status,
                ok_reqs: n.ok_reqs.clone(),
                err_reqs: n.err_reqs.clone(),
                err_msg: n.err_msg.clone(),
            })
        }
        /// The newest revision's `MooncakeXferResponse` holding this message's values; the fields this revision
        /// lacks at their defaults.
        pub fn to_newest(&self) -> newest::MooncakeXferResponse {
            let mut m = newest::MooncakeXferResponse::default();
            m.status = self.status;
            m.ok_reqs = self.ok_reqs.clone();
            m.err_reqs = self.err_reqs.clone();
            m.err_msg = self.err_msg.clone();
            m
        }
    }
    /// `MooncakeXferMetadata` of this revision through the newest revision's struct (what the sans-IO cores
    /// hold): the generated decoder and encoder of this revision, with `to_newest` / `from_newest`.
    pub const MOONCAKE_XFER_METADATA_VIA_NEWEST: ViaNewest<
        newest::MooncakeXferMetadata,
    > = ViaNewest {
        revision: REVISION,
        decode: |b| MooncakeXferMetadata::decode(b).map(|m| m.to_newest()),
        encode: |n| {
            MooncakeXferMetadata::from_newest(n)
                .map(|m| m.encode())
                .map_err(|e| e.in_revision(REVISION))
        },
    };
    /// `MooncakeXferResponse` of this revision through the newest revision's struct (what the sans-IO cores
    /// hold): the generated decoder and encoder of this revision, with `to_newest` / `from_newest`.
    pub const MOONCAKE_XFER_RESPONSE_VIA_NEWEST: ViaNewest<
        newest::MooncakeXferResponse,
    > = ViaNewest {
        revision: REVISION,
        decode: |b| MooncakeXferResponse::decode(b).map(|m| m.to_newest()),
        encode: |n| {
            MooncakeXferResponse::from_newest(n)
                .map(|m| m.encode())
                .map_err(|e| e.in_revision(REVISION))
        },
    };
}
/// `vllm-0.19.0..0.19.1` through the newest revision's structs.
pub mod vllm_0_19_0_to_0_19_1 {
    use super::*;
    use super::super::push::vllm_0_19_0_to_0_19_1::*;
    impl MooncakeXferMetadata {
        /// This revision's `MooncakeXferMetadata` holding what the newest revision's `n` holds. `Err` names what
        /// cannot be said here: a field this revision lacks that is off its default, an enum value it does not
        /// define, more than one block group where block lists are flat.
        pub fn from_newest(
            n: &newest::MooncakeXferMetadata,
        ) -> Result<Self, ConvertError> {
            if !(n.kv_block_lens.is_empty()) {
                return Err(ConvertError::Lacking {
                    field: "kv_block_lens".into(),
                    value: format!("{:?}", n.kv_block_lens),
                });
            }
            if !(n.registered_layer_names.is_empty()) {
                return Err(ConvertError::Lacking {
                    field: "registered_layer_names".into(),
                    value: format!("{:?}", n.registered_layer_names),
                });
            }
            if !(n.registered_layer_indices.is_empty()) {
                return Err(ConvertError::Lacking {
                    field: "registered_layer_indices".into(),
                    value: format!("{:?}", n.registered_layer_indices),
                });
            }
            if !(n.registered_group_indices.is_empty()) {
                return Err(ConvertError::Lacking {
                    field: "registered_group_indices".into(),
                    value: format!("{:?}", n.registered_group_indices),
                });
            }
            if !(n.registered_shared_group_ids.is_empty()) {
                return Err(ConvertError::Lacking {
                    field: "registered_shared_group_ids".into(),
                    value: format!("{:?}", n.registered_shared_group_ids),
                });
            }
            if !(n.registered_row_offsets.is_empty()) {
                return Err(ConvertError::Lacking {
                    field: "registered_row_offsets".into(),
                    value: format!("{:?}", n.registered_row_offsets),
                });
            }
            if !(n.remote_pp_size == WireInt::from_u64(1)) {
                return Err(ConvertError::Lacking {
                    field: "remote_pp_size".into(),
                    value: format!("{:?}", n.remote_pp_size),
                });
            }
            if !(n.layout_id == WireInt::from_u64(0)) {
                return Err(ConvertError::Lacking {
                    field: "layout_id".into(),
                    value: format!("{:?}", n.layout_id),
                });
            }
            Ok(MooncakeXferMetadataOf {
                remote_hostname: n.remote_hostname.clone(),
                remote_port: n.remote_port.clone(),
                remote_tp_size: n.remote_tp_size.clone(),
                remote_tp_rank: n.remote_tp_rank.clone(),
                req_blocks: flatten_req_blocks(&n.req_blocks)?,
                kv_caches_base_addr: n.kv_caches_base_addr.clone(),
                block_lens: n.block_lens.clone(),
            })
        }
        /// The newest revision's `MooncakeXferMetadata` holding this message's values; the fields this revision
        /// lacks at their defaults.
        pub fn to_newest(&self) -> newest::MooncakeXferMetadata {
            let mut m = newest::MooncakeXferMetadata::default();
            m.remote_hostname = self.remote_hostname.clone();
            m.remote_port = self.remote_port.clone();
            m.remote_tp_size = self.remote_tp_size.clone();
            m.remote_tp_rank = self.remote_tp_rank.clone();
            m.req_blocks = group_req_blocks(&self.req_blocks);
            m.kv_caches_base_addr = self.kv_caches_base_addr.clone();
            m.block_lens = self.block_lens.clone();
            m
        }
    }
    /// `MooncakeXferMetadata` of this revision through the newest revision's struct (what the sans-IO cores
    /// hold): the generated decoder and encoder of this revision, with `to_newest` / `from_newest`.
    pub const MOONCAKE_XFER_METADATA_VIA_NEWEST: ViaNewest<
        newest::MooncakeXferMetadata,
    > = ViaNewest {
        revision: REVISION,
        decode: |b| MooncakeXferMetadata::decode(b).map(|m| m.to_newest()),
        encode: |n| {
            MooncakeXferMetadata::from_newest(n)
                .map(|m| m.encode())
                .map_err(|e| e.in_revision(REVISION))
        },
    };
    /// `MooncakeXferResponse` of this revision through the newest revision's struct (what the sans-IO cores
    /// hold): the generated decoder and encoder of this revision, with `to_newest` / `from_newest`.
    pub const MOONCAKE_XFER_RESPONSE_VIA_NEWEST: ViaNewest<
        newest::MooncakeXferResponse,
    > = ViaNewest {
        revision: REVISION,
        decode: |b| MooncakeXferResponse::decode(b).map(|m| m.to_newest()),
        encode: |n| {
            MooncakeXferResponse::from_newest(n)
                .map(|m| m.encode())
                .map_err(|e| e.in_revision(REVISION))
        },
    };
}
/// `vllm-0.20.0..0.23.0` through the newest revision's structs.
pub mod vllm_0_20_0_to_0_23_0 {
    use super::*;
    use super::super::push::vllm_0_20_0_to_0_23_0::*;
    impl MooncakeXferMetadata {
        /// This revision's `MooncakeXferMetadata` holding what the newest revision's `n` holds. `Err` names what
        /// cannot be said here: a field this revision lacks that is off its default, an enum value it does not
        /// define, more than one block group where block lists are flat.
        pub fn from_newest(
            n: &newest::MooncakeXferMetadata,
        ) -> Result<Self, ConvertError> {
            if !(n.kv_block_lens.is_empty()) {
                return Err(ConvertError::Lacking {
                    field: "kv_block_lens".into(),
                    value: format!("{:?}", n.kv_block_lens),
                });
            }
            if !(n.registered_layer_names.is_empty()) {
                return Err(ConvertError::Lacking {
                    field: "registered_layer_names".into(),
                    value: format!("{:?}", n.registered_layer_names),
                });
            }
            if !(n.registered_layer_indices.is_empty()) {
                return Err(ConvertError::Lacking {
                    field: "registered_layer_indices".into(),
                    value: format!("{:?}", n.registered_layer_indices),
                });
            }
            if !(n.registered_group_indices.is_empty()) {
                return Err(ConvertError::Lacking {
                    field: "registered_group_indices".into(),
                    value: format!("{:?}", n.registered_group_indices),
                });
            }
            if !(n.registered_shared_group_ids.is_empty()) {
                return Err(ConvertError::Lacking {
                    field: "registered_shared_group_ids".into(),
                    value: format!("{:?}", n.registered_shared_group_ids),
                });
            }
            if !(n.registered_row_offsets.is_empty()) {
                return Err(ConvertError::Lacking {
                    field: "registered_row_offsets".into(),
                    value: format!("{:?}", n.registered_row_offsets),
                });
            }
            if !(n.remote_pp_size == WireInt::from_u64(1)) {
                return Err(ConvertError::Lacking {
                    field: "remote_pp_size".into(),
                    value: format!("{:?}", n.remote_pp_size),
                });
            }
            if !(n.layout_id == WireInt::from_u64(0)) {
                return Err(ConvertError::Lacking {
                    field: "layout_id".into(),
                    value: format!("{:?}", n.layout_id),
                });
            }
            Ok(MooncakeXferMetadataOf {
                remote_hostname: n.remote_hostname.clone(),
                remote_port: n.remote_port.clone(),
                remote_tp_size: n.remote_tp_size.clone(),
                remote_tp_rank: n.remote_tp_rank.clone(),
                req_blocks: n.req_blocks.clone(),
                kv_caches_base_addr: n.kv_caches_base_addr.clone(),
                block_lens: n.block_lens.clone(),
            })
        }
        /// The newest revision's `MooncakeXferMetadata` holding this message's values; the fields this revision
        /// lacks at their defaults.
        pub fn to_newest(&self) -> newest::MooncakeXferMetadata {
            let mut m = newest::MooncakeXferMetadata::default();
            m.remote_hostname = self.remote_hostname.clone();
            m.remote_port = self.remote_port.clone();
            m.remote_tp_size = self.remote_tp_size.clone();
            m.remote_tp_rank = self.remote_tp_rank.clone();
            m.req_blocks = self.req_blocks.clone();
            m.kv_caches_base_addr = self.kv_caches_base_addr.clone();
            m.block_lens = self.block_lens.clone();
            m
        }
    }
    /// `MooncakeXferMetadata` of this revision through the newest revision's struct (what the sans-IO cores
    /// hold): the generated decoder and encoder of this revision, with `to_newest` / `from_newest`.
    pub const MOONCAKE_XFER_METADATA_VIA_NEWEST: ViaNewest<
        newest::MooncakeXferMetadata,
    > = ViaNewest {
        revision: REVISION,
        decode: |b| MooncakeXferMetadata::decode(b).map(|m| m.to_newest()),
        encode: |n| {
            MooncakeXferMetadata::from_newest(n)
                .map(|m| m.encode())
                .map_err(|e| e.in_revision(REVISION))
        },
    };
    /// `MooncakeXferResponse` of this revision through the newest revision's struct (what the sans-IO cores
    /// hold): the generated decoder and encoder of this revision, with `to_newest` / `from_newest`.
    pub const MOONCAKE_XFER_RESPONSE_VIA_NEWEST: ViaNewest<
        newest::MooncakeXferResponse,
    > = ViaNewest {
        revision: REVISION,
        decode: |b| MooncakeXferResponse::decode(b).map(|m| m.to_newest()),
        encode: |n| {
            MooncakeXferResponse::from_newest(n)
                .map(|m| m.encode())
                .map_err(|e| e.in_revision(REVISION))
        },
    };
}
/// `vllm-0.24.0` through the newest revision's structs.
pub mod vllm_0_24_0 {
    use super::*;
    use super::super::push::vllm_0_24_0::*;
    impl MooncakeXferMetadata {
        /// This revision's `MooncakeXferMetadata` holding what the newest revision's `n` holds. `Err` names what
        /// cannot be said here: a field this revision lacks that is off its default, an enum value it does not
        /// define, more than one block group where block lists are flat.
        pub fn from_newest(
            n: &newest::MooncakeXferMetadata,
        ) -> Result<Self, ConvertError> {
            if !(n.kv_block_lens.is_empty()) {
                return Err(ConvertError::Lacking {
                    field: "kv_block_lens".into(),
                    value: format!("{:?}", n.kv_block_lens),
                });
            }
            if !(n.registered_group_indices.is_empty()) {
                return Err(ConvertError::Lacking {
                    field: "registered_group_indices".into(),
                    value: format!("{:?}", n.registered_group_indices),
                });
            }
            if !(n.registered_shared_group_ids.is_empty()) {
                return Err(ConvertError::Lacking {
                    field: "registered_shared_group_ids".into(),
                    value: format!("{:?}", n.registered_shared_group_ids),
                });
            }
            if !(n.registered_row_offsets.is_empty()) {
                return Err(ConvertError::Lacking {
                    field: "registered_row_offsets".into(),
                    value: format!("{:?}", n.registered_row_offsets),
                });
            }
            if !(n.remote_pp_size == WireInt::from_u64(1)) {
                return Err(ConvertError::Lacking {
                    field: "remote_pp_size".into(),
                    value: format!("{:?}", n.remote_pp_size),
                });
            }
            if !(n.layout_id == WireInt::from_u64(0)) {
                return Err(ConvertError::Lacking {
                    field: "layout_id".into(),
                    value: format!("{:?}", n.layout_id),
                });
            }
            Ok(MooncakeXferMetadataOf {
                remote_hostname: n.remote_hostname.clone(),
                remote_port: n.remote_port.clone(),
                remote_tp_size: n.remote_tp_size.clone(),
                remote_tp_rank: n.remote_tp_rank.clone(),
                req_blocks: n.req_blocks.clone(),
                kv_caches_base_addr: n.kv_caches_base_addr.clone(),
                block_lens: n.block_lens.clone(),
                registered_layer_names: n.registered_layer_names.clone(),
                registered_layer_indices: n.registered_layer_indices.clone(),
            })
        }
        /// The newest revision's `MooncakeXferMetadata` holding this message's values; the fields this revision
        /// lacks at their defaults.
        pub fn to_newest(&self) -> newest::MooncakeXferMetadata {
            let mut m = newest::MooncakeXferMetadata::default();
            m.remote_hostname = self.remote_hostname.clone();
            m.remote_port = self.remote_port.clone();
            m.remote_tp_size = self.remote_tp_size.clone();
            m.remote_tp_rank = self.remote_tp_rank.clone();
            m.req_blocks = self.req_blocks.clone();
            m.kv_caches_base_addr = self.kv_caches_base_addr.clone();
            m.block_lens = self.block_lens.clone();
            m.registered_layer_names = self.registered_layer_names.clone();
            m.registered_layer_indices = self.registered_layer_indices.clone();
            m
        }
    }
    /// `MooncakeXferMetadata` of this revision through the newest revision's struct (what the sans-IO cores
    /// hold): the generated decoder and encoder of this revision, with `to_newest` / `from_newest`.
    pub const MOONCAKE_XFER_METADATA_VIA_NEWEST: ViaNewest<
        newest::MooncakeXferMetadata,
    > = ViaNewest {
        revision: REVISION,
        decode: |b| MooncakeXferMetadata::decode(b).map(|m| m.to_newest()),
        encode: |n| {
            MooncakeXferMetadata::from_newest(n)
                .map(|m| m.encode())
                .map_err(|e| e.in_revision(REVISION))
        },
    };
    /// `MooncakeXferResponse` of this revision through the newest revision's struct (what the sans-IO cores
    /// hold): the generated decoder and encoder of this revision, with `to_newest` / `from_newest`.
    pub const MOONCAKE_XFER_RESPONSE_VIA_NEWEST: ViaNewest<
        newest::MooncakeXferResponse,
    > = ViaNewest {
        revision: REVISION,
        decode: |b| MooncakeXferResponse::decode(b).map(|m| m.to_newest()),
        encode: |n| {
            MooncakeXferResponse::from_newest(n)
                .map(|m| m.encode())
                .map_err(|e| e.in_revision(REVISION))
        },
    };
}
/// `vllm-0.25.0..0.25.1` through the newest revision's structs.
pub mod vllm_0_25_0_to_0_25_1 {
    use super::*;
    use super::super::push::vllm_0_25_0_to_0_25_1::*;
    impl MooncakeXferMetadata {
        /// This revision's `MooncakeXferMetadata` holding what the newest revision's `n` holds. `Err` names what
        /// cannot be said here: a field this revision lacks that is off its default, an enum value it does not
        /// define, more than one block group where block lists are flat.
        pub fn from_newest(
            n: &newest::MooncakeXferMetadata,
        ) -> Result<Self, ConvertError> {
            if !(n.registered_shared_group_ids.is_empty()) {
                return Err(ConvertError::Lacking {
                    field: "registered_shared_group_ids".into(),
                    value: format!("{:?}", n.registered_shared_group_ids),
                });
            }
            if !(n.registered_row_offsets.is_empty()) {
                return Err(ConvertError::Lacking {
                    field: "registered_row_offsets".into(),
                    value: format!("{:?}", n.registered_row_offsets),
                });
            }
            if !(n.remote_pp_size == WireInt::from_u64(1)) {
                return Err(ConvertError::Lacking {
                    field: "remote_pp_size".into(),
                    value: format!("{:?}", n.remote_pp_size),
                });
            }
            if !(n.layout_id == WireInt::from_u64(0)) {
                return Err(ConvertError::Lacking {
                    field: "layout_id".into(),
                    value: format!("{:?}", n.layout_id),
                });
            }
            Ok(MooncakeXferMetadataOf {
                remote_hostname: n.remote_hostname.clone(),
                remote_port: n.remote_port.clone(),
                remote_tp_size: n.remote_tp_size.clone(),
                remote_tp_rank: n.remote_tp_rank.clone(),
                req_blocks: n.req_blocks.clone(),
                kv_caches_base_addr: n.kv_caches_base_addr.clone(),
                block_lens: n.block_lens.clone(),
                kv_block_lens: n.kv_block_lens.clone(),
                registered_layer_names: n.registered_layer_names.clone(),
                registered_layer_indices: n.registered_layer_indices.clone(),
                registered_group_indices: n.registered_group_indices.clone(),
            })
        }
        /// The newest revision's `MooncakeXferMetadata` holding this message's values; the fields this revision
        /// lacks at their defaults.
        pub fn to_newest(&self) -> newest::MooncakeXferMetadata {
            let mut m = newest::MooncakeXferMetadata::default();
            m.remote_hostname = self.remote_hostname.clone();
            m.remote_port = self.remote_port.clone();
            m.remote_tp_size = self.remote_tp_size.clone();
            m.remote_tp_rank = self.remote_tp_rank.clone();
            m.req_blocks = self.req_blocks.clone();
            m.kv_caches_base_addr = self.kv_caches_base_addr.clone();
            m.block_lens = self.block_lens.clone();
            m.kv_block_lens = self.kv_block_lens.clone();
            m.registered_layer_names = self.registered_layer_names.clone();
            m.registered_layer_indices = self.registered_layer_indices.clone();
            m.registered_group_indices = self.registered_group_indices.clone();
            m
        }
    }
    /// `MooncakeXferMetadata` of this revision through the newest revision's struct (what the sans-IO cores
    /// hold): the generated decoder and encoder of this revision, with `to_newest` / `from_newest`.
    pub const MOONCAKE_XFER_METADATA_VIA_NEWEST: ViaNewest<
        newest::MooncakeXferMetadata,
    > = ViaNewest {
        revision: REVISION,
        decode: |b| MooncakeXferMetadata::decode(b).map(|m| m.to_newest()),
        encode: |n| {
            MooncakeXferMetadata::from_newest(n)
                .map(|m| m.encode())
                .map_err(|e| e.in_revision(REVISION))
        },
    };
    /// `MooncakeXferResponse` of this revision through the newest revision's struct (what the sans-IO cores
    /// hold): the generated decoder and encoder of this revision, with `to_newest` / `from_newest`.
    pub const MOONCAKE_XFER_RESPONSE_VIA_NEWEST: ViaNewest<
        newest::MooncakeXferResponse,
    > = ViaNewest {
        revision: REVISION,
        decode: |b| MooncakeXferResponse::decode(b).map(|m| m.to_newest()),
        encode: |n| {
            MooncakeXferResponse::from_newest(n)
                .map(|m| m.encode())
                .map_err(|e| e.in_revision(REVISION))
        },
    };
}
/// `vllm-0.26.0..0.28.0` through the newest revision's structs.
pub mod vllm_0_26_0_to_0_28_0 {
    use super::*;
    use super::super::push::vllm_0_26_0_to_0_28_0::*;
    /// `MooncakeXferMetadata` of this revision through the newest revision's struct (what the sans-IO cores
    /// hold): the generated decoder and encoder of this revision, with `to_newest` / `from_newest`.
    pub const MOONCAKE_XFER_METADATA_VIA_NEWEST: ViaNewest<
        newest::MooncakeXferMetadata,
    > = ViaNewest {
        revision: REVISION,
        decode: |b| MooncakeXferMetadata::decode(b).map(|m| m.to_newest()),
        encode: |n| {
            MooncakeXferMetadata::from_newest(n)
                .map(|m| m.encode())
                .map_err(|e| e.in_revision(REVISION))
        },
    };
    /// `MooncakeXferResponse` of this revision through the newest revision's struct (what the sans-IO cores
    /// hold): the generated decoder and encoder of this revision, with `to_newest` / `from_newest`.
    pub const MOONCAKE_XFER_RESPONSE_VIA_NEWEST: ViaNewest<
        newest::MooncakeXferResponse,
    > = ViaNewest {
        revision: REVISION,
        decode: |b| MooncakeXferResponse::decode(b).map(|m| m.to_newest()),
        encode: |n| {
            MooncakeXferResponse::from_newest(n)
                .map(|m| m.encode())
                .map_err(|e| e.in_revision(REVISION))
        },
    };
}
/// `vllm-0.29.0` through the newest revision's structs.
pub mod vllm_0_29_0 {
    use super::*;
    use super::super::push::vllm_0_29_0::*;
    /// `MooncakeXferMetadata` of this revision through the newest revision's struct (what the sans-IO cores
    /// hold): the generated decoder and encoder of this revision, with `to_newest` / `from_newest`.
    pub const MOONCAKE_XFER_METADATA_VIA_NEWEST: ViaNewest<
        newest::MooncakeXferMetadata,
    > = ViaNewest {
        revision: REVISION,
        decode: |b| MooncakeXferMetadata::decode(b).map(|m| m.to_newest()),
        encode: |n| {
            MooncakeXferMetadata::from_newest(n)
                .map(|m| m.encode())
                .map_err(|e| e.in_revision(REVISION))
        },
    };
    /// `MooncakeXferResponse` of this revision through the newest revision's struct (what the sans-IO cores
    /// hold): the generated decoder and encoder of this revision, with `to_newest` / `from_newest`.
    pub const MOONCAKE_XFER_RESPONSE_VIA_NEWEST: ViaNewest<
        newest::MooncakeXferResponse,
    > = ViaNewest {
        revision: REVISION,
        decode: |b| MooncakeXferResponse::decode(b).map(|m| m.to_newest()),
        encode: |n| {
            MooncakeXferResponse::from_newest(n)
                .map(|m| m.encode())
                .map_err(|e| e.in_revision(REVISION))
        },
    };
}
/// `vllm-0.30.0` through the newest revision's structs.
pub mod vllm_0_30_0 {
    use super::*;
    use super::super::push::vllm_0_30_0::*;
    impl MooncakeXferMetadata {
        /// This revision's `MooncakeXferMetadata` holding what the newest revision's `n` holds. `Err` names what
        /// cannot be said here: a field this revision lacks that is off its default, an enum value it does not
        /// define, more than one block group where block lists are flat.
        pub fn from_newest(
            n: &newest::MooncakeXferMetadata,
        ) -> Result<Self, ConvertError> {
            if !(n.registered_shared_group_ids.is_empty()) {
                return Err(ConvertError::Lacking {
                    field: "registered_shared_group_ids".into(),
                    value: format!("{:?}", n.registered_shared_group_ids),
                });
            }
            if !(n.registered_row_offsets.is_empty()) {
                return Err(ConvertError::Lacking {
                    field: "registered_row_offsets".into(),
                    value: format!("{:?}", n.registered_row_offsets),
                });
            }
            if !(n.layout_id == WireInt::from_u64(0)) {
                return Err(ConvertError::Lacking {
                    field: "layout_id".into(),
                    value: format!("{:?}", n.layout_id),
                });
            }
            Ok(MooncakeXferMetadataOf {
                remote_hostname: n.remote_hostname.clone(),
                remote_port: n.remote_port.clone(),
                remote_tp_size: n.remote_tp_size.clone(),
                remote_tp_rank: n.remote_tp_rank.clone(),
                req_blocks: n.req_blocks.clone(),
                kv_caches_base_addr: n.kv_caches_base_addr.clone(),
                block_lens: n.block_lens.clone(),
                kv_block_lens: n.kv_block_lens.clone(),
                registered_layer_names: n.registered_layer_names.clone(),
                registered_layer_indices: n.registered_layer_indices.clone(),
                registered_group_indices: n.registered_group_indices.clone(),
                remote_pp_size: n.remote_pp_size.clone(),
            })
        }
        /// The newest revision's `MooncakeXferMetadata` holding this message's values; the fields this revision
        /// lacks at their defaults.
        pub fn to_newest(&self) -> newest::MooncakeXferMetadata {
            let mut m = newest::MooncakeXferMetadata::default();
            m.remote_hostname = self.remote_hostname.clone();
            m.remote_port = self.remote_port.clone();
            m.remote_tp_size = self.remote_tp_size.clone();
            m.remote_tp_rank = self.remote_tp_rank.clone();
            m.req_blocks = self.req_blocks.clone();
            m.kv_caches_base_addr = self.kv_caches_base_addr.clone();
            m.block_lens = self.block_lens.clone();
            m.kv_block_lens = self.kv_block_lens.clone();
            m.registered_layer_names = self.registered_layer_names.clone();
            m.registered_layer_indices = self.registered_layer_indices.clone();
            m.registered_group_indices = self.registered_group_indices.clone();
            m.remote_pp_size = self.remote_pp_size.clone();
            m
        }
    }
    /// `MooncakeXferMetadata` of this revision through the newest revision's struct (what the sans-IO cores
    /// hold): the generated decoder and encoder of this revision, with `to_newest` / `from_newest`.
    pub const MOONCAKE_XFER_METADATA_VIA_NEWEST: ViaNewest<
        newest::MooncakeXferMetadata,
    > = ViaNewest {
        revision: REVISION,
        decode: |b| MooncakeXferMetadata::decode(b).map(|m| m.to_newest()),
        encode: |n| {
            MooncakeXferMetadata::from_newest(n)
                .map(|m| m.encode())
                .map_err(|e| e.in_revision(REVISION))
        },
    };
    /// `MooncakeXferResponse` of this revision through the newest revision's struct (what the sans-IO cores
    /// hold): the generated decoder and encoder of this revision, with `to_newest` / `from_newest`.
    pub const MOONCAKE_XFER_RESPONSE_VIA_NEWEST: ViaNewest<
        newest::MooncakeXferResponse,
    > = ViaNewest {
        revision: REVISION,
        decode: |b| MooncakeXferResponse::decode(b).map(|m| m.to_newest()),
        encode: |n| {
            MooncakeXferResponse::from_newest(n)
                .map(|m| m.encode())
                .map_err(|e| e.in_revision(REVISION))
        },
    };
}
/// `vllm-0.31.0` through the newest revision's structs.
pub mod vllm_0_31_0 {
    use super::*;
    use super::super::push::vllm_0_31_0::*;
    /// `MooncakeXferMetadata` of this revision through the newest revision's struct (what the sans-IO cores
    /// hold): the generated decoder and encoder of this revision, with `to_newest` / `from_newest`.
    pub const MOONCAKE_XFER_METADATA_VIA_NEWEST: ViaNewest<
        newest::MooncakeXferMetadata,
    > = ViaNewest {
        revision: REVISION,
        decode: |b| MooncakeXferMetadata::decode(b).map(|m| m.to_newest()),
        encode: |n| {
            MooncakeXferMetadata::from_newest(n)
                .map(|m| m.encode())
                .map_err(|e| e.in_revision(REVISION))
        },
    };
    /// `MooncakeXferResponse` of this revision through the newest revision's struct (what the sans-IO cores
    /// hold): the generated decoder and encoder of this revision, with `to_newest` / `from_newest`.
    pub const MOONCAKE_XFER_RESPONSE_VIA_NEWEST: ViaNewest<
        newest::MooncakeXferResponse,
    > = ViaNewest {
        revision: REVISION,
        decode: |b| MooncakeXferResponse::decode(b).map(|m| m.to_newest()),
        encode: |n| {
            MooncakeXferResponse::from_newest(n)
                .map(|m| m.encode())
                .map_err(|e| e.in_revision(REVISION))
        },
    };
}
/// `vllm-0.32.0` through the newest revision's structs.
pub mod vllm_0_32_0 {
    use super::*;
    use super::super::push::vllm_0_32_0::*;
    impl MooncakeXferMetadata {
        /// This revision's `MooncakeXferMetadata` holding what the newest revision's `n` holds. `Err` names what
        /// cannot be said here: a field this revision lacks that is off its default, an enum value it does not
        /// define, more than one block group where block lists are flat.
        pub fn from_newest(
            n: &newest::MooncakeXferMetadata,
        ) -> Result<Self, ConvertError> {
            if !(n.layout_id == WireInt::from_u64(0)) {
                return Err(ConvertError::Lacking {
                    field: "layout_id".into(),
                    value: format!("{:?}", n.layout_id),
                });
            }
            Ok(MooncakeXferMetadataOf {
                remote_hostname: n.remote_hostname.clone(),
                remote_port: n.remote_port.clone(),
                remote_tp_size: n.remote_tp_size.clone(),
                remote_tp_rank: n.remote_tp_rank.clone(),
                req_blocks: n.req_blocks.clone(),
                kv_caches_base_addr: n.kv_caches_base_addr.clone(),
                block_lens: n.block_lens.clone(),
                kv_block_lens: n.kv_block_lens.clone(),
                registered_layer_names: n.registered_layer_names.clone(),
                registered_layer_indices: n.registered_layer_indices.clone(),
                registered_group_indices: n.registered_group_indices.clone(),
                registered_shared_group_ids: n.registered_shared_group_ids.clone(),
                registered_row_offsets: n.registered_row_offsets.clone(),
                remote_pp_size: n.remote_pp_size.clone(),
            })
        }
        /// The newest revision's `MooncakeXferMetadata` holding this message's values; the fields this revision
        /// lacks at their defaults.
        pub fn to_newest(&self) -> newest::MooncakeXferMetadata {
            let mut m = newest::MooncakeXferMetadata::default();
            m.remote_hostname = self.remote_hostname.clone();
            m.remote_port = self.remote_port.clone();
            m.remote_tp_size = self.remote_tp_size.clone();
            m.remote_tp_rank = self.remote_tp_rank.clone();
            m.req_blocks = self.req_blocks.clone();
            m.kv_caches_base_addr = self.kv_caches_base_addr.clone();
            m.block_lens = self.block_lens.clone();
            m.kv_block_lens = self.kv_block_lens.clone();
            m.registered_layer_names = self.registered_layer_names.clone();
            m.registered_layer_indices = self.registered_layer_indices.clone();
            m.registered_group_indices = self.registered_group_indices.clone();
            m.registered_shared_group_ids = self.registered_shared_group_ids.clone();
            m.registered_row_offsets = self.registered_row_offsets.clone();
            m.remote_pp_size = self.remote_pp_size.clone();
            m
        }
    }
    /// `MooncakeXferMetadata` of this revision through the newest revision's struct (what the sans-IO cores
    /// hold): the generated decoder and encoder of this revision, with `to_newest` / `from_newest`.
    pub const MOONCAKE_XFER_METADATA_VIA_NEWEST: ViaNewest<
        newest::MooncakeXferMetadata,
    > = ViaNewest {
        revision: REVISION,
        decode: |b| MooncakeXferMetadata::decode(b).map(|m| m.to_newest()),
        encode: |n| {
            MooncakeXferMetadata::from_newest(n)
                .map(|m| m.encode())
                .map_err(|e| e.in_revision(REVISION))
        },
    };
    /// `MooncakeXferResponse` of this revision through the newest revision's struct (what the sans-IO cores
    /// hold): the generated decoder and encoder of this revision, with `to_newest` / `from_newest`.
    pub const MOONCAKE_XFER_RESPONSE_VIA_NEWEST: ViaNewest<
        newest::MooncakeXferResponse,
    > = ViaNewest {
        revision: REVISION,
        decode: |b| MooncakeXferResponse::decode(b).map(|m| m.to_newest()),
        encode: |n| {
            MooncakeXferResponse::from_newest(n)
                .map(|m| m.encode())
                .map_err(|e| e.in_revision(REVISION))
        },
    };
}
/// `vllm-0.33.0` through the newest revision's structs.
pub mod vllm_0_33_0 {
    use super::*;
    use super::super::push::vllm_0_33_0::*;
    impl MooncakeXferMetadata {
        /// This revision's `MooncakeXferMetadata` holding what the newest revision's `n` holds. `Err` names what
        /// cannot be said here: a field this revision lacks that is off its default, an enum value it does not
        /// define, more than one block group where block lists are flat.
        pub fn from_newest(
            n: &newest::MooncakeXferMetadata,
        ) -> Result<Self, ConvertError> {
            Ok(MooncakeXferMetadataOf {
                remote_hostname: n.remote_hostname.clone(),
                remote_port: n.remote_port.clone(),
                remote_tp_size: n.remote_tp_size.clone(),
                remote_tp_rank: n.remote_tp_rank.clone(),
                req_blocks: n.req_blocks.clone(),
                kv_caches_base_addr: n.kv_caches_base_addr.clone(),
                block_lens: n.block_lens.clone(),
                kv_block_lens: n.kv_block_lens.clone(),
                registered_layer_names: n.registered_layer_names.clone(),
                registered_layer_indices: n.registered_layer_indices.clone(),
                registered_group_indices: n.registered_group_indices.clone(),
                registered_shared_group_ids: n.registered_shared_group_ids.clone(),
                registered_row_offsets: n.registered_row_offsets.clone(),
                remote_pp_size: n.remote_pp_size.clone(),
                layout_id: n.layout_id.clone(),
            })
        }
        /// The newest revision's `MooncakeXferMetadata` holding this message's values; the fields this revision
        /// lacks at their defaults.
        pub fn to_newest(&self) -> newest::MooncakeXferMetadata {
            let mut m = newest::MooncakeXferMetadata::default();
            m.remote_hostname = self.remote_hostname.clone();
            m.remote_port = self.remote_port.clone();
            m.remote_tp_size = self.remote_tp_size.clone();
            m.remote_tp_rank = self.remote_tp_rank.clone();
            m.req_blocks = self.req_blocks.clone();
            m.kv_caches_base_addr = self.kv_caches_base_addr.clone();
            m.block_lens = self.block_lens.clone();
            m.kv_block_lens = self.kv_block_lens.clone();
            m.registered_layer_names = self.registered_layer_names.clone();
            m.registered_layer_indices = self.registered_layer_indices.clone();
            m.registered_group_indices = self.registered_group_indices.clone();
            m.registered_shared_group_ids = self.registered_shared_group_ids.clone();
            m.registered_row_offsets = self.registered_row_offsets.clone();
            m.remote_pp_size = self.remote_pp_size.clone();
            m.layout_id = self.layout_id.clone();
            m
        }
    }
    impl MooncakeXferResponse {
        /// This revision's `MooncakeXferResponse` holding what the newest revision's `n` holds. `Err` names what
        /// cannot be said here: a field this revision lacks that is off its default, an enum value it does not
        /// define, more than one block group where block lists are flat.
        pub fn from_newest(
            n: &newest::MooncakeXferResponse,
        ) -> Result<Self, ConvertError> {
            if !MOONCAKE_XFER_RESPONSE_STATUS_MEMBERS.contains(&n.status) {
                return Err(ConvertError::NotAMember {
                    enum_name: "MooncakeXferResponseStatus".into(),
                    value: n.status.to_string(),
                });
            }
            Ok(MooncakeXferResponseOf {
                status: n.status,
                ok_reqs: n.ok_reqs.clone(),
                err_reqs: n.err_reqs.clone(),
                err_msg: n.err_msg.clone(),
                layout_id: n.layout_id.clone(),
            })
        }
        /// The newest revision's `MooncakeXferResponse` holding this message's values; the fields this revision
        /// lacks at their defaults.
        pub fn to_newest(&self) -> newest::MooncakeXferResponse {
            let mut m = newest::MooncakeXferResponse::default();
            m.status = self.status;
            m.ok_reqs = self.ok_reqs.clone();
            m.err_reqs = self.err_reqs.clone();
            m.err_msg = self.err_msg.clone();
            m.layout_id = self.layout_id.clone();
            m
        }
    }
    /// `MooncakeXferMetadata` of this revision through the newest revision's struct (what the sans-IO cores
    /// hold): the generated decoder and encoder of this revision, with `to_newest` / `from_newest`.
    pub const MOONCAKE_XFER_METADATA_VIA_NEWEST: ViaNewest<
        newest::MooncakeXferMetadata,
    > = ViaNewest {
        revision: REVISION,
        decode: |b| MooncakeXferMetadata::decode(b).map(|m| m.to_newest()),
        encode: |n| {
            MooncakeXferMetadata::from_newest(n)
                .map(|m| m.encode())
                .map_err(|e| e.in_revision(REVISION))
        },
    };
    /// `MooncakeXferResponse` of this revision through the newest revision's struct (what the sans-IO cores
    /// hold): the generated decoder and encoder of this revision, with `to_newest` / `from_newest`.
    pub const MOONCAKE_XFER_RESPONSE_VIA_NEWEST: ViaNewest<
        newest::MooncakeXferResponse,
    > = ViaNewest {
        revision: REVISION,
        decode: |b| MooncakeXferResponse::decode(b).map(|m| m.to_newest()),
        encode: |n| {
            MooncakeXferResponse::from_newest(n)
                .map(|m| m.encode())
                .map_err(|e| e.in_revision(REVISION))
        },
    };
}
/// `vllm-0.34.0` through the newest revision's structs.
pub mod vllm_0_34_0 {
    use super::*;
    use super::super::push::vllm_0_34_0::*;
    impl MooncakeLeaseHeartbeat {
        /// This revision's `MooncakeLeaseHeartbeat` holding what the newest revision's `n` holds. `Err` names
        /// what cannot be said here: a field this revision lacks that is off its default, an enum value it does
        /// not define, more than one block group where block lists are flat.
        pub fn from_newest(
            n: &newest::MooncakeLeaseHeartbeat,
        ) -> Result<Self, ConvertError> {
            Ok(MooncakeLeaseHeartbeatOf {
                lease_transfer_ids: n.lease_transfer_ids.clone(),
            })
        }
        /// The newest revision's `MooncakeLeaseHeartbeat` holding this message's values; the fields this revision
        /// lacks at their defaults.
        pub fn to_newest(&self) -> newest::MooncakeLeaseHeartbeat {
            let mut m = newest::MooncakeLeaseHeartbeat::default();
            m.lease_transfer_ids = self.lease_transfer_ids.clone();
            m
        }
    }
    /// `MooncakeXferMetadata` of this revision through the newest revision's struct (what the sans-IO cores
    /// hold): the generated decoder and encoder of this revision, with `to_newest` / `from_newest`.
    pub const MOONCAKE_XFER_METADATA_VIA_NEWEST: ViaNewest<
        newest::MooncakeXferMetadata,
    > = ViaNewest {
        revision: REVISION,
        decode: |b| MooncakeXferMetadata::decode(b).map(|m| m.to_newest()),
        encode: |n| {
            MooncakeXferMetadata::from_newest(n)
                .map(|m| m.encode())
                .map_err(|e| e.in_revision(REVISION))
        },
    };
    /// `MooncakeLeaseHeartbeat` of this revision through the newest revision's struct (what the sans-IO cores
    /// hold): the generated decoder and encoder of this revision, with `to_newest` / `from_newest`.
    pub const MOONCAKE_LEASE_HEARTBEAT_VIA_NEWEST: ViaNewest<
        newest::MooncakeLeaseHeartbeat,
    > = ViaNewest {
        revision: REVISION,
        decode: |b| MooncakeLeaseHeartbeat::decode(b).map(|m| m.to_newest()),
        encode: |n| {
            MooncakeLeaseHeartbeat::from_newest(n)
                .map(|m| m.encode())
                .map_err(|e| e.in_revision(REVISION))
        },
    };
    /// `MooncakeXferResponse` of this revision through the newest revision's struct (what the sans-IO cores
    /// hold): the generated decoder and encoder of this revision, with `to_newest` / `from_newest`.
    pub const MOONCAKE_XFER_RESPONSE_VIA_NEWEST: ViaNewest<
        newest::MooncakeXferResponse,
    > = ViaNewest {
        revision: REVISION,
        decode: |b| MooncakeXferResponse::decode(b).map(|m| m.to_newest()),
        encode: |n| {
            MooncakeXferResponse::from_newest(n)
                .map(|m| m.encode())
                .map_err(|e| e.in_revision(REVISION))
        },
    };
}
/// `MooncakeXferMetadata` of `revision` through the newest revision's struct (`None`: no generated revision of that name has it).
pub fn mooncake_xfer_metadata_via_newest(
    revision: &str,
) -> Option<ViaNewest<newest::MooncakeXferMetadata>> {
    Some(
        match revision {
            "vllm-0.16.0..0.18.1" => {
                vllm_0_16_0_to_0_18_1::MOONCAKE_XFER_METADATA_VIA_NEWEST
            }
            "vllm-0.19.0..0.19.1" => {
                vllm_0_19_0_to_0_19_1::MOONCAKE_XFER_METADATA_VIA_NEWEST
            }
            "vllm-0.20.0..0.23.0" => {
                vllm_0_20_0_to_0_23_0::MOONCAKE_XFER_METADATA_VIA_NEWEST
            }
            "vllm-0.24.0" => vllm_0_24_0::MOONCAKE_XFER_METADATA_VIA_NEWEST,
            "vllm-0.25.0..0.25.1" => {
                vllm_0_25_0_to_0_25_1::MOONCAKE_XFER_METADATA_VIA_NEWEST
            }
            "vllm-0.26.0..0.28.0" => {
                vllm_0_26_0_to_0_28_0::MOONCAKE_XFER_METADATA_VIA_NEWEST
            }
            "vllm-0.29.0" => vllm_0_29_0::MOONCAKE_XFER_METADATA_VIA_NEWEST,
            "vllm-0.30.0" => vllm_0_30_0::MOONCAKE_XFER_METADATA_VIA_NEWEST,
            "vllm-0.31.0" => vllm_0_31_0::MOONCAKE_XFER_METADATA_VIA_NEWEST,
            "vllm-0.32.0" => vllm_0_32_0::MOONCAKE_XFER_METADATA_VIA_NEWEST,
            "vllm-0.33.0" => vllm_0_33_0::MOONCAKE_XFER_METADATA_VIA_NEWEST,
            "vllm-0.34.0" => vllm_0_34_0::MOONCAKE_XFER_METADATA_VIA_NEWEST,
            _ => return None,
        },
    )
}
/// `MooncakeLeaseHeartbeat` of `revision` through the newest revision's struct (`None`: no generated revision of that name has it).
pub fn mooncake_lease_heartbeat_via_newest(
    revision: &str,
) -> Option<ViaNewest<newest::MooncakeLeaseHeartbeat>> {
    Some(
        match revision {
            "vllm-0.34.0" => vllm_0_34_0::MOONCAKE_LEASE_HEARTBEAT_VIA_NEWEST,
            _ => return None,
        },
    )
}
/// `MooncakeXferResponse` of `revision` through the newest revision's struct (`None`: no generated revision of that name has it).
pub fn mooncake_xfer_response_via_newest(
    revision: &str,
) -> Option<ViaNewest<newest::MooncakeXferResponse>> {
    Some(
        match revision {
            "vllm-0.16.0..0.18.1" => {
                vllm_0_16_0_to_0_18_1::MOONCAKE_XFER_RESPONSE_VIA_NEWEST
            }
            "vllm-0.19.0..0.19.1" => {
                vllm_0_19_0_to_0_19_1::MOONCAKE_XFER_RESPONSE_VIA_NEWEST
            }
            "vllm-0.20.0..0.23.0" => {
                vllm_0_20_0_to_0_23_0::MOONCAKE_XFER_RESPONSE_VIA_NEWEST
            }
            "vllm-0.24.0" => vllm_0_24_0::MOONCAKE_XFER_RESPONSE_VIA_NEWEST,
            "vllm-0.25.0..0.25.1" => {
                vllm_0_25_0_to_0_25_1::MOONCAKE_XFER_RESPONSE_VIA_NEWEST
            }
            "vllm-0.26.0..0.28.0" => {
                vllm_0_26_0_to_0_28_0::MOONCAKE_XFER_RESPONSE_VIA_NEWEST
            }
            "vllm-0.29.0" => vllm_0_29_0::MOONCAKE_XFER_RESPONSE_VIA_NEWEST,
            "vllm-0.30.0" => vllm_0_30_0::MOONCAKE_XFER_RESPONSE_VIA_NEWEST,
            "vllm-0.31.0" => vllm_0_31_0::MOONCAKE_XFER_RESPONSE_VIA_NEWEST,
            "vllm-0.32.0" => vllm_0_32_0::MOONCAKE_XFER_RESPONSE_VIA_NEWEST,
            "vllm-0.33.0" => vllm_0_33_0::MOONCAKE_XFER_RESPONSE_VIA_NEWEST,
            "vllm-0.34.0" => vllm_0_34_0::MOONCAKE_XFER_RESPONSE_VIA_NEWEST,
            _ => return None,
        },
    )
}
