//! How a target's segment descriptor differs from what a real engine target answers, field by field.
//!
//! Measured against the pinned engine (pip `mooncake-transfer-engine-non-cuda` 0.3.13.post1,
//! `tests/engine/descriptor_probe.py`; the table is in `conformance/TESTEE.md`): a real target writes its
//! segment name (the session `host:rpc_port`), `rdma_server_name` (`""` over TCP) and `tcp_proto_version` 2,
//! and lists every buffer it registered. The real initiator accepts a descriptor without those (it writes
//! anyway, with version 1 framing when `tcp_proto_version` is absent or below 2) and never checks the buffer
//! list: a write outside it reaches the target, whose own registry decides. A strict initiator (the
//! conformance runner's) reports each difference and writes only inside advertised buffers.

use serde_json::Value;

use super::SegmentDesc;

/// The `tcp_proto_version` the pinned engine's target advertises.
pub const ENGINE_TCP_PROTO_VERSION: u64 = 2;

/// One way a descriptor differs from a real engine target's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deviation {
    /// The field (`name`, `rdma_server_name`, `tcp_proto_version`, `buffers`).
    pub field: &'static str,
    /// What the descriptor says and what a real target writes.
    pub detail: String,
    /// What the real engine's initiator does with it (measured).
    pub real_engine: &'static str,
}

impl std::fmt::Display for Deviation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` {} (the real engine's initiator {})", self.field, self.detail, self.real_engine)
    }
}

/// The differences of the descriptor `body` (a handshake answer's JSON, already accepted by
/// [`SegmentDesc::parse`]) from what a real engine target answers to an initiator that opened `session`.
pub fn audit(body: &[u8], session: &str) -> Vec<Deviation> {
    let Ok(Value::Object(o)) = serde_json::from_slice::<Value>(body) else { return vec![] };
    let mut out = vec![];
    match o.get("name") {
        None => out.push(Deviation {
            field: "name",
            detail: format!("is missing (a real target writes its segment name {session:?})"),
            real_engine: "ignores it and writes (measured)",
        }),
        Some(v) if v.as_str() != Some(session) => out.push(Deviation {
            field: "name",
            detail: format!("is {v}, not the segment name {session:?} the initiator opened"),
            real_engine: "ignores it and writes to the segment it opened (measured)",
        }),
        Some(_) => {}
    }
    if !o.contains_key("rdma_server_name") {
        out.push(Deviation {
            field: "rdma_server_name",
            detail: "is missing (a real target writes \"\" over TCP)".into(),
            real_engine: "ignores it and writes (measured)",
        });
    }
    match o.get("tcp_proto_version") {
        None => out.push(Deviation {
            field: "tcp_proto_version",
            detail: format!("is missing (a real target writes {ENGINE_TCP_PROTO_VERSION})"),
            real_engine: "then sends version-1 requests, with no acknowledgement (measured)",
        }),
        Some(v) if v.as_u64() != Some(ENGINE_TCP_PROTO_VERSION) => out.push(Deviation {
            field: "tcp_proto_version",
            detail: format!("is {v}, not {ENGINE_TCP_PROTO_VERSION}"),
            real_engine: "sends version-1 requests below 2 and version-2 requests from 2 on (measured with 1 and 3)",
        }),
        Some(_) => {}
    }
    out
}

/// The write of `size` bytes at `addr` when no advertised buffer of `desc` holds all of it: a description of
/// the buffers it overlaps (or that none does). `None` when one buffer covers it.
pub fn uncovered(desc: &SegmentDesc, addr: u64, size: u64) -> Option<Deviation> {
    let regions = desc.buffers.iter().map(|b| (b.addr, b.length));
    if super::data::range_allowed(regions, addr, size) {
        return None;
    }
    let n = desc.buffers.len();
    // The buffer that holds the write's first byte, else the nearest one below it.
    let below = desc.buffers.iter().filter(|b| b.addr <= addr).max_by_key(|b| b.addr);
    let detail = match below {
        Some(b) => {
            format!("buffer {:#x}+{} does not cover the write {addr:#x}+{size} ({n} advertised)", b.addr, b.length)
        }
        None => format!("lists no buffer at or below the write {addr:#x}+{size} ({n} advertised)"),
    };
    Some(Deviation {
        field: "buffers",
        detail,
        real_engine: "does not check the buffer list and sends the write; the target's own registered memory decides \
                      (measured); a real target lists every buffer it registered",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SESSION: &str = "127.0.0.1:15195";
    const REAL: &str = r#"{"buffers":[{"addr":4096,"length":65536,"name":"127.0.0.1:15195"}],"name":"127.0.0.1:15195","protocol":"tcp","rdma_server_name":"","tcp_data_host":"127.0.0.1","tcp_data_port":16998,"tcp_proto_version":2,"timestamp":"t"}"#;

    fn edited(f: impl Fn(&mut serde_json::Map<String, Value>)) -> Vec<u8> {
        let mut v: Value = serde_json::from_str(REAL).unwrap();
        f(v.as_object_mut().unwrap());
        v.to_string().into_bytes()
    }

    #[test]
    fn a_real_targets_descriptor_has_no_deviation() {
        assert_eq!(audit(REAL.as_bytes(), SESSION), vec![]);
        let d = SegmentDesc::parse(REAL.as_bytes()).unwrap();
        assert_eq!(uncovered(&d, 4096, 65536), None);
    }

    #[test]
    fn each_field_a_real_target_writes_is_named() {
        for (edit, field) in [
            (edited(|o| drop(o.remove("name"))), "name"),
            (edited(|o| drop(o.insert("name".into(), "127.0.0.1:1".into()))), "name"),
            (edited(|o| drop(o.remove("rdma_server_name"))), "rdma_server_name"),
            (edited(|o| drop(o.remove("tcp_proto_version"))), "tcp_proto_version"),
            (edited(|o| drop(o.insert("tcp_proto_version".into(), 3.into()))), "tcp_proto_version"),
        ] {
            let got = audit(&edit, SESSION);
            assert_eq!(got.iter().map(|d| d.field).collect::<Vec<_>>(), [field], "{}", String::from_utf8_lossy(&edit));
        }
    }

    #[test]
    fn a_write_outside_the_advertised_buffers_is_named() {
        let d = SegmentDesc::parse(REAL.as_bytes()).unwrap();
        let short = uncovered(&d, 4096, 65537).unwrap();
        assert!(short.to_string().contains("buffer 0x1000+65536 does not cover the write 0x1000+65537"), "{short}");
        let none = uncovered(&d, 1 << 40, 8).unwrap();
        assert!(none.to_string().contains("buffer 0x1000+65536 does not cover the write 0x10000000000+8"), "{none}");
        let below = uncovered(&d, 16, 8).unwrap();
        assert!(below.to_string().contains("lists no buffer at or below the write 0x10+8 (1 advertised)"), "{below}");
    }
}
