// @generated from spec/pull/ by mooncake-wire (src/generate/typed_rs/). Do not edit: change spec/ and
// regenerate with `BLESS=1 cargo test --test generated`.
//! The pull family's typed messages, one module per revision (generated from `spec/pull/`).
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
/// The tag in element 0 of a control tuple: a MessagePack bin the receiver compares (a str with the same letters
/// does not match). An open newtype: a constant for every tag any revision defines, named after its message, and
/// any other bytes representable, so a report can show what a peer sent.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ControlTag(pub Cow<'static, [u8]>);
impl ControlTag {
    /// Element 0 of `GetMetaMsg`: `b'get_meta_msg'`.
    pub const GET_META_MSG: ControlTag = ControlTag(Cow::Borrowed(b"get_meta_msg"));
    /// Element 0 of `DoneRecvingMsg`: `b'done_recving_msg'`.
    pub const DONE_RECVING_MSG: ControlTag = ControlTag(
        Cow::Borrowed(b"done_recving_msg"),
    );
    /// Every tag any revision defines, with the message it starts.
    pub const ALL: [(ControlTag, &'static str); 2] = [
        (ControlTag::GET_META_MSG, "GetMetaMsg"),
        (ControlTag::DONE_RECVING_MSG, "DoneRecvingMsg"),
    ];
    /// The tag's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
    /// The message this tag starts, if some revision defines it.
    pub fn message(&self) -> Option<&'static str> {
        Self::ALL.iter().find(|(t, _)| t == self).map(|(_, m)| *m)
    }
    /// Element 0 of a payload, when the payload starts with an array whose first element is a bin.
    pub fn first_of(bytes: &[u8]) -> Option<ControlTag> {
        first_bin_in_array(bytes).map(|b| ControlTag(Cow::Owned(b.to_vec())))
    }
}
impl fmt::Debug for ControlTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&py_bytes_repr(&self.0))
    }
}
impl fmt::Display for ControlTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}
/// `vllm-ascend-0.18.0` (0.18.0): V1 pull connector: MooncakeAgentMetadata with 5 fields; (b"get_meta_msg", "")
/// and (b"done_recving_msg", request id, port table) tuples; raw ACK.
pub mod vllm_ascend_0_18_0 {
    use super::*;
    /// The spec revision of this module.
    pub const REVISION: &str = "vllm-ascend-0.18.0";
    /// Generation (within the pull family, `spec/README.md`).
    pub const GENERATION: u32 = 1;
    /// Raw reply `ACK` (not MessagePack).
    pub const ACK: &[u8] = b"ACK";
    /// Metadata query, decoder worker → prefiller worker. The prefiller only looks at element 0
    /// (`vllm-ascend-0.18.0` `\[structs.GetMetaMsg\]`, vllm-ascend 0.18.0 sdist,
    /// vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake_connector.py). Strings held as `S`: see \[`GetMetaMsg`\]
    /// and \[`GetMetaMsgRef`\].
    /// On the wire: an array of exactly 2 elements; element 0 is always `b'get_meta_msg'` (checked, not stored).
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct GetMetaMsgOf<S> {
        /// Always the empty string. Required.
        pub unused: S,
    }
    /// GetMetaMsg with owned strings.
    pub type GetMetaMsg = GetMetaMsgOf<String>;
    /// GetMetaMsg with strings borrowed from the decoded bytes (no allocation per string).
    pub type GetMetaMsgRef<'a> = GetMetaMsgOf<&'a str>;
    impl<S> GetMetaMsgOf<S> {
        /// Wire names in declaration order (a tuple's elements).
        pub const FIELDS: [&'static str; 2] = ["tag", "unused"];
        /// Bit `i` set: field `i` has no default and must be on the wire.
        pub const REQUIRED: u64 = 0b11;
        /// The tag in element 0 (`b'get_meta_msg'`).
        pub const TAG: ControlTag = ControlTag::GET_META_MSG;
    }
    impl<S: Default> Default for GetMetaMsgOf<S> {
        /// Every defaulted field at its default; required ones empty, 0, or 1 for a size.
        fn default() -> Self {
            GetMetaMsgOf {
                unused: S::default(),
            }
        }
    }
    impl<S: Default> GetMetaMsgOf<S> {
        /// The message with these required fields and every other at its default.
        pub fn new(unused: S) -> Self {
            GetMetaMsgOf {
                unused,
                ..Self::default()
            }
        }
    }
    impl<'a, S: WireStr<'a> + Default> GetMetaMsgOf<S> {
        /// Decodes as msgspec does with vllm-ascend-0.18.0's class.
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
            d.tuple_struct(Self::FIELDS.len())?;
            d.item(0, |d| d.const_bytes(b"get_meta_msg"))?;
            let unused = d.item(1, |d| Ok(d.str()?))?;
            d.leave();
            Ok(GetMetaMsgOf { unused })
        }
    }
    impl GetMetaMsgRef<'_> {
        /// The same message with owned strings.
        pub fn to_owned_message(&self) -> GetMetaMsg {
            GetMetaMsgOf {
                unused: self.unused.to_string(),
            }
        }
    }
    impl<S: AsRef<str>> GetMetaMsgOf<S> {
        /// Encodes as msgspec does (an array of every element).
        pub fn encode(&self) -> Vec<u8> {
            let mut w = Writer::with_capacity(self.encoded_len_hint());
            self.encode_into(&mut w);
            w.into_bytes()
        }
        pub(crate) fn encoded_len_hint(&self) -> usize {
            5 + 17 + (self.unused.as_ref().len() + 5)
        }
        /// Appends the encoding to `w`.
        pub fn encode_into(&self, w: &mut Writer) {
            w.array_len(Self::FIELDS.len());
            w.bin(b"get_meta_msg");
            w.str(self.unused.as_ref());
        }
    }
    /// Reply to a metadata query, prefiller worker → decoder worker: where the prefiller's KV regions are
    /// (`vllm-ascend-0.18.0` `\[structs.MooncakeAgentMetadata\]`, vllm-ascend 0.18.0 sdist,
    /// vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake_connector.py). Strings held as `S`: see
    /// \[`MooncakeAgentMetadata`\] and \[`MooncakeAgentMetadataRef`\].
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct MooncakeAgentMetadataOf<S> {
        /// The prefiller's engine id; the decoder keys its tables by it. Required.
        pub engine_id: S,
        /// The prefiller worker's TransferEngine RPC port (session = local_ip:te_rpc_port). Required.
        pub te_rpc_port: WireInt,
        /// Base address of each registered KV region (K and V of every layer). Required.
        pub kv_caches_base_addr: Vec<WireInt>,
        /// Blocks per region. Required.
        pub num_blocks: WireInt,
        /// The prefiller worker's IP (get_ip()). Default `''`.
        pub local_ip: S,
    }
    /// MooncakeAgentMetadata with owned strings.
    pub type MooncakeAgentMetadata = MooncakeAgentMetadataOf<String>;
    /// MooncakeAgentMetadata with strings borrowed from the decoded bytes (no allocation per string).
    pub type MooncakeAgentMetadataRef<'a> = MooncakeAgentMetadataOf<&'a str>;
    impl<S> MooncakeAgentMetadataOf<S> {
        /// Wire names in declaration order.
        pub const FIELDS: [&'static str; 5] = [
            "engine_id",
            "te_rpc_port",
            "kv_caches_base_addr",
            "num_blocks",
            "local_ip",
        ];
        /// Bit `i` set: field `i` has no default and must be on the wire.
        pub const REQUIRED: u64 = 0b1111;
    }
    impl<S: Default> Default for MooncakeAgentMetadataOf<S> {
        /// Every defaulted field at its default; required ones empty, 0, or 1 for a size.
        fn default() -> Self {
            MooncakeAgentMetadataOf {
                engine_id: S::default(),
                te_rpc_port: WireInt::from_u64(0),
                kv_caches_base_addr: Vec::new(),
                num_blocks: WireInt::from_u64(0),
                local_ip: S::default(),
            }
        }
    }
    impl<S: Default> MooncakeAgentMetadataOf<S> {
        /// The message with these required fields and every other at its default.
        pub fn new(
            engine_id: S,
            te_rpc_port: WireInt,
            kv_caches_base_addr: Vec<WireInt>,
            num_blocks: WireInt,
        ) -> Self {
            MooncakeAgentMetadataOf {
                engine_id,
                te_rpc_port,
                kv_caches_base_addr,
                num_blocks,
                ..Self::default()
            }
        }
    }
    impl<'a, S: WireStr<'a> + Default> MooncakeAgentMetadataOf<S> {
        /// Decodes as msgspec does with vllm-ascend-0.18.0's class.
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
                        0 => v.engine_id = d.str()?,
                        1 => v.te_rpc_port = d.int()?,
                        2 => v.kv_caches_base_addr = d.list_int()?,
                        3 => v.num_blocks = d.int()?,
                        _ => v.local_ip = d.str()?,
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
                engine_id: self.engine_id.to_string(),
                te_rpc_port: self.te_rpc_port,
                kv_caches_base_addr: self.kv_caches_base_addr.clone(),
                num_blocks: self.num_blocks,
                local_ip: self.local_ip.to_string(),
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
            5 + 10 + (self.engine_id.as_ref().len() + 5) + 12 + 9 + 20
                + (5 + 9 * self.kv_caches_base_addr.len()) + 11 + 9 + 9
                + (self.local_ip.as_ref().len() + 5)
        }
        /// Appends the encoding to `w`.
        pub fn encode_into(&self, w: &mut Writer) {
            let h = w.begin_struct_map(Self::FIELDS.len());
            let mut n = 0;
            w.str("engine_id");
            w.str(self.engine_id.as_ref());
            n += 1;
            w.str("te_rpc_port");
            w.int(self.te_rpc_port);
            n += 1;
            w.str("kv_caches_base_addr");
            w.int_list(&self.kv_caches_base_addr);
            n += 1;
            w.str("num_blocks");
            w.int(self.num_blocks);
            n += 1;
            if !(self.local_ip.as_ref().is_empty()) {
                w.str("local_ip");
                w.str(self.local_ip.as_ref());
                n += 1;
            }
            w.finish_struct_map(h, n);
        }
    }
    /// Completion, decoder worker → every prefiller worker it read from: the prefiller may free the request's
    /// blocks once all expected messages arrived (`vllm-ascend-0.18.0` `\[structs.DoneRecvingMsg\]`, vllm-ascend
    /// 0.18.0 sdist, vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake_connector.py). Strings held as `S`: see
    /// \[`DoneRecvingMsg`\] and \[`DoneRecvingMsgRef`\].
    /// On the wire: an array of exactly 3 elements; element 0 is always `b'done_recving_msg'` (checked, not
    /// stored).
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct DoneRecvingMsgOf<S> {
        /// The prefiller's request id. Required.
        pub request_id: S,
        /// Per prefiller handshake port, how many done messages it must count before freeing; empty = free on the
        /// first. Required.
        pub remote_port_send_num: Vec<(WireInt, RemotePortInfoOf<S>)>,
    }
    /// DoneRecvingMsg with owned strings.
    pub type DoneRecvingMsg = DoneRecvingMsgOf<String>;
    /// DoneRecvingMsg with strings borrowed from the decoded bytes (no allocation per string).
    pub type DoneRecvingMsgRef<'a> = DoneRecvingMsgOf<&'a str>;
    impl<S> DoneRecvingMsgOf<S> {
        /// Wire names in declaration order (a tuple's elements).
        pub const FIELDS: [&'static str; 3] = [
            "tag",
            "request_id",
            "remote_port_send_num",
        ];
        /// Bit `i` set: field `i` has no default and must be on the wire.
        pub const REQUIRED: u64 = 0b111;
        /// The tag in element 0 (`b'done_recving_msg'`).
        pub const TAG: ControlTag = ControlTag::DONE_RECVING_MSG;
    }
    impl<S: Default> Default for DoneRecvingMsgOf<S> {
        /// Every defaulted field at its default; required ones empty, 0, or 1 for a size.
        fn default() -> Self {
            DoneRecvingMsgOf {
                request_id: S::default(),
                remote_port_send_num: Vec::new(),
            }
        }
    }
    impl<S: Default> DoneRecvingMsgOf<S> {
        /// The message with these required fields and every other at its default.
        pub fn new(
            request_id: S,
            remote_port_send_num: Vec<(WireInt, RemotePortInfoOf<S>)>,
        ) -> Self {
            DoneRecvingMsgOf {
                request_id,
                remote_port_send_num,
                ..Self::default()
            }
        }
    }
    impl<'a, S: WireStr<'a> + Default> DoneRecvingMsgOf<S> {
        /// Decodes as msgspec does with vllm-ascend-0.18.0's class.
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
            d.tuple_struct(Self::FIELDS.len())?;
            d.item(0, |d| d.const_bytes(b"done_recving_msg"))?;
            let request_id = d.item(1, |d| Ok(d.str()?))?;
            let remote_port_send_num = d
                .item(
                    2,
                    |d| Ok(
                        d.int_dict(|d| Ok(RemotePortInfoOf::decode_in(d, strictness)?))?,
                    ),
                )?;
            d.leave();
            Ok(DoneRecvingMsgOf {
                request_id,
                remote_port_send_num,
            })
        }
    }
    impl DoneRecvingMsgRef<'_> {
        /// The same message with owned strings.
        pub fn to_owned_message(&self) -> DoneRecvingMsg {
            DoneRecvingMsgOf {
                request_id: self.request_id.to_string(),
                remote_port_send_num: self
                    .remote_port_send_num
                    .iter()
                    .map(|(k0, x0)| (*k0, x0.to_owned_message()))
                    .collect(),
            }
        }
    }
    impl<S: AsRef<str>> DoneRecvingMsgOf<S> {
        /// Encodes as msgspec does (an array of every element).
        pub fn encode(&self) -> Vec<u8> {
            let mut w = Writer::with_capacity(self.encoded_len_hint());
            self.encode_into(&mut w);
            w.into_bytes()
        }
        pub(crate) fn encoded_len_hint(&self) -> usize {
            5 + 21 + (self.request_id.as_ref().len() + 5)
                + (5
                    + self
                        .remote_port_send_num
                        .iter()
                        .map(|(k0, x0)| 9 + x0.encoded_len_hint())
                        .sum::<usize>())
        }
        /// Appends the encoding to `w`.
        pub fn encode_into(&self, w: &mut Writer) {
            w.array_len(Self::FIELDS.len());
            w.bin(b"done_recving_msg");
            w.str(self.request_id.as_ref());
            w.map_len(self.remote_port_send_num.len());
            for (k0, x0) in self.remote_port_send_num.iter() {
                w.int(*k0);
                x0.encode_into(w);
            }
        }
    }
    /// A TypedDict written as a dict literal {"num": ..., "host": ...}: a map of both keys in this order
    /// (`vllm-ascend-0.18.0` `\[structs.RemotePortInfo\]`, vllm-ascend 0.18.0 sdist,
    /// vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake_connector.py). Strings held as `S`: see
    /// \[`RemotePortInfo`\] and \[`RemotePortInfoRef`\].
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct RemotePortInfoOf<S> {
        /// Done messages the prefiller worker on this port waits for. Required.
        pub num: WireInt,
        /// That worker's host. Required.
        pub host: S,
    }
    /// RemotePortInfo with owned strings.
    pub type RemotePortInfo = RemotePortInfoOf<String>;
    /// RemotePortInfo with strings borrowed from the decoded bytes (no allocation per string).
    pub type RemotePortInfoRef<'a> = RemotePortInfoOf<&'a str>;
    impl<S> RemotePortInfoOf<S> {
        /// Wire names in declaration order.
        pub const FIELDS: [&'static str; 2] = ["num", "host"];
        /// Bit `i` set: field `i` has no default and must be on the wire.
        pub const REQUIRED: u64 = 0b11;
    }
    impl<S: Default> Default for RemotePortInfoOf<S> {
        /// Every defaulted field at its default; required ones empty, 0, or 1 for a size.
        fn default() -> Self {
            RemotePortInfoOf {
                num: WireInt::from_u64(0),
                host: S::default(),
            }
        }
    }
    impl<S: Default> RemotePortInfoOf<S> {
        /// The message with these required fields and every other at its default.
        pub fn new(num: WireInt, host: S) -> Self {
            RemotePortInfoOf {
                num,
                host,
                ..Self::default()
            }
        }
    }
    impl<'a, S: WireStr<'a> + Default> RemotePortInfoOf<S> {
        /// Decodes as msgspec does with vllm-ascend-0.18.0's class.
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
                        0 => v.num = d.int()?,
                        _ => v.host = d.str()?,
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
    impl RemotePortInfoRef<'_> {
        /// The same message with owned strings.
        pub fn to_owned_message(&self) -> RemotePortInfo {
            RemotePortInfoOf {
                num: self.num,
                host: self.host.to_string(),
            }
        }
    }
    impl<S: AsRef<str>> RemotePortInfoOf<S> {
        /// Encodes as msgspec does (declaration order).
        pub fn encode(&self) -> Vec<u8> {
            let mut w = Writer::with_capacity(self.encoded_len_hint());
            self.encode_into(&mut w);
            w.into_bytes()
        }
        pub(crate) fn encoded_len_hint(&self) -> usize {
            5 + 4 + 9 + 5 + (self.host.as_ref().len() + 5)
        }
        /// Appends the encoding to `w`.
        pub fn encode_into(&self, w: &mut Writer) {
            let h = w.begin_struct_map(Self::FIELDS.len());
            let mut n = 0;
            w.str("num");
            w.int(self.num);
            n += 1;
            w.str("host");
            w.str(self.host.as_ref());
            n += 1;
            w.finish_struct_map(h, n);
        }
    }
    /// A control tuple of this revision, matched to its message by element 0 (its \[`ControlTag`\]) as the receiver
    /// matches it. A payload whose element 0 is no tag of this revision decodes as `GetMetaMsg`, whose error then
    /// says what is wrong.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub enum ControlMsgOf<S> {
        /// Element 0 is `b'get_meta_msg'`.
        GetMetaMsg(GetMetaMsgOf<S>),
        /// Element 0 is `b'done_recving_msg'`.
        DoneRecvingMsg(DoneRecvingMsgOf<S>),
    }
    /// A control tuple with owned strings.
    pub type ControlMsg = ControlMsgOf<String>;
    /// A control tuple borrowing its strings.
    pub type ControlMsgRef<'a> = ControlMsgOf<&'a str>;
    impl<'a, S: WireStr<'a> + Default> ControlMsgOf<S> {
        /// Decodes as the message element 0 names.
        pub fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {
            match ControlTag::first_of(bytes) {
                Some(t) if t == ControlTag::DONE_RECVING_MSG => {
                    DoneRecvingMsgOf::decode(bytes).map(Self::DoneRecvingMsg)
                }
                _ => GetMetaMsgOf::decode(bytes).map(Self::GetMetaMsg),
            }
        }
    }
    impl<S: AsRef<str>> ControlMsgOf<S> {
        /// Encodes the message.
        pub fn encode(&self) -> Vec<u8> {
            match self {
                Self::GetMetaMsg(m) => m.encode(),
                Self::DoneRecvingMsg(m) => m.encode(),
            }
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
                "GetMetaMsg" => {
                    GetMetaMsgRef::decode_with(bytes, strictness).map(|v| v.encode())
                }
                "MooncakeAgentMetadata" => {
                    MooncakeAgentMetadataRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                "DoneRecvingMsg" => {
                    DoneRecvingMsgRef::decode_with(bytes, strictness).map(|v| v.encode())
                }
                "RemotePortInfo" => {
                    RemotePortInfoRef::decode_with(bytes, strictness).map(|v| v.encode())
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
                ("GetMetaMsg", false) => GetMetaMsg::decode(bytes).map(drop),
                ("GetMetaMsg", true) => GetMetaMsgRef::decode(bytes).map(drop),
                ("MooncakeAgentMetadata", false) => {
                    MooncakeAgentMetadata::decode(bytes).map(drop)
                }
                ("MooncakeAgentMetadata", true) => {
                    MooncakeAgentMetadataRef::decode(bytes).map(drop)
                }
                ("DoneRecvingMsg", false) => DoneRecvingMsg::decode(bytes).map(drop),
                ("DoneRecvingMsg", true) => DoneRecvingMsgRef::decode(bytes).map(drop),
                ("RemotePortInfo", false) => RemotePortInfo::decode(bytes).map(drop),
                ("RemotePortInfo", true) => RemotePortInfoRef::decode(bytes).map(drop),
                _ => return None,
            },
        )
    }
    /// The field list of `message`, in declaration order.
    pub fn fields(message: &str) -> Option<&'static [&'static str]> {
        Some(
            match message {
                "GetMetaMsg" => &GetMetaMsg::FIELDS,
                "MooncakeAgentMetadata" => &MooncakeAgentMetadata::FIELDS,
                "DoneRecvingMsg" => &DoneRecvingMsg::FIELDS,
                "RemotePortInfo" => &RemotePortInfo::FIELDS,
                _ => return None,
            },
        )
    }
    /// The required mask of `message` (bit `i` set: field `i` must be on the wire).
    pub fn required(message: &str) -> Option<u64> {
        Some(
            match message {
                "GetMetaMsg" => GetMetaMsg::REQUIRED,
                "MooncakeAgentMetadata" => MooncakeAgentMetadata::REQUIRED,
                "DoneRecvingMsg" => DoneRecvingMsg::REQUIRED,
                "RemotePortInfo" => RemotePortInfo::REQUIRED,
                _ => return None,
            },
        )
    }
}
/// `vllm-ascend-0.23.0.post1` (0.23.0.post1): MooncakeAgentMetadata grows to 11 fields: per-group layer table,
/// per-layer region lists, block lens/strides, handshake_port; + remote_block_size parameter.
pub mod vllm_ascend_0_23_0_post1 {
    use super::*;
    /// The spec revision of this module.
    pub const REVISION: &str = "vllm-ascend-0.23.0.post1";
    /// Generation (within the pull family, `spec/README.md`).
    pub const GENERATION: u32 = 1;
    /// Raw reply `ACK` (not MessagePack).
    pub const ACK: &[u8] = b"ACK";
    /// Unchanged since `vllm-ascend-0.18.0`.
    pub use super::vllm_ascend_0_18_0::{GetMetaMsg, GetMetaMsgOf, GetMetaMsgRef};
    /// Reply to a metadata query, prefiller worker → decoder worker: where the prefiller's KV regions are
    /// (`vllm-ascend-0.23.0.post1` `\[structs.MooncakeAgentMetadata\]`, vllm-ascend 0.18.0 sdist,
    /// vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake_connector.py). Strings held as `S`: see
    /// \[`MooncakeAgentMetadata`\] and \[`MooncakeAgentMetadataRef`\].
    #[derive(Clone, Debug, PartialEq)]
    pub struct MooncakeAgentMetadataOf<S> {
        /// The prefiller's engine id; the decoder keys its tables by it. Required.
        pub engine_id: S,
        /// The prefiller worker's TransferEngine RPC port (session = local_ip:te_rpc_port). Required.
        pub te_rpc_port: WireInt,
        /// Transfer group → (description, the group's layer indices). The description is a map: layer_names,
        /// kv_cache_spec_type (the class name of vLLM's KV-cache spec), kv_cache_spec (msgspec.to_builtins of
        /// that spec, or {"repr": Python repr of it} when it holds values msgspec cannot encode — a
        /// FullAttentionSpec holds a torch dtype, so it travels as its repr — plus num_kv_heads,
        /// num_key_value_heads, total_num_kv_heads), kv_cache_group_id; a Mamba group adds shapes and
        /// dtype_sizes. The decoder compares it with its own only to log a difference at DEBUG level, stores it,
        /// and plans its reads with its own table (MooncakeConnectorWorker._serialize_kv_group_spec,
        /// KVCacheRecvingThread._get_remote_metadata). Required.
        pub kv_group2layeridx: Vec<(WireInt, (Vec<(S, Untyped)>, Vec<WireInt>))>,
        /// The prefiller's block size. Required.
        pub block_size: WireInt,
        /// Base address of each registered KV region (K and V of every layer). Required.
        pub kv_caches_base_addr: Vec<Vec<WireInt>>,
        /// Per layer and region: kernel blocks per logical block. Required.
        pub block_size_scale: Vec<Vec<WireInt>>,
        /// Blocks per region. Required.
        pub num_blocks: WireInt,
        /// Per layer and region: bytes of one block. Required.
        pub block_lens: Vec<Vec<WireInt>>,
        /// Per layer and region: bytes between consecutive blocks. Required.
        pub block_strides: Vec<Vec<WireInt>>,
        /// The prefiller worker's IP (get_ip()). Default `''`.
        pub local_ip: S,
        /// The prefiller worker's side-channel port. Default `0`.
        pub handshake_port: WireInt,
    }
    /// MooncakeAgentMetadata with owned strings.
    pub type MooncakeAgentMetadata = MooncakeAgentMetadataOf<String>;
    /// MooncakeAgentMetadata with strings borrowed from the decoded bytes (no allocation per string).
    pub type MooncakeAgentMetadataRef<'a> = MooncakeAgentMetadataOf<&'a str>;
    impl<S> MooncakeAgentMetadataOf<S> {
        /// Wire names in declaration order.
        pub const FIELDS: [&'static str; 11] = [
            "engine_id",
            "te_rpc_port",
            "kv_group2layeridx",
            "block_size",
            "kv_caches_base_addr",
            "block_size_scale",
            "num_blocks",
            "block_lens",
            "block_strides",
            "local_ip",
            "handshake_port",
        ];
        /// Bit `i` set: field `i` has no default and must be on the wire.
        pub const REQUIRED: u64 = 0b111111111;
    }
    impl<S: Default> Default for MooncakeAgentMetadataOf<S> {
        /// Every defaulted field at its default; required ones empty, 0, or 1 for a size.
        fn default() -> Self {
            MooncakeAgentMetadataOf {
                engine_id: S::default(),
                te_rpc_port: WireInt::from_u64(0),
                kv_group2layeridx: Vec::new(),
                block_size: WireInt::from_u64(1),
                kv_caches_base_addr: Vec::new(),
                block_size_scale: Vec::new(),
                num_blocks: WireInt::from_u64(0),
                block_lens: Vec::new(),
                block_strides: Vec::new(),
                local_ip: S::default(),
                handshake_port: WireInt::from_u64(0),
            }
        }
    }
    impl<S: Default> MooncakeAgentMetadataOf<S> {
        /// The message with these required fields and every other at its default.
        pub fn new(
            engine_id: S,
            te_rpc_port: WireInt,
            kv_group2layeridx: Vec<(WireInt, (Vec<(S, Untyped)>, Vec<WireInt>))>,
            block_size: WireInt,
            kv_caches_base_addr: Vec<Vec<WireInt>>,
            block_size_scale: Vec<Vec<WireInt>>,
            num_blocks: WireInt,
            block_lens: Vec<Vec<WireInt>>,
            block_strides: Vec<Vec<WireInt>>,
        ) -> Self {
            MooncakeAgentMetadataOf {
                engine_id,
                te_rpc_port,
                kv_group2layeridx,
                block_size,
                kv_caches_base_addr,
                block_size_scale,
                num_blocks,
                block_lens,
                block_strides,
                ..Self::default()
            }
        }
    }
    impl<'a, S: WireStr<'a> + Default> MooncakeAgentMetadataOf<S> {
        /// Decodes as msgspec does with vllm-ascend-0.23.0.post1's class.
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
                        0 => v.engine_id = d.str()?,
                        1 => v.te_rpc_port = d.int()?,
                        2 => {
                            v.kv_group2layeridx = d
                                .int_dict(|d| Ok(
                                    d
                                        .tuple(
                                            2,
                                            |d| Ok((
                                                d.item(0, |d| Ok(d.str_dict(|d| Ok(d.any()?))?))?,
                                                d.item(1, |d| Ok(d.list_int()?))?,
                                            )),
                                        )?,
                                ))?;
                        }
                        3 => v.block_size = d.int()?,
                        4 => v.kv_caches_base_addr = d.list_list_int()?,
                        5 => v.block_size_scale = d.list_list_int()?,
                        6 => v.num_blocks = d.int()?,
                        7 => v.block_lens = d.list_list_int()?,
                        8 => v.block_strides = d.list_list_int()?,
                        9 => v.local_ip = d.str()?,
                        _ => v.handshake_port = d.int()?,
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
                engine_id: self.engine_id.to_string(),
                te_rpc_port: self.te_rpc_port,
                kv_group2layeridx: self
                    .kv_group2layeridx
                    .iter()
                    .map(|(k0, x0)| (
                        *k0,
                        (
                            x0
                                .0
                                .iter()
                                .map(|(k1, x1)| (k1.to_string(), x1.clone()))
                                .collect(),
                            x0.1.clone(),
                        ),
                    ))
                    .collect(),
                block_size: self.block_size,
                kv_caches_base_addr: self.kv_caches_base_addr.clone(),
                block_size_scale: self.block_size_scale.clone(),
                num_blocks: self.num_blocks,
                block_lens: self.block_lens.clone(),
                block_strides: self.block_strides.clone(),
                local_ip: self.local_ip.to_string(),
                handshake_port: self.handshake_port,
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
            5 + 10 + (self.engine_id.as_ref().len() + 5) + 12 + 9 + 18
                + (5
                    + self
                        .kv_group2layeridx
                        .iter()
                        .map(|(k0, x0)| {
                            9
                                + (1
                                    + (5
                                        + x0
                                            .0
                                            .iter()
                                            .map(|(k1, x1)| (k1.as_ref().len() + 5) + 16)
                                            .sum::<usize>()) + (5 + 9 * x0.1.len()))
                        })
                        .sum::<usize>()) + 11 + 9 + 20
                + (5
                    + self
                        .kv_caches_base_addr
                        .iter()
                        .map(|x0| (5 + 9 * x0.len()))
                        .sum::<usize>()) + 17
                + (5
                    + self
                        .block_size_scale
                        .iter()
                        .map(|x0| (5 + 9 * x0.len()))
                        .sum::<usize>()) + 11 + 9 + 11
                + (5
                    + self.block_lens.iter().map(|x0| (5 + 9 * x0.len())).sum::<usize>())
                + 14
                + (5
                    + self
                        .block_strides
                        .iter()
                        .map(|x0| (5 + 9 * x0.len()))
                        .sum::<usize>()) + 9 + (self.local_ip.as_ref().len() + 5) + 15
                + 9
        }
        /// Appends the encoding to `w`.
        pub fn encode_into(&self, w: &mut Writer) {
            let h = w.begin_struct_map(Self::FIELDS.len());
            let mut n = 0;
            w.str("engine_id");
            w.str(self.engine_id.as_ref());
            n += 1;
            w.str("te_rpc_port");
            w.int(self.te_rpc_port);
            n += 1;
            w.str("kv_group2layeridx");
            w.map_len(self.kv_group2layeridx.len());
            for (k0, x0) in self.kv_group2layeridx.iter() {
                w.int(*k0);
                w.array_len(2);
                w.map_len(x0.0.len());
                for (k1, x1) in x0.0.iter() {
                    w.str(k1.as_ref());
                    x1.encode_into(w);
                }
                w.int_list(&x0.1);
            }
            n += 1;
            w.str("block_size");
            w.int(self.block_size);
            n += 1;
            w.str("kv_caches_base_addr");
            int_lists(w, &self.kv_caches_base_addr);
            n += 1;
            w.str("block_size_scale");
            int_lists(w, &self.block_size_scale);
            n += 1;
            w.str("num_blocks");
            w.int(self.num_blocks);
            n += 1;
            w.str("block_lens");
            int_lists(w, &self.block_lens);
            n += 1;
            w.str("block_strides");
            int_lists(w, &self.block_strides);
            n += 1;
            if !(self.local_ip.as_ref().is_empty()) {
                w.str("local_ip");
                w.str(self.local_ip.as_ref());
                n += 1;
            }
            if !(self.handshake_port == WireInt::from_u64(0)) {
                w.str("handshake_port");
                w.int(self.handshake_port);
                n += 1;
            }
            w.finish_struct_map(h, n);
        }
    }
    /// Unchanged since `vllm-ascend-0.18.0`.
    pub use super::vllm_ascend_0_18_0::{
        DoneRecvingMsg, DoneRecvingMsgOf, DoneRecvingMsgRef,
    };
    /// Unchanged since `vllm-ascend-0.18.0`.
    pub use super::vllm_ascend_0_18_0::{
        RemotePortInfo, RemotePortInfoOf, RemotePortInfoRef,
    };
    /// A control tuple of this revision, matched to its message by element 0 (its \[`ControlTag`\]) as the receiver
    /// matches it. A payload whose element 0 is no tag of this revision decodes as `GetMetaMsg`, whose error then
    /// says what is wrong.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub enum ControlMsgOf<S> {
        /// Element 0 is `b'get_meta_msg'`.
        GetMetaMsg(GetMetaMsgOf<S>),
        /// Element 0 is `b'done_recving_msg'`.
        DoneRecvingMsg(DoneRecvingMsgOf<S>),
    }
    /// A control tuple with owned strings.
    pub type ControlMsg = ControlMsgOf<String>;
    /// A control tuple borrowing its strings.
    pub type ControlMsgRef<'a> = ControlMsgOf<&'a str>;
    impl<'a, S: WireStr<'a> + Default> ControlMsgOf<S> {
        /// Decodes as the message element 0 names.
        pub fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {
            match ControlTag::first_of(bytes) {
                Some(t) if t == ControlTag::DONE_RECVING_MSG => {
                    DoneRecvingMsgOf::decode(bytes).map(Self::DoneRecvingMsg)
                }
                _ => GetMetaMsgOf::decode(bytes).map(Self::GetMetaMsg),
            }
        }
    }
    impl<S: AsRef<str>> ControlMsgOf<S> {
        /// Encodes the message.
        pub fn encode(&self) -> Vec<u8> {
            match self {
                Self::GetMetaMsg(m) => m.encode(),
                Self::DoneRecvingMsg(m) => m.encode(),
            }
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
                "GetMetaMsg" => {
                    GetMetaMsgRef::decode_with(bytes, strictness).map(|v| v.encode())
                }
                "MooncakeAgentMetadata" => {
                    MooncakeAgentMetadataRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                "DoneRecvingMsg" => {
                    DoneRecvingMsgRef::decode_with(bytes, strictness).map(|v| v.encode())
                }
                "RemotePortInfo" => {
                    RemotePortInfoRef::decode_with(bytes, strictness).map(|v| v.encode())
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
                ("GetMetaMsg", false) => GetMetaMsg::decode(bytes).map(drop),
                ("GetMetaMsg", true) => GetMetaMsgRef::decode(bytes).map(drop),
                ("MooncakeAgentMetadata", false) => {
                    MooncakeAgentMetadata::decode(bytes).map(drop)
                }
                ("MooncakeAgentMetadata", true) => {
                    MooncakeAgentMetadataRef::decode(bytes).map(drop)
                }
                ("DoneRecvingMsg", false) => DoneRecvingMsg::decode(bytes).map(drop),
                ("DoneRecvingMsg", true) => DoneRecvingMsgRef::decode(bytes).map(drop),
                ("RemotePortInfo", false) => RemotePortInfo::decode(bytes).map(drop),
                ("RemotePortInfo", true) => RemotePortInfoRef::decode(bytes).map(drop),
                _ => return None,
            },
        )
    }
    /// The field list of `message`, in declaration order.
    pub fn fields(message: &str) -> Option<&'static [&'static str]> {
        Some(
            match message {
                "GetMetaMsg" => &GetMetaMsg::FIELDS,
                "MooncakeAgentMetadata" => &MooncakeAgentMetadata::FIELDS,
                "DoneRecvingMsg" => &DoneRecvingMsg::FIELDS,
                "RemotePortInfo" => &RemotePortInfo::FIELDS,
                _ => return None,
            },
        )
    }
    /// The required mask of `message` (bit `i` set: field `i` must be on the wire).
    pub fn required(message: &str) -> Option<u64> {
        Some(
            match message {
                "GetMetaMsg" => GetMetaMsg::REQUIRED,
                "MooncakeAgentMetadata" => MooncakeAgentMetadata::REQUIRED,
                "DoneRecvingMsg" => DoneRecvingMsg::REQUIRED,
                "RemotePortInfo" => RemotePortInfo::REQUIRED,
                _ => return None,
            },
        )
    }
}
/// `vllm-ascend-main@3e486e317` (unreleased): MooncakePullConnector: (b"get_meta_msg",) answered by
/// MooncakeTransferMetadataGroups (PP → TP tables); (b"done_recving_msg", request id) answered by raw ACK.
pub mod vllm_ascend_main_3e486e317 {
    use super::*;
    /// The spec revision of this module.
    pub const REVISION: &str = "vllm-ascend-main@3e486e317";
    /// Generation (within the pull family, `spec/README.md`).
    pub const GENERATION: u32 = 2;
    /// Raw reply `ACK` (not MessagePack).
    pub const ACK: &[u8] = b"ACK";
    /// Metadata query, decoder worker → prefiller scheduler. The prefiller ignores any further elements
    /// (`vllm-ascend-main@3e486e317` `\[structs.GetMetaMsg\]`, vllm-project/vllm-ascend,
    /// vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake/pull_worker.py).
    /// On the wire: an array of exactly 1 elements; element 0 is always `b'get_meta_msg'` (checked, not stored).
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct GetMetaMsg {}
    /// GetMetaMsg (it holds no strings: the same type as \[`GetMetaMsg`\]).
    pub type GetMetaMsgRef<'a> = GetMetaMsg;
    impl GetMetaMsg {
        /// Wire names in declaration order (a tuple's elements).
        pub const FIELDS: [&'static str; 1] = ["tag"];
        /// Bit `i` set: field `i` has no default and must be on the wire.
        pub const REQUIRED: u64 = 0b1;
        /// The tag in element 0 (`b'get_meta_msg'`).
        pub const TAG: ControlTag = ControlTag::GET_META_MSG;
    }
    impl Default for GetMetaMsg {
        /// Every defaulted field at its default; required ones empty, 0, or 1 for a size.
        fn default() -> Self {
            GetMetaMsg {}
        }
    }
    impl GetMetaMsg {
        /// The message with these required fields and every other at its default.
        pub fn new() -> Self {
            GetMetaMsg { ..Self::default() }
        }
    }
    impl GetMetaMsg {
        /// Decodes as msgspec does with vllm-ascend-main@3e486e317's class.
        pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
            Self::decode_with(bytes, Strictness::Msgspec)
        }
        /// Decodes; with [`Strictness::OpenStatus`] an enum value the revision lacks is kept instead of rejected.
        pub fn decode_with(
            bytes: &[u8],
            strictness: Strictness,
        ) -> Result<Self, DecodeError> {
            let mut d = De::new(bytes)?;
            let v = Self::decode_in(&mut d, strictness)?;
            d.finish()?;
            Ok(v)
        }
        /// Decodes one value at the reader's position (inside a frame).
        pub(crate) fn decode_in(
            d: &mut De<'_>,
            strictness: Strictness,
        ) -> Result<Self, DecodeError> {
            d.tuple_struct(Self::FIELDS.len())?;
            d.item(0, |d| d.const_bytes(b"get_meta_msg"))?;
            d.leave();
            Ok(GetMetaMsg {})
        }
    }
    impl GetMetaMsg {
        /// Encodes as msgspec does (an array of every element).
        pub fn encode(&self) -> Vec<u8> {
            let mut w = Writer::with_capacity(self.encoded_len_hint());
            self.encode_into(&mut w);
            w.into_bytes()
        }
        pub(crate) fn encoded_len_hint(&self) -> usize {
            5 + 17
        }
        /// Appends the encoding to `w`.
        pub fn encode_into(&self, w: &mut Writer) {
            w.array_len(Self::FIELDS.len());
            w.bin(b"get_meta_msg");
        }
    }
    /// Reply to get_meta_msg, prefiller scheduler → decoder worker: every prefiller worker's transfer metadata,
    /// grouped by PP rank. Encoded once when the sending thread starts (`vllm-ascend-main@3e486e317`
    /// `\[structs.MooncakeTransferMetadataGroups\]`, vllm-project/vllm-ascend,
    /// vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake/metadata.py (the version pull_scheduler.py@3e486e317
    /// constructs)). Strings held as `S`: see \[`MooncakeTransferMetadataGroups`\] and
    /// \[`MooncakeTransferMetadataGroupsRef`\].
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct MooncakeTransferMetadataGroupsOf<S> {
        /// Must equal the remote_engine_id the decoder expects. Required.
        pub engine_id: S,
        /// The prefiller scheduler's side-channel host. Required.
        pub scheduler_host: S,
        /// The prefiller scheduler's side-channel port. Required.
        pub scheduler_port: WireInt,
        /// Required.
        pub pp_size: WireInt,
        /// The decoder requires 1. Required.
        pub pcp_size: WireInt,
        /// Required.
        pub dcp_size: WireInt,
        /// TP ranks outside 0 … tp_size − 1 are rejected by the decoder. Required.
        pub tp_size: WireInt,
        /// Whether TP ranks own different layers (LayerSplit). Required.
        pub use_kv_pp: bool,
        /// PP rank → that stage's metadata, in PP-rank order; never empty. Required.
        pub metadata_by_pp_rank: Vec<(WireInt, MooncakePPTransferMetadataOf<S>)>,
    }
    /// MooncakeTransferMetadataGroups with owned strings.
    pub type MooncakeTransferMetadataGroups = MooncakeTransferMetadataGroupsOf<String>;
    /// MooncakeTransferMetadataGroups with strings borrowed from the decoded bytes (no allocation per string).
    pub type MooncakeTransferMetadataGroupsRef<'a> = MooncakeTransferMetadataGroupsOf<
        &'a str,
    >;
    impl<S> MooncakeTransferMetadataGroupsOf<S> {
        /// Wire names in declaration order.
        pub const FIELDS: [&'static str; 9] = [
            "engine_id",
            "scheduler_host",
            "scheduler_port",
            "pp_size",
            "pcp_size",
            "dcp_size",
            "tp_size",
            "use_kv_pp",
            "metadata_by_pp_rank",
        ];
        /// Bit `i` set: field `i` has no default and must be on the wire.
        pub const REQUIRED: u64 = 0b111111111;
    }
    impl<S: Default> Default for MooncakeTransferMetadataGroupsOf<S> {
        /// Every defaulted field at its default; required ones empty, 0, or 1 for a size.
        fn default() -> Self {
            MooncakeTransferMetadataGroupsOf {
                engine_id: S::default(),
                scheduler_host: S::default(),
                scheduler_port: WireInt::from_u64(0),
                pp_size: WireInt::from_u64(1),
                pcp_size: WireInt::from_u64(1),
                dcp_size: WireInt::from_u64(1),
                tp_size: WireInt::from_u64(1),
                use_kv_pp: false,
                metadata_by_pp_rank: Vec::new(),
            }
        }
    }
    impl<S: Default> MooncakeTransferMetadataGroupsOf<S> {
        /// The message with these required fields and every other at its default.
        pub fn new(
            engine_id: S,
            scheduler_host: S,
            scheduler_port: WireInt,
            pp_size: WireInt,
            pcp_size: WireInt,
            dcp_size: WireInt,
            tp_size: WireInt,
            use_kv_pp: bool,
            metadata_by_pp_rank: Vec<(WireInt, MooncakePPTransferMetadataOf<S>)>,
        ) -> Self {
            MooncakeTransferMetadataGroupsOf {
                engine_id,
                scheduler_host,
                scheduler_port,
                pp_size,
                pcp_size,
                dcp_size,
                tp_size,
                use_kv_pp,
                metadata_by_pp_rank,
                ..Self::default()
            }
        }
    }
    impl<'a, S: WireStr<'a> + Default> MooncakeTransferMetadataGroupsOf<S> {
        /// Decodes as msgspec does with vllm-ascend-main@3e486e317's class.
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
                        0 => v.engine_id = d.str()?,
                        1 => v.scheduler_host = d.str()?,
                        2 => v.scheduler_port = d.int()?,
                        3 => v.pp_size = d.int()?,
                        4 => v.pcp_size = d.int()?,
                        5 => v.dcp_size = d.int()?,
                        6 => v.tp_size = d.int()?,
                        7 => v.use_kv_pp = d.bool()?,
                        _ => {
                            v.metadata_by_pp_rank = d
                                .int_dict(|d| Ok(
                                    MooncakePPTransferMetadataOf::decode_in(d, strictness)?,
                                ))?;
                        }
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
    impl MooncakeTransferMetadataGroupsRef<'_> {
        /// The same message with owned strings.
        pub fn to_owned_message(&self) -> MooncakeTransferMetadataGroups {
            MooncakeTransferMetadataGroupsOf {
                engine_id: self.engine_id.to_string(),
                scheduler_host: self.scheduler_host.to_string(),
                scheduler_port: self.scheduler_port,
                pp_size: self.pp_size,
                pcp_size: self.pcp_size,
                dcp_size: self.dcp_size,
                tp_size: self.tp_size,
                use_kv_pp: self.use_kv_pp,
                metadata_by_pp_rank: self
                    .metadata_by_pp_rank
                    .iter()
                    .map(|(k0, x0)| (*k0, x0.to_owned_message()))
                    .collect(),
            }
        }
    }
    impl<S: AsRef<str>> MooncakeTransferMetadataGroupsOf<S> {
        /// Encodes as msgspec does (declaration order).
        pub fn encode(&self) -> Vec<u8> {
            let mut w = Writer::with_capacity(self.encoded_len_hint());
            self.encode_into(&mut w);
            w.into_bytes()
        }
        pub(crate) fn encoded_len_hint(&self) -> usize {
            5 + 10 + (self.engine_id.as_ref().len() + 5) + 15
                + (self.scheduler_host.as_ref().len() + 5) + 15 + 9 + 8 + 9 + 9 + 9 + 9
                + 9 + 8 + 9 + 10 + 1 + 20
                + (5
                    + self
                        .metadata_by_pp_rank
                        .iter()
                        .map(|(k0, x0)| 9 + x0.encoded_len_hint())
                        .sum::<usize>())
        }
        /// Appends the encoding to `w`.
        pub fn encode_into(&self, w: &mut Writer) {
            let h = w.begin_struct_map(Self::FIELDS.len());
            let mut n = 0;
            w.str("engine_id");
            w.str(self.engine_id.as_ref());
            n += 1;
            w.str("scheduler_host");
            w.str(self.scheduler_host.as_ref());
            n += 1;
            w.str("scheduler_port");
            w.int(self.scheduler_port);
            n += 1;
            w.str("pp_size");
            w.int(self.pp_size);
            n += 1;
            w.str("pcp_size");
            w.int(self.pcp_size);
            n += 1;
            w.str("dcp_size");
            w.int(self.dcp_size);
            n += 1;
            w.str("tp_size");
            w.int(self.tp_size);
            n += 1;
            w.str("use_kv_pp");
            w.bool(self.use_kv_pp);
            n += 1;
            w.str("metadata_by_pp_rank");
            w.map_len(self.metadata_by_pp_rank.len());
            for (k0, x0) in self.metadata_by_pp_rank.iter() {
                w.int(*k0);
                x0.encode_into(w);
            }
            n += 1;
            w.finish_struct_map(h, n);
        }
    }
    /// Completion, decoder scheduler → prefiller scheduler, once per request after the workers' aggregated
    /// finished_recving (at once when nothing had to be read) (`vllm-ascend-main@3e486e317`
    /// `\[structs.DoneRecvingMsg\]`, vllm-project/vllm-ascend@3e486e317e443984deb2bb2d83688f4383d8e156
    /// vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake/pull_scheduler.py). Strings held as `S`: see
    /// \[`DoneRecvingMsg`\] and \[`DoneRecvingMsgRef`\].
    /// On the wire: an array of exactly 2 elements; element 0 is always `b'done_recving_msg'` (checked, not
    /// stored).
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct DoneRecvingMsgOf<S> {
        /// The prefiller's request id; the prefiller also accepts it before its own request_finished and applies
        /// it later. Required.
        pub request_id: S,
    }
    /// DoneRecvingMsg with owned strings.
    pub type DoneRecvingMsg = DoneRecvingMsgOf<String>;
    /// DoneRecvingMsg with strings borrowed from the decoded bytes (no allocation per string).
    pub type DoneRecvingMsgRef<'a> = DoneRecvingMsgOf<&'a str>;
    impl<S> DoneRecvingMsgOf<S> {
        /// Wire names in declaration order (a tuple's elements).
        pub const FIELDS: [&'static str; 2] = ["tag", "request_id"];
        /// Bit `i` set: field `i` has no default and must be on the wire.
        pub const REQUIRED: u64 = 0b11;
        /// The tag in element 0 (`b'done_recving_msg'`).
        pub const TAG: ControlTag = ControlTag::DONE_RECVING_MSG;
    }
    impl<S: Default> Default for DoneRecvingMsgOf<S> {
        /// Every defaulted field at its default; required ones empty, 0, or 1 for a size.
        fn default() -> Self {
            DoneRecvingMsgOf {
                request_id: S::default(),
            }
        }
    }
    impl<S: Default> DoneRecvingMsgOf<S> {
        /// The message with these required fields and every other at its default.
        pub fn new(request_id: S) -> Self {
            DoneRecvingMsgOf {
                request_id,
                ..Self::default()
            }
        }
    }
    impl<'a, S: WireStr<'a> + Default> DoneRecvingMsgOf<S> {
        /// Decodes as msgspec does with vllm-ascend-main@3e486e317's class.
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
            d.tuple_struct(Self::FIELDS.len())?;
            d.item(0, |d| d.const_bytes(b"done_recving_msg"))?;
            let request_id = d.item(1, |d| Ok(d.str()?))?;
            d.leave();
            Ok(DoneRecvingMsgOf { request_id })
        }
    }
    impl DoneRecvingMsgRef<'_> {
        /// The same message with owned strings.
        pub fn to_owned_message(&self) -> DoneRecvingMsg {
            DoneRecvingMsgOf {
                request_id: self.request_id.to_string(),
            }
        }
    }
    impl<S: AsRef<str>> DoneRecvingMsgOf<S> {
        /// Encodes as msgspec does (an array of every element).
        pub fn encode(&self) -> Vec<u8> {
            let mut w = Writer::with_capacity(self.encoded_len_hint());
            self.encode_into(&mut w);
            w.into_bytes()
        }
        pub(crate) fn encoded_len_hint(&self) -> usize {
            5 + 21 + (self.request_id.as_ref().len() + 5)
        }
        /// Appends the encoding to `w`.
        pub fn encode_into(&self, w: &mut Writer) {
            w.array_len(Self::FIELDS.len());
            w.bin(b"done_recving_msg");
            w.str(self.request_id.as_ref());
        }
    }
    /// The metadata shared by the TP workers of one PP rank. Per-layer lists follow layer_names (the sorted union
    /// of the TP ranks' layers); each inner list follows the cache tensors of the layer (K/V, or Mamba conv/SSM)
    /// (`vllm-ascend-main@3e486e317` `\[structs.MooncakePPTransferMetadata\]`, vllm-project/vllm-ascend,
    /// vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake/metadata.py). Strings held as `S`: see
    /// \[`MooncakePPTransferMetadata`\] and \[`MooncakePPTransferMetadataRef`\].
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct MooncakePPTransferMetadataOf<S> {
        /// Required.
        pub block_size: WireInt,
        /// Required.
        pub num_blocks: WireInt,
        /// Required.
        pub layer_names: Vec<S>,
        /// Required.
        pub layer_block_sizes: Vec<WireInt>,
        /// KV-cache group of each layer. Required.
        pub group_indices: Vec<WireInt>,
        /// Required.
        pub block_strides: Vec<Vec<WireInt>>,
        /// Required.
        pub block_lens: Vec<Vec<WireInt>>,
        /// Shape of one block of each cache tensor. Required.
        pub block_shapes: Vec<Vec<Vec<WireInt>>>,
        /// Required.
        pub block_size_scales: Vec<Vec<WireInt>>,
        /// TP rank → that worker's addresses; never empty. Required.
        pub metadata_by_tp_rank: Vec<(WireInt, MooncakeTPTransferMetadataOf<S>)>,
    }
    /// MooncakePPTransferMetadata with owned strings.
    pub type MooncakePPTransferMetadata = MooncakePPTransferMetadataOf<String>;
    /// MooncakePPTransferMetadata with strings borrowed from the decoded bytes (no allocation per string).
    pub type MooncakePPTransferMetadataRef<'a> = MooncakePPTransferMetadataOf<&'a str>;
    impl<S> MooncakePPTransferMetadataOf<S> {
        /// Wire names in declaration order.
        pub const FIELDS: [&'static str; 10] = [
            "block_size",
            "num_blocks",
            "layer_names",
            "layer_block_sizes",
            "group_indices",
            "block_strides",
            "block_lens",
            "block_shapes",
            "block_size_scales",
            "metadata_by_tp_rank",
        ];
        /// Bit `i` set: field `i` has no default and must be on the wire.
        pub const REQUIRED: u64 = 0b1111111111;
    }
    impl<S: Default> Default for MooncakePPTransferMetadataOf<S> {
        /// Every defaulted field at its default; required ones empty, 0, or 1 for a size.
        fn default() -> Self {
            MooncakePPTransferMetadataOf {
                block_size: WireInt::from_u64(1),
                num_blocks: WireInt::from_u64(0),
                layer_names: Vec::new(),
                layer_block_sizes: Vec::new(),
                group_indices: Vec::new(),
                block_strides: Vec::new(),
                block_lens: Vec::new(),
                block_shapes: Vec::new(),
                block_size_scales: Vec::new(),
                metadata_by_tp_rank: Vec::new(),
            }
        }
    }
    impl<S: Default> MooncakePPTransferMetadataOf<S> {
        /// The message with these required fields and every other at its default.
        pub fn new(
            block_size: WireInt,
            num_blocks: WireInt,
            layer_names: Vec<S>,
            layer_block_sizes: Vec<WireInt>,
            group_indices: Vec<WireInt>,
            block_strides: Vec<Vec<WireInt>>,
            block_lens: Vec<Vec<WireInt>>,
            block_shapes: Vec<Vec<Vec<WireInt>>>,
            block_size_scales: Vec<Vec<WireInt>>,
            metadata_by_tp_rank: Vec<(WireInt, MooncakeTPTransferMetadataOf<S>)>,
        ) -> Self {
            MooncakePPTransferMetadataOf {
                block_size,
                num_blocks,
                layer_names,
                layer_block_sizes,
                group_indices,
                block_strides,
                block_lens,
                block_shapes,
                block_size_scales,
                metadata_by_tp_rank,
                ..Self::default()
            }
        }
    }
    impl<'a, S: WireStr<'a> + Default> MooncakePPTransferMetadataOf<S> {
        /// Decodes as msgspec does with vllm-ascend-main@3e486e317's class.
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
                        0 => v.block_size = d.int()?,
                        1 => v.num_blocks = d.int()?,
                        2 => v.layer_names = d.list_str()?,
                        3 => v.layer_block_sizes = d.list_int()?,
                        4 => v.group_indices = d.list_int()?,
                        5 => v.block_strides = d.list_list_int()?,
                        6 => v.block_lens = d.list_list_int()?,
                        7 => v.block_shapes = d.list_of(|d| Ok(d.list_list_int()?))?,
                        8 => v.block_size_scales = d.list_list_int()?,
                        _ => {
                            v.metadata_by_tp_rank = d
                                .int_dict(|d| Ok(
                                    MooncakeTPTransferMetadataOf::decode_in(d, strictness)?,
                                ))?;
                        }
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
    impl MooncakePPTransferMetadataRef<'_> {
        /// The same message with owned strings.
        pub fn to_owned_message(&self) -> MooncakePPTransferMetadata {
            MooncakePPTransferMetadataOf {
                block_size: self.block_size,
                num_blocks: self.num_blocks,
                layer_names: self.layer_names.iter().map(|x0| x0.to_string()).collect(),
                layer_block_sizes: self.layer_block_sizes.clone(),
                group_indices: self.group_indices.clone(),
                block_strides: self.block_strides.clone(),
                block_lens: self.block_lens.clone(),
                block_shapes: self.block_shapes.clone(),
                block_size_scales: self.block_size_scales.clone(),
                metadata_by_tp_rank: self
                    .metadata_by_tp_rank
                    .iter()
                    .map(|(k0, x0)| (*k0, x0.to_owned_message()))
                    .collect(),
            }
        }
    }
    impl<S: AsRef<str>> MooncakePPTransferMetadataOf<S> {
        /// Encodes as msgspec does (declaration order).
        pub fn encode(&self) -> Vec<u8> {
            let mut w = Writer::with_capacity(self.encoded_len_hint());
            self.encode_into(&mut w);
            w.into_bytes()
        }
        pub(crate) fn encoded_len_hint(&self) -> usize {
            5 + 11 + 9 + 11 + 9 + 12 + str_list_len(&self.layer_names) + 18
                + (5 + 9 * self.layer_block_sizes.len()) + 14
                + (5 + 9 * self.group_indices.len()) + 14
                + (5
                    + self
                        .block_strides
                        .iter()
                        .map(|x0| (5 + 9 * x0.len()))
                        .sum::<usize>()) + 11
                + (5
                    + self.block_lens.iter().map(|x0| (5 + 9 * x0.len())).sum::<usize>())
                + 13
                + (5
                    + self
                        .block_shapes
                        .iter()
                        .map(|x0| {
                            (5 + x0.iter().map(|x1| (5 + 9 * x1.len())).sum::<usize>())
                        })
                        .sum::<usize>()) + 18
                + (5
                    + self
                        .block_size_scales
                        .iter()
                        .map(|x0| (5 + 9 * x0.len()))
                        .sum::<usize>()) + 20
                + (5
                    + self
                        .metadata_by_tp_rank
                        .iter()
                        .map(|(k0, x0)| 9 + x0.encoded_len_hint())
                        .sum::<usize>())
        }
        /// Appends the encoding to `w`.
        pub fn encode_into(&self, w: &mut Writer) {
            let h = w.begin_struct_map(Self::FIELDS.len());
            let mut n = 0;
            w.str("block_size");
            w.int(self.block_size);
            n += 1;
            w.str("num_blocks");
            w.int(self.num_blocks);
            n += 1;
            w.str("layer_names");
            str_list(w, &self.layer_names);
            n += 1;
            w.str("layer_block_sizes");
            w.int_list(&self.layer_block_sizes);
            n += 1;
            w.str("group_indices");
            w.int_list(&self.group_indices);
            n += 1;
            w.str("block_strides");
            int_lists(w, &self.block_strides);
            n += 1;
            w.str("block_lens");
            int_lists(w, &self.block_lens);
            n += 1;
            w.str("block_shapes");
            w.array_len(self.block_shapes.len());
            for x0 in self.block_shapes.iter() {
                int_lists(w, x0);
            }
            n += 1;
            w.str("block_size_scales");
            int_lists(w, &self.block_size_scales);
            n += 1;
            w.str("metadata_by_tp_rank");
            w.map_len(self.metadata_by_tp_rank.len());
            for (k0, x0) in self.metadata_by_tp_rank.iter() {
                w.int(*k0);
                x0.encode_into(w);
            }
            n += 1;
            w.finish_struct_map(h, n);
        }
    }
    /// One prefiller worker's connection and KV-region addresses (`vllm-ascend-main@3e486e317`
    /// `\[structs.MooncakeTPTransferMetadata\]`, vllm-project/vllm-ascend,
    /// vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake/metadata.py). Strings held as `S`: see
    /// \[`MooncakeTPTransferMetadata`\] and \[`MooncakeTPTransferMetadataRef`\].
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct MooncakeTPTransferMetadataOf<S> {
        /// TransferEngine RPC port; the decoder reads from session local_ip:te_rpc_port. Required.
        pub te_rpc_port: WireInt,
        /// Indices into layer_names of the layers this worker holds. Required.
        pub layer_indices: Vec<WireInt>,
        /// Per layer of layer_names (empty for layers it does not hold): region base addresses. Required.
        pub kv_caches_base_addr: Vec<Vec<WireInt>>,
        /// Required.
        pub local_ip: S,
        /// Required.
        pub handshake_port: WireInt,
    }
    /// MooncakeTPTransferMetadata with owned strings.
    pub type MooncakeTPTransferMetadata = MooncakeTPTransferMetadataOf<String>;
    /// MooncakeTPTransferMetadata with strings borrowed from the decoded bytes (no allocation per string).
    pub type MooncakeTPTransferMetadataRef<'a> = MooncakeTPTransferMetadataOf<&'a str>;
    impl<S> MooncakeTPTransferMetadataOf<S> {
        /// Wire names in declaration order.
        pub const FIELDS: [&'static str; 5] = [
            "te_rpc_port",
            "layer_indices",
            "kv_caches_base_addr",
            "local_ip",
            "handshake_port",
        ];
        /// Bit `i` set: field `i` has no default and must be on the wire.
        pub const REQUIRED: u64 = 0b11111;
    }
    impl<S: Default> Default for MooncakeTPTransferMetadataOf<S> {
        /// Every defaulted field at its default; required ones empty, 0, or 1 for a size.
        fn default() -> Self {
            MooncakeTPTransferMetadataOf {
                te_rpc_port: WireInt::from_u64(0),
                layer_indices: Vec::new(),
                kv_caches_base_addr: Vec::new(),
                local_ip: S::default(),
                handshake_port: WireInt::from_u64(0),
            }
        }
    }
    impl<S: Default> MooncakeTPTransferMetadataOf<S> {
        /// The message with these required fields and every other at its default.
        pub fn new(
            te_rpc_port: WireInt,
            layer_indices: Vec<WireInt>,
            kv_caches_base_addr: Vec<Vec<WireInt>>,
            local_ip: S,
            handshake_port: WireInt,
        ) -> Self {
            MooncakeTPTransferMetadataOf {
                te_rpc_port,
                layer_indices,
                kv_caches_base_addr,
                local_ip,
                handshake_port,
                ..Self::default()
            }
        }
    }
    impl<'a, S: WireStr<'a> + Default> MooncakeTPTransferMetadataOf<S> {
        /// Decodes as msgspec does with vllm-ascend-main@3e486e317's class.
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
                        0 => v.te_rpc_port = d.int()?,
                        1 => v.layer_indices = d.list_int()?,
                        2 => v.kv_caches_base_addr = d.list_list_int()?,
                        3 => v.local_ip = d.str()?,
                        _ => v.handshake_port = d.int()?,
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
    impl MooncakeTPTransferMetadataRef<'_> {
        /// The same message with owned strings.
        pub fn to_owned_message(&self) -> MooncakeTPTransferMetadata {
            MooncakeTPTransferMetadataOf {
                te_rpc_port: self.te_rpc_port,
                layer_indices: self.layer_indices.clone(),
                kv_caches_base_addr: self.kv_caches_base_addr.clone(),
                local_ip: self.local_ip.to_string(),
                handshake_port: self.handshake_port,
            }
        }
    }
    impl<S: AsRef<str>> MooncakeTPTransferMetadataOf<S> {
        /// Encodes as msgspec does (declaration order).
        pub fn encode(&self) -> Vec<u8> {
            let mut w = Writer::with_capacity(self.encoded_len_hint());
            self.encode_into(&mut w);
            w.into_bytes()
        }
        pub(crate) fn encoded_len_hint(&self) -> usize {
            5 + 12 + 9 + 14 + (5 + 9 * self.layer_indices.len()) + 20
                + (5
                    + self
                        .kv_caches_base_addr
                        .iter()
                        .map(|x0| (5 + 9 * x0.len()))
                        .sum::<usize>()) + 9 + (self.local_ip.as_ref().len() + 5) + 15
                + 9
        }
        /// Appends the encoding to `w`.
        pub fn encode_into(&self, w: &mut Writer) {
            let h = w.begin_struct_map(Self::FIELDS.len());
            let mut n = 0;
            w.str("te_rpc_port");
            w.int(self.te_rpc_port);
            n += 1;
            w.str("layer_indices");
            w.int_list(&self.layer_indices);
            n += 1;
            w.str("kv_caches_base_addr");
            int_lists(w, &self.kv_caches_base_addr);
            n += 1;
            w.str("local_ip");
            w.str(self.local_ip.as_ref());
            n += 1;
            w.str("handshake_port");
            w.int(self.handshake_port);
            n += 1;
            w.finish_struct_map(h, n);
        }
    }
    /// A control tuple of this revision, matched to its message by element 0 (its \[`ControlTag`\]) as the receiver
    /// matches it. A payload whose element 0 is no tag of this revision decodes as `GetMetaMsg`, whose error then
    /// says what is wrong.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub enum ControlMsgOf<S> {
        /// Element 0 is `b'get_meta_msg'`.
        GetMetaMsg(GetMetaMsg),
        /// Element 0 is `b'done_recving_msg'`.
        DoneRecvingMsg(DoneRecvingMsgOf<S>),
    }
    /// A control tuple with owned strings.
    pub type ControlMsg = ControlMsgOf<String>;
    /// A control tuple borrowing its strings.
    pub type ControlMsgRef<'a> = ControlMsgOf<&'a str>;
    impl<'a, S: WireStr<'a> + Default> ControlMsgOf<S> {
        /// Decodes as the message element 0 names.
        pub fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {
            match ControlTag::first_of(bytes) {
                Some(t) if t == ControlTag::DONE_RECVING_MSG => {
                    DoneRecvingMsgOf::decode(bytes).map(Self::DoneRecvingMsg)
                }
                _ => GetMetaMsg::decode(bytes).map(Self::GetMetaMsg),
            }
        }
    }
    impl<S: AsRef<str>> ControlMsgOf<S> {
        /// Encodes the message.
        pub fn encode(&self) -> Vec<u8> {
            match self {
                Self::GetMetaMsg(m) => m.encode(),
                Self::DoneRecvingMsg(m) => m.encode(),
            }
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
                "GetMetaMsg" => {
                    GetMetaMsgRef::decode_with(bytes, strictness).map(|v| v.encode())
                }
                "MooncakeTransferMetadataGroups" => {
                    MooncakeTransferMetadataGroupsRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                "DoneRecvingMsg" => {
                    DoneRecvingMsgRef::decode_with(bytes, strictness).map(|v| v.encode())
                }
                "MooncakePPTransferMetadata" => {
                    MooncakePPTransferMetadataRef::decode_with(bytes, strictness)
                        .map(|v| v.encode())
                }
                "MooncakeTPTransferMetadata" => {
                    MooncakeTPTransferMetadataRef::decode_with(bytes, strictness)
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
                ("GetMetaMsg", false) => GetMetaMsg::decode(bytes).map(drop),
                ("GetMetaMsg", true) => GetMetaMsgRef::decode(bytes).map(drop),
                ("MooncakeTransferMetadataGroups", false) => {
                    MooncakeTransferMetadataGroups::decode(bytes).map(drop)
                }
                ("MooncakeTransferMetadataGroups", true) => {
                    MooncakeTransferMetadataGroupsRef::decode(bytes).map(drop)
                }
                ("DoneRecvingMsg", false) => DoneRecvingMsg::decode(bytes).map(drop),
                ("DoneRecvingMsg", true) => DoneRecvingMsgRef::decode(bytes).map(drop),
                ("MooncakePPTransferMetadata", false) => {
                    MooncakePPTransferMetadata::decode(bytes).map(drop)
                }
                ("MooncakePPTransferMetadata", true) => {
                    MooncakePPTransferMetadataRef::decode(bytes).map(drop)
                }
                ("MooncakeTPTransferMetadata", false) => {
                    MooncakeTPTransferMetadata::decode(bytes).map(drop)
                }
                ("MooncakeTPTransferMetadata", true) => {
                    MooncakeTPTransferMetadataRef::decode(bytes).map(drop)
                }
                _ => return None,
            },
        )
    }
    /// The field list of `message`, in declaration order.
    pub fn fields(message: &str) -> Option<&'static [&'static str]> {
        Some(
            match message {
                "GetMetaMsg" => &GetMetaMsg::FIELDS,
                "MooncakeTransferMetadataGroups" => {
                    &MooncakeTransferMetadataGroups::FIELDS
                }
                "DoneRecvingMsg" => &DoneRecvingMsg::FIELDS,
                "MooncakePPTransferMetadata" => &MooncakePPTransferMetadata::FIELDS,
                "MooncakeTPTransferMetadata" => &MooncakeTPTransferMetadata::FIELDS,
                _ => return None,
            },
        )
    }
    /// The required mask of `message` (bit `i` set: field `i` must be on the wire).
    pub fn required(message: &str) -> Option<u64> {
        Some(
            match message {
                "GetMetaMsg" => GetMetaMsg::REQUIRED,
                "MooncakeTransferMetadataGroups" => {
                    MooncakeTransferMetadataGroups::REQUIRED
                }
                "DoneRecvingMsg" => DoneRecvingMsg::REQUIRED,
                "MooncakePPTransferMetadata" => MooncakePPTransferMetadata::REQUIRED,
                "MooncakeTPTransferMetadata" => MooncakeTPTransferMetadata::REQUIRED,
                _ => return None,
            },
        )
    }
}
/// The newest revision.
pub use vllm_ascend_main_3e486e317 as newest;
/// The newest revision of generation 1.
pub use vllm_ascend_0_23_0_post1 as newest_gen1;
/// The newest revision of generation 2.
pub use vllm_ascend_main_3e486e317 as newest_gen2;
/// The newest revision with a release (what a user of released software speaks).
pub use vllm_ascend_0_23_0_post1 as newest_released;
/// Every revision of the pull family, oldest first.
pub const REVISIONS: [GeneratedRevision; 3] = [
    GeneratedRevision {
        revision: "vllm-ascend-0.18.0",
        messages: &[
            "GetMetaMsg",
            "MooncakeAgentMetadata",
            "DoneRecvingMsg",
            "RemotePortInfo",
        ],
        round_trip: vllm_ascend_0_18_0::round_trip,
        decode_and_drop: vllm_ascend_0_18_0::decode_and_drop,
        fields: vllm_ascend_0_18_0::fields,
        required: vllm_ascend_0_18_0::required,
    },
    GeneratedRevision {
        revision: "vllm-ascend-0.23.0.post1",
        messages: &[
            "GetMetaMsg",
            "MooncakeAgentMetadata",
            "DoneRecvingMsg",
            "RemotePortInfo",
        ],
        round_trip: vllm_ascend_0_23_0_post1::round_trip,
        decode_and_drop: vllm_ascend_0_23_0_post1::decode_and_drop,
        fields: vllm_ascend_0_23_0_post1::fields,
        required: vllm_ascend_0_23_0_post1::required,
    },
    GeneratedRevision {
        revision: "vllm-ascend-main@3e486e317",
        messages: &[
            "GetMetaMsg",
            "MooncakeTransferMetadataGroups",
            "DoneRecvingMsg",
            "MooncakePPTransferMetadata",
            "MooncakeTPTransferMetadata",
        ],
        round_trip: vllm_ascend_main_3e486e317::round_trip,
        decode_and_drop: vllm_ascend_main_3e486e317::decode_and_drop,
        fields: vllm_ascend_main_3e486e317::fields,
        required: vllm_ascend_main_3e486e317::required,
    },
];
