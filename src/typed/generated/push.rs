// @generated from spec/push/ by mooncake-wire (src/generate/typed_rs/). Do not edit: change spec/ and
// regenerate with `BLESS=1 cargo test --test generated`.
//! The push family's typed messages, one module per revision (generated from `spec/push/`).
#![allow(
    clippy::all,
    missing_docs,
    unused_variables,
    unused_mut,
    unused_imports,
    unused_parens
)]
use std::borrow::Cow;
use std::fmt;
use crate::codec::{py_bytes_repr, DecodeError};
use crate::msgpack::{WireInt, Writer};
use crate::typed::blocks::{encode_req_blocks, req_blocks_len};
use crate::typed::de::{
    first_bin_in_array, int_lists, str_list, str_list_buf_len, str_list_len,
    write_str_list, De, EnumMember, WireStr,
};
use crate::typed::{
    FlatReqBlocksOf, GeneratedRevision, ReqBlocksOf, StrList, Strictness, Untyped,
};
/// Status of one prefiller reply. Terminal members end the reply stream of one request message. An open newtype:
/// named constants for every member any revision defines (the terminal flags are the spec's), and any other value
/// representable, so a report can show what a peer sent. Each revision's members:
/// `MOONCAKE_XFER_RESPONSE_STATUS_MEMBERS` in its module.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MooncakeXferResponseStatus(pub i64);
impl MooncakeXferResponseStatus {
    /// Last reply for the message; per-request outcome in ok_reqs/err_reqs (since vllm-0.16.0..0.18.1; terminal).
    pub const FINISH: MooncakeXferResponseStatus = MooncakeXferResponseStatus(0);
    /// More replies follow on the same DEALER (since vllm-0.16.0..0.18.1; not terminal).
    pub const CONTINUE: MooncakeXferResponseStatus = MooncakeXferResponseStatus(1);
    /// The whole message failed; err_msg says why; no id lists (since vllm-0.16.0..0.18.1; terminal).
    pub const ERROR: MooncakeXferResponseStatus = MooncakeXferResponseStatus(2);
    /// The prefiller does not hold the layout for this layout_id; resend with the layout (since vllm-0.33.0;
    /// terminal).
    pub const LAYOUT_MISS: MooncakeXferResponseStatus = MooncakeXferResponseStatus(3);
    /// Every member any revision defines, with its name, in value order of declaration.
    pub const ALL: [(MooncakeXferResponseStatus, &'static str); 4] = [
        (MooncakeXferResponseStatus::FINISH, "FINISH"),
        (MooncakeXferResponseStatus::CONTINUE, "CONTINUE"),
        (MooncakeXferResponseStatus::ERROR, "ERROR"),
        (MooncakeXferResponseStatus::LAYOUT_MISS, "LAYOUT_MISS"),
    ];
    /// The member's name, if some revision defines this value.
    pub fn name(self) -> Option<&'static str> {
        Self::ALL.iter().find(|(s, _)| *s == self).map(|(_, n)| *n)
    }
    /// Whether some revision defines this value.
    pub fn is_known(self) -> bool {
        self.name().is_some()
    }
    /// Whether this value ends a reply stream (every value the spec does not mark non-terminal does).
    pub fn is_terminal(self) -> bool {
        !matches!(self, MooncakeXferResponseStatus::CONTINUE)
    }
}
impl fmt::Debug for MooncakeXferResponseStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "MooncakeXferResponseStatus({})", self.0),
        }
    }
}
impl fmt::Display for MooncakeXferResponseStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}
impl EnumMember for MooncakeXferResponseStatus {
    fn from_wire(v: i64) -> Self {
        MooncakeXferResponseStatus(v)
    }
}
/// `vllm-0.13.0..0.15.1` (0.13.0, 0.14.0, 0.14.1, 0.15.0, 0.15.1): REQ → ROUTER at fixed ports,
/// MooncakeAgentMetadata request, raw trans_done / trans_error reply; no bootstrap server.
pub mod vllm_0_13_0_to_0_15_1 {
    use super::*;
    /// The spec revision of this module.
    pub const REVISION: &str = "vllm-0.13.0..0.15.1";
    /// Generation (`spec/PROTOCOL.md#gen1`).
    pub const GENERATION: u32 = 1;
    /// Raw reply `trans_done` (not MessagePack).
    pub const TRANS_DONE: &[u8] = b"trans_done";
    /// Raw reply `trans_error` (not MessagePack).
    pub const TRANS_ERROR: &[u8] = b"trans_error";
    /// Pull request, decoder → prefiller (`vllm-0.13.0..0.15.1` `\[structs.MooncakeAgentMetadata\]`, vLLM 0.13.0
    /// wheel, vllm/distributed/kv_transfer/kv_connector/v1/mooncake_connector.py). Strings held as `S`: see
    /// \[`MooncakeAgentMetadata`\] and \[`MooncakeAgentMetadataRef`\].
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct MooncakeAgentMetadataOf<S> {
        /// Decoder worker IP. Required.
        pub remote_hostname: S,
        /// Decoder's TransferEngine RPC port. Required.
        pub remote_port: WireInt,
        /// Requests to pull. Required.
        pub request_ids: Vec<S>,
        /// Base address of each registered decoder KV region. Required.
        pub kv_caches_base_addr: Vec<WireInt>,
        /// Destination block ids, parallel to request_ids. Required.
        pub block_ids: Vec<Vec<WireInt>>,
    }
    /// MooncakeAgentMetadata with owned strings.
    pub type MooncakeAgentMetadata = MooncakeAgentMetadataOf<String>;
    /// MooncakeAgentMetadata with strings borrowed from the decoded bytes (no allocation per string).
    pub type MooncakeAgentMetadataRef<'a> = MooncakeAgentMetadataOf<&'a str>;
    impl<S> MooncakeAgentMetadataOf<S> {
        /// Wire names in declaration order.
        pub const FIELDS: [&'static str; 5] = [
            "remote_hostname",
            "remote_port",
            "request_ids",
            "kv_caches_base_addr",
            "block_ids",
        ];
        /// Bit `i` set: field `i` has no default and must be on the wire.
        pub const REQUIRED: u64 = 0b11111;
    }
    impl<S: Default> Default for MooncakeAgentMetadataOf<S> {
        /// Every defaulted field at its default; required ones empty, 0, or 1 for a size.
        fn default() -> Self {
            MooncakeAgentMetadataOf {
                remote_hostname: S::default(),
                remote_port: WireInt::from_u64(0),
                request_ids: Vec::new(),
                kv_caches_base_addr: Vec::new(),
                block_ids: Vec::new(),
            }
        }
    }
    impl<S: Default> MooncakeAgentMetadataOf<S> {
        /// The message with these required fields and every other at its default.
        pub fn new(
            remote_hostname: S,
            remote_port: WireInt,
            request_ids: Vec<S>,
            kv_caches_base_addr: Vec<WireInt>,
            block_ids: Vec<Vec<WireInt>>,
        ) -> Self {
            MooncakeAgentMetadataOf {
                remote_hostname,
                remote_port,
                request_ids,
                kv_caches_base_addr,
                block_ids,
                ..Self::default()
            }
        }
    }
    impl<'a, S: WireStr<'a> + Default> MooncakeAgentMetadataOf<S> {
        /// Decodes as msgspec does with vllm-0.13.0..0.15.1's class.
        pub fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {
            Self::decode_with(bytes, Strictness::Msgspec)
        }
        /// Decodes; with [`Strictness::OpenStatus`] an enum value the revision lacks is kept instead of rejected.
        pub fn decode_with(
            bytes: &'a [u8],
            strictness: Strictness,
        ) -> Result<Self, DecodeError> {
            let mut d = De::new(bytes)?;
            let v = Self::decode_in(&mut d, strictness)?;
            d.finish()?;
            Ok(v)
        }
        /// Decodes one value at the reader's position (inside a frame).
        pub(crate) fn decode_in(
            d: &mut De<'a>,
            strictness: Strictness,
        ) -> Result<Self, DecodeError> {
            let mut v = Self::default();
            let mut seen = 0u64;
            d.struct_map(
                &Self::FIELDS,
                |d, i| {
                    seen |= 1 << i;
                    match i {
                        0 => v.remote_hostname = d.str()?,
                        1 => v.remote_port = d.int()?,
                        2 => v.request_ids = d.list_str()?,
                        3 => v.kv_caches_base_addr = d.list_int()?,
                        _ => v.block_ids = d.list_list_int()?,
                    }
                    Ok(())
                },
            )?;
            let missing = Self::REQUIRED & !seen;
            if missing != 0 {
                return Err(d.missing(Self::FIELDS[missing.trailing_zeros() as usize]));
            }
            Ok(v)
        }
    }
    impl MooncakeAgentMetadataRef<'_> {
        /// The same message with owned strings.
        pub fn to_owned_message(&self) -> MooncakeAgentMetadata {
            MooncakeAgentMetadataOf {
                remote_hostname: self.remote_hostname.to_string(),
                remote_port: self.remote_port,
                request_ids: self.request_ids.iter().map(|x0| x0.to_string()).collect(),
                kv_caches_base_addr: self.kv_caches_base_addr.clone(),
                block_ids: self.block_ids.clone(),
            }
        }
    }
    impl<S: AsRef<str>> MooncakeAgentMetadataOf<S> {
        /// Encodes as msgspec does (declaration order, defaults omitted).
        pub fn encode(&self) -> Vec<u8> {
            let mut w = Writer::with_capacity(self.encoded_len_hint());
            self.encode_into(&mut w);
            w.into_bytes()
        }
        pub(crate) fn encoded_len_hint(&self) -> usize {
            5 + 16 + (self.remote_hostname.as_ref().len() + 5) + 12 + 9 + 12
                + str_list_len(&self.request_ids) + 20
                + (5 + 9 * self.kv_caches_base_addr.len()) + 10
                + (5 + self.block_ids.iter().map(|x0| (5 + 9 * x0.len())).sum::<usize>())
        }
        /// Appends the encoding to `w`.
        pub fn encode_into(&self, w: &mut Writer) {
            let h = w.begin_struct_map(Self::FIELDS.len());
            let mut n = 0;
            w.str("remote_hostname");
            w.str(self.remote_hostname.as_ref());
            n += 1;
            w.str("remote_port");
            w.int(self.remote_port);
            n += 1;
            w.str("request_ids");
            str_list(w, &self.request_ids);
            n += 1;
            w.str("kv_caches_base_addr");
            w.int_list(&self.kv_caches_base_addr);
            n += 1;
            w.str("block_ids");
            int_lists(w, &self.block_ids);
            n += 1;
            w.finish_struct_map(h, n);
        }
    }
    /// Decodes `bytes` as `message` and encodes the result again (`None`: no such message here).
    pub fn round_trip(
        message: &str,
        bytes: &[u8],
        strictness: Strictness,
    ) -> Option<Result<Vec<u8>, DecodeError>> {
        Some(
            match message {
                "MooncakeAgentMetadata" => {
                    MooncakeAgentMetadataRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                _ => return None,
            },
        )
    }
    /// Decodes `bytes` as `message` (owned or borrowed strings) and drops the result: for benchmarks.
    pub fn decode_and_drop(
        message: &str,
        bytes: &[u8],
        borrowed: bool,
    ) -> Option<Result<(), DecodeError>> {
        Some(
            match (message, borrowed) {
                ("MooncakeAgentMetadata", false) => {
                    MooncakeAgentMetadata::decode(bytes).map(drop)
                }
                ("MooncakeAgentMetadata", true) => {
                    MooncakeAgentMetadataRef::decode(bytes).map(drop)
                }
                _ => return None,
            },
        )
    }
    /// The field list of `message`, in declaration order.
    pub fn fields(message: &str) -> Option<&'static [&'static str]> {
        Some(
            match message {
                "MooncakeAgentMetadata" => &MooncakeAgentMetadata::FIELDS,
                _ => return None,
            },
        )
    }
    /// The required mask of `message` (bit `i` set: field `i` must be on the wire).
    pub fn required(message: &str) -> Option<u64> {
        Some(
            match message {
                "MooncakeAgentMetadata" => MooncakeAgentMetadata::REQUIRED,
                _ => return None,
            },
        )
    }
}
/// `vllm-0.16.0..0.18.1` (0.16.0, 0.17.0, 0.17.1, 0.18.0, 0.18.1): Bootstrap server and DEALER→ROUTER side
/// channel; MooncakeXferMetadata with 6 fields and flat block lists; MooncakeXferResponse with
/// FINISH/CONTINUE/ERROR.
pub mod vllm_0_16_0_to_0_18_1 {
    use super::*;
    /// The spec revision of this module.
    pub const REVISION: &str = "vllm-0.16.0..0.18.1";
    /// Generation (`spec/PROTOCOL.md#gen2`).
    pub const GENERATION: u32 = 2;
    /// The members of `MooncakeXferResponseStatus` this revision defines (a decoder rejects any other value).
    pub const MOONCAKE_XFER_RESPONSE_STATUS_MEMBERS: [MooncakeXferResponseStatus; 3] = [
        MooncakeXferResponseStatus::FINISH,
        MooncakeXferResponseStatus::CONTINUE,
        MooncakeXferResponseStatus::ERROR,
    ];
    /// Pull request, decoder → prefiller: where to write the blocks of each request (`vllm-0.16.0..0.18.1`
    /// `\[structs.MooncakeXferMetadata\]`, vLLM 0.16.0 wheel,
    /// vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py). Strings held as `S`: see
    /// \[`MooncakeXferMetadata`\] and \[`MooncakeXferMetadataRef`\].
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct MooncakeXferMetadataOf<S> {
        /// Decoder worker IP (get_ip()). Required.
        pub remote_hostname: S,
        /// Decoder's TransferEngine RPC port (not a ZMQ port). Required.
        pub remote_port: WireInt,
        /// Decoder TP world size. Required.
        pub remote_tp_size: WireInt,
        /// Decoder TP rank. Required.
        pub remote_tp_rank: WireInt,
        /// Decoder request id → (transfer id, destination block ids). Required.
        pub req_blocks: Vec<(S, FlatReqBlocksOf<S>)>,
        /// Base address of each registered decoder KV region. Required.
        pub kv_caches_base_addr: Vec<WireInt>,
    }
    /// MooncakeXferMetadata with owned strings.
    pub type MooncakeXferMetadata = MooncakeXferMetadataOf<String>;
    /// MooncakeXferMetadata with strings borrowed from the decoded bytes (no allocation per string).
    pub type MooncakeXferMetadataRef<'a> = MooncakeXferMetadataOf<&'a str>;
    impl<S> MooncakeXferMetadataOf<S> {
        /// Wire names in declaration order.
        pub const FIELDS: [&'static str; 6] = [
            "remote_hostname",
            "remote_port",
            "remote_tp_size",
            "remote_tp_rank",
            "req_blocks",
            "kv_caches_base_addr",
        ];
        /// Bit `i` set: field `i` has no default and must be on the wire.
        pub const REQUIRED: u64 = 0b111111;
    }
    impl<S: Default> Default for MooncakeXferMetadataOf<S> {
        /// Every defaulted field at its default; required ones empty, 0, or 1 for a size.
        fn default() -> Self {
            MooncakeXferMetadataOf {
                remote_hostname: S::default(),
                remote_port: WireInt::from_u64(0),
                remote_tp_size: WireInt::from_u64(1),
                remote_tp_rank: WireInt::from_u64(0),
                req_blocks: Vec::new(),
                kv_caches_base_addr: Vec::new(),
            }
        }
    }
    impl<S: Default> MooncakeXferMetadataOf<S> {
        /// The message with these required fields and every other at its default.
        pub fn new(
            remote_hostname: S,
            remote_port: WireInt,
            remote_tp_size: WireInt,
            remote_tp_rank: WireInt,
            req_blocks: Vec<(S, FlatReqBlocksOf<S>)>,
            kv_caches_base_addr: Vec<WireInt>,
        ) -> Self {
            MooncakeXferMetadataOf {
                remote_hostname,
                remote_port,
                remote_tp_size,
                remote_tp_rank,
                req_blocks,
                kv_caches_base_addr,
                ..Self::default()
            }
        }
    }
    impl<'a, S: WireStr<'a> + Default> MooncakeXferMetadataOf<S> {
        /// Decodes as msgspec does with vllm-0.16.0..0.18.1's class.
        pub fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {
            Self::decode_with(bytes, Strictness::Msgspec)
        }
        /// Decodes; with [`Strictness::OpenStatus`] an enum value the revision lacks is kept instead of rejected.
        pub fn decode_with(
            bytes: &'a [u8],
            strictness: Strictness,
        ) -> Result<Self, DecodeError> {
            let mut d = De::new(bytes)?;
            let v = Self::decode_in(&mut d, strictness)?;
            d.finish()?;
            Ok(v)
        }
        /// Decodes one value at the reader's position (inside a frame).
        pub(crate) fn decode_in(
            d: &mut De<'a>,
            strictness: Strictness,
        ) -> Result<Self, DecodeError> {
            let mut v = Self::default();
            let mut seen = 0u64;
            d.struct_map(
                &Self::FIELDS,
                |d, i| {
                    seen |= 1 << i;
                    match i {
                        0 => v.remote_hostname = d.str()?,
                        1 => v.remote_port = d.int()?,
                        2 => v.remote_tp_size = d.int()?,
                        3 => v.remote_tp_rank = d.int()?,
                        4 => v.req_blocks = d.str_dict(De::flat_blocks_value)?,
                        _ => v.kv_caches_base_addr = d.list_int()?,
                    }
                    Ok(())
                },
            )?;
            let missing = Self::REQUIRED & !seen;
            if missing != 0 {
                return Err(d.missing(Self::FIELDS[missing.trailing_zeros() as usize]));
            }
            Ok(v)
        }
    }
    impl MooncakeXferMetadataRef<'_> {
        /// The same message with owned strings.
        pub fn to_owned_message(&self) -> MooncakeXferMetadata {
            MooncakeXferMetadataOf {
                remote_hostname: self.remote_hostname.to_string(),
                remote_port: self.remote_port,
                remote_tp_size: self.remote_tp_size,
                remote_tp_rank: self.remote_tp_rank,
                req_blocks: self
                    .req_blocks
                    .iter()
                    .map(|(k, b)| (k.to_string(), b.to_owned_blocks()))
                    .collect(),
                kv_caches_base_addr: self.kv_caches_base_addr.clone(),
            }
        }
    }
    impl<S: AsRef<str>> MooncakeXferMetadataOf<S> {
        /// Encodes as msgspec does (declaration order, defaults omitted).
        pub fn encode(&self) -> Vec<u8> {
            let mut w = Writer::with_capacity(self.encoded_len_hint());
            self.encode_into(&mut w);
            w.into_bytes()
        }
        pub(crate) fn encoded_len_hint(&self) -> usize {
            5 + 16 + (self.remote_hostname.as_ref().len() + 5) + 12 + 9 + 15 + 9 + 15 + 9
                + 11 + req_blocks_len(&self.req_blocks) + 20
                + (5 + 9 * self.kv_caches_base_addr.len())
        }
        /// Appends the encoding to `w`.
        pub fn encode_into(&self, w: &mut Writer) {
            let h = w.begin_struct_map(Self::FIELDS.len());
            let mut n = 0;
            w.str("remote_hostname");
            w.str(self.remote_hostname.as_ref());
            n += 1;
            w.str("remote_port");
            w.int(self.remote_port);
            n += 1;
            w.str("remote_tp_size");
            w.int(self.remote_tp_size);
            n += 1;
            w.str("remote_tp_rank");
            w.int(self.remote_tp_rank);
            n += 1;
            w.str("req_blocks");
            encode_req_blocks(w, &self.req_blocks);
            n += 1;
            w.str("kv_caches_base_addr");
            w.int_list(&self.kv_caches_base_addr);
            n += 1;
            w.finish_struct_map(h, n);
        }
    }
    /// Prefiller reply, prefiller → decoder. One or more per request message: CONTINUE* then one terminal
    /// status (`vllm-0.16.0..0.18.1` `\[structs.MooncakeXferResponse\]`, vLLM 0.16.0 wheel,
    /// vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py). Strings held as `S`: see
    /// \[`MooncakeXferResponse`\] and \[`MooncakeXferResponseRef`\].
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct MooncakeXferResponseOf<S> {
        /// See the status enum. Required.
        pub status: MooncakeXferResponseStatus,
        /// Decoder request ids written (or with nothing to write) in this round. Default `None`.
        pub ok_reqs: Option<StrList>,
        /// Decoder request ids that failed in this round. Default `None`.
        pub err_reqs: Option<StrList>,
        /// Free-text reason. Default `None`.
        pub err_msg: Option<S>,
    }
    /// MooncakeXferResponse with owned strings.
    pub type MooncakeXferResponse = MooncakeXferResponseOf<String>;
    /// MooncakeXferResponse with strings borrowed from the decoded bytes (no allocation per string).
    pub type MooncakeXferResponseRef<'a> = MooncakeXferResponseOf<&'a str>;
    impl<S> MooncakeXferResponseOf<S> {
        /// Wire names in declaration order.
        pub const FIELDS: [&'static str; 4] = [
            "status",
            "ok_reqs",
            "err_reqs",
            "err_msg",
        ];
        /// Bit `i` set: field `i` has no default and must be on the wire.
        pub const REQUIRED: u64 = 0b1;
    }
    impl<S: Default> Default for MooncakeXferResponseOf<S> {
        /// Every defaulted field at its default; required ones empty, 0, or 1 for a size.
        fn default() -> Self {
            MooncakeXferResponseOf {
                status: MooncakeXferResponseStatus::FINISH,
                ok_reqs: None,
                err_reqs: None,
                err_msg: None,
            }
        }
    }
    impl<S: Default> MooncakeXferResponseOf<S> {
        /// The message with these required fields and every other at its default.
        pub fn new(status: MooncakeXferResponseStatus) -> Self {
            MooncakeXferResponseOf {
                status,
                ..Self::default()
            }
        }
    }
    impl<'a, S: WireStr<'a> + Default> MooncakeXferResponseOf<S> {
        /// Decodes as msgspec does with vllm-0.16.0..0.18.1's class.
        pub fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {
            Self::decode_with(bytes, Strictness::Msgspec)
        }
        /// Decodes; with [`Strictness::OpenStatus`] an enum value the revision lacks is kept instead of rejected.
        pub fn decode_with(
            bytes: &'a [u8],
            strictness: Strictness,
        ) -> Result<Self, DecodeError> {
            let mut d = De::new(bytes)?;
            let v = Self::decode_in(&mut d, strictness)?;
            d.finish()?;
            Ok(v)
        }
        /// Decodes one value at the reader's position (inside a frame).
        pub(crate) fn decode_in(
            d: &mut De<'a>,
            strictness: Strictness,
        ) -> Result<Self, DecodeError> {
            let mut v = Self::default();
            let mut seen = 0u64;
            d.struct_map(
                &Self::FIELDS,
                |d, i| {
                    seen |= 1 << i;
                    match i {
                        0 => {
                            v.status = d
                                .enum_member(
                                    &MOONCAKE_XFER_RESPONSE_STATUS_MEMBERS,
                                    strictness,
                                )?;
                        }
                        1 => v.ok_reqs = d.opt_str_list()?,
                        2 => v.err_reqs = d.opt_str_list()?,
                        _ => v.err_msg = d.opt_str()?,
                    }
                    Ok(())
                },
            )?;
            let missing = Self::REQUIRED & !seen;
            if missing != 0 {
                return Err(d.missing(Self::FIELDS[missing.trailing_zeros() as usize]));
            }
            Ok(v)
        }
    }
    impl MooncakeXferResponseRef<'_> {
        /// The same message with owned strings.
        pub fn to_owned_message(&self) -> MooncakeXferResponse {
            MooncakeXferResponseOf {
                status: self.status,
                ok_reqs: self.ok_reqs.clone(),
                err_reqs: self.err_reqs.clone(),
                err_msg: self.err_msg.map(str::to_string),
            }
        }
    }
    impl<S: AsRef<str>> MooncakeXferResponseOf<S> {
        /// Encodes as msgspec does (declaration order, defaults omitted).
        pub fn encode(&self) -> Vec<u8> {
            let mut w = Writer::with_capacity(self.encoded_len_hint());
            self.encode_into(&mut w);
            w.into_bytes()
        }
        pub(crate) fn encoded_len_hint(&self) -> usize {
            5 + 7 + 9 + 8 + self.ok_reqs.as_ref().map_or(1, str_list_buf_len) + 9
                + self.err_reqs.as_ref().map_or(1, str_list_buf_len) + 8
                + self.err_msg.as_ref().map_or(1, |s| s.as_ref().len() + 5)
        }
        /// Appends the encoding to `w`.
        pub fn encode_into(&self, w: &mut Writer) {
            let h = w.begin_struct_map(Self::FIELDS.len());
            let mut n = 0;
            w.str("status");
            w.sint(self.status.0);
            n += 1;
            if !(self.ok_reqs.is_none()) {
                w.str("ok_reqs");
                if let Some(l) = &self.ok_reqs { write_str_list(w, l) } else { w.nil() }
                n += 1;
            }
            if !(self.err_reqs.is_none()) {
                w.str("err_reqs");
                if let Some(l) = &self.err_reqs { write_str_list(w, l) } else { w.nil() }
                n += 1;
            }
            if !(self.err_msg.is_none()) {
                w.str("err_msg");
                if let Some(s) = &self.err_msg { w.str(s.as_ref()) } else { w.nil() }
                n += 1;
            }
            w.finish_struct_map(h, n);
        }
    }
    /// Decodes `bytes` as `message` and encodes the result again (`None`: no such message here).
    pub fn round_trip(
        message: &str,
        bytes: &[u8],
        strictness: Strictness,
    ) -> Option<Result<Vec<u8>, DecodeError>> {
        Some(
            match message {
                "MooncakeXferMetadata" => {
                    MooncakeXferMetadataRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                "MooncakeXferResponse" => {
                    MooncakeXferResponseRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                _ => return None,
            },
        )
    }
    /// Decodes `bytes` as `message` (owned or borrowed strings) and drops the result: for benchmarks.
    pub fn decode_and_drop(
        message: &str,
        bytes: &[u8],
        borrowed: bool,
    ) -> Option<Result<(), DecodeError>> {
        Some(
            match (message, borrowed) {
                ("MooncakeXferMetadata", false) => {
                    MooncakeXferMetadata::decode(bytes).map(drop)
                }
                ("MooncakeXferMetadata", true) => {
                    MooncakeXferMetadataRef::decode(bytes).map(drop)
                }
                ("MooncakeXferResponse", false) => {
                    MooncakeXferResponse::decode(bytes).map(drop)
                }
                ("MooncakeXferResponse", true) => {
                    MooncakeXferResponseRef::decode(bytes).map(drop)
                }
                _ => return None,
            },
        )
    }
    /// The field list of `message`, in declaration order.
    pub fn fields(message: &str) -> Option<&'static [&'static str]> {
        Some(
            match message {
                "MooncakeXferMetadata" => &MooncakeXferMetadata::FIELDS,
                "MooncakeXferResponse" => &MooncakeXferResponse::FIELDS,
                _ => return None,
            },
        )
    }
    /// The required mask of `message` (bit `i` set: field `i` must be on the wire).
    pub fn required(message: &str) -> Option<u64> {
        Some(
            match message {
                "MooncakeXferMetadata" => MooncakeXferMetadata::REQUIRED,
                "MooncakeXferResponse" => MooncakeXferResponse::REQUIRED,
                _ => return None,
            },
        )
    }
}
/// `vllm-0.19.0..0.19.1` (0.19.0, 0.19.1): + required block_lens (7 fields); one reply per round, empty
/// ok_reqs/err_reqs omitted; heterogeneous TP; HND KV layout.
pub mod vllm_0_19_0_to_0_19_1 {
    use super::*;
    /// The spec revision of this module.
    pub const REVISION: &str = "vllm-0.19.0..0.19.1";
    /// Generation (`spec/PROTOCOL.md#gen2`).
    pub const GENERATION: u32 = 2;
    /// The members of `MooncakeXferResponseStatus` this revision defines (a decoder rejects any other value).
    pub const MOONCAKE_XFER_RESPONSE_STATUS_MEMBERS: [MooncakeXferResponseStatus; 3] = [
        MooncakeXferResponseStatus::FINISH,
        MooncakeXferResponseStatus::CONTINUE,
        MooncakeXferResponseStatus::ERROR,
    ];
    /// Pull request, decoder → prefiller: where to write the blocks of each request (`vllm-0.19.0..0.19.1`
    /// `\[structs.MooncakeXferMetadata\]`, vLLM 0.16.0 wheel,
    /// vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py). Strings held as `S`: see
    /// \[`MooncakeXferMetadata`\] and \[`MooncakeXferMetadataRef`\].
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct MooncakeXferMetadataOf<S> {
        /// Decoder worker IP (get_ip()). Required.
        pub remote_hostname: S,
        /// Decoder's TransferEngine RPC port (not a ZMQ port). Required.
        pub remote_port: WireInt,
        /// Decoder TP world size. Required.
        pub remote_tp_size: WireInt,
        /// Decoder TP rank. Required.
        pub remote_tp_rank: WireInt,
        /// Decoder request id → (transfer id, destination block ids). Required.
        pub req_blocks: Vec<(S, FlatReqBlocksOf<S>)>,
        /// Base address of each registered decoder KV region. Required.
        pub kv_caches_base_addr: Vec<WireInt>,
        /// Byte stride between consecutive blocks of each region. Required.
        pub block_lens: Vec<WireInt>,
    }
    /// MooncakeXferMetadata with owned strings.
    pub type MooncakeXferMetadata = MooncakeXferMetadataOf<String>;
    /// MooncakeXferMetadata with strings borrowed from the decoded bytes (no allocation per string).
    pub type MooncakeXferMetadataRef<'a> = MooncakeXferMetadataOf<&'a str>;
    impl<S> MooncakeXferMetadataOf<S> {
        /// Wire names in declaration order.
        pub const FIELDS: [&'static str; 7] = [
            "remote_hostname",
            "remote_port",
            "remote_tp_size",
            "remote_tp_rank",
            "req_blocks",
            "kv_caches_base_addr",
            "block_lens",
        ];
        /// Bit `i` set: field `i` has no default and must be on the wire.
        pub const REQUIRED: u64 = 0b1111111;
    }
    impl<S: Default> Default for MooncakeXferMetadataOf<S> {
        /// Every defaulted field at its default; required ones empty, 0, or 1 for a size.
        fn default() -> Self {
            MooncakeXferMetadataOf {
                remote_hostname: S::default(),
                remote_port: WireInt::from_u64(0),
                remote_tp_size: WireInt::from_u64(1),
                remote_tp_rank: WireInt::from_u64(0),
                req_blocks: Vec::new(),
                kv_caches_base_addr: Vec::new(),
                block_lens: Vec::new(),
            }
        }
    }
    impl<S: Default> MooncakeXferMetadataOf<S> {
        /// The message with these required fields and every other at its default.
        pub fn new(
            remote_hostname: S,
            remote_port: WireInt,
            remote_tp_size: WireInt,
            remote_tp_rank: WireInt,
            req_blocks: Vec<(S, FlatReqBlocksOf<S>)>,
            kv_caches_base_addr: Vec<WireInt>,
            block_lens: Vec<WireInt>,
        ) -> Self {
            MooncakeXferMetadataOf {
                remote_hostname,
                remote_port,
                remote_tp_size,
                remote_tp_rank,
                req_blocks,
                kv_caches_base_addr,
                block_lens,
                ..Self::default()
            }
        }
    }
    impl<'a, S: WireStr<'a> + Default> MooncakeXferMetadataOf<S> {
        /// Decodes as msgspec does with vllm-0.19.0..0.19.1's class.
        pub fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {
            Self::decode_with(bytes, Strictness::Msgspec)
        }
        /// Decodes; with [`Strictness::OpenStatus`] an enum value the revision lacks is kept instead of rejected.
        pub fn decode_with(
            bytes: &'a [u8],
            strictness: Strictness,
        ) -> Result<Self, DecodeError> {
            let mut d = De::new(bytes)?;
            let v = Self::decode_in(&mut d, strictness)?;
            d.finish()?;
            Ok(v)
        }
        /// Decodes one value at the reader's position (inside a frame).
        pub(crate) fn decode_in(
            d: &mut De<'a>,
            strictness: Strictness,
        ) -> Result<Self, DecodeError> {
            let mut v = Self::default();
            let mut seen = 0u64;
            d.struct_map(
                &Self::FIELDS,
                |d, i| {
                    seen |= 1 << i;
                    match i {
                        0 => v.remote_hostname = d.str()?,
                        1 => v.remote_port = d.int()?,
                        2 => v.remote_tp_size = d.int()?,
                        3 => v.remote_tp_rank = d.int()?,
                        4 => v.req_blocks = d.str_dict(De::flat_blocks_value)?,
                        5 => v.kv_caches_base_addr = d.list_int()?,
                        _ => v.block_lens = d.list_int()?,
                    }
                    Ok(())
                },
            )?;
            let missing = Self::REQUIRED & !seen;
            if missing != 0 {
                return Err(d.missing(Self::FIELDS[missing.trailing_zeros() as usize]));
            }
            Ok(v)
        }
    }
    impl MooncakeXferMetadataRef<'_> {
        /// The same message with owned strings.
        pub fn to_owned_message(&self) -> MooncakeXferMetadata {
            MooncakeXferMetadataOf {
                remote_hostname: self.remote_hostname.to_string(),
                remote_port: self.remote_port,
                remote_tp_size: self.remote_tp_size,
                remote_tp_rank: self.remote_tp_rank,
                req_blocks: self
                    .req_blocks
                    .iter()
                    .map(|(k, b)| (k.to_string(), b.to_owned_blocks()))
                    .collect(),
                kv_caches_base_addr: self.kv_caches_base_addr.clone(),
                block_lens: self.block_lens.clone(),
            }
        }
    }
    impl<S: AsRef<str>> MooncakeXferMetadataOf<S> {
        /// Encodes as msgspec does (declaration order, defaults omitted).
        pub fn encode(&self) -> Vec<u8> {
            let mut w = Writer::with_capacity(self.encoded_len_hint());
            self.encode_into(&mut w);
            w.into_bytes()
        }
        pub(crate) fn encoded_len_hint(&self) -> usize {
            5 + 16 + (self.remote_hostname.as_ref().len() + 5) + 12 + 9 + 15 + 9 + 15 + 9
                + 11 + req_blocks_len(&self.req_blocks) + 20
                + (5 + 9 * self.kv_caches_base_addr.len()) + 11
                + (5 + 9 * self.block_lens.len())
        }
        /// Appends the encoding to `w`.
        pub fn encode_into(&self, w: &mut Writer) {
            let h = w.begin_struct_map(Self::FIELDS.len());
            let mut n = 0;
            w.str("remote_hostname");
            w.str(self.remote_hostname.as_ref());
            n += 1;
            w.str("remote_port");
            w.int(self.remote_port);
            n += 1;
            w.str("remote_tp_size");
            w.int(self.remote_tp_size);
            n += 1;
            w.str("remote_tp_rank");
            w.int(self.remote_tp_rank);
            n += 1;
            w.str("req_blocks");
            encode_req_blocks(w, &self.req_blocks);
            n += 1;
            w.str("kv_caches_base_addr");
            w.int_list(&self.kv_caches_base_addr);
            n += 1;
            w.str("block_lens");
            w.int_list(&self.block_lens);
            n += 1;
            w.finish_struct_map(h, n);
        }
    }
    /// Unchanged since `vllm-0.16.0..0.18.1`.
    pub use super::vllm_0_16_0_to_0_18_1::{
        MooncakeXferResponse, MooncakeXferResponseOf, MooncakeXferResponseRef,
    };
    /// Decodes `bytes` as `message` and encodes the result again (`None`: no such message here).
    pub fn round_trip(
        message: &str,
        bytes: &[u8],
        strictness: Strictness,
    ) -> Option<Result<Vec<u8>, DecodeError>> {
        Some(
            match message {
                "MooncakeXferMetadata" => {
                    MooncakeXferMetadataRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                "MooncakeXferResponse" => {
                    MooncakeXferResponseRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                _ => return None,
            },
        )
    }
    /// Decodes `bytes` as `message` (owned or borrowed strings) and drops the result: for benchmarks.
    pub fn decode_and_drop(
        message: &str,
        bytes: &[u8],
        borrowed: bool,
    ) -> Option<Result<(), DecodeError>> {
        Some(
            match (message, borrowed) {
                ("MooncakeXferMetadata", false) => {
                    MooncakeXferMetadata::decode(bytes).map(drop)
                }
                ("MooncakeXferMetadata", true) => {
                    MooncakeXferMetadataRef::decode(bytes).map(drop)
                }
                ("MooncakeXferResponse", false) => {
                    MooncakeXferResponse::decode(bytes).map(drop)
                }
                ("MooncakeXferResponse", true) => {
                    MooncakeXferResponseRef::decode(bytes).map(drop)
                }
                _ => return None,
            },
        )
    }
    /// The field list of `message`, in declaration order.
    pub fn fields(message: &str) -> Option<&'static [&'static str]> {
        Some(
            match message {
                "MooncakeXferMetadata" => &MooncakeXferMetadata::FIELDS,
                "MooncakeXferResponse" => &MooncakeXferResponse::FIELDS,
                _ => return None,
            },
        )
    }
    /// The required mask of `message` (bit `i` set: field `i` must be on the wire).
    pub fn required(message: &str) -> Option<u64> {
        Some(
            match message {
                "MooncakeXferMetadata" => MooncakeXferMetadata::REQUIRED,
                "MooncakeXferResponse" => MooncakeXferResponse::REQUIRED,
                _ => return None,
            },
        )
    }
}
/// `vllm-0.20.0..0.23.0` (0.20.0, 0.20.1, 0.20.2, 0.21.0, 0.22.0, 0.22.1, 0.23.0): req_blocks values carry one
/// block list per KV-cache group (list\[list\[int\]\]). Note: 0.23.0's FlashAttention backend becomes blocks-first,
/// so a FlashAttention deployment of 0.23.0 registers one region per layer where 0.20.0-0.22.1 registered K and V
/// apart; the connector's rules are unchanged, the spec does not model attention backends.
pub mod vllm_0_20_0_to_0_23_0 {
    use super::*;
    /// The spec revision of this module.
    pub const REVISION: &str = "vllm-0.20.0..0.23.0";
    /// Generation (`spec/PROTOCOL.md#gen2`).
    pub const GENERATION: u32 = 2;
    /// The members of `MooncakeXferResponseStatus` this revision defines (a decoder rejects any other value).
    pub const MOONCAKE_XFER_RESPONSE_STATUS_MEMBERS: [MooncakeXferResponseStatus; 3] = [
        MooncakeXferResponseStatus::FINISH,
        MooncakeXferResponseStatus::CONTINUE,
        MooncakeXferResponseStatus::ERROR,
    ];
    /// Pull request, decoder → prefiller: where to write the blocks of each request (`vllm-0.20.0..0.23.0`
    /// `\[structs.MooncakeXferMetadata\]`, vLLM 0.16.0 wheel,
    /// vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py). Strings held as `S`: see
    /// \[`MooncakeXferMetadata`\] and \[`MooncakeXferMetadataRef`\].
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct MooncakeXferMetadataOf<S> {
        /// Decoder worker IP (get_ip()). Required.
        pub remote_hostname: S,
        /// Decoder's TransferEngine RPC port (not a ZMQ port). Required.
        pub remote_port: WireInt,
        /// Decoder TP world size. Required.
        pub remote_tp_size: WireInt,
        /// Decoder TP rank. Required.
        pub remote_tp_rank: WireInt,
        /// Decoder request id → (transfer id, destination block ids per KV transfer group); \[\] when nothing is
        /// to be written. Required.
        pub req_blocks: Vec<(S, ReqBlocksOf<S>)>,
        /// Base address of each registered decoder KV region. Required.
        pub kv_caches_base_addr: Vec<WireInt>,
        /// Byte stride between consecutive blocks of each region. Required.
        pub block_lens: Vec<WireInt>,
    }
    /// MooncakeXferMetadata with owned strings.
    pub type MooncakeXferMetadata = MooncakeXferMetadataOf<String>;
    /// MooncakeXferMetadata with strings borrowed from the decoded bytes (no allocation per string).
    pub type MooncakeXferMetadataRef<'a> = MooncakeXferMetadataOf<&'a str>;
    impl<S> MooncakeXferMetadataOf<S> {
        /// Wire names in declaration order.
        pub const FIELDS: [&'static str; 7] = [
            "remote_hostname",
            "remote_port",
            "remote_tp_size",
            "remote_tp_rank",
            "req_blocks",
            "kv_caches_base_addr",
            "block_lens",
        ];
        /// Bit `i` set: field `i` has no default and must be on the wire.
        pub const REQUIRED: u64 = 0b1111111;
    }
    impl<S: Default> Default for MooncakeXferMetadataOf<S> {
        /// Every defaulted field at its default; required ones empty, 0, or 1 for a size.
        fn default() -> Self {
            MooncakeXferMetadataOf {
                remote_hostname: S::default(),
                remote_port: WireInt::from_u64(0),
                remote_tp_size: WireInt::from_u64(1),
                remote_tp_rank: WireInt::from_u64(0),
                req_blocks: Vec::new(),
                kv_caches_base_addr: Vec::new(),
                block_lens: Vec::new(),
            }
        }
    }
    impl<S: Default> MooncakeXferMetadataOf<S> {
        /// The message with these required fields and every other at its default.
        pub fn new(
            remote_hostname: S,
            remote_port: WireInt,
            remote_tp_size: WireInt,
            remote_tp_rank: WireInt,
            req_blocks: Vec<(S, ReqBlocksOf<S>)>,
            kv_caches_base_addr: Vec<WireInt>,
            block_lens: Vec<WireInt>,
        ) -> Self {
            MooncakeXferMetadataOf {
                remote_hostname,
                remote_port,
                remote_tp_size,
                remote_tp_rank,
                req_blocks,
                kv_caches_base_addr,
                block_lens,
                ..Self::default()
            }
        }
    }
    impl<'a, S: WireStr<'a> + Default> MooncakeXferMetadataOf<S> {
        /// Decodes as msgspec does with vllm-0.20.0..0.23.0's class.
        pub fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {
            Self::decode_with(bytes, Strictness::Msgspec)
        }
        /// Decodes; with [`Strictness::OpenStatus`] an enum value the revision lacks is kept instead of rejected.
        pub fn decode_with(
            bytes: &'a [u8],
            strictness: Strictness,
        ) -> Result<Self, DecodeError> {
            let mut d = De::new(bytes)?;
            let v = Self::decode_in(&mut d, strictness)?;
            d.finish()?;
            Ok(v)
        }
        /// Decodes one value at the reader's position (inside a frame).
        pub(crate) fn decode_in(
            d: &mut De<'a>,
            strictness: Strictness,
        ) -> Result<Self, DecodeError> {
            let mut v = Self::default();
            let mut seen = 0u64;
            d.struct_map(
                &Self::FIELDS,
                |d, i| {
                    seen |= 1 << i;
                    match i {
                        0 => v.remote_hostname = d.str()?,
                        1 => v.remote_port = d.int()?,
                        2 => v.remote_tp_size = d.int()?,
                        3 => v.remote_tp_rank = d.int()?,
                        4 => v.req_blocks = d.str_dict(De::blocks_value)?,
                        5 => v.kv_caches_base_addr = d.list_int()?,
                        _ => v.block_lens = d.list_int()?,
                    }
                    Ok(())
                },
            )?;
            let missing = Self::REQUIRED & !seen;
            if missing != 0 {
                return Err(d.missing(Self::FIELDS[missing.trailing_zeros() as usize]));
            }
            Ok(v)
        }
    }
    impl MooncakeXferMetadataRef<'_> {
        /// The same message with owned strings.
        pub fn to_owned_message(&self) -> MooncakeXferMetadata {
            MooncakeXferMetadataOf {
                remote_hostname: self.remote_hostname.to_string(),
                remote_port: self.remote_port,
                remote_tp_size: self.remote_tp_size,
                remote_tp_rank: self.remote_tp_rank,
                req_blocks: self
                    .req_blocks
                    .iter()
                    .map(|(k, b)| (k.to_string(), b.to_owned_blocks()))
                    .collect(),
                kv_caches_base_addr: self.kv_caches_base_addr.clone(),
                block_lens: self.block_lens.clone(),
            }
        }
    }
    impl<S: AsRef<str>> MooncakeXferMetadataOf<S> {
        /// Encodes as msgspec does (declaration order, defaults omitted).
        pub fn encode(&self) -> Vec<u8> {
            let mut w = Writer::with_capacity(self.encoded_len_hint());
            self.encode_into(&mut w);
            w.into_bytes()
        }
        pub(crate) fn encoded_len_hint(&self) -> usize {
            5 + 16 + (self.remote_hostname.as_ref().len() + 5) + 12 + 9 + 15 + 9 + 15 + 9
                + 11 + req_blocks_len(&self.req_blocks) + 20
                + (5 + 9 * self.kv_caches_base_addr.len()) + 11
                + (5 + 9 * self.block_lens.len())
        }
        /// Appends the encoding to `w`.
        pub fn encode_into(&self, w: &mut Writer) {
            let h = w.begin_struct_map(Self::FIELDS.len());
            let mut n = 0;
            w.str("remote_hostname");
            w.str(self.remote_hostname.as_ref());
            n += 1;
            w.str("remote_port");
            w.int(self.remote_port);
            n += 1;
            w.str("remote_tp_size");
            w.int(self.remote_tp_size);
            n += 1;
            w.str("remote_tp_rank");
            w.int(self.remote_tp_rank);
            n += 1;
            w.str("req_blocks");
            encode_req_blocks(w, &self.req_blocks);
            n += 1;
            w.str("kv_caches_base_addr");
            w.int_list(&self.kv_caches_base_addr);
            n += 1;
            w.str("block_lens");
            w.int_list(&self.block_lens);
            n += 1;
            w.finish_struct_map(h, n);
        }
    }
    /// Unchanged since `vllm-0.16.0..0.18.1`.
    pub use super::vllm_0_16_0_to_0_18_1::{
        MooncakeXferResponse, MooncakeXferResponseOf, MooncakeXferResponseRef,
    };
    /// Decodes `bytes` as `message` and encodes the result again (`None`: no such message here).
    pub fn round_trip(
        message: &str,
        bytes: &[u8],
        strictness: Strictness,
    ) -> Option<Result<Vec<u8>, DecodeError>> {
        Some(
            match message {
                "MooncakeXferMetadata" => {
                    MooncakeXferMetadataRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                "MooncakeXferResponse" => {
                    MooncakeXferResponseRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                _ => return None,
            },
        )
    }
    /// Decodes `bytes` as `message` (owned or borrowed strings) and drops the result: for benchmarks.
    pub fn decode_and_drop(
        message: &str,
        bytes: &[u8],
        borrowed: bool,
    ) -> Option<Result<(), DecodeError>> {
        Some(
            match (message, borrowed) {
                ("MooncakeXferMetadata", false) => {
                    MooncakeXferMetadata::decode(bytes).map(drop)
                }
                ("MooncakeXferMetadata", true) => {
                    MooncakeXferMetadataRef::decode(bytes).map(drop)
                }
                ("MooncakeXferResponse", false) => {
                    MooncakeXferResponse::decode(bytes).map(drop)
                }
                ("MooncakeXferResponse", true) => {
                    MooncakeXferResponseRef::decode(bytes).map(drop)
                }
                _ => return None,
            },
        )
    }
    /// The field list of `message`, in declaration order.
    pub fn fields(message: &str) -> Option<&'static [&'static str]> {
        Some(
            match message {
                "MooncakeXferMetadata" => &MooncakeXferMetadata::FIELDS,
                "MooncakeXferResponse" => &MooncakeXferResponse::FIELDS,
                _ => return None,
            },
        )
    }
    /// The required mask of `message` (bit `i` set: field `i` must be on the wire).
    pub fn required(message: &str) -> Option<u64> {
        Some(
            match message {
                "MooncakeXferMetadata" => MooncakeXferMetadata::REQUIRED,
                "MooncakeXferResponse" => MooncakeXferResponse::REQUIRED,
                _ => return None,
            },
        )
    }
}
/// `vllm-0.24.0` (0.24.0): + defaulted registered_layer_names, registered_layer_indices (9 fields), which the
/// prefiller requires in practice.
pub mod vllm_0_24_0 {
    use super::*;
    /// The spec revision of this module.
    pub const REVISION: &str = "vllm-0.24.0";
    /// Generation (`spec/PROTOCOL.md#gen2`).
    pub const GENERATION: u32 = 2;
    /// The members of `MooncakeXferResponseStatus` this revision defines (a decoder rejects any other value).
    pub const MOONCAKE_XFER_RESPONSE_STATUS_MEMBERS: [MooncakeXferResponseStatus; 3] = [
        MooncakeXferResponseStatus::FINISH,
        MooncakeXferResponseStatus::CONTINUE,
        MooncakeXferResponseStatus::ERROR,
    ];
    /// Pull request, decoder → prefiller: where to write the blocks of each request (`vllm-0.24.0`
    /// `\[structs.MooncakeXferMetadata\]`, vLLM 0.16.0 wheel,
    /// vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py). Strings held as `S`: see
    /// \[`MooncakeXferMetadata`\] and \[`MooncakeXferMetadataRef`\].
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct MooncakeXferMetadataOf<S> {
        /// Decoder worker IP (get_ip()). Required.
        pub remote_hostname: S,
        /// Decoder's TransferEngine RPC port (not a ZMQ port). Required.
        pub remote_port: WireInt,
        /// Decoder TP world size. Required.
        pub remote_tp_size: WireInt,
        /// Decoder TP rank. Required.
        pub remote_tp_rank: WireInt,
        /// Decoder request id → (transfer id, destination block ids per KV transfer group); \[\] when nothing is
        /// to be written. Required.
        pub req_blocks: Vec<(S, ReqBlocksOf<S>)>,
        /// Base address of each registered decoder KV region. Required.
        pub kv_caches_base_addr: Vec<WireInt>,
        /// Byte stride between consecutive blocks of each region. Required.
        pub block_lens: Vec<WireInt>,
        /// Layer name per region (repeated when a layer has several regions). Default `list()`.
        pub registered_layer_names: Vec<S>,
        /// Layer index per region. Default `list()`.
        pub registered_layer_indices: Vec<WireInt>,
    }
    /// MooncakeXferMetadata with owned strings.
    pub type MooncakeXferMetadata = MooncakeXferMetadataOf<String>;
    /// MooncakeXferMetadata with strings borrowed from the decoded bytes (no allocation per string).
    pub type MooncakeXferMetadataRef<'a> = MooncakeXferMetadataOf<&'a str>;
    impl<S> MooncakeXferMetadataOf<S> {
        /// Wire names in declaration order.
        pub const FIELDS: [&'static str; 9] = [
            "remote_hostname",
            "remote_port",
            "remote_tp_size",
            "remote_tp_rank",
            "req_blocks",
            "kv_caches_base_addr",
            "block_lens",
            "registered_layer_names",
            "registered_layer_indices",
        ];
        /// Bit `i` set: field `i` has no default and must be on the wire.
        pub const REQUIRED: u64 = 0b1111111;
    }
    impl<S: Default> Default for MooncakeXferMetadataOf<S> {
        /// Every defaulted field at its default; required ones empty, 0, or 1 for a size.
        fn default() -> Self {
            MooncakeXferMetadataOf {
                remote_hostname: S::default(),
                remote_port: WireInt::from_u64(0),
                remote_tp_size: WireInt::from_u64(1),
                remote_tp_rank: WireInt::from_u64(0),
                req_blocks: Vec::new(),
                kv_caches_base_addr: Vec::new(),
                block_lens: Vec::new(),
                registered_layer_names: Vec::new(),
                registered_layer_indices: Vec::new(),
            }
        }
    }
    impl<S: Default> MooncakeXferMetadataOf<S> {
        /// The message with these required fields and every other at its default.
        pub fn new(
            remote_hostname: S,
            remote_port: WireInt,
            remote_tp_size: WireInt,
            remote_tp_rank: WireInt,
            req_blocks: Vec<(S, ReqBlocksOf<S>)>,
            kv_caches_base_addr: Vec<WireInt>,
            block_lens: Vec<WireInt>,
        ) -> Self {
            MooncakeXferMetadataOf {
                remote_hostname,
                remote_port,
                remote_tp_size,
                remote_tp_rank,
                req_blocks,
                kv_caches_base_addr,
                block_lens,
                ..Self::default()
            }
        }
    }
    impl<'a, S: WireStr<'a> + Default> MooncakeXferMetadataOf<S> {
        /// Decodes as msgspec does with vllm-0.24.0's class.
        pub fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {
            Self::decode_with(bytes, Strictness::Msgspec)
        }
        /// Decodes; with [`Strictness::OpenStatus`] an enum value the revision lacks is kept instead of rejected.
        pub fn decode_with(
            bytes: &'a [u8],
            strictness: Strictness,
        ) -> Result<Self, DecodeError> {
            let mut d = De::new(bytes)?;
            let v = Self::decode_in(&mut d, strictness)?;
            d.finish()?;
            Ok(v)
        }
        /// Decodes one value at the reader's position (inside a frame).
        pub(crate) fn decode_in(
            d: &mut De<'a>,
            strictness: Strictness,
        ) -> Result<Self, DecodeError> {
            let mut v = Self::default();
            let mut seen = 0u64;
            d.struct_map(
                &Self::FIELDS,
                |d, i| {
                    seen |= 1 << i;
                    match i {
                        0 => v.remote_hostname = d.str()?,
                        1 => v.remote_port = d.int()?,
                        2 => v.remote_tp_size = d.int()?,
                        3 => v.remote_tp_rank = d.int()?,
                        4 => v.req_blocks = d.str_dict(De::blocks_value)?,
                        5 => v.kv_caches_base_addr = d.list_int()?,
                        6 => v.block_lens = d.list_int()?,
                        7 => v.registered_layer_names = d.list_str()?,
                        _ => v.registered_layer_indices = d.list_int()?,
                    }
                    Ok(())
                },
            )?;
            let missing = Self::REQUIRED & !seen;
            if missing != 0 {
                return Err(d.missing(Self::FIELDS[missing.trailing_zeros() as usize]));
            }
            Ok(v)
        }
    }
    impl MooncakeXferMetadataRef<'_> {
        /// The same message with owned strings.
        pub fn to_owned_message(&self) -> MooncakeXferMetadata {
            MooncakeXferMetadataOf {
                remote_hostname: self.remote_hostname.to_string(),
                remote_port: self.remote_port,
                remote_tp_size: self.remote_tp_size,
                remote_tp_rank: self.remote_tp_rank,
                req_blocks: self
                    .req_blocks
                    .iter()
                    .map(|(k, b)| (k.to_string(), b.to_owned_blocks()))
                    .collect(),
                kv_caches_base_addr: self.kv_caches_base_addr.clone(),
                block_lens: self.block_lens.clone(),
                registered_layer_names: self
                    .registered_layer_names
                    .iter()
                    .map(|x0| x0.to_string())
                    .collect(),
                registered_layer_indices: self.registered_layer_indices.clone(),
            }
        }
    }
    impl<S: AsRef<str>> MooncakeXferMetadataOf<S> {
        /// Encodes as msgspec does (declaration order, defaults omitted).
        pub fn encode(&self) -> Vec<u8> {
            let mut w = Writer::with_capacity(self.encoded_len_hint());
            self.encode_into(&mut w);
            w.into_bytes()
        }
        pub(crate) fn encoded_len_hint(&self) -> usize {
            5 + 16 + (self.remote_hostname.as_ref().len() + 5) + 12 + 9 + 15 + 9 + 15 + 9
                + 11 + req_blocks_len(&self.req_blocks) + 20
                + (5 + 9 * self.kv_caches_base_addr.len()) + 11
                + (5 + 9 * self.block_lens.len()) + 23
                + str_list_len(&self.registered_layer_names) + 25
                + (5 + 9 * self.registered_layer_indices.len())
        }
        /// Appends the encoding to `w`.
        pub fn encode_into(&self, w: &mut Writer) {
            let h = w.begin_struct_map(Self::FIELDS.len());
            let mut n = 0;
            w.str("remote_hostname");
            w.str(self.remote_hostname.as_ref());
            n += 1;
            w.str("remote_port");
            w.int(self.remote_port);
            n += 1;
            w.str("remote_tp_size");
            w.int(self.remote_tp_size);
            n += 1;
            w.str("remote_tp_rank");
            w.int(self.remote_tp_rank);
            n += 1;
            w.str("req_blocks");
            encode_req_blocks(w, &self.req_blocks);
            n += 1;
            w.str("kv_caches_base_addr");
            w.int_list(&self.kv_caches_base_addr);
            n += 1;
            w.str("block_lens");
            w.int_list(&self.block_lens);
            n += 1;
            if !(self.registered_layer_names.is_empty()) {
                w.str("registered_layer_names");
                str_list(w, &self.registered_layer_names);
                n += 1;
            }
            if !(self.registered_layer_indices.is_empty()) {
                w.str("registered_layer_indices");
                w.int_list(&self.registered_layer_indices);
                n += 1;
            }
            w.finish_struct_map(h, n);
        }
    }
    /// Unchanged since `vllm-0.16.0..0.18.1`.
    pub use super::vllm_0_16_0_to_0_18_1::{
        MooncakeXferResponse, MooncakeXferResponseOf, MooncakeXferResponseRef,
    };
    /// Decodes `bytes` as `message` and encodes the result again (`None`: no such message here).
    pub fn round_trip(
        message: &str,
        bytes: &[u8],
        strictness: Strictness,
    ) -> Option<Result<Vec<u8>, DecodeError>> {
        Some(
            match message {
                "MooncakeXferMetadata" => {
                    MooncakeXferMetadataRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                "MooncakeXferResponse" => {
                    MooncakeXferResponseRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                _ => return None,
            },
        )
    }
    /// Decodes `bytes` as `message` (owned or borrowed strings) and drops the result: for benchmarks.
    pub fn decode_and_drop(
        message: &str,
        bytes: &[u8],
        borrowed: bool,
    ) -> Option<Result<(), DecodeError>> {
        Some(
            match (message, borrowed) {
                ("MooncakeXferMetadata", false) => {
                    MooncakeXferMetadata::decode(bytes).map(drop)
                }
                ("MooncakeXferMetadata", true) => {
                    MooncakeXferMetadataRef::decode(bytes).map(drop)
                }
                ("MooncakeXferResponse", false) => {
                    MooncakeXferResponse::decode(bytes).map(drop)
                }
                ("MooncakeXferResponse", true) => {
                    MooncakeXferResponseRef::decode(bytes).map(drop)
                }
                _ => return None,
            },
        )
    }
    /// The field list of `message`, in declaration order.
    pub fn fields(message: &str) -> Option<&'static [&'static str]> {
        Some(
            match message {
                "MooncakeXferMetadata" => &MooncakeXferMetadata::FIELDS,
                "MooncakeXferResponse" => &MooncakeXferResponse::FIELDS,
                _ => return None,
            },
        )
    }
    /// The required mask of `message` (bit `i` set: field `i` must be on the wire).
    pub fn required(message: &str) -> Option<u64> {
        Some(
            match message {
                "MooncakeXferMetadata" => MooncakeXferMetadata::REQUIRED,
                "MooncakeXferResponse" => MooncakeXferResponse::REQUIRED,
                _ => return None,
            },
        )
    }
}
/// `vllm-0.25.0..0.25.1` (0.25.0, 0.25.1): + required kv_block_lens (before the defaulted fields), + defaulted
/// registered_group_indices (11 fields).
pub mod vllm_0_25_0_to_0_25_1 {
    use super::*;
    /// The spec revision of this module.
    pub const REVISION: &str = "vllm-0.25.0..0.25.1";
    /// Generation (`spec/PROTOCOL.md#gen2`).
    pub const GENERATION: u32 = 2;
    /// The members of `MooncakeXferResponseStatus` this revision defines (a decoder rejects any other value).
    pub const MOONCAKE_XFER_RESPONSE_STATUS_MEMBERS: [MooncakeXferResponseStatus; 3] = [
        MooncakeXferResponseStatus::FINISH,
        MooncakeXferResponseStatus::CONTINUE,
        MooncakeXferResponseStatus::ERROR,
    ];
    /// Pull request, decoder → prefiller: where to write the blocks of each request (`vllm-0.25.0..0.25.1`
    /// `\[structs.MooncakeXferMetadata\]`, vLLM 0.16.0 wheel,
    /// vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py). Strings held as `S`: see
    /// \[`MooncakeXferMetadata`\] and \[`MooncakeXferMetadataRef`\].
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct MooncakeXferMetadataOf<S> {
        /// Decoder worker IP (get_ip()). Required.
        pub remote_hostname: S,
        /// Decoder's TransferEngine RPC port (not a ZMQ port). Required.
        pub remote_port: WireInt,
        /// Decoder TP world size. Required.
        pub remote_tp_size: WireInt,
        /// Decoder TP rank. Required.
        pub remote_tp_rank: WireInt,
        /// Decoder request id → (transfer id, destination block ids per KV transfer group); \[\] when nothing is
        /// to be written. Required.
        pub req_blocks: Vec<(S, ReqBlocksOf<S>)>,
        /// Base address of each registered decoder KV region. Required.
        pub kv_caches_base_addr: Vec<WireInt>,
        /// Byte stride between consecutive blocks of each region. Required.
        pub block_lens: Vec<WireInt>,
        /// Bytes to move per block of each region (at most the stride). Required.
        pub kv_block_lens: Vec<WireInt>,
        /// Layer name per region (repeated when a layer has several regions). Default `list()`.
        pub registered_layer_names: Vec<S>,
        /// Layer index per region. Default `list()`.
        pub registered_layer_indices: Vec<WireInt>,
        /// KV transfer group per region; -1 marks a region shared by several groups. Default `list()`.
        pub registered_group_indices: Vec<WireInt>,
    }
    /// MooncakeXferMetadata with owned strings.
    pub type MooncakeXferMetadata = MooncakeXferMetadataOf<String>;
    /// MooncakeXferMetadata with strings borrowed from the decoded bytes (no allocation per string).
    pub type MooncakeXferMetadataRef<'a> = MooncakeXferMetadataOf<&'a str>;
    impl<S> MooncakeXferMetadataOf<S> {
        /// Wire names in declaration order.
        pub const FIELDS: [&'static str; 11] = [
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
        ];
        /// Bit `i` set: field `i` has no default and must be on the wire.
        pub const REQUIRED: u64 = 0b11111111;
    }
    impl<S: Default> Default for MooncakeXferMetadataOf<S> {
        /// Every defaulted field at its default; required ones empty, 0, or 1 for a size.
        fn default() -> Self {
            MooncakeXferMetadataOf {
                remote_hostname: S::default(),
                remote_port: WireInt::from_u64(0),
                remote_tp_size: WireInt::from_u64(1),
                remote_tp_rank: WireInt::from_u64(0),
                req_blocks: Vec::new(),
                kv_caches_base_addr: Vec::new(),
                block_lens: Vec::new(),
                kv_block_lens: Vec::new(),
                registered_layer_names: Vec::new(),
                registered_layer_indices: Vec::new(),
                registered_group_indices: Vec::new(),
            }
        }
    }
    impl<S: Default> MooncakeXferMetadataOf<S> {
        /// The message with these required fields and every other at its default.
        pub fn new(
            remote_hostname: S,
            remote_port: WireInt,
            remote_tp_size: WireInt,
            remote_tp_rank: WireInt,
            req_blocks: Vec<(S, ReqBlocksOf<S>)>,
            kv_caches_base_addr: Vec<WireInt>,
            block_lens: Vec<WireInt>,
            kv_block_lens: Vec<WireInt>,
        ) -> Self {
            MooncakeXferMetadataOf {
                remote_hostname,
                remote_port,
                remote_tp_size,
                remote_tp_rank,
                req_blocks,
                kv_caches_base_addr,
                block_lens,
                kv_block_lens,
                ..Self::default()
            }
        }
    }
    impl<'a, S: WireStr<'a> + Default> MooncakeXferMetadataOf<S> {
        /// Decodes as msgspec does with vllm-0.25.0..0.25.1's class.
        pub fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {
            Self::decode_with(bytes, Strictness::Msgspec)
        }
        /// Decodes; with [`Strictness::OpenStatus`] an enum value the revision lacks is kept instead of rejected.
        pub fn decode_with(
            bytes: &'a [u8],
            strictness: Strictness,
        ) -> Result<Self, DecodeError> {
            let mut d = De::new(bytes)?;
            let v = Self::decode_in(&mut d, strictness)?;
            d.finish()?;
            Ok(v)
        }
        /// Decodes one value at the reader's position (inside a frame).
        pub(crate) fn decode_in(
            d: &mut De<'a>,
            strictness: Strictness,
        ) -> Result<Self, DecodeError> {
            let mut v = Self::default();
            let mut seen = 0u64;
            d.struct_map(
                &Self::FIELDS,
                |d, i| {
                    seen |= 1 << i;
                    match i {
                        0 => v.remote_hostname = d.str()?,
                        1 => v.remote_port = d.int()?,
                        2 => v.remote_tp_size = d.int()?,
                        3 => v.remote_tp_rank = d.int()?,
                        4 => v.req_blocks = d.str_dict(De::blocks_value)?,
                        5 => v.kv_caches_base_addr = d.list_int()?,
                        6 => v.block_lens = d.list_int()?,
                        7 => v.kv_block_lens = d.list_int()?,
                        8 => v.registered_layer_names = d.list_str()?,
                        9 => v.registered_layer_indices = d.list_int()?,
                        _ => v.registered_group_indices = d.list_int()?,
                    }
                    Ok(())
                },
            )?;
            let missing = Self::REQUIRED & !seen;
            if missing != 0 {
                return Err(d.missing(Self::FIELDS[missing.trailing_zeros() as usize]));
            }
            Ok(v)
        }
    }
    impl MooncakeXferMetadataRef<'_> {
        /// The same message with owned strings.
        pub fn to_owned_message(&self) -> MooncakeXferMetadata {
            MooncakeXferMetadataOf {
                remote_hostname: self.remote_hostname.to_string(),
                remote_port: self.remote_port,
                remote_tp_size: self.remote_tp_size,
                remote_tp_rank: self.remote_tp_rank,
                req_blocks: self
                    .req_blocks
                    .iter()
                    .map(|(k, b)| (k.to_string(), b.to_owned_blocks()))
                    .collect(),
                kv_caches_base_addr: self.kv_caches_base_addr.clone(),
                block_lens: self.block_lens.clone(),
                kv_block_lens: self.kv_block_lens.clone(),
                registered_layer_names: self
                    .registered_layer_names
                    .iter()
                    .map(|x0| x0.to_string())
                    .collect(),
                registered_layer_indices: self.registered_layer_indices.clone(),
                registered_group_indices: self.registered_group_indices.clone(),
            }
        }
    }
    impl<S: AsRef<str>> MooncakeXferMetadataOf<S> {
        /// Encodes as msgspec does (declaration order, defaults omitted).
        pub fn encode(&self) -> Vec<u8> {
            let mut w = Writer::with_capacity(self.encoded_len_hint());
            self.encode_into(&mut w);
            w.into_bytes()
        }
        pub(crate) fn encoded_len_hint(&self) -> usize {
            5 + 16 + (self.remote_hostname.as_ref().len() + 5) + 12 + 9 + 15 + 9 + 15 + 9
                + 11 + req_blocks_len(&self.req_blocks) + 20
                + (5 + 9 * self.kv_caches_base_addr.len()) + 11
                + (5 + 9 * self.block_lens.len()) + 14
                + (5 + 9 * self.kv_block_lens.len()) + 23
                + str_list_len(&self.registered_layer_names) + 25
                + (5 + 9 * self.registered_layer_indices.len()) + 25
                + (5 + 9 * self.registered_group_indices.len())
        }
        /// Appends the encoding to `w`.
        pub fn encode_into(&self, w: &mut Writer) {
            let h = w.begin_struct_map(Self::FIELDS.len());
            let mut n = 0;
            w.str("remote_hostname");
            w.str(self.remote_hostname.as_ref());
            n += 1;
            w.str("remote_port");
            w.int(self.remote_port);
            n += 1;
            w.str("remote_tp_size");
            w.int(self.remote_tp_size);
            n += 1;
            w.str("remote_tp_rank");
            w.int(self.remote_tp_rank);
            n += 1;
            w.str("req_blocks");
            encode_req_blocks(w, &self.req_blocks);
            n += 1;
            w.str("kv_caches_base_addr");
            w.int_list(&self.kv_caches_base_addr);
            n += 1;
            w.str("block_lens");
            w.int_list(&self.block_lens);
            n += 1;
            w.str("kv_block_lens");
            w.int_list(&self.kv_block_lens);
            n += 1;
            if !(self.registered_layer_names.is_empty()) {
                w.str("registered_layer_names");
                str_list(w, &self.registered_layer_names);
                n += 1;
            }
            if !(self.registered_layer_indices.is_empty()) {
                w.str("registered_layer_indices");
                w.int_list(&self.registered_layer_indices);
                n += 1;
            }
            if !(self.registered_group_indices.is_empty()) {
                w.str("registered_group_indices");
                w.int_list(&self.registered_group_indices);
                n += 1;
            }
            w.finish_struct_map(h, n);
        }
    }
    /// Unchanged since `vllm-0.16.0..0.18.1`.
    pub use super::vllm_0_16_0_to_0_18_1::{
        MooncakeXferResponse, MooncakeXferResponseOf, MooncakeXferResponseRef,
    };
    /// Decodes `bytes` as `message` and encodes the result again (`None`: no such message here).
    pub fn round_trip(
        message: &str,
        bytes: &[u8],
        strictness: Strictness,
    ) -> Option<Result<Vec<u8>, DecodeError>> {
        Some(
            match message {
                "MooncakeXferMetadata" => {
                    MooncakeXferMetadataRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                "MooncakeXferResponse" => {
                    MooncakeXferResponseRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                _ => return None,
            },
        )
    }
    /// Decodes `bytes` as `message` (owned or borrowed strings) and drops the result: for benchmarks.
    pub fn decode_and_drop(
        message: &str,
        bytes: &[u8],
        borrowed: bool,
    ) -> Option<Result<(), DecodeError>> {
        Some(
            match (message, borrowed) {
                ("MooncakeXferMetadata", false) => {
                    MooncakeXferMetadata::decode(bytes).map(drop)
                }
                ("MooncakeXferMetadata", true) => {
                    MooncakeXferMetadataRef::decode(bytes).map(drop)
                }
                ("MooncakeXferResponse", false) => {
                    MooncakeXferResponse::decode(bytes).map(drop)
                }
                ("MooncakeXferResponse", true) => {
                    MooncakeXferResponseRef::decode(bytes).map(drop)
                }
                _ => return None,
            },
        )
    }
    /// The field list of `message`, in declaration order.
    pub fn fields(message: &str) -> Option<&'static [&'static str]> {
        Some(
            match message {
                "MooncakeXferMetadata" => &MooncakeXferMetadata::FIELDS,
                "MooncakeXferResponse" => &MooncakeXferResponse::FIELDS,
                _ => return None,
            },
        )
    }
    /// The required mask of `message` (bit `i` set: field `i` must be on the wire).
    pub fn required(message: &str) -> Option<u64> {
        Some(
            match message {
                "MooncakeXferMetadata" => MooncakeXferMetadata::REQUIRED,
                "MooncakeXferResponse" => MooncakeXferResponse::REQUIRED,
                _ => return None,
            },
        )
    }
}
/// `vllm-0.26.0..0.28.0` (0.26.0, 0.27.0, 0.27.1, 0.28.0): Wire unchanged; attention regions are no longer split
/// into K and V halves (one region per layer, whole blocks).
pub mod vllm_0_26_0_to_0_28_0 {
    use super::*;
    /// The spec revision of this module.
    pub const REVISION: &str = "vllm-0.26.0..0.28.0";
    /// Generation (`spec/PROTOCOL.md#gen2`).
    pub const GENERATION: u32 = 2;
    /// The members of `MooncakeXferResponseStatus` this revision defines (a decoder rejects any other value).
    pub const MOONCAKE_XFER_RESPONSE_STATUS_MEMBERS: [MooncakeXferResponseStatus; 3] = [
        MooncakeXferResponseStatus::FINISH,
        MooncakeXferResponseStatus::CONTINUE,
        MooncakeXferResponseStatus::ERROR,
    ];
    /// Unchanged since `vllm-0.25.0..0.25.1`.
    pub use super::vllm_0_25_0_to_0_25_1::{
        MooncakeXferMetadata, MooncakeXferMetadataOf, MooncakeXferMetadataRef,
    };
    /// Unchanged since `vllm-0.16.0..0.18.1`.
    pub use super::vllm_0_16_0_to_0_18_1::{
        MooncakeXferResponse, MooncakeXferResponseOf, MooncakeXferResponseRef,
    };
    /// Decodes `bytes` as `message` and encodes the result again (`None`: no such message here).
    pub fn round_trip(
        message: &str,
        bytes: &[u8],
        strictness: Strictness,
    ) -> Option<Result<Vec<u8>, DecodeError>> {
        Some(
            match message {
                "MooncakeXferMetadata" => {
                    MooncakeXferMetadataRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                "MooncakeXferResponse" => {
                    MooncakeXferResponseRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                _ => return None,
            },
        )
    }
    /// Decodes `bytes` as `message` (owned or borrowed strings) and drops the result: for benchmarks.
    pub fn decode_and_drop(
        message: &str,
        bytes: &[u8],
        borrowed: bool,
    ) -> Option<Result<(), DecodeError>> {
        Some(
            match (message, borrowed) {
                ("MooncakeXferMetadata", false) => {
                    MooncakeXferMetadata::decode(bytes).map(drop)
                }
                ("MooncakeXferMetadata", true) => {
                    MooncakeXferMetadataRef::decode(bytes).map(drop)
                }
                ("MooncakeXferResponse", false) => {
                    MooncakeXferResponse::decode(bytes).map(drop)
                }
                ("MooncakeXferResponse", true) => {
                    MooncakeXferResponseRef::decode(bytes).map(drop)
                }
                _ => return None,
            },
        )
    }
    /// The field list of `message`, in declaration order.
    pub fn fields(message: &str) -> Option<&'static [&'static str]> {
        Some(
            match message {
                "MooncakeXferMetadata" => &MooncakeXferMetadata::FIELDS,
                "MooncakeXferResponse" => &MooncakeXferResponse::FIELDS,
                _ => return None,
            },
        )
    }
    /// The required mask of `message` (bit `i` set: field `i` must be on the wire).
    pub fn required(message: &str) -> Option<u64> {
        Some(
            match message {
                "MooncakeXferMetadata" => MooncakeXferMetadata::REQUIRED,
                "MooncakeXferResponse" => MooncakeXferResponse::REQUIRED,
                _ => return None,
            },
        )
    }
}
/// `vllm-0.29.0` (0.29.0): Wire unchanged; required KV layout LBHNC instead of HND; no K/V halves at all
/// (per-head regions for non-dense blocks).
pub mod vllm_0_29_0 {
    use super::*;
    /// The spec revision of this module.
    pub const REVISION: &str = "vllm-0.29.0";
    /// Generation (`spec/PROTOCOL.md#gen2`).
    pub const GENERATION: u32 = 2;
    /// The members of `MooncakeXferResponseStatus` this revision defines (a decoder rejects any other value).
    pub const MOONCAKE_XFER_RESPONSE_STATUS_MEMBERS: [MooncakeXferResponseStatus; 3] = [
        MooncakeXferResponseStatus::FINISH,
        MooncakeXferResponseStatus::CONTINUE,
        MooncakeXferResponseStatus::ERROR,
    ];
    /// Unchanged since `vllm-0.25.0..0.25.1`.
    pub use super::vllm_0_25_0_to_0_25_1::{
        MooncakeXferMetadata, MooncakeXferMetadataOf, MooncakeXferMetadataRef,
    };
    /// Unchanged since `vllm-0.16.0..0.18.1`.
    pub use super::vllm_0_16_0_to_0_18_1::{
        MooncakeXferResponse, MooncakeXferResponseOf, MooncakeXferResponseRef,
    };
    /// Decodes `bytes` as `message` and encodes the result again (`None`: no such message here).
    pub fn round_trip(
        message: &str,
        bytes: &[u8],
        strictness: Strictness,
    ) -> Option<Result<Vec<u8>, DecodeError>> {
        Some(
            match message {
                "MooncakeXferMetadata" => {
                    MooncakeXferMetadataRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                "MooncakeXferResponse" => {
                    MooncakeXferResponseRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                _ => return None,
            },
        )
    }
    /// Decodes `bytes` as `message` (owned or borrowed strings) and drops the result: for benchmarks.
    pub fn decode_and_drop(
        message: &str,
        bytes: &[u8],
        borrowed: bool,
    ) -> Option<Result<(), DecodeError>> {
        Some(
            match (message, borrowed) {
                ("MooncakeXferMetadata", false) => {
                    MooncakeXferMetadata::decode(bytes).map(drop)
                }
                ("MooncakeXferMetadata", true) => {
                    MooncakeXferMetadataRef::decode(bytes).map(drop)
                }
                ("MooncakeXferResponse", false) => {
                    MooncakeXferResponse::decode(bytes).map(drop)
                }
                ("MooncakeXferResponse", true) => {
                    MooncakeXferResponseRef::decode(bytes).map(drop)
                }
                _ => return None,
            },
        )
    }
    /// The field list of `message`, in declaration order.
    pub fn fields(message: &str) -> Option<&'static [&'static str]> {
        Some(
            match message {
                "MooncakeXferMetadata" => &MooncakeXferMetadata::FIELDS,
                "MooncakeXferResponse" => &MooncakeXferResponse::FIELDS,
                _ => return None,
            },
        )
    }
    /// The required mask of `message` (bit `i` set: field `i` must be on the wire).
    pub fn required(message: &str) -> Option<u64> {
        Some(
            match message {
                "MooncakeXferMetadata" => MooncakeXferMetadata::REQUIRED,
                "MooncakeXferResponse" => MooncakeXferResponse::REQUIRED,
                _ => return None,
            },
        )
    }
}
/// `vllm-0.30.0` (0.30.0): + remote_pp_size: int = 1 (12 fields).
pub mod vllm_0_30_0 {
    use super::*;
    /// The spec revision of this module.
    pub const REVISION: &str = "vllm-0.30.0";
    /// Generation (`spec/PROTOCOL.md#gen2`).
    pub const GENERATION: u32 = 2;
    /// The members of `MooncakeXferResponseStatus` this revision defines (a decoder rejects any other value).
    pub const MOONCAKE_XFER_RESPONSE_STATUS_MEMBERS: [MooncakeXferResponseStatus; 3] = [
        MooncakeXferResponseStatus::FINISH,
        MooncakeXferResponseStatus::CONTINUE,
        MooncakeXferResponseStatus::ERROR,
    ];
    /// Pull request, decoder → prefiller: where to write the blocks of each request (`vllm-0.30.0`
    /// `\[structs.MooncakeXferMetadata\]`, vLLM 0.16.0 wheel,
    /// vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py). Strings held as `S`: see
    /// \[`MooncakeXferMetadata`\] and \[`MooncakeXferMetadataRef`\].
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct MooncakeXferMetadataOf<S> {
        /// Decoder worker IP (get_ip()). Required.
        pub remote_hostname: S,
        /// Decoder's TransferEngine RPC port (not a ZMQ port). Required.
        pub remote_port: WireInt,
        /// Decoder TP world size. Required.
        pub remote_tp_size: WireInt,
        /// Decoder TP rank. Required.
        pub remote_tp_rank: WireInt,
        /// Decoder request id → (transfer id, destination block ids per KV transfer group); \[\] when nothing is
        /// to be written. Required.
        pub req_blocks: Vec<(S, ReqBlocksOf<S>)>,
        /// Base address of each registered decoder KV region. Required.
        pub kv_caches_base_addr: Vec<WireInt>,
        /// Byte stride between consecutive blocks of each region. Required.
        pub block_lens: Vec<WireInt>,
        /// Bytes to move per block of each region (at most the stride). Required.
        pub kv_block_lens: Vec<WireInt>,
        /// Layer name per region (repeated when a layer has several regions). Default `list()`.
        pub registered_layer_names: Vec<S>,
        /// Layer index per region. Default `list()`.
        pub registered_layer_indices: Vec<WireInt>,
        /// KV transfer group per region; -1 marks a region shared by several groups. Default `list()`.
        pub registered_group_indices: Vec<WireInt>,
        /// Decoder PP size (omitted when 1). Default `1`.
        pub remote_pp_size: WireInt,
    }
    /// MooncakeXferMetadata with owned strings.
    pub type MooncakeXferMetadata = MooncakeXferMetadataOf<String>;
    /// MooncakeXferMetadata with strings borrowed from the decoded bytes (no allocation per string).
    pub type MooncakeXferMetadataRef<'a> = MooncakeXferMetadataOf<&'a str>;
    impl<S> MooncakeXferMetadataOf<S> {
        /// Wire names in declaration order.
        pub const FIELDS: [&'static str; 12] = [
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
            "remote_pp_size",
        ];
        /// Bit `i` set: field `i` has no default and must be on the wire.
        pub const REQUIRED: u64 = 0b11111111;
    }
    impl<S: Default> Default for MooncakeXferMetadataOf<S> {
        /// Every defaulted field at its default; required ones empty, 0, or 1 for a size.
        fn default() -> Self {
            MooncakeXferMetadataOf {
                remote_hostname: S::default(),
                remote_port: WireInt::from_u64(0),
                remote_tp_size: WireInt::from_u64(1),
                remote_tp_rank: WireInt::from_u64(0),
                req_blocks: Vec::new(),
                kv_caches_base_addr: Vec::new(),
                block_lens: Vec::new(),
                kv_block_lens: Vec::new(),
                registered_layer_names: Vec::new(),
                registered_layer_indices: Vec::new(),
                registered_group_indices: Vec::new(),
                remote_pp_size: WireInt::from_u64(1),
            }
        }
    }
    impl<S: Default> MooncakeXferMetadataOf<S> {
        /// The message with these required fields and every other at its default.
        pub fn new(
            remote_hostname: S,
            remote_port: WireInt,
            remote_tp_size: WireInt,
            remote_tp_rank: WireInt,
            req_blocks: Vec<(S, ReqBlocksOf<S>)>,
            kv_caches_base_addr: Vec<WireInt>,
            block_lens: Vec<WireInt>,
            kv_block_lens: Vec<WireInt>,
        ) -> Self {
            MooncakeXferMetadataOf {
                remote_hostname,
                remote_port,
                remote_tp_size,
                remote_tp_rank,
                req_blocks,
                kv_caches_base_addr,
                block_lens,
                kv_block_lens,
                ..Self::default()
            }
        }
    }
    impl<'a, S: WireStr<'a> + Default> MooncakeXferMetadataOf<S> {
        /// Decodes as msgspec does with vllm-0.30.0's class.
        pub fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {
            Self::decode_with(bytes, Strictness::Msgspec)
        }
        /// Decodes; with [`Strictness::OpenStatus`] an enum value the revision lacks is kept instead of rejected.
        pub fn decode_with(
            bytes: &'a [u8],
            strictness: Strictness,
        ) -> Result<Self, DecodeError> {
            let mut d = De::new(bytes)?;
            let v = Self::decode_in(&mut d, strictness)?;
            d.finish()?;
            Ok(v)
        }
        /// Decodes one value at the reader's position (inside a frame).
        pub(crate) fn decode_in(
            d: &mut De<'a>,
            strictness: Strictness,
        ) -> Result<Self, DecodeError> {
            let mut v = Self::default();
            let mut seen = 0u64;
            d.struct_map(
                &Self::FIELDS,
                |d, i| {
                    seen |= 1 << i;
                    match i {
                        0 => v.remote_hostname = d.str()?,
                        1 => v.remote_port = d.int()?,
                        2 => v.remote_tp_size = d.int()?,
                        3 => v.remote_tp_rank = d.int()?,
                        4 => v.req_blocks = d.str_dict(De::blocks_value)?,
                        5 => v.kv_caches_base_addr = d.list_int()?,
                        6 => v.block_lens = d.list_int()?,
                        7 => v.kv_block_lens = d.list_int()?,
                        8 => v.registered_layer_names = d.list_str()?,
                        9 => v.registered_layer_indices = d.list_int()?,
                        10 => v.registered_group_indices = d.list_int()?,
                        _ => v.remote_pp_size = d.int()?,
                    }
                    Ok(())
                },
            )?;
            let missing = Self::REQUIRED & !seen;
            if missing != 0 {
                return Err(d.missing(Self::FIELDS[missing.trailing_zeros() as usize]));
            }
            Ok(v)
        }
    }
    impl MooncakeXferMetadataRef<'_> {
        /// The same message with owned strings.
        pub fn to_owned_message(&self) -> MooncakeXferMetadata {
            MooncakeXferMetadataOf {
                remote_hostname: self.remote_hostname.to_string(),
                remote_port: self.remote_port,
                remote_tp_size: self.remote_tp_size,
                remote_tp_rank: self.remote_tp_rank,
                req_blocks: self
                    .req_blocks
                    .iter()
                    .map(|(k, b)| (k.to_string(), b.to_owned_blocks()))
                    .collect(),
                kv_caches_base_addr: self.kv_caches_base_addr.clone(),
                block_lens: self.block_lens.clone(),
                kv_block_lens: self.kv_block_lens.clone(),
                registered_layer_names: self
                    .registered_layer_names
                    .iter()
                    .map(|x0| x0.to_string())
                    .collect(),
                registered_layer_indices: self.registered_layer_indices.clone(),
                registered_group_indices: self.registered_group_indices.clone(),
                remote_pp_size: self.remote_pp_size,
            }
        }
    }
    impl<S: AsRef<str>> MooncakeXferMetadataOf<S> {
        /// Encodes as msgspec does (declaration order, defaults omitted).
        pub fn encode(&self) -> Vec<u8> {
            let mut w = Writer::with_capacity(self.encoded_len_hint());
            self.encode_into(&mut w);
            w.into_bytes()
        }
        pub(crate) fn encoded_len_hint(&self) -> usize {
            5 + 16 + (self.remote_hostname.as_ref().len() + 5) + 12 + 9 + 15 + 9 + 15 + 9
                + 11 + req_blocks_len(&self.req_blocks) + 20
                + (5 + 9 * self.kv_caches_base_addr.len()) + 11
                + (5 + 9 * self.block_lens.len()) + 14
                + (5 + 9 * self.kv_block_lens.len()) + 23
                + str_list_len(&self.registered_layer_names) + 25
                + (5 + 9 * self.registered_layer_indices.len()) + 25
                + (5 + 9 * self.registered_group_indices.len()) + 15 + 9
        }
        /// Appends the encoding to `w`.
        pub fn encode_into(&self, w: &mut Writer) {
            let h = w.begin_struct_map(Self::FIELDS.len());
            let mut n = 0;
            w.str("remote_hostname");
            w.str(self.remote_hostname.as_ref());
            n += 1;
            w.str("remote_port");
            w.int(self.remote_port);
            n += 1;
            w.str("remote_tp_size");
            w.int(self.remote_tp_size);
            n += 1;
            w.str("remote_tp_rank");
            w.int(self.remote_tp_rank);
            n += 1;
            w.str("req_blocks");
            encode_req_blocks(w, &self.req_blocks);
            n += 1;
            w.str("kv_caches_base_addr");
            w.int_list(&self.kv_caches_base_addr);
            n += 1;
            w.str("block_lens");
            w.int_list(&self.block_lens);
            n += 1;
            w.str("kv_block_lens");
            w.int_list(&self.kv_block_lens);
            n += 1;
            if !(self.registered_layer_names.is_empty()) {
                w.str("registered_layer_names");
                str_list(w, &self.registered_layer_names);
                n += 1;
            }
            if !(self.registered_layer_indices.is_empty()) {
                w.str("registered_layer_indices");
                w.int_list(&self.registered_layer_indices);
                n += 1;
            }
            if !(self.registered_group_indices.is_empty()) {
                w.str("registered_group_indices");
                w.int_list(&self.registered_group_indices);
                n += 1;
            }
            if !(self.remote_pp_size == WireInt::from_u64(1)) {
                w.str("remote_pp_size");
                w.int(self.remote_pp_size);
                n += 1;
            }
            w.finish_struct_map(h, n);
        }
    }
    /// Unchanged since `vllm-0.16.0..0.18.1`.
    pub use super::vllm_0_16_0_to_0_18_1::{
        MooncakeXferResponse, MooncakeXferResponseOf, MooncakeXferResponseRef,
    };
    /// Decodes `bytes` as `message` and encodes the result again (`None`: no such message here).
    pub fn round_trip(
        message: &str,
        bytes: &[u8],
        strictness: Strictness,
    ) -> Option<Result<Vec<u8>, DecodeError>> {
        Some(
            match message {
                "MooncakeXferMetadata" => {
                    MooncakeXferMetadataRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                "MooncakeXferResponse" => {
                    MooncakeXferResponseRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                _ => return None,
            },
        )
    }
    /// Decodes `bytes` as `message` (owned or borrowed strings) and drops the result: for benchmarks.
    pub fn decode_and_drop(
        message: &str,
        bytes: &[u8],
        borrowed: bool,
    ) -> Option<Result<(), DecodeError>> {
        Some(
            match (message, borrowed) {
                ("MooncakeXferMetadata", false) => {
                    MooncakeXferMetadata::decode(bytes).map(drop)
                }
                ("MooncakeXferMetadata", true) => {
                    MooncakeXferMetadataRef::decode(bytes).map(drop)
                }
                ("MooncakeXferResponse", false) => {
                    MooncakeXferResponse::decode(bytes).map(drop)
                }
                ("MooncakeXferResponse", true) => {
                    MooncakeXferResponseRef::decode(bytes).map(drop)
                }
                _ => return None,
            },
        )
    }
    /// The field list of `message`, in declaration order.
    pub fn fields(message: &str) -> Option<&'static [&'static str]> {
        Some(
            match message {
                "MooncakeXferMetadata" => &MooncakeXferMetadata::FIELDS,
                "MooncakeXferResponse" => &MooncakeXferResponse::FIELDS,
                _ => return None,
            },
        )
    }
    /// The required mask of `message` (bit `i` set: field `i` must be on the wire).
    pub fn required(message: &str) -> Option<u64> {
        Some(
            match message {
                "MooncakeXferMetadata" => MooncakeXferMetadata::REQUIRED,
                "MooncakeXferResponse" => MooncakeXferResponse::REQUIRED,
                _ => return None,
            },
        )
    }
}
/// `vllm-0.31.0` (0.31.0): Side channel unchanged; POST /register accepts an identical re-registration.
pub mod vllm_0_31_0 {
    use super::*;
    /// The spec revision of this module.
    pub const REVISION: &str = "vllm-0.31.0";
    /// Generation (`spec/PROTOCOL.md#gen2`).
    pub const GENERATION: u32 = 2;
    /// The members of `MooncakeXferResponseStatus` this revision defines (a decoder rejects any other value).
    pub const MOONCAKE_XFER_RESPONSE_STATUS_MEMBERS: [MooncakeXferResponseStatus; 3] = [
        MooncakeXferResponseStatus::FINISH,
        MooncakeXferResponseStatus::CONTINUE,
        MooncakeXferResponseStatus::ERROR,
    ];
    /// Unchanged since `vllm-0.30.0`.
    pub use super::vllm_0_30_0::{
        MooncakeXferMetadata, MooncakeXferMetadataOf, MooncakeXferMetadataRef,
    };
    /// Unchanged since `vllm-0.16.0..0.18.1`.
    pub use super::vllm_0_16_0_to_0_18_1::{
        MooncakeXferResponse, MooncakeXferResponseOf, MooncakeXferResponseRef,
    };
    /// Decodes `bytes` as `message` and encodes the result again (`None`: no such message here).
    pub fn round_trip(
        message: &str,
        bytes: &[u8],
        strictness: Strictness,
    ) -> Option<Result<Vec<u8>, DecodeError>> {
        Some(
            match message {
                "MooncakeXferMetadata" => {
                    MooncakeXferMetadataRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                "MooncakeXferResponse" => {
                    MooncakeXferResponseRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                _ => return None,
            },
        )
    }
    /// Decodes `bytes` as `message` (owned or borrowed strings) and drops the result: for benchmarks.
    pub fn decode_and_drop(
        message: &str,
        bytes: &[u8],
        borrowed: bool,
    ) -> Option<Result<(), DecodeError>> {
        Some(
            match (message, borrowed) {
                ("MooncakeXferMetadata", false) => {
                    MooncakeXferMetadata::decode(bytes).map(drop)
                }
                ("MooncakeXferMetadata", true) => {
                    MooncakeXferMetadataRef::decode(bytes).map(drop)
                }
                ("MooncakeXferResponse", false) => {
                    MooncakeXferResponse::decode(bytes).map(drop)
                }
                ("MooncakeXferResponse", true) => {
                    MooncakeXferResponseRef::decode(bytes).map(drop)
                }
                _ => return None,
            },
        )
    }
    /// The field list of `message`, in declaration order.
    pub fn fields(message: &str) -> Option<&'static [&'static str]> {
        Some(
            match message {
                "MooncakeXferMetadata" => &MooncakeXferMetadata::FIELDS,
                "MooncakeXferResponse" => &MooncakeXferResponse::FIELDS,
                _ => return None,
            },
        )
    }
    /// The required mask of `message` (bit `i` set: field `i` must be on the wire).
    pub fn required(message: &str) -> Option<u64> {
        Some(
            match message {
                "MooncakeXferMetadata" => MooncakeXferMetadata::REQUIRED,
                "MooncakeXferResponse" => MooncakeXferResponse::REQUIRED,
                _ => return None,
            },
        )
    }
}
/// `vllm-0.32.0` (0.32.0): + defaulted registered_shared_group_ids, registered_row_offsets before remote_pp_size
/// (14 fields).
pub mod vllm_0_32_0 {
    use super::*;
    /// The spec revision of this module.
    pub const REVISION: &str = "vllm-0.32.0";
    /// Generation (`spec/PROTOCOL.md#gen2`).
    pub const GENERATION: u32 = 2;
    /// The members of `MooncakeXferResponseStatus` this revision defines (a decoder rejects any other value).
    pub const MOONCAKE_XFER_RESPONSE_STATUS_MEMBERS: [MooncakeXferResponseStatus; 3] = [
        MooncakeXferResponseStatus::FINISH,
        MooncakeXferResponseStatus::CONTINUE,
        MooncakeXferResponseStatus::ERROR,
    ];
    /// Pull request, decoder → prefiller: where to write the blocks of each request (`vllm-0.32.0`
    /// `\[structs.MooncakeXferMetadata\]`, vLLM 0.16.0 wheel,
    /// vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py). Strings held as `S`: see
    /// \[`MooncakeXferMetadata`\] and \[`MooncakeXferMetadataRef`\].
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct MooncakeXferMetadataOf<S> {
        /// Decoder worker IP (get_ip()). Required.
        pub remote_hostname: S,
        /// Decoder's TransferEngine RPC port (not a ZMQ port). Required.
        pub remote_port: WireInt,
        /// Decoder TP world size. Required.
        pub remote_tp_size: WireInt,
        /// Decoder TP rank. Required.
        pub remote_tp_rank: WireInt,
        /// Decoder request id → (transfer id, destination block ids per KV transfer group); \[\] when nothing is
        /// to be written. Required.
        pub req_blocks: Vec<(S, ReqBlocksOf<S>)>,
        /// Base address of each registered decoder KV region. Required.
        pub kv_caches_base_addr: Vec<WireInt>,
        /// Byte stride between consecutive blocks of each region. Required.
        pub block_lens: Vec<WireInt>,
        /// Bytes to move per block of each region (at most the stride). Required.
        pub kv_block_lens: Vec<WireInt>,
        /// Layer name per region (repeated when a layer has several regions). Default `list()`.
        pub registered_layer_names: Vec<S>,
        /// Layer index per region. Default `list()`.
        pub registered_layer_indices: Vec<WireInt>,
        /// KV transfer group per region; -1 marks a region shared by several groups. Default `list()`.
        pub registered_group_indices: Vec<WireInt>,
        /// Groups sharing each region (\[\[g\]\] for an unshared region). Default `list()`.
        pub registered_shared_group_ids: Vec<Vec<WireInt>>,
        /// Byte offset of a packed-row view inside its block row; -1 = not a packed-row view. Default `list()`.
        pub registered_row_offsets: Vec<WireInt>,
        /// Decoder PP size (omitted when 1). Default `1`.
        pub remote_pp_size: WireInt,
    }
    /// MooncakeXferMetadata with owned strings.
    pub type MooncakeXferMetadata = MooncakeXferMetadataOf<String>;
    /// MooncakeXferMetadata with strings borrowed from the decoded bytes (no allocation per string).
    pub type MooncakeXferMetadataRef<'a> = MooncakeXferMetadataOf<&'a str>;
    impl<S> MooncakeXferMetadataOf<S> {
        /// Wire names in declaration order.
        pub const FIELDS: [&'static str; 14] = [
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
        ];
        /// Bit `i` set: field `i` has no default and must be on the wire.
        pub const REQUIRED: u64 = 0b11111111;
    }
    impl<S: Default> Default for MooncakeXferMetadataOf<S> {
        /// Every defaulted field at its default; required ones empty, 0, or 1 for a size.
        fn default() -> Self {
            MooncakeXferMetadataOf {
                remote_hostname: S::default(),
                remote_port: WireInt::from_u64(0),
                remote_tp_size: WireInt::from_u64(1),
                remote_tp_rank: WireInt::from_u64(0),
                req_blocks: Vec::new(),
                kv_caches_base_addr: Vec::new(),
                block_lens: Vec::new(),
                kv_block_lens: Vec::new(),
                registered_layer_names: Vec::new(),
                registered_layer_indices: Vec::new(),
                registered_group_indices: Vec::new(),
                registered_shared_group_ids: Vec::new(),
                registered_row_offsets: Vec::new(),
                remote_pp_size: WireInt::from_u64(1),
            }
        }
    }
    impl<S: Default> MooncakeXferMetadataOf<S> {
        /// The message with these required fields and every other at its default.
        pub fn new(
            remote_hostname: S,
            remote_port: WireInt,
            remote_tp_size: WireInt,
            remote_tp_rank: WireInt,
            req_blocks: Vec<(S, ReqBlocksOf<S>)>,
            kv_caches_base_addr: Vec<WireInt>,
            block_lens: Vec<WireInt>,
            kv_block_lens: Vec<WireInt>,
        ) -> Self {
            MooncakeXferMetadataOf {
                remote_hostname,
                remote_port,
                remote_tp_size,
                remote_tp_rank,
                req_blocks,
                kv_caches_base_addr,
                block_lens,
                kv_block_lens,
                ..Self::default()
            }
        }
    }
    impl<'a, S: WireStr<'a> + Default> MooncakeXferMetadataOf<S> {
        /// Decodes as msgspec does with vllm-0.32.0's class.
        pub fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {
            Self::decode_with(bytes, Strictness::Msgspec)
        }
        /// Decodes; with [`Strictness::OpenStatus`] an enum value the revision lacks is kept instead of rejected.
        pub fn decode_with(
            bytes: &'a [u8],
            strictness: Strictness,
        ) -> Result<Self, DecodeError> {
            let mut d = De::new(bytes)?;
            let v = Self::decode_in(&mut d, strictness)?;
            d.finish()?;
            Ok(v)
        }
        /// Decodes one value at the reader's position (inside a frame).
        pub(crate) fn decode_in(
            d: &mut De<'a>,
            strictness: Strictness,
        ) -> Result<Self, DecodeError> {
            let mut v = Self::default();
            let mut seen = 0u64;
            d.struct_map(
                &Self::FIELDS,
                |d, i| {
                    seen |= 1 << i;
                    match i {
                        0 => v.remote_hostname = d.str()?,
                        1 => v.remote_port = d.int()?,
                        2 => v.remote_tp_size = d.int()?,
                        3 => v.remote_tp_rank = d.int()?,
                        4 => v.req_blocks = d.str_dict(De::blocks_value)?,
                        5 => v.kv_caches_base_addr = d.list_int()?,
                        6 => v.block_lens = d.list_int()?,
                        7 => v.kv_block_lens = d.list_int()?,
                        8 => v.registered_layer_names = d.list_str()?,
                        9 => v.registered_layer_indices = d.list_int()?,
                        10 => v.registered_group_indices = d.list_int()?,
                        11 => v.registered_shared_group_ids = d.list_list_int()?,
                        12 => v.registered_row_offsets = d.list_int()?,
                        _ => v.remote_pp_size = d.int()?,
                    }
                    Ok(())
                },
            )?;
            let missing = Self::REQUIRED & !seen;
            if missing != 0 {
                return Err(d.missing(Self::FIELDS[missing.trailing_zeros() as usize]));
            }
            Ok(v)
        }
    }
    impl MooncakeXferMetadataRef<'_> {
        /// The same message with owned strings.
        pub fn to_owned_message(&self) -> MooncakeXferMetadata {
            MooncakeXferMetadataOf {
                remote_hostname: self.remote_hostname.to_string(),
                remote_port: self.remote_port,
                remote_tp_size: self.remote_tp_size,
                remote_tp_rank: self.remote_tp_rank,
                req_blocks: self
                    .req_blocks
                    .iter()
                    .map(|(k, b)| (k.to_string(), b.to_owned_blocks()))
                    .collect(),
                kv_caches_base_addr: self.kv_caches_base_addr.clone(),
                block_lens: self.block_lens.clone(),
                kv_block_lens: self.kv_block_lens.clone(),
                registered_layer_names: self
                    .registered_layer_names
                    .iter()
                    .map(|x0| x0.to_string())
                    .collect(),
                registered_layer_indices: self.registered_layer_indices.clone(),
                registered_group_indices: self.registered_group_indices.clone(),
                registered_shared_group_ids: self.registered_shared_group_ids.clone(),
                registered_row_offsets: self.registered_row_offsets.clone(),
                remote_pp_size: self.remote_pp_size,
            }
        }
    }
    impl<S: AsRef<str>> MooncakeXferMetadataOf<S> {
        /// Encodes as msgspec does (declaration order, defaults omitted).
        pub fn encode(&self) -> Vec<u8> {
            let mut w = Writer::with_capacity(self.encoded_len_hint());
            self.encode_into(&mut w);
            w.into_bytes()
        }
        pub(crate) fn encoded_len_hint(&self) -> usize {
            5 + 16 + (self.remote_hostname.as_ref().len() + 5) + 12 + 9 + 15 + 9 + 15 + 9
                + 11 + req_blocks_len(&self.req_blocks) + 20
                + (5 + 9 * self.kv_caches_base_addr.len()) + 11
                + (5 + 9 * self.block_lens.len()) + 14
                + (5 + 9 * self.kv_block_lens.len()) + 23
                + str_list_len(&self.registered_layer_names) + 25
                + (5 + 9 * self.registered_layer_indices.len()) + 25
                + (5 + 9 * self.registered_group_indices.len()) + 28
                + (5
                    + self
                        .registered_shared_group_ids
                        .iter()
                        .map(|x0| (5 + 9 * x0.len()))
                        .sum::<usize>()) + 23
                + (5 + 9 * self.registered_row_offsets.len()) + 15 + 9
        }
        /// Appends the encoding to `w`.
        pub fn encode_into(&self, w: &mut Writer) {
            let h = w.begin_struct_map(Self::FIELDS.len());
            let mut n = 0;
            w.str("remote_hostname");
            w.str(self.remote_hostname.as_ref());
            n += 1;
            w.str("remote_port");
            w.int(self.remote_port);
            n += 1;
            w.str("remote_tp_size");
            w.int(self.remote_tp_size);
            n += 1;
            w.str("remote_tp_rank");
            w.int(self.remote_tp_rank);
            n += 1;
            w.str("req_blocks");
            encode_req_blocks(w, &self.req_blocks);
            n += 1;
            w.str("kv_caches_base_addr");
            w.int_list(&self.kv_caches_base_addr);
            n += 1;
            w.str("block_lens");
            w.int_list(&self.block_lens);
            n += 1;
            w.str("kv_block_lens");
            w.int_list(&self.kv_block_lens);
            n += 1;
            if !(self.registered_layer_names.is_empty()) {
                w.str("registered_layer_names");
                str_list(w, &self.registered_layer_names);
                n += 1;
            }
            if !(self.registered_layer_indices.is_empty()) {
                w.str("registered_layer_indices");
                w.int_list(&self.registered_layer_indices);
                n += 1;
            }
            if !(self.registered_group_indices.is_empty()) {
                w.str("registered_group_indices");
                w.int_list(&self.registered_group_indices);
                n += 1;
            }
            if !(self.registered_shared_group_ids.is_empty()) {
                w.str("registered_shared_group_ids");
                int_lists(w, &self.registered_shared_group_ids);
                n += 1;
            }
            if !(self.registered_row_offsets.is_empty()) {
                w.str("registered_row_offsets");
                w.int_list(&self.registered_row_offsets);
                n += 1;
            }
            if !(self.remote_pp_size == WireInt::from_u64(1)) {
                w.str("remote_pp_size");
                w.int(self.remote_pp_size);
                n += 1;
            }
            w.finish_struct_map(h, n);
        }
    }
    /// Unchanged since `vllm-0.16.0..0.18.1`.
    pub use super::vllm_0_16_0_to_0_18_1::{
        MooncakeXferResponse, MooncakeXferResponseOf, MooncakeXferResponseRef,
    };
    /// Decodes `bytes` as `message` and encodes the result again (`None`: no such message here).
    pub fn round_trip(
        message: &str,
        bytes: &[u8],
        strictness: Strictness,
    ) -> Option<Result<Vec<u8>, DecodeError>> {
        Some(
            match message {
                "MooncakeXferMetadata" => {
                    MooncakeXferMetadataRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                "MooncakeXferResponse" => {
                    MooncakeXferResponseRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                _ => return None,
            },
        )
    }
    /// Decodes `bytes` as `message` (owned or borrowed strings) and drops the result: for benchmarks.
    pub fn decode_and_drop(
        message: &str,
        bytes: &[u8],
        borrowed: bool,
    ) -> Option<Result<(), DecodeError>> {
        Some(
            match (message, borrowed) {
                ("MooncakeXferMetadata", false) => {
                    MooncakeXferMetadata::decode(bytes).map(drop)
                }
                ("MooncakeXferMetadata", true) => {
                    MooncakeXferMetadataRef::decode(bytes).map(drop)
                }
                ("MooncakeXferResponse", false) => {
                    MooncakeXferResponse::decode(bytes).map(drop)
                }
                ("MooncakeXferResponse", true) => {
                    MooncakeXferResponseRef::decode(bytes).map(drop)
                }
                _ => return None,
            },
        )
    }
    /// The field list of `message`, in declaration order.
    pub fn fields(message: &str) -> Option<&'static [&'static str]> {
        Some(
            match message {
                "MooncakeXferMetadata" => &MooncakeXferMetadata::FIELDS,
                "MooncakeXferResponse" => &MooncakeXferResponse::FIELDS,
                _ => return None,
            },
        )
    }
    /// The required mask of `message` (bit `i` set: field `i` must be on the wire).
    pub fn required(message: &str) -> Option<u64> {
        Some(
            match message {
                "MooncakeXferMetadata" => MooncakeXferMetadata::REQUIRED,
                "MooncakeXferResponse" => MooncakeXferResponse::REQUIRED,
                _ => return None,
            },
        )
    }
}
/// `vllm-0.33.0` (0.33.0): + layout_id on request (15 fields) and response (5 fields); + status LAYOUT_MISS = 3;
/// layout caching.
pub mod vllm_0_33_0 {
    use super::*;
    /// The spec revision of this module.
    pub const REVISION: &str = "vllm-0.33.0";
    /// Generation (`spec/PROTOCOL.md#gen2`).
    pub const GENERATION: u32 = 2;
    /// The members of `MooncakeXferResponseStatus` this revision defines (a decoder rejects any other value).
    pub const MOONCAKE_XFER_RESPONSE_STATUS_MEMBERS: [MooncakeXferResponseStatus; 4] = [
        MooncakeXferResponseStatus::FINISH,
        MooncakeXferResponseStatus::CONTINUE,
        MooncakeXferResponseStatus::ERROR,
        MooncakeXferResponseStatus::LAYOUT_MISS,
    ];
    /// Pull request, decoder → prefiller: where to write the blocks of each request (`vllm-0.33.0`
    /// `\[structs.MooncakeXferMetadata\]`, vLLM 0.16.0 wheel,
    /// vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py). Strings held as `S`: see
    /// \[`MooncakeXferMetadata`\] and \[`MooncakeXferMetadataRef`\].
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct MooncakeXferMetadataOf<S> {
        /// Decoder worker IP (get_ip()). Required.
        pub remote_hostname: S,
        /// Decoder's TransferEngine RPC port (not a ZMQ port). Required.
        pub remote_port: WireInt,
        /// Decoder TP world size. Required.
        pub remote_tp_size: WireInt,
        /// Decoder TP rank. Required.
        pub remote_tp_rank: WireInt,
        /// Decoder request id → (transfer id, destination block ids per KV transfer group); \[\] when nothing is
        /// to be written. Required.
        pub req_blocks: Vec<(S, ReqBlocksOf<S>)>,
        /// Base address of each registered decoder KV region. Required.
        pub kv_caches_base_addr: Vec<WireInt>,
        /// Byte stride between consecutive blocks of each region. Required.
        pub block_lens: Vec<WireInt>,
        /// Bytes to move per block of each region (at most the stride). Required.
        pub kv_block_lens: Vec<WireInt>,
        /// Layer name per region (repeated when a layer has several regions). Default `list()`.
        pub registered_layer_names: Vec<S>,
        /// Layer index per region. Default `list()`.
        pub registered_layer_indices: Vec<WireInt>,
        /// KV transfer group per region; -1 marks a region shared by several groups. Default `list()`.
        pub registered_group_indices: Vec<WireInt>,
        /// Groups sharing each region (\[\[g\]\] for an unshared region). Default `list()`.
        pub registered_shared_group_ids: Vec<Vec<WireInt>>,
        /// Byte offset of a packed-row view inside its block row; -1 = not a packed-row view. Default `list()`.
        pub registered_row_offsets: Vec<WireInt>,
        /// Decoder PP size (omitted when 1). Default `1`.
        pub remote_pp_size: WireInt,
        /// Random odd 63-bit id of the decoder's current registration; 0 = the layout is always sent. Default
        /// `0`.
        pub layout_id: WireInt,
    }
    /// MooncakeXferMetadata with owned strings.
    pub type MooncakeXferMetadata = MooncakeXferMetadataOf<String>;
    /// MooncakeXferMetadata with strings borrowed from the decoded bytes (no allocation per string).
    pub type MooncakeXferMetadataRef<'a> = MooncakeXferMetadataOf<&'a str>;
    impl<S> MooncakeXferMetadataOf<S> {
        /// Wire names in declaration order.
        pub const FIELDS: [&'static str; 15] = [
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
        /// Bit `i` set: field `i` has no default and must be on the wire.
        pub const REQUIRED: u64 = 0b11111111;
    }
    impl<S: Default> Default for MooncakeXferMetadataOf<S> {
        /// Every defaulted field at its default; required ones empty, 0, or 1 for a size.
        fn default() -> Self {
            MooncakeXferMetadataOf {
                remote_hostname: S::default(),
                remote_port: WireInt::from_u64(0),
                remote_tp_size: WireInt::from_u64(1),
                remote_tp_rank: WireInt::from_u64(0),
                req_blocks: Vec::new(),
                kv_caches_base_addr: Vec::new(),
                block_lens: Vec::new(),
                kv_block_lens: Vec::new(),
                registered_layer_names: Vec::new(),
                registered_layer_indices: Vec::new(),
                registered_group_indices: Vec::new(),
                registered_shared_group_ids: Vec::new(),
                registered_row_offsets: Vec::new(),
                remote_pp_size: WireInt::from_u64(1),
                layout_id: WireInt::from_u64(0),
            }
        }
    }
    impl<S: Default> MooncakeXferMetadataOf<S> {
        /// The message with these required fields and every other at its default.
        pub fn new(
            remote_hostname: S,
            remote_port: WireInt,
            remote_tp_size: WireInt,
            remote_tp_rank: WireInt,
            req_blocks: Vec<(S, ReqBlocksOf<S>)>,
            kv_caches_base_addr: Vec<WireInt>,
            block_lens: Vec<WireInt>,
            kv_block_lens: Vec<WireInt>,
        ) -> Self {
            MooncakeXferMetadataOf {
                remote_hostname,
                remote_port,
                remote_tp_size,
                remote_tp_rank,
                req_blocks,
                kv_caches_base_addr,
                block_lens,
                kv_block_lens,
                ..Self::default()
            }
        }
    }
    impl<'a, S: WireStr<'a> + Default> MooncakeXferMetadataOf<S> {
        /// Decodes as msgspec does with vllm-0.33.0's class.
        pub fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {
            Self::decode_with(bytes, Strictness::Msgspec)
        }
        /// Decodes; with [`Strictness::OpenStatus`] an enum value the revision lacks is kept instead of rejected.
        pub fn decode_with(
            bytes: &'a [u8],
            strictness: Strictness,
        ) -> Result<Self, DecodeError> {
            let mut d = De::new(bytes)?;
            let v = Self::decode_in(&mut d, strictness)?;
            d.finish()?;
            Ok(v)
        }
        /// Decodes one value at the reader's position (inside a frame).
        pub(crate) fn decode_in(
            d: &mut De<'a>,
            strictness: Strictness,
        ) -> Result<Self, DecodeError> {
            let mut v = Self::default();
            let mut seen = 0u64;
            d.struct_map(
                &Self::FIELDS,
                |d, i| {
                    seen |= 1 << i;
                    match i {
                        0 => v.remote_hostname = d.str()?,
                        1 => v.remote_port = d.int()?,
                        2 => v.remote_tp_size = d.int()?,
                        3 => v.remote_tp_rank = d.int()?,
                        4 => v.req_blocks = d.str_dict(De::blocks_value)?,
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
                },
            )?;
            let missing = Self::REQUIRED & !seen;
            if missing != 0 {
                return Err(d.missing(Self::FIELDS[missing.trailing_zeros() as usize]));
            }
            Ok(v)
        }
    }
    impl MooncakeXferMetadataRef<'_> {
        /// The same message with owned strings.
        pub fn to_owned_message(&self) -> MooncakeXferMetadata {
            MooncakeXferMetadataOf {
                remote_hostname: self.remote_hostname.to_string(),
                remote_port: self.remote_port,
                remote_tp_size: self.remote_tp_size,
                remote_tp_rank: self.remote_tp_rank,
                req_blocks: self
                    .req_blocks
                    .iter()
                    .map(|(k, b)| (k.to_string(), b.to_owned_blocks()))
                    .collect(),
                kv_caches_base_addr: self.kv_caches_base_addr.clone(),
                block_lens: self.block_lens.clone(),
                kv_block_lens: self.kv_block_lens.clone(),
                registered_layer_names: self
                    .registered_layer_names
                    .iter()
                    .map(|x0| x0.to_string())
                    .collect(),
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
        /// Encodes as msgspec does (declaration order, defaults omitted).
        pub fn encode(&self) -> Vec<u8> {
            let mut w = Writer::with_capacity(self.encoded_len_hint());
            self.encode_into(&mut w);
            w.into_bytes()
        }
        pub(crate) fn encoded_len_hint(&self) -> usize {
            5 + 16 + (self.remote_hostname.as_ref().len() + 5) + 12 + 9 + 15 + 9 + 15 + 9
                + 11 + req_blocks_len(&self.req_blocks) + 20
                + (5 + 9 * self.kv_caches_base_addr.len()) + 11
                + (5 + 9 * self.block_lens.len()) + 14
                + (5 + 9 * self.kv_block_lens.len()) + 23
                + str_list_len(&self.registered_layer_names) + 25
                + (5 + 9 * self.registered_layer_indices.len()) + 25
                + (5 + 9 * self.registered_group_indices.len()) + 28
                + (5
                    + self
                        .registered_shared_group_ids
                        .iter()
                        .map(|x0| (5 + 9 * x0.len()))
                        .sum::<usize>()) + 23
                + (5 + 9 * self.registered_row_offsets.len()) + 15 + 9 + 10 + 9
        }
        /// Appends the encoding to `w`.
        pub fn encode_into(&self, w: &mut Writer) {
            let h = w.begin_struct_map(Self::FIELDS.len());
            let mut n = 0;
            w.str("remote_hostname");
            w.str(self.remote_hostname.as_ref());
            n += 1;
            w.str("remote_port");
            w.int(self.remote_port);
            n += 1;
            w.str("remote_tp_size");
            w.int(self.remote_tp_size);
            n += 1;
            w.str("remote_tp_rank");
            w.int(self.remote_tp_rank);
            n += 1;
            w.str("req_blocks");
            encode_req_blocks(w, &self.req_blocks);
            n += 1;
            w.str("kv_caches_base_addr");
            w.int_list(&self.kv_caches_base_addr);
            n += 1;
            w.str("block_lens");
            w.int_list(&self.block_lens);
            n += 1;
            w.str("kv_block_lens");
            w.int_list(&self.kv_block_lens);
            n += 1;
            if !(self.registered_layer_names.is_empty()) {
                w.str("registered_layer_names");
                str_list(w, &self.registered_layer_names);
                n += 1;
            }
            if !(self.registered_layer_indices.is_empty()) {
                w.str("registered_layer_indices");
                w.int_list(&self.registered_layer_indices);
                n += 1;
            }
            if !(self.registered_group_indices.is_empty()) {
                w.str("registered_group_indices");
                w.int_list(&self.registered_group_indices);
                n += 1;
            }
            if !(self.registered_shared_group_ids.is_empty()) {
                w.str("registered_shared_group_ids");
                int_lists(w, &self.registered_shared_group_ids);
                n += 1;
            }
            if !(self.registered_row_offsets.is_empty()) {
                w.str("registered_row_offsets");
                w.int_list(&self.registered_row_offsets);
                n += 1;
            }
            if !(self.remote_pp_size == WireInt::from_u64(1)) {
                w.str("remote_pp_size");
                w.int(self.remote_pp_size);
                n += 1;
            }
            if !(self.layout_id == WireInt::from_u64(0)) {
                w.str("layout_id");
                w.int(self.layout_id);
                n += 1;
            }
            w.finish_struct_map(h, n);
        }
    }
    /// Prefiller reply, prefiller → decoder. One or more per request message: CONTINUE* then one terminal
    /// status (`vllm-0.33.0` `\[structs.MooncakeXferResponse\]`, vLLM 0.16.0 wheel,
    /// vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py). Strings held as `S`: see
    /// \[`MooncakeXferResponse`\] and \[`MooncakeXferResponseRef`\].
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct MooncakeXferResponseOf<S> {
        /// See the status enum. Required.
        pub status: MooncakeXferResponseStatus,
        /// Decoder request ids written (or with nothing to write) in this round. Default `None`.
        pub ok_reqs: Option<StrList>,
        /// Decoder request ids that failed in this round. Default `None`.
        pub err_reqs: Option<StrList>,
        /// Free-text reason. Default `None`.
        pub err_msg: Option<S>,
        /// Echo of the request's layout_id in CONTINUE/FINISH once the layout is cached; absent in
        /// ERROR/LAYOUT_MISS. Default `0`.
        pub layout_id: WireInt,
    }
    /// MooncakeXferResponse with owned strings.
    pub type MooncakeXferResponse = MooncakeXferResponseOf<String>;
    /// MooncakeXferResponse with strings borrowed from the decoded bytes (no allocation per string).
    pub type MooncakeXferResponseRef<'a> = MooncakeXferResponseOf<&'a str>;
    impl<S> MooncakeXferResponseOf<S> {
        /// Wire names in declaration order.
        pub const FIELDS: [&'static str; 5] = [
            "status",
            "ok_reqs",
            "err_reqs",
            "err_msg",
            "layout_id",
        ];
        /// Bit `i` set: field `i` has no default and must be on the wire.
        pub const REQUIRED: u64 = 0b1;
    }
    impl<S: Default> Default for MooncakeXferResponseOf<S> {
        /// Every defaulted field at its default; required ones empty, 0, or 1 for a size.
        fn default() -> Self {
            MooncakeXferResponseOf {
                status: MooncakeXferResponseStatus::FINISH,
                ok_reqs: None,
                err_reqs: None,
                err_msg: None,
                layout_id: WireInt::from_u64(0),
            }
        }
    }
    impl<S: Default> MooncakeXferResponseOf<S> {
        /// The message with these required fields and every other at its default.
        pub fn new(status: MooncakeXferResponseStatus) -> Self {
            MooncakeXferResponseOf {
                status,
                ..Self::default()
            }
        }
    }
    impl<'a, S: WireStr<'a> + Default> MooncakeXferResponseOf<S> {
        /// Decodes as msgspec does with vllm-0.33.0's class.
        pub fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {
            Self::decode_with(bytes, Strictness::Msgspec)
        }
        /// Decodes; with [`Strictness::OpenStatus`] an enum value the revision lacks is kept instead of rejected.
        pub fn decode_with(
            bytes: &'a [u8],
            strictness: Strictness,
        ) -> Result<Self, DecodeError> {
            let mut d = De::new(bytes)?;
            let v = Self::decode_in(&mut d, strictness)?;
            d.finish()?;
            Ok(v)
        }
        /// Decodes one value at the reader's position (inside a frame).
        pub(crate) fn decode_in(
            d: &mut De<'a>,
            strictness: Strictness,
        ) -> Result<Self, DecodeError> {
            let mut v = Self::default();
            let mut seen = 0u64;
            d.struct_map(
                &Self::FIELDS,
                |d, i| {
                    seen |= 1 << i;
                    match i {
                        0 => {
                            v.status = d
                                .enum_member(
                                    &MOONCAKE_XFER_RESPONSE_STATUS_MEMBERS,
                                    strictness,
                                )?;
                        }
                        1 => v.ok_reqs = d.opt_str_list()?,
                        2 => v.err_reqs = d.opt_str_list()?,
                        3 => v.err_msg = d.opt_str()?,
                        _ => v.layout_id = d.int()?,
                    }
                    Ok(())
                },
            )?;
            let missing = Self::REQUIRED & !seen;
            if missing != 0 {
                return Err(d.missing(Self::FIELDS[missing.trailing_zeros() as usize]));
            }
            Ok(v)
        }
    }
    impl MooncakeXferResponseRef<'_> {
        /// The same message with owned strings.
        pub fn to_owned_message(&self) -> MooncakeXferResponse {
            MooncakeXferResponseOf {
                status: self.status,
                ok_reqs: self.ok_reqs.clone(),
                err_reqs: self.err_reqs.clone(),
                err_msg: self.err_msg.map(str::to_string),
                layout_id: self.layout_id,
            }
        }
    }
    impl<S: AsRef<str>> MooncakeXferResponseOf<S> {
        /// Encodes as msgspec does (declaration order, defaults omitted).
        pub fn encode(&self) -> Vec<u8> {
            let mut w = Writer::with_capacity(self.encoded_len_hint());
            self.encode_into(&mut w);
            w.into_bytes()
        }
        pub(crate) fn encoded_len_hint(&self) -> usize {
            5 + 7 + 9 + 8 + self.ok_reqs.as_ref().map_or(1, str_list_buf_len) + 9
                + self.err_reqs.as_ref().map_or(1, str_list_buf_len) + 8
                + self.err_msg.as_ref().map_or(1, |s| s.as_ref().len() + 5) + 10 + 9
        }
        /// Appends the encoding to `w`.
        pub fn encode_into(&self, w: &mut Writer) {
            let h = w.begin_struct_map(Self::FIELDS.len());
            let mut n = 0;
            w.str("status");
            w.sint(self.status.0);
            n += 1;
            if !(self.ok_reqs.is_none()) {
                w.str("ok_reqs");
                if let Some(l) = &self.ok_reqs { write_str_list(w, l) } else { w.nil() }
                n += 1;
            }
            if !(self.err_reqs.is_none()) {
                w.str("err_reqs");
                if let Some(l) = &self.err_reqs { write_str_list(w, l) } else { w.nil() }
                n += 1;
            }
            if !(self.err_msg.is_none()) {
                w.str("err_msg");
                if let Some(s) = &self.err_msg { w.str(s.as_ref()) } else { w.nil() }
                n += 1;
            }
            if !(self.layout_id == WireInt::from_u64(0)) {
                w.str("layout_id");
                w.int(self.layout_id);
                n += 1;
            }
            w.finish_struct_map(h, n);
        }
    }
    /// Decodes `bytes` as `message` and encodes the result again (`None`: no such message here).
    pub fn round_trip(
        message: &str,
        bytes: &[u8],
        strictness: Strictness,
    ) -> Option<Result<Vec<u8>, DecodeError>> {
        Some(
            match message {
                "MooncakeXferMetadata" => {
                    MooncakeXferMetadataRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                "MooncakeXferResponse" => {
                    MooncakeXferResponseRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                _ => return None,
            },
        )
    }
    /// Decodes `bytes` as `message` (owned or borrowed strings) and drops the result: for benchmarks.
    pub fn decode_and_drop(
        message: &str,
        bytes: &[u8],
        borrowed: bool,
    ) -> Option<Result<(), DecodeError>> {
        Some(
            match (message, borrowed) {
                ("MooncakeXferMetadata", false) => {
                    MooncakeXferMetadata::decode(bytes).map(drop)
                }
                ("MooncakeXferMetadata", true) => {
                    MooncakeXferMetadataRef::decode(bytes).map(drop)
                }
                ("MooncakeXferResponse", false) => {
                    MooncakeXferResponse::decode(bytes).map(drop)
                }
                ("MooncakeXferResponse", true) => {
                    MooncakeXferResponseRef::decode(bytes).map(drop)
                }
                _ => return None,
            },
        )
    }
    /// The field list of `message`, in declaration order.
    pub fn fields(message: &str) -> Option<&'static [&'static str]> {
        Some(
            match message {
                "MooncakeXferMetadata" => &MooncakeXferMetadata::FIELDS,
                "MooncakeXferResponse" => &MooncakeXferResponse::FIELDS,
                _ => return None,
            },
        )
    }
    /// The required mask of `message` (bit `i` set: field `i` must be on the wire).
    pub fn required(message: &str) -> Option<u64> {
        Some(
            match message {
                "MooncakeXferMetadata" => MooncakeXferMetadata::REQUIRED,
                "MooncakeXferResponse" => MooncakeXferResponse::REQUIRED,
                _ => return None,
            },
        )
    }
}
/// `vllm-0.34.0` (0.34.0): + MooncakeLeaseHeartbeat (decoder → prefiller ROUTER) and KV leases
/// (kv_lease_duration); a pull of an expired transfer is answered at once; descending block runs are reversed
/// before planning.
pub mod vllm_0_34_0 {
    use super::*;
    /// The spec revision of this module.
    pub const REVISION: &str = "vllm-0.34.0";
    /// Generation (`spec/PROTOCOL.md#gen2`).
    pub const GENERATION: u32 = 2;
    /// The members of `MooncakeXferResponseStatus` this revision defines (a decoder rejects any other value).
    pub const MOONCAKE_XFER_RESPONSE_STATUS_MEMBERS: [MooncakeXferResponseStatus; 4] = [
        MooncakeXferResponseStatus::FINISH,
        MooncakeXferResponseStatus::CONTINUE,
        MooncakeXferResponseStatus::ERROR,
        MooncakeXferResponseStatus::LAYOUT_MISS,
    ];
    /// Unchanged since `vllm-0.33.0`.
    pub use super::vllm_0_33_0::{
        MooncakeXferMetadata, MooncakeXferMetadataOf, MooncakeXferMetadataRef,
    };
    /// Lease renewal, decoder → prefiller: the transfers one prefiller engine holds for this decoder that it
    /// has not pulled yet. Shares the prefiller's ROUTER with pulls; a pull decodes as a heartbeat with no ids
    /// (msgspec skips unknown fields), which is how the prefiller tells them apart (`vllm-0.34.0`
    /// `\[structs.MooncakeLeaseHeartbeat\]`, vLLM 0.34.0 wheel,
    /// vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py). Strings held as `S`: see
    /// \[`MooncakeLeaseHeartbeat`\] and \[`MooncakeLeaseHeartbeatRef`\].
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct MooncakeLeaseHeartbeatOf<S> {
        /// Transfer ids whose KV lease to renew; empty (or absent) means this is not a heartbeat. Default
        /// `list()`.
        pub lease_transfer_ids: Vec<S>,
    }
    /// MooncakeLeaseHeartbeat with owned strings.
    pub type MooncakeLeaseHeartbeat = MooncakeLeaseHeartbeatOf<String>;
    /// MooncakeLeaseHeartbeat with strings borrowed from the decoded bytes (no allocation per string).
    pub type MooncakeLeaseHeartbeatRef<'a> = MooncakeLeaseHeartbeatOf<&'a str>;
    impl<S> MooncakeLeaseHeartbeatOf<S> {
        /// Wire names in declaration order.
        pub const FIELDS: [&'static str; 1] = ["lease_transfer_ids"];
        /// Bit `i` set: field `i` has no default and must be on the wire.
        pub const REQUIRED: u64 = 0b0;
    }
    impl<S: Default> Default for MooncakeLeaseHeartbeatOf<S> {
        /// Every defaulted field at its default; required ones empty, 0, or 1 for a size.
        fn default() -> Self {
            MooncakeLeaseHeartbeatOf {
                lease_transfer_ids: Vec::new(),
            }
        }
    }
    impl<S: Default> MooncakeLeaseHeartbeatOf<S> {
        /// The message with these required fields and every other at its default.
        pub fn new() -> Self {
            MooncakeLeaseHeartbeatOf {
                ..Self::default()
            }
        }
    }
    impl<'a, S: WireStr<'a> + Default> MooncakeLeaseHeartbeatOf<S> {
        /// Decodes as msgspec does with vllm-0.34.0's class.
        pub fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {
            Self::decode_with(bytes, Strictness::Msgspec)
        }
        /// Decodes; with [`Strictness::OpenStatus`] an enum value the revision lacks is kept instead of rejected.
        pub fn decode_with(
            bytes: &'a [u8],
            strictness: Strictness,
        ) -> Result<Self, DecodeError> {
            let mut d = De::new(bytes)?;
            let v = Self::decode_in(&mut d, strictness)?;
            d.finish()?;
            Ok(v)
        }
        /// Decodes one value at the reader's position (inside a frame).
        pub(crate) fn decode_in(
            d: &mut De<'a>,
            strictness: Strictness,
        ) -> Result<Self, DecodeError> {
            let mut v = Self::default();
            let mut seen = 0u64;
            d.struct_map(
                &Self::FIELDS,
                |d, i| {
                    seen |= 1 << i;
                    match i {
                        _ => v.lease_transfer_ids = d.list_str()?,
                    }
                    Ok(())
                },
            )?;
            let missing = Self::REQUIRED & !seen;
            if missing != 0 {
                return Err(d.missing(Self::FIELDS[missing.trailing_zeros() as usize]));
            }
            Ok(v)
        }
    }
    impl MooncakeLeaseHeartbeatRef<'_> {
        /// The same message with owned strings.
        pub fn to_owned_message(&self) -> MooncakeLeaseHeartbeat {
            MooncakeLeaseHeartbeatOf {
                lease_transfer_ids: self
                    .lease_transfer_ids
                    .iter()
                    .map(|x0| x0.to_string())
                    .collect(),
            }
        }
    }
    impl<S: AsRef<str>> MooncakeLeaseHeartbeatOf<S> {
        /// Encodes as msgspec does (declaration order, defaults omitted).
        pub fn encode(&self) -> Vec<u8> {
            let mut w = Writer::with_capacity(self.encoded_len_hint());
            self.encode_into(&mut w);
            w.into_bytes()
        }
        pub(crate) fn encoded_len_hint(&self) -> usize {
            5 + 19 + str_list_len(&self.lease_transfer_ids)
        }
        /// Appends the encoding to `w`.
        pub fn encode_into(&self, w: &mut Writer) {
            let h = w.begin_struct_map(Self::FIELDS.len());
            let mut n = 0;
            if !(self.lease_transfer_ids.is_empty()) {
                w.str("lease_transfer_ids");
                str_list(w, &self.lease_transfer_ids);
                n += 1;
            }
            w.finish_struct_map(h, n);
        }
    }
    /// Unchanged since `vllm-0.33.0`.
    pub use super::vllm_0_33_0::{
        MooncakeXferResponse, MooncakeXferResponseOf, MooncakeXferResponseRef,
    };
    /// Decodes `bytes` as `message` and encodes the result again (`None`: no such message here).
    pub fn round_trip(
        message: &str,
        bytes: &[u8],
        strictness: Strictness,
    ) -> Option<Result<Vec<u8>, DecodeError>> {
        Some(
            match message {
                "MooncakeXferMetadata" => {
                    MooncakeXferMetadataRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                "MooncakeLeaseHeartbeat" => {
                    MooncakeLeaseHeartbeatRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                "MooncakeXferResponse" => {
                    MooncakeXferResponseRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                _ => return None,
            },
        )
    }
    /// Decodes `bytes` as `message` (owned or borrowed strings) and drops the result: for benchmarks.
    pub fn decode_and_drop(
        message: &str,
        bytes: &[u8],
        borrowed: bool,
    ) -> Option<Result<(), DecodeError>> {
        Some(
            match (message, borrowed) {
                ("MooncakeXferMetadata", false) => {
                    MooncakeXferMetadata::decode(bytes).map(drop)
                }
                ("MooncakeXferMetadata", true) => {
                    MooncakeXferMetadataRef::decode(bytes).map(drop)
                }
                ("MooncakeLeaseHeartbeat", false) => {
                    MooncakeLeaseHeartbeat::decode(bytes).map(drop)
                }
                ("MooncakeLeaseHeartbeat", true) => {
                    MooncakeLeaseHeartbeatRef::decode(bytes).map(drop)
                }
                ("MooncakeXferResponse", false) => {
                    MooncakeXferResponse::decode(bytes).map(drop)
                }
                ("MooncakeXferResponse", true) => {
                    MooncakeXferResponseRef::decode(bytes).map(drop)
                }
                _ => return None,
            },
        )
    }
    /// The field list of `message`, in declaration order.
    pub fn fields(message: &str) -> Option<&'static [&'static str]> {
        Some(
            match message {
                "MooncakeXferMetadata" => &MooncakeXferMetadata::FIELDS,
                "MooncakeLeaseHeartbeat" => &MooncakeLeaseHeartbeat::FIELDS,
                "MooncakeXferResponse" => &MooncakeXferResponse::FIELDS,
                _ => return None,
            },
        )
    }
    /// The required mask of `message` (bit `i` set: field `i` must be on the wire).
    pub fn required(message: &str) -> Option<u64> {
        Some(
            match message {
                "MooncakeXferMetadata" => MooncakeXferMetadata::REQUIRED,
                "MooncakeLeaseHeartbeat" => MooncakeLeaseHeartbeat::REQUIRED,
                "MooncakeXferResponse" => MooncakeXferResponse::REQUIRED,
                _ => return None,
            },
        )
    }
}
/// The newest revision.
pub use vllm_0_34_0 as newest;
/// The newest revision of generation 1.
pub use vllm_0_13_0_to_0_15_1 as newest_gen1;
/// The newest revision of generation 2.
pub use vllm_0_34_0 as newest_gen2;
/// The newest revision with a release (what a user of released software speaks).
pub use vllm_0_34_0 as newest_released;
/// Every revision of the push family, oldest first.
pub const REVISIONS: [GeneratedRevision; 13] = [
    GeneratedRevision {
        revision: "vllm-0.13.0..0.15.1",
        messages: &["MooncakeAgentMetadata"],
        round_trip: vllm_0_13_0_to_0_15_1::round_trip,
        decode_and_drop: vllm_0_13_0_to_0_15_1::decode_and_drop,
        fields: vllm_0_13_0_to_0_15_1::fields,
        required: vllm_0_13_0_to_0_15_1::required,
    },
    GeneratedRevision {
        revision: "vllm-0.16.0..0.18.1",
        messages: &["MooncakeXferMetadata", "MooncakeXferResponse"],
        round_trip: vllm_0_16_0_to_0_18_1::round_trip,
        decode_and_drop: vllm_0_16_0_to_0_18_1::decode_and_drop,
        fields: vllm_0_16_0_to_0_18_1::fields,
        required: vllm_0_16_0_to_0_18_1::required,
    },
    GeneratedRevision {
        revision: "vllm-0.19.0..0.19.1",
        messages: &["MooncakeXferMetadata", "MooncakeXferResponse"],
        round_trip: vllm_0_19_0_to_0_19_1::round_trip,
        decode_and_drop: vllm_0_19_0_to_0_19_1::decode_and_drop,
        fields: vllm_0_19_0_to_0_19_1::fields,
        required: vllm_0_19_0_to_0_19_1::required,
    },
    GeneratedRevision {
        revision: "vllm-0.20.0..0.23.0",
        messages: &["MooncakeXferMetadata", "MooncakeXferResponse"],
        round_trip: vllm_0_20_0_to_0_23_0::round_trip,
        decode_and_drop: vllm_0_20_0_to_0_23_0::decode_and_drop,
        fields: vllm_0_20_0_to_0_23_0::fields,
        required: vllm_0_20_0_to_0_23_0::required,
    },
    GeneratedRevision {
        revision: "vllm-0.24.0",
        messages: &["MooncakeXferMetadata", "MooncakeXferResponse"],
        round_trip: vllm_0_24_0::round_trip,
        decode_and_drop: vllm_0_24_0::decode_and_drop,
        fields: vllm_0_24_0::fields,
        required: vllm_0_24_0::required,
    },
    GeneratedRevision {
        revision: "vllm-0.25.0..0.25.1",
        messages: &["MooncakeXferMetadata", "MooncakeXferResponse"],
        round_trip: vllm_0_25_0_to_0_25_1::round_trip,
        decode_and_drop: vllm_0_25_0_to_0_25_1::decode_and_drop,
        fields: vllm_0_25_0_to_0_25_1::fields,
        required: vllm_0_25_0_to_0_25_1::required,
    },
    GeneratedRevision {
        revision: "vllm-0.26.0..0.28.0",
        messages: &["MooncakeXferMetadata", "MooncakeXferResponse"],
        round_trip: vllm_0_26_0_to_0_28_0::round_trip,
        decode_and_drop: vllm_0_26_0_to_0_28_0::decode_and_drop,
        fields: vllm_0_26_0_to_0_28_0::fields,
        required: vllm_0_26_0_to_0_28_0::required,
    },
    GeneratedRevision {
        revision: "vllm-0.29.0",
        messages: &["MooncakeXferMetadata", "MooncakeXferResponse"],
        round_trip: vllm_0_29_0::round_trip,
        decode_and_drop: vllm_0_29_0::decode_and_drop,
        fields: vllm_0_29_0::fields,
        required: vllm_0_29_0::required,
    },
    GeneratedRevision {
        revision: "vllm-0.30.0",
        messages: &["MooncakeXferMetadata", "MooncakeXferResponse"],
        round_trip: vllm_0_30_0::round_trip,
        decode_and_drop: vllm_0_30_0::decode_and_drop,
        fields: vllm_0_30_0::fields,
        required: vllm_0_30_0::required,
    },
    GeneratedRevision {
        revision: "vllm-0.31.0",
        messages: &["MooncakeXferMetadata", "MooncakeXferResponse"],
        round_trip: vllm_0_31_0::round_trip,
        decode_and_drop: vllm_0_31_0::decode_and_drop,
        fields: vllm_0_31_0::fields,
        required: vllm_0_31_0::required,
    },
    GeneratedRevision {
        revision: "vllm-0.32.0",
        messages: &["MooncakeXferMetadata", "MooncakeXferResponse"],
        round_trip: vllm_0_32_0::round_trip,
        decode_and_drop: vllm_0_32_0::decode_and_drop,
        fields: vllm_0_32_0::fields,
        required: vllm_0_32_0::required,
    },
    GeneratedRevision {
        revision: "vllm-0.33.0",
        messages: &["MooncakeXferMetadata", "MooncakeXferResponse"],
        round_trip: vllm_0_33_0::round_trip,
        decode_and_drop: vllm_0_33_0::decode_and_drop,
        fields: vllm_0_33_0::fields,
        required: vllm_0_33_0::required,
    },
    GeneratedRevision {
        revision: "vllm-0.34.0",
        messages: &[
            "MooncakeXferMetadata",
            "MooncakeLeaseHeartbeat",
            "MooncakeXferResponse",
        ],
        round_trip: vllm_0_34_0::round_trip,
        decode_and_drop: vllm_0_34_0::decode_and_drop,
        fields: vllm_0_34_0::fields,
        required: vllm_0_34_0::required,
    },
];
