//! `RemotePortInfo` of vllm-ascend 0.23.0.post1: a TypedDict the decoder writes as the dict literal
//! `{"num": ..., "host": ...}` inside `DoneRecvingMsg` (vllm-ascend 0.23.0.post1 sdist,
//! `vllm_ascend/distributed/kv_transfer/kv_p2p/mooncake_connector.py`; `spec/pull/vllm-ascend-0.18.0.toml`
//! `[structs.RemotePortInfo]`, `kind = "dataclass"`, unchanged in 0.23.0.post1). A map of both keys, both
//! required, unknown keys ignored, always written in declaration order (no defaults, nothing omitted).

use crate::codec::DecodeError;
use crate::msgpack::{WireInt, Writer};
use crate::typed::de::{De, R};

/// How many completion messages the prefiller worker on one handshake port waits for, and its host.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct RemotePortInfo {
    pub num: WireInt,
    pub host: String,
}

/// Wire names in declaration order.
pub const FIELDS: [&str; 2] = ["num", "host"];

impl RemotePortInfo {
    /// Decodes as msgspec does with the TypedDict.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut d = De::new(bytes)?;
        let v = Self::decode_in(&mut d)?;
        d.finish()?;
        Ok(v)
    }

    pub(crate) fn decode_in(d: &mut De<'_>) -> R<Self> {
        let (mut num, mut host) = (None, None);
        d.struct_map(&FIELDS, |d, i| {
            match i {
                0 => num = Some(d.int()?),
                _ => host = Some(d.str()?),
            }
            Ok(())
        })?;
        Ok(RemotePortInfo { num: num.ok_or_else(|| d.missing("num"))?, host: host.ok_or_else(|| d.missing("host"))? })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(16 + self.host.len());
        self.encode_into(&mut w);
        w.into_bytes()
    }

    pub fn encode_into(&self, w: &mut Writer) {
        w.map_len(FIELDS.len());
        w.str("num");
        w.int(self.num);
        w.str("host");
        w.str(&self.host);
    }
}
