//! What a state machine needs to know about the revision it speaks, read from the spec — never hard-coded
//! per release. Messages are handled internally as the typed 0.33.0 structs and converted at the boundary.

use std::sync::Arc;
use std::time::Duration;

use crate::codec::convert::{self, Lacking};
use crate::codec::{Codec, DecodeError, DecodeErrorKind, EncodeError, Value};
use crate::plan::PlanRules;
use crate::spec::behaviour::*;
use crate::spec::{Behaviour, ExpiredPull, KvLeases, LayoutCaching, LeaseRenewal, Revision, Spec};
use crate::typed::generated::via_newest;
use crate::typed::{MooncakeLeaseHeartbeat, MooncakeXferMetadata, MooncakeXferResponse, Status, ViaNewest};

/// A generation-2 revision, as the prefiller and decoder cores use it.
#[derive(Clone, Debug)]
pub struct WireProfile {
    /// The revision.
    pub revision: Arc<Revision>,
    codec: Arc<Codec>,
    /// `layout_id` caching and `LAYOUT_MISS` (0.33.0): from `behaviour.layout_caching`.
    pub layout_caching: Option<LayoutCaching>,
    /// KV leases and heartbeats on the prefiller (0.34.0): from `behaviour.kv_leases`.
    pub kv_leases: Option<KvLeases>,
    /// A pull of an expired transfer answered at once (0.34.0): from `behaviour.expired_pull`.
    pub expired_pull: Option<ExpiredPull>,
    /// Lease renewal by the decoder (0.34.0): from `behaviour.lease_renewal`.
    pub lease_renewal: Option<LeaseRenewal>,
    /// Status values this revision's enum defines, with their `terminal` flag.
    pub statuses: Vec<(Status, bool)>,
    /// A decoder fails requests a FINISH left unreported (`behaviour.unreported_after_finish = "failed"`).
    pub fail_unreported_after_finish: bool,
    /// Every behaviour value of the revision, typed.
    pub rules: Rules,
    /// Default of `VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT` (`[env]`).
    pub abort_timeout: Duration,
    /// The generated codecs of this revision, when it is a built-in one (`src/typed/generated/via_newest.rs`);
    /// `None` for a revision from a spec given at run time, which goes through its spec-driven codec and the
    /// spec-driven conversion to the newest revision ([`convert`]).
    generated: Option<Generated>,
}

#[derive(Clone, Copy, Debug)]
struct Generated {
    metadata: ViaNewest<MooncakeXferMetadata>,
    response: ViaNewest<MooncakeXferResponse>,
    /// The lease heartbeat, in revisions that have it.
    heartbeat: Option<ViaNewest<MooncakeLeaseHeartbeat>>,
}

impl Generated {
    /// The generated codecs of `codec`'s revision if that revision is the built-in one of its name: the
    /// generated code holds the built-in spec's rules, a revision loaded from elsewhere may differ.
    fn of(codec: &Codec) -> Option<Generated> {
        let rev = codec.revision();
        let builtin = Spec::builtin().revision(&rev.revision)?;
        if !Arc::ptr_eq(builtin, rev) {
            return None;
        }
        Some(Generated {
            metadata: via_newest::mooncake_xfer_metadata_via_newest(&rev.revision)?,
            response: via_newest::mooncake_xfer_response_via_newest(&rev.revision)?,
            heartbeat: via_newest::mooncake_lease_heartbeat_via_newest(&rev.revision),
        })
    }
}

/// A payload from a decoder as a prefiller reads it ([`WireProfile::read_inbound`]).
#[derive(Clone, Debug, PartialEq)]
#[allow(clippy::large_enum_variant)] // a reading is matched at once, one per payload; never kept in a collection
pub enum Inbound {
    /// A lease heartbeat naming at least one transfer.
    Heartbeat(MooncakeLeaseHeartbeat),
    /// A pull, or why the payload is not one.
    Pull(Result<MooncakeXferMetadata, DecodeError>),
}

