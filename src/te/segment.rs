//! The segment descriptor: the JSON body of a handshake frame (what a target tells an initiator about itself).

use serde_json::{Map, Value};

/// One registered buffer of a segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferDesc {
    /// The segment name the buffer belongs to (the engine writes the segment's name).
    pub name: String,
    /// The target's own (virtual) address of the buffer's first byte, as registered.
    pub addr: u64,
    /// The buffer's length in bytes.
    pub length: u64,
}

/// A TCP segment descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentDesc {
    /// `"<host>:<rpc_port>"`, the segment (session) name.
    pub name: String,
    /// `"tcp"` for the TCP transport.
    pub protocol: String,
    /// The memory the target registered, which requests must fall inside.
    pub buffers: Vec<BufferDesc>,
    /// Where the data server listens, when the descriptor says (newer engines); else the host part of `name`.
    pub tcp_data_host: Option<String>,
    /// The data server's port.
    pub tcp_data_port: u16,
    /// 1 when absent (engines before the acknowledged format).
    pub tcp_proto_version: u32,
    /// Passed through as the engine wrote it (empty for TCP).
    pub rdma_server_name: String,
    /// Passed through as the engine wrote it.
    pub timestamp: String,
}

/// Why a descriptor is unusable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentError(pub String);

impl std::fmt::Display for SegmentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "segment descriptor: {}", self.0)
    }
}
impl std::error::Error for SegmentError {}

fn err<T>(m: impl Into<String>) -> Result<T, SegmentError> {
    Err(SegmentError(m.into()))
}

impl SegmentDesc {
    /// The host the data server is reached at as far as the descriptor alone says: `tcp_data_host`, else the
    /// host part of `name`. An initiator that opened a session uses the session's host instead of `name`'s (as
    /// measured of the real engine; `mooncake_io`'s client does).
    pub fn data_host(&self) -> &str {
        match &self.tcp_data_host {
            Some(h) if !h.is_empty() => h,
            _ => self.name.rsplit_once(':').map_or(self.name.as_str(), |(h, _)| h),
        }
    }

    /// Whether the target speaks the acknowledged data format (version 2 or later).
    pub fn acknowledged(&self) -> bool {
        self.tcp_proto_version >= 2
    }

    /// The JSON text the engine writes (keys in alphabetical order, one trailing newline).
    pub fn to_json(&self) -> String {
        let buffers: Vec<Value> = self
            .buffers
            .iter()
            .map(|b| serde_json::json!({"addr": b.addr, "length": b.length, "name": b.name}))
            .collect();
        let mut m = Map::new();
        m.insert("buffers".into(), Value::Array(buffers));
        m.insert("name".into(), self.name.clone().into());
        m.insert("protocol".into(), self.protocol.clone().into());
        m.insert("rdma_server_name".into(), self.rdma_server_name.clone().into());
        if let Some(h) = &self.tcp_data_host {
            m.insert("tcp_data_host".into(), h.clone().into());
        }
        m.insert("tcp_data_port".into(), self.tcp_data_port.into());
        m.insert("tcp_proto_version".into(), self.tcp_proto_version.into());
        m.insert("timestamp".into(), self.timestamp.clone().into());
        Value::Object(m).to_string() + "\n"
    }

    /// Reads a TCP descriptor. Unknown keys are ignored (the engine ignores them too); a buffer with an empty
    /// name, address 0 or length 0 makes the descriptor unusable, as in the engine.
    pub fn parse(body: &[u8]) -> Result<SegmentDesc, SegmentError> {
        let v: Value = serde_json::from_slice(body).map_err(|e| SegmentError(format!("not JSON: {e}")))?;
        let Value::Object(o) = v else { return err("not a JSON object") };
        let s = |k: &str| -> Result<String, SegmentError> {
            match o.get(k) {
                None | Some(Value::Null) => Ok(String::new()),
                Some(Value::String(s)) => Ok(s.clone()),
                Some(other) => err(format!("`{k}` is {other}, not a string")),
            }
        };
        let name = s("name")?;
        let protocol = s("protocol")?;
        if protocol != "tcp" {
            return err(format!("protocol is {protocol:?}, not \"tcp\""));
        }
        let port = match o.get("tcp_data_port").and_then(Value::as_u64) {
            Some(p) if (1..=65535).contains(&p) => p as u16,
            other => return err(format!("tcp_data_port is {other:?}, not a port")),
        };
        let version = match o.get("tcp_proto_version") {
            None => 1,
            Some(v) => match v.as_u64() {
                Some(n) if n <= u32::MAX as u64 => n as u32,
                _ => return err(format!("tcp_proto_version is {v}, not a small integer")),
            },
        };
        let mut buffers = vec![];
        match o.get("buffers") {
            None | Some(Value::Null) => {}
            Some(Value::Array(a)) => {
                for (i, b) in a.iter().enumerate() {
                    let name = b.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
                    let addr = b.get("addr").and_then(Value::as_u64).unwrap_or(0);
                    let length = b.get("length").and_then(Value::as_u64).unwrap_or(0);
                    if name.is_empty() || addr == 0 || length == 0 {
                        return err(format!("buffer {i} has an empty name, address 0 or length 0"));
                    }
                    buffers.push(BufferDesc { name, addr, length });
                }
            }
            Some(other) => return err(format!("`buffers` is {other}, not a list")),
        }
        let host = s("tcp_data_host")?;
        Ok(SegmentDesc {
            tcp_data_host: o.contains_key("tcp_data_host").then_some(host),
            name,
            protocol,
            buffers,
            tcp_data_port: port,
            tcp_proto_version: version,
            rdma_server_name: s("rdma_server_name")?,
            timestamp: s("timestamp")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MEASURED: &str = r#"{"buffers":[{"addr":94720244883792,"length":4096,"name":"127.0.0.1:15195"}],"name":"127.0.0.1:15195","protocol":"tcp","rdma_server_name":"","tcp_data_host":"127.0.0.1","tcp_data_port":16998,"tcp_proto_version":2,"timestamp":"2026-12-01 17:54:16.272098"}"#;

    #[test]
    fn the_measured_descriptor_round_trips() {
        let d = SegmentDesc::parse(MEASURED.as_bytes()).unwrap();
        assert_eq!(d.data_host(), "127.0.0.1");
        assert_eq!((d.tcp_data_port, d.tcp_proto_version, d.buffers[0].length), (16998, 2, 4096));
        assert_eq!(d.to_json(), format!("{MEASURED}\n"));
    }

    #[test]
    fn older_descriptors_and_bad_ones() {
        let old = r#"{"buffers":[],"name":"10.0.0.2:15001","protocol":"tcp","tcp_data_port":16000}"#;
        let d = SegmentDesc::parse(old.as_bytes()).unwrap();
        assert_eq!((d.data_host(), d.acknowledged()), ("10.0.0.2", false));
        for bad in [
            r#"[]"#,
            r#"{"protocol":"rdma","tcp_data_port":1}"#,
            r#"{"protocol":"tcp"}"#,
            r#"{"protocol":"tcp","tcp_data_port":70000}"#,
            r#"{"protocol":"tcp","tcp_data_port":1,"buffers":[{"name":"x","addr":0,"length":1}]}"#,
            r#"{"protocol":"tcp","tcp_data_port":1,"tcp_proto_version":-1}"#,
            "\u{0}",
        ] {
            assert!(SegmentDesc::parse(bad.as_bytes()).is_err(), "{bad}");
        }
    }
}
