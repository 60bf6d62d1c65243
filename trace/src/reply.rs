//! How findings show a recorded or live reply, and how two replies differ, field by field.

use mooncake_wire::typed::{MooncakeXferResponse, StrList};

/// An optional field as JSON (`absent` when missing).
fn show<T: serde::Serialize>(v: &Option<T>) -> String {
    v.as_ref().map(|x| serde_json::to_string(x).unwrap_or_default()).unwrap_or_else(|| "absent".into())
}

/// A reply as its fields in JSON, for findings.
pub fn show_reply(r: &MooncakeXferResponse) -> String {
    let mut o = serde_json::Map::new();
    o.insert("status".into(), r.status.to_string().into());
    for (k, v) in [("ok_reqs", &r.ok_reqs), ("err_reqs", &r.err_reqs)] {
        if let Some(v) = v {
            o.insert(k.into(), serde_json::json!(v));
        }
    }
    if let Some(m) = &r.err_msg {
        o.insert("err_msg".into(), m.clone().into());
    }
    serde_json::Value::Object(o).to_string()
}

/// Field-level differences between two replies (ok/err ids compared as sets).
pub fn reply_diff(live: &MooncakeXferResponse, want: &MooncakeXferResponse) -> String {
    let mut d = vec![];
    let set =
        |l: &Option<StrList>| l.as_ref().map(|v| v.iter().map(String::from).collect::<std::collections::BTreeSet<_>>());
    if live.status != want.status {
        d.push(format!("$.status: {} vs recorded {}", live.status, want.status));
    }
    if set(&live.ok_reqs) != set(&want.ok_reqs) {
        d.push(format!("$.ok_reqs: {} vs recorded {}", show(&live.ok_reqs), show(&want.ok_reqs)));
    }
    if set(&live.err_reqs) != set(&want.err_reqs) {
        d.push(format!("$.err_reqs: {} vs recorded {}", show(&live.err_reqs), show(&want.err_reqs)));
    }
    if live.err_msg != want.err_msg {
        d.push(format!("$.err_msg: {} vs recorded {}", show(&live.err_msg), show(&want.err_msg)));
    }
    if live.layout_id != want.layout_id {
        d.push(format!("$.layout_id: {:#x} vs recorded {:#x}", live.layout_id, want.layout_id));
    }
    d.join("; ")
}