/// The behaviour values a generation-2 core consults (spec `[behaviour]`, `src/spec/behaviour.rs`). Built from
/// the spec only; a core never branches on a revision name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rules {
    /// `behaviour.reply_rounds`.
    pub reply_rounds: ReplyRounds,
    /// `behaviour.empty_id_lists`.
    pub empty_id_lists: EmptyIdLists,
    /// `behaviour.pairing_check`.
    pub pairing_check: PairingCheck,
    /// `behaviour.heterogeneous_tp`.
    pub heterogeneous_tp: HeterogeneousTp,
    /// `behaviour.transfer_failure`.
    pub transfer_failure: TransferFailure,
    /// `behaviour.block_count_failure`.
    pub block_count_failure: BlockCountFailure,
    /// `behaviour.unknown_transfer`.
    pub unknown_transfer: UnknownTransfer,
    /// `behaviour.undecodable_request`.
    pub undecodable_request: UndecodableRequest,
    /// `behaviour.ready_wait`.
    pub ready_wait: ReadyWait,
    /// `behaviour.need_send`.
    pub need_send: NeedSend,
    /// `behaviour.empty_write`.
    pub empty_write: EmptyWrite,
    /// `behaviour.equal_length`: fields that must have equal lengths, if the revision checks any.
    pub equal_length: Option<EqualLengthFields>,
    /// The transfer planner's rules (from the plan items of `[behaviour]`).
    pub plan: PlanRules,
    /// `behaviour.decoder_addressing`.
    pub decoder_addressing: DecoderAddressing,
    /// `behaviour.failure_report`.
    pub failure_report: FailureReport,
    /// `behaviour.failure_finish`.
    pub failure_finish: FailureFinish,
    /// `behaviour.free_only_success`.
    pub free_only_success: FreeOnlySuccess,
    /// `behaviour.unreported_after_finish`.
    pub unreported_after_finish: UnreportedAfterFinish,
    /// `behaviour.unknown_ok_id`.
    pub unknown_ok_id: UnknownOkId,
    /// `behaviour.decoder_pp_targets`.
    pub decoder_pp_targets: DecoderPpTargets,
}

/// Why a message cannot be said in a revision, or a spec-driven value of it read back as the cores' struct: what
/// [`WireProfile`]'s encoders and value views and `gen1::Gen1Profile::encode_request` return.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CarryError {
    /// The message holds something the revision cannot carry (its text names the revision).
    #[error(transparent)]
    Convert(#[from] convert::ConvertError),
    /// The bytes do not decode as the message (boxed: a decode error is large, and rare here).
    #[error(transparent)]
    Decode(Box<DecodeError>),
    /// The value does not encode as the message.
    #[error(transparent)]
    Encode(#[from] EncodeError),
}

impl From<DecodeError> for CarryError {
    fn from(e: DecodeError) -> Self {
        CarryError::Decode(Box::new(e))
    }
}

/// Why a revision cannot be spoken by a sans-IO core: what [`WireProfile::new`], `gen1::Gen1Profile::new` and
/// their `builtin`s return. Each variant names what the spec lacks, so a caller can tell a name that is no
/// revision from a revision of the other generation or a spec that misses an item.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    /// The built-in spec has no revision of that name.
    #[error("no revision {0} in the spec")]
    UnknownRevision(String),
    /// The revision is of the other generation than the core's.
    #[error("{revision} is generation {generation}; this core speaks generation {expected}")]
    WrongGeneration {
        /// The revision.
        revision: String,
        /// Its generation.
        generation: u32,
        /// The generation the core speaks.
        expected: u32,
    },
    /// A generation-1 core speaks built-in revisions only, and this one is not.
    #[error("no codec for {0}: not a built-in revision")]
    NotBuiltin(String),
    /// The revision lacks a message the core exchanges.
    #[error("{revision} has no {message}")]
    MissingMessage {
        /// The revision.
        revision: String,
        /// The message.
        message: &'static str,
    },
    /// The revision's reply status enum has no `terminal` flags.
    #[error("{0}: no status enum with terminal flags")]
    NoStatusEnum(String),
    /// `[env]` gives no default for `VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT`.
    #[error("{0}: no VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT default in [env]")]
    NoAbortTimeout(String),
    /// A `[behaviour]` item the core consults is not stated.
    #[error("{revision}: behaviour.{item} is not stated")]
    NotStated {
        /// The revision.
        revision: String,
        /// The behaviour item.
        item: &'static str,
    },
    /// A raw reply constant of generation 1 (`trans_done`, `trans_error`) is not in `[transport]`.
    #[error("{revision}: no raw constant `{name}`")]
    MissingConstant {
        /// The revision.
        revision: String,
        /// The constant's name.
        name: &'static str,
    },
    /// The revision is of another protocol family than the core's (`push`, `pull`).
    #[error("{revision} is of the {family} family; this core speaks the other one")]
    WrongFamily {
        /// The revision.
        revision: String,
        /// Its family.
        family: String,
    },
    /// The revision's messages (or a type the core needs over them) do not compile.
    #[error("the codec does not compile: {0}")]
    Compile(String),
    /// A message of a revision given at run time has no field-by-field counterpart in the newest revision
    /// (the cores hold the newest structs).
    #[error("{0}")]
    NoCounterpart(convert::ConvertError),
}

