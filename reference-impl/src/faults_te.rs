//! Deliberate faults in a decoder's transfer-engine handshake answer (its segment descriptor), so tests can
//! prove the conformance runner's engine catches each one (`"faults": ["te_…"]` in a decoder's start config,
//! beside the wire faults of [`crate::faults`]; not part of the testee protocol). Each is a variation measured
//! against the real engine (`conformance/TESTEE.md`, "The transfer-engine segment descriptor").

use std::sync::Arc;

use mooncake_io::engine::AnswerEdit;
use mooncake_wire::te::handshake::MsgType;
use serde_json::Value;

use crate::error::UnknownFault;

/// One deliberate change to the handshake answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnswerFault {
    /// Every buffer advertised at 4 KiB (the regions are larger).
    BufferShort,
    /// The last buffer left out.
    BufferMissing,
    /// A buffer with length 0 (a corrupted descriptor).
    BufferCorrupt,
    /// No segment `name`.
    NameMissing,
    /// A segment `name` other than the session.
    NameWrong,
    /// No `rdma_server_name`.
    RdmaServerNameMissing,
    /// No `tcp_proto_version`.
    TcpProtoVersionMissing,
    /// `tcp_proto_version` 3.
    TcpProtoVersionOther,
    /// The answer is a Connection frame (the initiator sent a Metadata one).
    AnswerType,
    /// The answer's body is not JSON.
    AnswerNotJson,
}

impl AnswerFault {
    /// The fault of a config name (`te_buffer_short`, …); `None` for a name without the `te_` prefix.
    pub fn parse(s: &str) -> Option<Result<AnswerFault, UnknownFault>> {
        let name = s.strip_prefix("te_")?;
        Some(Ok(match name {
            "buffer_short" => AnswerFault::BufferShort,
            "buffer_missing" => AnswerFault::BufferMissing,
            "buffer_corrupt" => AnswerFault::BufferCorrupt,
            "name_missing" => AnswerFault::NameMissing,
            "name_wrong" => AnswerFault::NameWrong,
            "rdma_server_name_missing" => AnswerFault::RdmaServerNameMissing,
            "tcp_proto_version_missing" => AnswerFault::TcpProtoVersionMissing,
            "tcp_proto_version_3" => AnswerFault::TcpProtoVersionOther,
            "answer_type" => AnswerFault::AnswerType,
            "answer_not_json" => AnswerFault::AnswerNotJson,
            _ => return Some(Err(UnknownFault(s.to_string()))),
        }))
    }

    fn apply(self, v: &mut Value, ty: &mut MsgType) {
        let Some(o) = v.as_object_mut() else { return };
        let buffers = o.get_mut("buffers").and_then(Value::as_array_mut);
        match self {
            AnswerFault::BufferShort => buffers.into_iter().flatten().for_each(|b| b["length"] = 4096.into()),
            AnswerFault::BufferMissing => drop(buffers.and_then(Vec::pop)),
            AnswerFault::BufferCorrupt => buffers.into_iter().flatten().take(1).for_each(|b| b["length"] = 0.into()),
            AnswerFault::NameMissing => drop(o.remove("name")),
            AnswerFault::NameWrong => drop(o.insert("name".into(), "127.0.0.1:1".into())),
            AnswerFault::RdmaServerNameMissing => drop(o.remove("rdma_server_name")),
            AnswerFault::TcpProtoVersionMissing => drop(o.remove("tcp_proto_version")),
            AnswerFault::TcpProtoVersionOther => drop(o.insert("tcp_proto_version".into(), 3.into())),
            AnswerFault::AnswerType => *ty = MsgType::Connection,
            AnswerFault::AnswerNotJson => *v = Value::String("not json".into()),
        }
    }
}

/// The wire faults of `names` (those without the `te_` prefix).
pub fn wire_faults(names: &[String]) -> Result<Vec<crate::faults::Fault>, UnknownFault> {
    names.iter().filter(|n| !n.starts_with("te_")).map(|n| crate::faults::Fault::parse(n)).collect()
}

/// The handshake-answer edit of the `te_` faults of `names`, `None` when there are none.
pub fn answer_edit(names: &[String]) -> Result<Option<AnswerEdit>, UnknownFault> {
    let faults: Vec<AnswerFault> = names.iter().filter_map(|n| AnswerFault::parse(n)).collect::<Result<_, _>>()?;
    if faults.is_empty() {
        return Ok(None);
    }
    Ok(Some(Arc::new(move |v: &mut Value, ty: &mut MsgType| faults.iter().for_each(|f| f.apply(v, ty)))))
}
