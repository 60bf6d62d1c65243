//! `MooncakeXferResponse` of vLLM 0.33.0 (`spec/push/vllm-0.16.0..0.18.1.toml` + `vllm-0.33.0.toml`).

use super::de::{De, WireStr, R};
use super::{Status, Strictness};
use crate::codec::{DecodeError, DecodeErrorKind};
use crate::msgpack::{WireInt, Writer};

/// Prefiller → decoder reply, with its strings held as `S` (see [`MooncakeXferResponse`] and
/// [`MooncakeXferResponseRef`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MooncakeXferResponseOf<S> {
    pub status: Status,
    pub ok_reqs: Option<Vec<S>>,
    pub err_reqs: Option<Vec<S>>,
    pub err_msg: Option<S>,
    pub layout_id: WireInt,
}

/// Prefiller → decoder reply (owned strings).
pub type MooncakeXferResponse = MooncakeXferResponseOf<String>;
/// Prefiller → decoder reply whose strings borrow from the decoded bytes (no allocation per request id).
pub type MooncakeXferResponseRef<'a> = MooncakeXferResponseOf<&'a str>;

/// Wire names in declaration order.
pub const FIELDS: [&str; 5] = ["status", "ok_reqs", "err_reqs", "err_msg", "layout_id"];

impl<S> MooncakeXferResponseOf<S> {
    pub fn new(status: Status) -> Self {
        MooncakeXferResponseOf { status, ok_reqs: None, err_reqs: None, err_msg: None, layout_id: WireInt::ZERO }
    }
}

impl MooncakeXferResponseRef<'_> {
    /// The same reply with owned strings.
    pub fn to_owned_message(&self) -> MooncakeXferResponse {
        let list = |l: &Option<Vec<&str>>| l.as_ref().map(|v| v.iter().map(|s| s.to_string()).collect());
        MooncakeXferResponseOf {
            status: self.status,
            ok_reqs: list(&self.ok_reqs),
            err_reqs: list(&self.err_reqs),
            err_msg: self.err_msg.map(str::to_string),
            layout_id: self.layout_id,
        }
    }
}

impl<'a, S: WireStr<'a>> MooncakeXferResponseOf<S> {
    /// Decodes as msgspec does with vLLM 0.33.0's class.
    pub fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {
        Self::decode_with(bytes, Strictness::Msgspec)
    }

    /// Decodes; with [`Strictness::OpenStatus`] an unknown status is kept instead of rejected.
    pub fn decode_with(bytes: &'a [u8], strictness: Strictness) -> Result<Self, DecodeError> {
        let mut d = De::new(bytes)?;
        let v = Self::decode_in(&mut d, strictness)?;
        d.finish()?;
        Ok(v)
    }

    fn decode_in(d: &mut De<'a>, strictness: Strictness) -> R<Self> {
        let mut status = None;
        let mut v = Self::new(Status::FINISH);
        d.struct_map(&FIELDS, |d, i| {
            match i {
                0 => {
                    let s = d.int()?;
                    let st = s.as_i64().map(Status).filter(|s| s.is_known() || strictness == Strictness::OpenStatus);
                    status = Some(st.ok_or_else(|| d.err(DecodeErrorKind::InvalidEnum(s)))?);
                }
                1 => v.ok_reqs = d.opt_list_str()?,
                2 => v.err_reqs = d.opt_list_str()?,
                3 => v.err_msg = d.opt_str()?,
                _ => v.layout_id = d.int()?,
            }
            Ok(())
        })?;
        v.status = status.ok_or_else(|| d.missing("status"))?;
        Ok(v)
    }
}

impl<S: AsRef<str>> MooncakeXferResponseOf<S> {
    /// Encodes as msgspec does (omit_defaults, declaration order).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(self.encoded_len_hint());
        self.encode_into(&mut w);
        w.into_bytes()
    }

    fn encoded_len_hint(&self) -> usize {
        let list =
            |l: &Option<Vec<S>>| l.as_ref().map_or(0, |v| 10 + v.iter().map(|s| s.as_ref().len() + 5).sum::<usize>());
        48 + list(&self.ok_reqs) + list(&self.err_reqs) + self.err_msg.as_ref().map_or(0, |s| s.as_ref().len() + 14)
    }

    pub fn encode_into(&self, w: &mut Writer) {
        let h = w.begin_struct_map(FIELDS.len());
        let mut n = 1;
        w.str("status");
        w.sint(self.status.0);
        for (name, list) in [("ok_reqs", &self.ok_reqs), ("err_reqs", &self.err_reqs)] {
            if let Some(l) = list {
                w.str(name);
                w.array_len(l.len());
                for s in l {
                    w.str(s.as_ref());
                }
                n += 1;
            }
        }
        if let Some(m) = &self.err_msg {
            w.str("err_msg");
            w.str(m.as_ref());
            n += 1;
        }
        if self.layout_id != WireInt::ZERO {
            w.str("layout_id");
            w.int(self.layout_id);
            n += 1;
        }
        w.finish_struct_map(h, n);
    }
}