/// The value of a behaviour item the rules need, or that `revision` does not state it.
pub(crate) fn need<T: Copy>(i: &Option<Item<T>>, revision: &str, item: &'static str) -> Result<T, ProfileError> {
    i.as_ref().map(|i| i.value).ok_or_else(|| ProfileError::NotStated { revision: revision.to_string(), item })
}

/// The transfer planner's rules of `revision`'s `[behaviour]`, with the pairing check given (generation 1 has
/// none on the wire: the decoder's TP rank is not sent).
pub(crate) fn plan_rules(r: &str, b: &Behaviour, pairing_check: PairingCheck) -> Result<PlanRules, ProfileError> {
    Ok(PlanRules {
        region_alignment: need(&b.region_alignment, r, "region_alignment")?,
        kv_half_split: need(&b.kv_half_split, r, "kv_half_split")?,
        block_groups: need(&b.block_groups, r, "block_groups")?,
        destination_stride: need(&b.destination_stride, r, "destination_stride")?,
        tp_byte_plan: need(&b.tp_byte_plan, r, "tp_byte_plan")?,
        replicated_producer: need(&b.replicated_producer, r, "replicated_producer")?,
        region_coalescing: need(&b.region_coalescing, r, "region_coalescing")?,
        pairing_check,
        need_send: need(&b.need_send, r, "need_send")?,
        paired_block_order: need(&b.paired_block_order, r, "paired_block_order")?,
    })
}

impl Rules {
    /// The generation-2 rules of a `[behaviour]`; an item the spec does not state is an error.
    pub(crate) fn of(r: &str, b: &Behaviour) -> Result<Rules, ProfileError> {
        Ok(Rules {
            reply_rounds: need(&b.reply_rounds, r, "reply_rounds")?,
            empty_id_lists: need(&b.empty_id_lists, r, "empty_id_lists")?,
            pairing_check: need(&b.pairing_check, r, "pairing_check")?,
            heterogeneous_tp: need(&b.heterogeneous_tp, r, "heterogeneous_tp")?,
            transfer_failure: need(&b.transfer_failure, r, "transfer_failure")?,
            block_count_failure: need(&b.block_count_failure, r, "block_count_failure")?,
            unknown_transfer: need(&b.unknown_transfer, r, "unknown_transfer")?,
            undecodable_request: need(&b.undecodable_request, r, "undecodable_request")?,
            ready_wait: need(&b.ready_wait, r, "ready_wait")?,
            need_send: need(&b.need_send, r, "need_send")?,
            empty_write: need(&b.empty_write, r, "empty_write")?,
            equal_length: b.equal_length_fields.as_ref().map(|i| i.value.clone()),
            plan: plan_rules(r, b, need(&b.pairing_check, r, "pairing_check")?)?,
            decoder_addressing: need(&b.decoder_addressing, r, "decoder_addressing")?,
            failure_report: need(&b.failure_report, r, "failure_report")?,
            failure_finish: need(&b.failure_finish, r, "failure_finish")?,
            free_only_success: need(&b.free_only_success, r, "free_only_success")?,
            unreported_after_finish: need(&b.unreported_after_finish, r, "unreported_after_finish")?,
            unknown_ok_id: need(&b.unknown_ok_id, r, "unknown_ok_id")?,
            decoder_pp_targets: need(&b.decoder_pp_targets, r, "decoder_pp_targets")?,
        })
    }
}

