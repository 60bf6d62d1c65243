//! The value type of `req_blocks` (`tuple[TransferId, list[list[int]]]`, or `list[int]` before 0.20.0) as the
//! generated structs hold it, with its decoder and encoder.

use super::de::{De, Seg, WireStr, R};
use crate::codec::convert::{flatten_one, group_one};
use crate::codec::DecodeErrorKind as K;
use crate::msgpack::{WireInt, Writer};

/// One `req_blocks` value: `(transfer_id, block ids per KV transfer group)`, with its strings held as `S`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ReqBlocksOf<S> {
    /// The transfer id.
    pub transfer_id: S,
    /// `[]` (not `[[]]`) when nothing is to be written.
    pub blocks: Vec<Vec<WireInt>>,
}

/// One `req_blocks` value with owned strings.
pub type ReqBlocks = ReqBlocksOf<String>;
/// One `req_blocks` value borrowing its strings from the decoded input.
pub type ReqBlocksRef<'a> = ReqBlocksOf<&'a str>;

/// One `req_blocks` value of a revision before 0.20.0: `(transfer_id, block ids)`, one flat list.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct FlatReqBlocksOf<S> {
    /// The transfer id.
    pub transfer_id: S,
    /// The block ids, flat.
    pub blocks: Vec<WireInt>,
}

impl ReqBlocksOf<&str> {
    /// The same value with owned strings.
    pub(crate) fn to_owned_blocks(&self) -> ReqBlocks {
        ReqBlocksOf { transfer_id: self.transfer_id.to_owned(), blocks: self.blocks.clone() }
    }
}
impl FlatReqBlocksOf<&str> {
    /// The same value with owned strings.
    pub(crate) fn to_owned_blocks(&self) -> FlatReqBlocksOf<String> {
        FlatReqBlocksOf { transfer_id: self.transfer_id.to_owned(), blocks: self.blocks.clone() }
    }
}

/// What the encoder needs of a `req_blocks` value.
pub(crate) trait BlocksValue {
    fn transfer_id(&self) -> &str;
    fn write_blocks(&self, w: &mut Writer);
    fn len_hint(&self) -> usize;
}
impl<S: AsRef<str>> BlocksValue for ReqBlocksOf<S> {
    fn transfer_id(&self) -> &str {
        self.transfer_id.as_ref()
    }
    fn write_blocks(&self, w: &mut Writer) {
        w.array_len(self.blocks.len());
        for g in &self.blocks {
            w.int_list(g);
        }
    }
    fn len_hint(&self) -> usize {
        5 + self.blocks.iter().map(|g| 5 + 9 * g.len()).sum::<usize>()
    }
}
impl<S: AsRef<str>> BlocksValue for FlatReqBlocksOf<S> {
    fn transfer_id(&self) -> &str {
        self.transfer_id.as_ref()
    }
    fn write_blocks(&self, w: &mut Writer) {
        w.int_list(&self.blocks);
    }
    fn len_hint(&self) -> usize {
        5 + 9 * self.blocks.len()
    }
}

impl<'a> De<'a> {
    /// `[transfer_id, blocks]`: exactly two elements, as msgspec's `tuple[A, B]`.
    fn pair<S: WireStr<'a>, B>(&mut self, blocks: impl FnOnce(&mut Self) -> R<B>) -> R<(S, B)> {
        let n = self.array("array")?;
        if n != 2 {
            return Err(self.err(K::ArrayLength { expected: 2, got: n }));
        }
        self.enter()?;
        let transfer_id = self.with(Seg::Index(0), |d| d.str())?;
        let b = self.with(Seg::Index(1), blocks)?;
        self.leave();
        Ok((transfer_id, b))
    }

    /// A `req_blocks` value with one block list per group.
    pub(crate) fn blocks_value<S: WireStr<'a>>(d: &mut Self) -> R<ReqBlocksOf<S>> {
        let (transfer_id, blocks) = d.pair(|d| d.list_list_int())?;
        Ok(ReqBlocksOf { transfer_id, blocks })
    }

    /// A `req_blocks` value with one flat block list.
    pub(crate) fn flat_blocks_value<S: WireStr<'a>>(d: &mut Self) -> R<FlatReqBlocksOf<S>> {
        let (transfer_id, blocks) = d.pair(|d| d.list_int())?;
        Ok(FlatReqBlocksOf { transfer_id, blocks })
    }
}

/// Writes a `dict[str, tuple[str, …]]` in its order.
pub(crate) fn encode_req_blocks<S: AsRef<str>, B: BlocksValue>(w: &mut Writer, v: &[(S, B)]) {
    w.map_len(v.len());
    for (k, b) in v {
        w.str(k.as_ref());
        w.array_len(2);
        w.str(b.transfer_id());
        b.write_blocks(w);
    }
}

/// An upper bound of the encoded size of a `req_blocks` dict.
pub(crate) fn req_blocks_len<S: AsRef<str>, B: BlocksValue>(v: &[(S, B)]) -> usize {
    5 + v.iter().map(|(k, b)| k.as_ref().len() + b.transfer_id().len() + 12 + b.len_hint()).sum::<usize>()
}

/// Grouped block lists as a revision with flat lists (before 0.20.0) carries them: no group stays `[]`, one
/// group is that group's list, more than one cannot be said (`Err` names the request). The rule is the
/// spec-driven conversion's ([`crate::codec::convert`]).
pub(crate) fn flatten_req_blocks(
    grouped: &[(String, ReqBlocks)],
) -> Result<Vec<(String, FlatReqBlocksOf<String>)>, crate::codec::convert::ConvertError> {
    grouped
        .iter()
        .map(|(k, b)| {
            let blocks = flatten_one(&b.blocks)
                .map_err(|groups| crate::codec::convert::ConvertError::RequestGroups { request: k.clone(), groups })?;
            Ok((k.clone(), FlatReqBlocksOf { transfer_id: b.transfer_id.clone(), blocks }))
        })
        .collect()
}

/// Flat block lists as grouped ones: an empty list is no group, any other is the one group.
pub(crate) fn group_req_blocks(flat: &[(String, FlatReqBlocksOf<String>)]) -> Vec<(String, ReqBlocks)> {
    flat.iter()
        .map(|(k, b)| (k.clone(), ReqBlocksOf { transfer_id: b.transfer_id.clone(), blocks: group_one(&b.blocks) }))
        .collect()
}
