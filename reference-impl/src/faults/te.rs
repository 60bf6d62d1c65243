//! Faults in a decoder's transfer-engine handshake answer (its segment descriptor). Each is a variation measured
//! against the real engine (`conformance/TESTEE.md`, "The transfer-engine segment descriptor").

use std::sync::Arc;

use mooncake_io::engine::AnswerEdit;
use mooncake_wire::te::handshake::MsgType;
use serde_json::Value;

use super::Fault;

/// The handshake answer after one fault (faults of other kinds leave it alone).
fn apply(f: Fault, v: &mut Value, ty: &mut MsgType) {
    let Some(o) = v.as_object_mut() else { return };
    let buffers = o.get_mut("buffers").and_then(Value::as_array_mut);
    match f {
        Fault::TeBufferShort => buffers.into_iter().flatten().for_each(|b| b["length"] = 4096.into()),
        Fault::TeBufferMissing => drop(buffers.and_then(Vec::pop)),
        Fault::TeBufferCorrupt => buffers.into_iter().flatten().take(1).for_each(|b| b["length"] = 0.into()),
        Fault::TeNameMissing => drop(o.remove("name")),
        Fault::TeNameWrong => drop(o.insert("name".into(), "127.0.0.1:1".into())),
        Fault::TeRdmaServerNameMissing => drop(o.remove("rdma_server_name")),
        Fault::TeTcpProtoVersionMissing => drop(o.remove("tcp_proto_version")),
        Fault::TeTcpProtoVersion3 => drop(o.insert("tcp_proto_version".into(), 3.into())),
        Fault::TeAnswerType => *ty = MsgType::Connection,
        Fault::TeAnswerNotJson => *v = Value::String("not json".into()),
        _ => {}
    }
}

/// The handshake-answer edit of the transfer-engine faults among `faults`, `None` when there are none.
pub fn answer_edit(faults: &[Fault]) -> Option<AnswerEdit> {
    let te: Vec<Fault> = faults.iter().copied().filter(|f| f.name().starts_with("te_")).collect();
    if te.is_empty() {
        return None;
    }
    Some(Arc::new(move |v: &mut Value, ty: &mut MsgType| te.iter().for_each(|f| apply(*f, v, ty))))
}