impl WireProfile {
    /// The profile of a built-in revision (`vllm-0.33.0`).
    pub fn builtin(revision: &str) -> Result<WireProfile, ProfileError> {
        let rev =
            Spec::builtin().revision(revision).ok_or_else(|| ProfileError::UnknownRevision(revision.into()))?.clone();
        let codec = Codec::builtin(revision).expect("built-in");
        Self::new(rev, codec)
    }

    /// The profile of a generation-2 revision compiled as `codec` (an error names the behaviour item the spec lacks).
    pub fn new(rev: Arc<Revision>, codec: Arc<Codec>) -> Result<WireProfile, ProfileError> {
        if rev.generation != 2 {
            return Err(ProfileError::WrongGeneration {
                revision: rev.revision.clone(),
                generation: rev.generation,
                expected: 2,
            });
        }
        for message in ["MooncakeXferMetadata", "MooncakeXferResponse"] {
            if codec.message_type(message).is_none() {
                return Err(ProfileError::MissingMessage { revision: rev.revision.clone(), message });
            }
        }
        let (_, status_enum) = rev.status_enum().ok_or_else(|| ProfileError::NoStatusEnum(rev.revision.clone()))?;
        let statuses = status_enum.members.iter().map(|m| (Status(m.value), m.terminal == Some(true))).collect();
        let abort = rev
            .env
            .get("VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT")
            .and_then(|e| e.default.parse::<u64>().ok())
            .ok_or_else(|| ProfileError::NoAbortTimeout(rev.revision.clone()))?;
        let rules = Rules::of(&rev.revision, &rev.behaviour)?;
        let generated = Generated::of(&codec);
        if generated.is_none() {
            let newest = newest_codec();
            for m in ["MooncakeXferMetadata", "MooncakeXferResponse"] {
                convert::check(&codec, &newest, m).map_err(ProfileError::NoCounterpart)?;
                convert::check(&newest, &codec, m).map_err(ProfileError::NoCounterpart)?;
            }
        }
        Ok(WireProfile {
            generated,
            rules,
            layout_caching: rev.behaviour.layout_caching().cloned(),
            kv_leases: rev.behaviour.kv_leases().cloned(),
            expired_pull: rev.behaviour.expired_pull().cloned(),
            lease_renewal: rev.behaviour.lease_renewal().cloned(),
            fail_unreported_after_finish: rev.behaviour.unreported_after_finish.as_ref().map(|i| i.value)
                == Some(UnreportedAfterFinish::Failed),
            abort_timeout: Duration::from_secs(abort),
            statuses,
            codec,
            revision: rev,
        })
    }

    /// Whether this revision's pull request has the field `name`.
    pub(crate) fn request_has(&self, name: &str) -> bool {
        self.revision.structs.get("MooncakeXferMetadata").is_some_and(|s| s.fields.iter().any(|f| f.name == name))
    }

    /// Whether messages go through the generated code of this revision (a built-in revision) rather than the
    /// spec-driven codec (a revision from a spec loaded at run time). Both give the same bytes and errors
    /// (`tests/suite/via_newest.rs`).
    pub fn is_generated(&self) -> bool {
        self.generated.is_some()
    }

    /// The revision's name.
    pub fn name(&self) -> &str {
        &self.revision.revision
    }
    /// The revision's spec-driven codec.
    pub fn codec(&self) -> &Arc<Codec> {
        &self.codec
    }
    /// Whether the revision's status enum defines `s`.
    pub fn knows_status(&self, s: Status) -> bool {
        self.statuses.iter().any(|(x, _)| *x == s)
    }
    /// Whether `s` ends a request (its `terminal` flag; an unknown value counts as terminal).
    pub fn is_terminal(&self, s: Status) -> bool {
        self.statuses.iter().any(|(x, t)| *x == s && *t)
    }
    /// The newest revision, built in: its typed structs are the cores' own, used as they are (an open status
    /// value is encoded, not refused).
    fn is_typed(&self) -> bool {
        self.revision.revision == crate::typed::REVISION && self.generated.is_some()
    }

