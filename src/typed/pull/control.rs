//! The decoder's control tuples of vllm-ascend 0.23.0.post1 and the prefiller's raw acknowledgement
//! (vllm-ascend 0.23.0.post1 sdist, `vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake_connector.py`;
//! `spec/pull/vllm-ascend-0.18.0.toml` `[structs.GetMetaMsg]`, `[structs.DoneRecvingMsg]` and the `Ack`
//! message's `constants`, unchanged in 0.23.0.post1). A tuple is a MessagePack array of exactly its
//! elements; element 0 is a bin tag the prefiller compares (a str with the same letters does not match).

use std::borrow::Cow;
use std::fmt;

use super::remote_port_info::RemotePortInfo;
use crate::codec::{py_bytes_repr, DecodeError, DecodeErrorKind as K};
use crate::msgpack::{Obj, Reader, WireInt, Writer};
use crate::typed::de::{De, Seg, R};

/// The tag in element 0 of a control tuple, as an open newtype: named constants for the tags vllm-ascend
/// 0.23.0.post1 sends, any other bytes representable (to report what a peer sent).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ControlTag(pub Cow<'static, [u8]>);

impl ControlTag {
    /// `GET_META_MSG`: the metadata query (`spec/pull/vllm-ascend-0.18.0.toml`, `GetMetaMsg.tag`).
    pub const GET_META: ControlTag = ControlTag(Cow::Borrowed(b"get_meta_msg"));
    /// `DONE_RECVING_MSG`: the completion (`DoneRecvingMsg.tag`).
    pub const DONE_RECVING: ControlTag = ControlTag(Cow::Borrowed(b"done_recving_msg"));

    /// Tags vllm-ascend 0.23.0.post1 defines, with the message each starts.
    pub const KNOWN: [(ControlTag, &'static str); 2] =
        [(ControlTag::GET_META, "GetMetaMsg"), (ControlTag::DONE_RECVING, "DoneRecvingMsg")];

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
    /// The message this tag starts, if it is a known one.
    pub fn message(&self) -> Option<&'static str> {
        Self::KNOWN.iter().find(|(t, _)| t == self).map(|(_, m)| *m)
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

/// The prefiller's reply to a `DoneRecvingMsg`: these three bytes, not MessagePack (the `Ack` message's
/// `ACK` constant). Anything else makes the decoder raise.
pub const ACK: &[u8] = b"ACK";

/// Element 0: a bin equal to `tag` (msgspec's `Expected bytes` first, then the receiver's comparison,
/// reported as the spec codec reports a const mismatch).
fn tag(d: &mut De<'_>, want: &ControlTag) -> R<()> {
    d.with(Seg::Index(0), |d| {
        let b = d.bytes()?;
        if b != want.as_bytes() {
            return Err(d.err(K::InvalidTag(py_bytes_repr(&b))));
        }
        Ok(())
    })
}

/// `(b"get_meta_msg", "")`: decoder worker → prefiller worker, answered by `MooncakeAgentMetadata`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct GetMetaMsg {
    /// Always `""` from vllm-ascend; the prefiller only looks at the tag.
    pub unused: String,
}

/// Element names in order (the spec's field names; element 0 is the tag).
pub const GET_META_FIELDS: [&str; 2] = ["tag", "unused"];

impl GetMetaMsg {
    pub const TAG: ControlTag = ControlTag::GET_META;

    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut d = De::new(bytes)?;
        d.tuple_len(GET_META_FIELDS.len())?;
        d.enter()?;
        tag(&mut d, &Self::TAG)?;
        let unused = d.with(Seg::Index(1), |d| d.str())?;
        d.leave();
        d.finish()?;
        Ok(GetMetaMsg { unused })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(20 + self.unused.len());
        w.array_len(GET_META_FIELDS.len());
        w.bin(Self::TAG.as_bytes());
        w.str(&self.unused);
        w.into_bytes()
    }
}

/// `(b"done_recving_msg", request_id, remote_port_send_num)`: decoder worker → every prefiller worker it
/// read from, answered by [`ACK`].
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct DoneRecvingMsg {
    /// The prefiller's request id (`ReqId`, `remote_request_id` in kv_transfer_params).
    pub request_id: String,
    /// Handshake port (`HandshakePort`) → how many done messages that worker counts before freeing; in
    /// wire order, ports unique (last duplicate wins). Empty = free on the first.
    pub remote_port_send_num: Vec<(WireInt, RemotePortInfo)>,
}

/// Element names in order.
pub const DONE_RECVING_FIELDS: [&str; 3] = ["tag", "request_id", "remote_port_send_num"];

impl DoneRecvingMsg {
    pub const TAG: ControlTag = ControlTag::DONE_RECVING;

    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut d = De::new(bytes)?;
        d.tuple_len(DONE_RECVING_FIELDS.len())?;
        d.enter()?;
        tag(&mut d, &Self::TAG)?;
        let request_id = d.with(Seg::Index(1), |d| d.str())?;
        let remote_port_send_num = d.with(Seg::Index(2), |d| {
            d.dict(
                |d, o| match o {
                    Obj::Int(i) => Ok(i),
                    o => Err(d.key_err(K::Expected { expected: "int".into(), got: o.kind().msgspec_name() })),
                },
                RemotePortInfo::decode_in,
            )
        })?;
        d.leave();
        d.finish()?;
        Ok(DoneRecvingMsg { request_id, remote_port_send_num })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(
            24 + self.request_id.len()
                + self.remote_port_send_num.iter().map(|(_, p)| 24 + p.host.len()).sum::<usize>(),
        );
        w.array_len(DONE_RECVING_FIELDS.len());
        w.bin(Self::TAG.as_bytes());
        w.str(&self.request_id);
        w.map_len(self.remote_port_send_num.len());
        for (port, info) in &self.remote_port_send_num {
            w.int(*port);
            info.encode_into(&mut w);
        }
        w.into_bytes()
    }
}

/// A decoder → prefiller payload, matched to its message by content as the prefiller does (it decodes an
/// untyped tuple and compares element 0 with each tag).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    GetMeta(GetMetaMsg),
    DoneRecving(DoneRecvingMsg),
}

impl Request {
    /// A payload whose element 0 is the `DONE_RECVING` bin tag decodes as [`DoneRecvingMsg`]; any other as
    /// [`GetMetaMsg`], whose error then says what is wrong (not an array, wrong arity, `Invalid value b'...'`
    /// for an unknown tag — a payload the prefiller leaves unanswered).
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        if Self::first_tag(bytes).as_ref() == Some(&ControlTag::DONE_RECVING) {
            DoneRecvingMsg::decode(bytes).map(Request::DoneRecving)
        } else {
            GetMetaMsg::decode(bytes).map(Request::GetMeta)
        }
    }

    /// Element 0 of a payload, when the payload starts with an array whose first element is a bin.
    pub fn first_tag(bytes: &[u8]) -> Option<ControlTag> {
        let mut r = Reader::new(bytes);
        match (r.read_obj().ok()?, r.read_obj().ok()?) {
            (Obj::Array(n), Obj::Bin(b)) if n > 0 => Some(ControlTag(Cow::Owned(b.to_vec()))),
            _ => None,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        match self {
            Request::GetMeta(m) => m.encode(),
            Request::DoneRecving(m) => m.encode(),
        }
    }
}
