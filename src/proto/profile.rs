//! What a state machine needs to know about the revision it speaks, read from the spec — never hard-coded
//! per release. Messages are handled internally as the typed 0.33.0 structs and converted at the boundary.

use std::sync::Arc;
use std::time::Duration;

use crate::codec::{Codec, DecodeError};
use crate::spec::{LayoutCaching, Revision, Spec};
use crate::typed::{MooncakeXferMetadata, MooncakeXferResponse, Status};

/// A generation-2 revision, as the prefiller and decoder cores use it.
#[derive(Clone, Debug)]
pub struct WireProfile {
    pub revision: Arc<Revision>,
    codec: Arc<Codec>,
    /// `layout_id` caching and `LAYOUT_MISS` (0.33.0): from `behaviour.layout_caching`.
    pub layout_caching: Option<LayoutCaching>,
    /// Status values this revision's enum defines, with their `terminal` flag.
    pub statuses: Vec<(Status, bool)>,
    /// A decoder fails requests a FINISH left unreported (`behaviour.unreported_after_finish = "failed"`).
    pub fail_unreported_after_finish: bool,
    /// Default of `VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT` (`[env]`).
    pub abort_timeout: Duration,
}

impl WireProfile {
    /// The profile of a built-in revision (`vllm-0.33.0`).
    pub fn builtin(revision: &str) -> Result<WireProfile, String> {
        let rev = Spec::builtin().revision(revision).ok_or_else(|| format!("no revision {revision} in the spec"))?.clone();
        let codec = Codec::builtin(revision).expect("built-in");
        Self::new(rev, codec)
    }

    pub fn new(rev: Arc<Revision>, codec: Arc<Codec>) -> Result<WireProfile, String> {
        if rev.generation != 2 {
            return Err(format!("{} is generation {}; the state machines speak generation 2", rev.revision, rev.generation));
        }
        for m in ["MooncakeXferMetadata", "MooncakeXferResponse"] {
            if codec.message_type(m).is_none() {
                return Err(format!("{} has no {m}", rev.revision));
            }
        }
        let (_, status_enum) = rev.status_enum().ok_or("no status enum with terminal flags")?;
        let statuses = status_enum.members.iter().map(|m| (Status(m.value), m.terminal == Some(true))).collect();
        let abort = rev
            .env
            .get("VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT")
            .and_then(|e| e.default.parse::<u64>().ok())
            .ok_or("no VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT default in [env]")?;
        Ok(WireProfile {
            layout_caching: rev.behaviour.layout_caching.get().cloned(),
            fail_unreported_after_finish: rev.behaviour.unreported_after_finish.as_deref() == Some("failed"),
            abort_timeout: Duration::from_secs(abort),
            statuses,
            codec,
            revision: rev,
        })
    }

    pub fn name(&self) -> &str {
        &self.revision.revision
    }
    pub fn codec(&self) -> &Arc<Codec> {
        &self.codec
    }
    pub fn knows_status(&self, s: Status) -> bool {
        self.statuses.iter().any(|(x, _)| *x == s)
    }
    pub fn is_terminal(&self, s: Status) -> bool {
        self.statuses.iter().any(|(x, t)| *x == s && *t)
    }
    fn is_typed(&self) -> bool {
        self.revision.revision == crate::typed::REVISION
    }

    /// Decodes a pull request as this revision's decoder does (msgspec rules of this revision).
    pub fn decode_metadata(&self, bytes: &[u8]) -> Result<MooncakeXferMetadata, DecodeError> {
        if self.is_typed() {
            return MooncakeXferMetadata::decode(bytes);
        }
        let v = self.codec.decode("MooncakeXferMetadata", bytes)?;
        Ok(MooncakeXferMetadata::from_revision(&v).expect("a decoded metadata value converts"))
    }

    pub fn encode_metadata(&self, m: &MooncakeXferMetadata) -> Result<Vec<u8>, String> {
        if self.is_typed() {
            return Ok(m.encode());
        }
        let v = m.to_revision(&self.codec)?;
        self.codec.encode("MooncakeXferMetadata", &v).map_err(|e| e.to_string())
    }

    pub fn decode_response(&self, bytes: &[u8]) -> Result<MooncakeXferResponse, DecodeError> {
        if self.is_typed() {
            return MooncakeXferResponse::decode(bytes);
        }
        let v = self.codec.decode("MooncakeXferResponse", bytes)?;
        Ok(MooncakeXferResponse::from_revision(&v).expect("a decoded response value converts"))
    }

    pub fn encode_response(&self, r: &MooncakeXferResponse) -> Result<Vec<u8>, String> {
        if self.is_typed() {
            return Ok(r.encode());
        }
        let v = r.to_revision(&self.codec)?;
        self.codec.encode("MooncakeXferResponse", &v).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaviour_comes_from_the_spec() {
        let p33 = WireProfile::builtin("vllm-0.33.0").unwrap();
        let p32 = WireProfile::builtin("vllm-0.32.0").unwrap();
        assert_eq!(p33.layout_caching.as_ref().unwrap().max_peer_layouts, 1024);
        assert!(p32.layout_caching.is_none());
        assert!(p33.knows_status(Status::LAYOUT_MISS) && !p32.knows_status(Status::LAYOUT_MISS));
        assert!(p33.fail_unreported_after_finish && !p32.fail_unreported_after_finish);
        assert_eq!(p33.abort_timeout, Duration::from_secs(480));
        assert!(WireProfile::builtin("vllm-0.13.0..0.15.1").is_err());
    }

    #[test]
    fn older_revisions_cannot_carry_newer_fields() {
        let p32 = WireProfile::builtin("vllm-0.32.0").unwrap();
        let mut r = MooncakeXferResponse::new(Status::FINISH);
        assert_eq!(p32.encode_response(&r).unwrap(), r.encode(), "0.32.0 bytes equal 0.33.0 bytes without layout_id");
        r.layout_id = 5u64.into();
        assert!(p32.encode_response(&r).unwrap_err().contains("layout_id"));
        let miss = MooncakeXferResponse::new(Status::LAYOUT_MISS);
        assert!(p32.encode_response(&miss).is_err(), "0.32.0 has no LAYOUT_MISS");
        assert_eq!(p32.decode_response(&miss.encode()).unwrap_err().msgspec_message(), "Invalid enum value 3 - at `$.status`");
    }
}