    /// Decodes a pull request as this revision's decoder does (msgspec rules of this revision).
    pub fn decode_metadata(&self, bytes: &[u8]) -> Result<MooncakeXferMetadata, DecodeError> {
        if let Some(g) = &self.generated {
            return (g.metadata.decode)(bytes);
        }
        self.decode_via_spec("MooncakeXferMetadata", bytes, |b| MooncakeXferMetadata::decode(b))
    }

    /// Encodes a pull as this revision does (an error says what the revision cannot carry).
    pub fn encode_metadata(&self, m: &MooncakeXferMetadata) -> Result<Vec<u8>, CarryError> {
        if self.is_typed() {
            return Ok(m.encode());
        }
        if let Some(g) = &self.generated {
            return Ok((g.metadata.encode)(m)?);
        }
        self.encode_via_spec("MooncakeXferMetadata", &m.encode())
    }

    /// Decodes a reply of this revision into the newest struct.
    pub fn decode_response(&self, bytes: &[u8]) -> Result<MooncakeXferResponse, DecodeError> {
        if let Some(g) = &self.generated {
            return (g.response.decode)(bytes);
        }
        self.decode_via_spec("MooncakeXferResponse", bytes, |b| MooncakeXferResponse::decode(b))
    }

    /// Encodes a reply as this revision does (an error says what the revision cannot carry).
    pub fn encode_response(&self, r: &MooncakeXferResponse) -> Result<Vec<u8>, CarryError> {
        if self.is_typed() {
            return Ok(r.encode());
        }
        if let Some(g) = &self.generated {
            return Ok((g.response.encode)(r)?);
        }
        self.encode_via_spec("MooncakeXferResponse", &r.encode())
    }

    /// Whether this revision has the lease heartbeat message (`MooncakeLeaseHeartbeat`, 0.34.0).
    pub fn has_heartbeat(&self) -> bool {
        self.codec.message_type(HEARTBEAT).is_some()
    }

    /// Decodes a payload as this revision's lease heartbeat (`None`: the revision has no such message). A pull
    /// decodes too, with no ids (unknown fields are skipped): [`WireProfile::heartbeat_ids`] tells them apart.
    pub fn decode_heartbeat(&self, bytes: &[u8]) -> Option<Result<MooncakeLeaseHeartbeat, DecodeError>> {
        if !self.has_heartbeat() {
            return None;
        }
        if let Some(h) = self.generated.as_ref().and_then(|g| g.heartbeat) {
            return Some((h.decode)(bytes));
        }
        Some(self.decode_via_spec(HEARTBEAT, bytes, |b| MooncakeLeaseHeartbeat::decode(b)))
    }

    /// The transfer ids of a heartbeat, as a prefiller of this revision classifies an inbound payload
    /// (`spec/PROTOCOL.md#kv-leases`): it decodes as a heartbeat and names at least one id. `None` for anything
    /// else (a pull, an undecodable payload, an empty heartbeat) and in revisions without heartbeats.
    pub fn heartbeat_ids(&self, bytes: &[u8]) -> Option<Vec<String>> {
        let h = self.decode_heartbeat(bytes)?.ok()?;
        Some(h.lease_transfer_ids).filter(|v| !v.is_empty())
    }

    /// What a prefiller of this revision reads in a payload from a decoder: a lease heartbeat (tried first,
    /// where the revision has them: [`WireProfile::heartbeat_ids`]), else a pull (or why it is not one). One
    /// reading of the payload, as the prefiller's listener makes it.
    pub fn read_inbound(&self, bytes: &[u8]) -> Inbound {
        if let Some(Ok(h)) = self.decode_heartbeat(bytes) {
            if !h.lease_transfer_ids.is_empty() {
                return Inbound::Heartbeat(h);
            }
        }
        Inbound::Pull(self.decode_metadata(bytes))
    }

    /// Encodes a heartbeat as this revision does (an error when the revision has no heartbeat).
    pub fn encode_heartbeat(&self, h: &MooncakeLeaseHeartbeat) -> Result<Vec<u8>, CarryError> {
        if let Some(g) = self.generated.as_ref().and_then(|g| g.heartbeat) {
            return Ok((g.encode)(h)?);
        }
        self.encode_via_spec(HEARTBEAT, &h.encode())
    }

    /// The pull request as a spec-driven value of this revision (for reports and field-by-field comparisons):
    /// its encoding in this revision, read by the spec codec. `Err` says what the revision cannot carry.
    pub fn metadata_value(&self, m: &MooncakeXferMetadata) -> Result<Value, CarryError> {
        self.value_of("MooncakeXferMetadata", self.encode_metadata(m)?)
    }

    /// A spec-driven value of this revision's pull request as the cores' struct (the inverse of
    /// [`WireProfile::metadata_value`]).
    pub fn metadata_from_value(&self, v: &Value) -> Result<MooncakeXferMetadata, CarryError> {
        Ok(self.decode_metadata(&self.bytes_of("MooncakeXferMetadata", v)?)?)
    }

    /// The reply as a spec-driven value of this revision (see [`WireProfile::metadata_value`]).
    pub fn response_value(&self, r: &MooncakeXferResponse) -> Result<Value, CarryError> {
        self.value_of("MooncakeXferResponse", self.encode_response(r)?)
    }

    /// A spec-driven value of this revision's reply as the cores' struct.
    pub fn response_from_value(&self, v: &Value) -> Result<MooncakeXferResponse, CarryError> {
        Ok(self.decode_response(&self.bytes_of("MooncakeXferResponse", v)?)?)
    }

    fn value_of(&self, message: &str, bytes: Vec<u8>) -> Result<Value, CarryError> {
        Ok(self.codec.decode(message, &bytes)?)
    }

    fn bytes_of(&self, message: &str, v: &Value) -> Result<Vec<u8>, CarryError> {
        Ok(self.codec.encode(message, v)?)
    }

    /// A revision from a spec given at run time: this revision's spec-driven decoder, the value converted into
    /// the newest revision's ([`convert`], by the two specs' field lists), and the newest revision's generated
    /// decoder over the newest revision's encoding of it.
    fn decode_via_spec<T>(
        &self,
        message: &str,
        bytes: &[u8],
        decode: fn(&[u8]) -> Result<T, DecodeError>,
    ) -> Result<T, DecodeError> {
        let v = self.codec.decode(message, bytes)?;
        let newest = newest_codec();
        let cannot = |e: String| {
            DecodeError::new(DecodeErrorKind::Expected {
                expected: format!("a {message} the newest revision can hold ({e})"),
                got: "one it cannot",
            })
        };
        let n = convert::convert(&self.codec, &newest, message, &v, Lacking::MustBeDefault)
            .map_err(|e| cannot(e.to_string()))?;
        let b = newest.encode(message, &n).map_err(|e| cannot(e.to_string()))?;
        decode(&b)
    }

    /// The other way: the newest revision's encoding read by its spec-driven decoder, the value converted into
    /// this revision's, and this revision's spec-driven encoder.
    fn encode_via_spec(&self, message: &str, newest_bytes: &[u8]) -> Result<Vec<u8>, CarryError> {
        let newest = newest_codec();
        let n = newest.decode(message, newest_bytes)?;
        let v = convert::convert(&newest, &self.codec, message, &n, Lacking::MustBeDefault)
            .map_err(|e| e.in_revision(&self.revision.revision))?;
        Ok(self.codec.encode(message, &v)?)
    }
}

/// What the typed pull means beyond its wire shape (a protocol rule of the cores, not part of the generated
/// typed layer).
impl<S: AsRef<str>> crate::typed::MooncakeXferMetadataOf<S> {
    /// Whether this pull carries no layout (0.33.0 layout caching, `spec/PROTOCOL.md#layout-caching`: a
    /// nonzero `layout_id`, no base addresses).
    pub fn is_layout_less(&self) -> bool {
        self.layout_id != crate::msgpack::WireInt::ZERO && self.kv_caches_base_addr.is_empty()
    }
}

/// The lease heartbeat's message name.
const HEARTBEAT: &str = "MooncakeLeaseHeartbeat";

/// The newest revision's codec (what the typed structs the cores hold are).
fn newest_codec() -> Arc<Codec> {
    Codec::builtin(crate::typed::REVISION).expect("the newest revision is built in")
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
    fn newest_plan_rules_are_the_newest_revisions() {
        let newest = Spec::builtin().push().newest().unwrap();
        let p = WireProfile::builtin(&newest.revision).unwrap();
        assert_eq!(crate::plan::PlanRules::newest(), p.rules.plan, "PlanRules::newest() lags {}", newest.revision);
        // 0.33.0 plans block pairs as given; 0.34.0 reverses descending runs first, and nothing else differs.
        let p33 = WireProfile::builtin("vllm-0.33.0").unwrap().rules.plan;
        let p34 = WireProfile::builtin("vllm-0.34.0").unwrap().rules.plan;
        assert_eq!(p33.paired_block_order, PairedBlockOrder::AsGiven);
        assert_eq!(p34.paired_block_order, PairedBlockOrder::DescendingRunsReversed);
        assert_eq!(crate::plan::PlanRules { paired_block_order: PairedBlockOrder::AsGiven, ..p34 }, p33);
    }

    #[test]
    fn a_profile_error_says_which_kind() {
        assert_eq!(WireProfile::builtin("vllm-9.9.9").unwrap_err(), ProfileError::UnknownRevision("vllm-9.9.9".into()));
        let wrong = |revision: &str, generation, expected| ProfileError::WrongGeneration {
            revision: revision.into(),
            generation,
            expected,
        };
        assert_eq!(WireProfile::builtin("vllm-0.13.0..0.15.1").unwrap_err(), wrong("vllm-0.13.0..0.15.1", 1, 2));
        // A revision given at run time that lacks a behaviour item, or the abort timeout's default.
        let base = Spec::builtin().revision("vllm-0.33.0").unwrap();
        let without = |edit: &dyn Fn(&mut Revision)| {
            let mut rev = Revision::clone(base);
            edit(&mut rev);
            let rev = Arc::new(rev);
            WireProfile::new(rev.clone(), Arc::new(Codec::new(rev).unwrap())).unwrap_err()
        };
        let e = without(&|r| r.behaviour.need_send = None);
        assert_eq!(e, ProfileError::NotStated { revision: "vllm-0.33.0".into(), item: "need_send" });
        assert_eq!(e.to_string(), "vllm-0.33.0: behaviour.need_send is not stated");
        assert_eq!(
            without(&|r| {
                r.env.shift_remove("VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT");
            }),
            ProfileError::NoAbortTimeout("vllm-0.33.0".into())
        );
    }

    #[test]
    fn older_revisions_cannot_carry_newer_fields() {
        let p32 = WireProfile::builtin("vllm-0.32.0").unwrap();
        let mut r = MooncakeXferResponse::new(Status::FINISH);
        assert_eq!(p32.encode_response(&r).unwrap(), r.encode(), "0.32.0 bytes equal 0.33.0 bytes without layout_id");
        r.layout_id = 5u64.into();
        let e = p32.encode_response(&r).unwrap_err();
        assert!(
            matches!(&e, CarryError::Convert(c) if matches!(c.innermost(), convert::ConvertError::Lacking { field, .. } if field == "layout_id")),
            "{e:?}"
        );
        assert!(e.to_string().contains("layout_id"), "{e}");
        let miss = MooncakeXferResponse::new(Status::LAYOUT_MISS);
        assert!(p32.encode_response(&miss).is_err(), "0.32.0 has no LAYOUT_MISS");
        assert_eq!(
            p32.decode_response(&miss.encode()).unwrap_err().msgspec_message(),
            "Invalid enum value 3 - at `$.status`"
        );
    }
}
