//! The model of a wire diff: one [`Change`] per difference between two resolved revisions, each with a
//! [`Verdict`] for both directions of a mixed deployment and what happens to the bytes of messages that did
//! not change.
//!
//! The two directions follow msgspec's decoding rules (`spec/MSGSPEC.md` §5):
//! *old decoder reads new bytes* is an old peer receiving from a new one, *new decoder reads old bytes* the
//! reverse.

use serde::Serialize;

/// What a change does to one direction of a mixed deployment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "effect", rename_all = "kebab-case")]
pub enum Effect {
    /// Every message still decodes to the same content.
    Compatible,
    /// Only messages that actually carry the new field or value (or the condition in `when`) fail or are
    /// misread; the others decode as before.
    BreaksWhenSent {
        /// The condition, in words (`` `layout_id` holds a non-default value ``).
        when: String,
    },
    /// Every message fails or is misread — except, if `except` says so, degenerate ones.
    Breaks {
        /// Messages that still decode, in words.
        #[serde(skip_serializing_if = "Option::is_none")]
        except: Option<String>,
    },
    /// Behaviour whose cross-version effect the spec data does not determine: a reviewer must decide.
    Review,
}

impl Effect {
    /// Whether the effect breaks some messages ([`Effect::Breaks`] or [`Effect::BreaksWhenSent`]).
    pub fn is_breaking(&self) -> bool {
        matches!(self, Effect::Breaks { .. } | Effect::BreaksWhenSent { .. })
    }
    /// Worse effects rank higher: Breaks > BreaksWhenSent > Review > Compatible.
    pub(crate) fn rank(&self) -> u8 {
        match self {
            Effect::Compatible => 0,
            Effect::Review => 1,
            Effect::BreaksWhenSent { .. } => 2,
            Effect::Breaks { .. } => 3,
        }
    }
    pub(crate) fn when(w: impl Into<String>) -> Effect {
        Effect::BreaksWhenSent { when: w.into() }
    }
    pub(crate) fn always() -> Effect {
        Effect::Breaks { except: None }
    }
}

/// One direction of one change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// The effect in this direction.
    #[serde(flatten)]
    pub effect: Effect,
    /// Who sends and who reads in this direction: `new D → old P`.
    pub peers: Peers,
    /// Why, in a few words.
    pub reason: String,
    /// What msgspec does with a witness message in this direction (its error text, or the misread), observed
    /// by running the spec-driven codec (byte-identical to msgspec) on it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub example: Option<String>,
}

impl Verdict {
    /// A verdict without an example.
    pub fn new(effect: Effect, peers: &Peers, reason: impl Into<String>) -> Verdict {
        Verdict { effect, peers: peers.clone(), reason: reason.into(), example: None }
    }
}

/// Which of the two revisions compared a peer runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Age {
    /// The old revision.
    Old,
    /// The new revision.
    New,
}

/// A peer's role: the decoder (`D`), the prefiller (`P`), the bootstrap client or server, or another role the
/// spec names (`sender`, `receiver`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerRole {
    /// The decoder, written `D`.
    Decoder,
    /// The prefiller, written `P`.
    Prefiller,
    /// The bootstrap HTTP client (a decoder querying, a prefiller registering).
    Client,
    /// The bootstrap HTTP server (the prefiller side).
    Server,
    /// Another role, as the spec names it.
    Other(String),
}

impl PeerRole {
    /// The role a transport message's `from` or `to` names.
    pub fn of(role: &str) -> PeerRole {
        match role {
            "decoder" => PeerRole::Decoder,
            "prefiller" => PeerRole::Prefiller,
            "client" => PeerRole::Client,
            "server" => PeerRole::Server,
            other => PeerRole::Other(other.to_string()),
        }
    }
}

impl std::fmt::Display for PeerRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PeerRole::Decoder => "D",
            PeerRole::Prefiller => "P",
            PeerRole::Client => "client",
            PeerRole::Server => "server",
            PeerRole::Other(o) => o,
        })
    }
}

/// One end of a direction: the revision it runs and, where known, its role.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerEnd {
    /// Old or new.
    pub age: Age,
    /// Its role; `None` for a change no message carries.
    pub role: Option<PeerRole>,
}

impl std::fmt::Display for PeerEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.age == Age::New { "new" } else { "old" })?;
        match &self.role {
            Some(r) => write!(f, " {r}"),
            None => Ok(()),
        }
    }
}

/// Who sends and who reads in one direction of a change, written `new D → old P` (`new → old` where no role
/// is known; nothing for a local setting) in every output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Peers {
    /// A message between two peers.
    Between {
        /// The end that writes it.
        sender: PeerEnd,
        /// The end that reads it.
        reader: PeerEnd,
    },
    /// A local setting (an environment variable): nothing goes between peers.
    Local,
}

impl Peers {
    /// Role `from` of revision `from_age` sends to role `to` of the other revision.
    pub fn new(from_age: Age, from: PeerRole, to: PeerRole) -> Peers {
        Peers::Between {
            sender: PeerEnd { age: from_age, role: Some(from) },
            reader: PeerEnd { age: from_age.other(), role: Some(to) },
        }
    }

    /// A sender of revision `from_age` and a reader of the other, roles unknown.
    pub fn unnamed(from_age: Age) -> Peers {
        Peers::Between {
            sender: PeerEnd { age: from_age, role: None },
            reader: PeerEnd { age: from_age.other(), role: None },
        }
    }

    /// Whether these peers can be a decoder running revision `decoder` and a prefiller running the other (a
    /// bootstrap client is on the decoder's side, its server on the prefiller's; other roles, unnamed ends and
    /// local settings fit any pair).
    pub fn fit_decoder_at(&self, decoder: Age) -> bool {
        self.ends().into_iter().all(|end| match end.role {
            Some(PeerRole::Decoder | PeerRole::Client) => end.age == decoder,
            Some(PeerRole::Prefiller | PeerRole::Server) => end.age != decoder,
            _ => true,
        })
    }

    /// Both ends, sender first (none for a local setting).
    pub fn ends(&self) -> Vec<&PeerEnd> {
        match self {
            Peers::Between { sender, reader } => vec![sender, reader],
            Peers::Local => vec![],
        }
    }
}

impl Age {
    /// The other revision.
    pub fn other(self) -> Age {
        match self {
            Age::Old => Age::New,
            Age::New => Age::Old,
        }
    }
}

impl std::fmt::Display for Peers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Peers::Between { sender, reader } => write!(f, "{sender} → {reader}"),
            Peers::Local => Ok(()),
        }
    }
}

impl Serialize for Peers {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Whether messages that mean the same under both revisions are encoded to the same bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "bytes", content = "why", rename_all = "kebab-case")]
pub enum Bytes {
    /// Every such message encodes to the same bytes under both revisions.
    Same,
    /// Some unchanged messages encode differently: those described.
    DifferWhen(String),
    /// Every message encodes differently.
    Differ(String),
    /// No message means the same under both revisions (e.g. every new message carries a new required field).
    NotApplicable(String),
}

/// Which part of a revision a change is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Area {
    /// The generation of the wire.
    Generation,
    /// A struct (message or nested struct).
    Struct,
    /// An enum.
    Enum,
    /// A type alias.
    Alias,
    /// Sockets, frames and encodings of the side channel.
    Transport,
    /// The bootstrap HTTP server.
    Bootstrap,
    /// The `kv_transfer_params` the router sets.
    KvTransferParams,
    /// A behaviour item.
    Behaviour,
    /// Environment variables.
    Env,
    /// `kv_connector_extra_config` keys.
    ExtraConfig,
    /// The literal texts of error answers.
    Replies,
}

/// What changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// The revisions belong to different generations (no peer of one can reach a peer of the other).
    Generation,
    /// A struct field added.
    FieldAdded,
    /// A struct field removed.
    FieldRemoved,
    /// A struct field renamed.
    FieldRenamed,
    /// Struct fields in another order.
    FieldsReordered,
    /// A field's type changed.
    FieldType,
    /// A tuple's number of elements changed.
    TupleArity,
    /// A field's default changed.
    FieldDefault,
    /// A field became required or optional.
    FieldRequired,
    /// A struct option changed (`omit_defaults`, `array_like`, `forbid_unknown_fields`, tag, rename).
    StructOption,
    /// The kind of a struct changed (msgspec struct, dataclass, tuple, ...).
    StructKind,
    /// A struct's map header width changed (its field count crossed 16).
    MapHeader,
    /// A message added.
    MessageAdded,
    /// A message removed.
    MessageRemoved,
    /// A message replaced by another struct.
    MessageReplaced,
    /// An enum value added.
    EnumValueAdded,
    /// An enum value removed.
    EnumValueRemoved,
    /// An enum member's value changed.
    EnumValueChanged,
    /// An enum member renamed (same value).
    EnumMemberRenamed,
    /// Whether a status member is terminal changed.
    EnumTerminal,
    /// A type alias's definition changed.
    AliasType,
    /// The socket pattern of the side channel changed.
    TransportPattern,
    /// A socket's address or options changed.
    Socket,
    /// A message's frame layout changed.
    FrameLayout,
    /// A message's payload encoding changed.
    Encoding,
    /// The replies a prefiller sends per round changed.
    ReplySequence,
    /// A raw byte constant on the wire changed.
    RawConstant,
    /// The bootstrap server appeared, went away or moved.
    BootstrapServer,
    /// A bootstrap request or response model changed.
    BootstrapModel,
    /// A bootstrap route added, removed or changed.
    Route,
    /// How the bootstrap server answers a second registration of a slot changed.
    DuplicateRegistration,
    /// A `kv_transfer_params` key added, removed or changed.
    KvParam,
    /// A behaviour item changed.
    Behaviour,
    /// An environment variable the connector reads changed.
    Env,
    /// A struct added that no message of the new revision carries.
    StructAdded,
    /// A struct removed that no message of the old revision carried.
    StructRemoved,
    /// An enum added that no struct of the new revision uses.
    EnumAdded,
    /// A `kv_connector_extra_config` key added, removed or changed.
    ConfigKey,
    /// A reply text added, removed or sent with other statuses.
    ReplyText,
}

impl Kind {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Kind::Generation => "generation",
            Kind::FieldAdded => "field added",
            Kind::FieldRemoved => "field removed",
            Kind::FieldRenamed => "field renamed",
            Kind::FieldsReordered => "fields reordered",
            Kind::FieldType => "type",
            Kind::TupleArity => "tuple arity",
            Kind::FieldDefault => "default",
            Kind::FieldRequired => "required-ness",
            Kind::StructOption => "struct option",
            Kind::StructKind => "struct kind",
            Kind::MapHeader => "map header",
            Kind::MessageAdded => "message added",
            Kind::MessageRemoved => "message removed",
            Kind::MessageReplaced => "message replaced",
            Kind::EnumValueAdded => "enum value added",
            Kind::EnumValueRemoved => "enum value removed",
            Kind::EnumValueChanged => "enum value changed",
            Kind::EnumMemberRenamed => "enum member renamed",
            Kind::EnumTerminal => "terminal status",
            Kind::AliasType => "alias type",
            Kind::TransportPattern => "transport",
            Kind::Socket => "socket",
            Kind::FrameLayout => "frame layout",
            Kind::Encoding => "payload encoding",
            Kind::ReplySequence => "reply sequence",
            Kind::RawConstant => "raw constant",
            Kind::BootstrapServer => "bootstrap server",
            Kind::BootstrapModel => "bootstrap payload",
            Kind::Route => "bootstrap route",
            Kind::DuplicateRegistration => "duplicate registration",
            Kind::KvParam => "kv_transfer_params",
            Kind::Behaviour => "behaviour",
            Kind::Env => "environment",
            Kind::StructAdded => "struct added",
            Kind::StructRemoved => "struct removed",
            Kind::EnumAdded => "enum added",
            Kind::ConfigKey => "kv_connector_extra_config",
            Kind::ReplyText => "reply text",
        }
    }
}

/// A concrete way to confirm a schema verdict by encoding: writer values (JSON, `msgspec.to_builtins`
/// form; omitted fields take their defaults) for each direction.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Witness {
    /// The struct that is encoded and decoded, in the old revision…
    pub old_struct: String,
    /// …and in the new revision.
    pub new_struct: String,
    /// Fields that carry the same value under another name: (old name, new name).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub renames: Vec<(String, String)>,
    /// New bytes, old decoder.
    pub old_reads_new: Probe,
    /// Old bytes, new decoder.
    pub new_reads_old: Probe,
}

/// The writer values of one direction.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Probe {
    /// A message that does not use the change.
    pub plain: serde_json::Value,
    /// A message that uses it (the new field or value sent, the condition of `BreaksWhenSent` met).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub using: Option<serde_json::Value>,
    /// A message covered by `Breaks { except }`, which must decode faithfully.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exception: Option<serde_json::Value>,
}

impl Probe {
    pub(crate) fn plain(v: serde_json::Value) -> Probe {
        Probe { plain: v, using: None, exception: None }
    }
    pub(crate) fn using(plain: serde_json::Value, using: serde_json::Value) -> Probe {
        Probe { plain, using: Some(using), exception: None }
    }
}

/// One difference between two revisions, with its verdict for each direction of a mixed deployment.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Change {
    /// Which part of the revision changed.
    pub area: Area,
    /// What kind of change it is.
    pub kind: Kind,
    /// Where: `MooncakeXferMetadata.block_lens`, `MooncakeXferResponseStatus.LAYOUT_MISS`, `behaviour.reply_rounds`.
    pub subject: String,
    /// What changed, in a few words (``added `block_lens: list[int]`, required, at 7 of 7``).
    pub what: String,
    /// An old peer decoding a new peer's messages.
    pub old_reads_new: Verdict,
    /// A new peer decoding an old peer's messages.
    pub new_reads_old: Verdict,
    /// Bytes of messages that mean the same under both revisions.
    #[serde(flatten)]
    pub bytes: Bytes,
    /// Further remarks, among them the spec's own `why` of the edit (prefixed `spec:`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Messages that show the verdicts by encoding, when the change is in a decodable struct or enum.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub witness: Option<Witness>,
    /// Whether the witness, run through the codecs of both revisions, behaves as the verdicts say (`None`: no
    /// witness — transport, bootstrap and behaviour rules are not decodable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmed: Option<bool>,
    /// Set when what the row adds is in no revision of the spec (vLLM source read by `extract`): why it stands
    /// out. Such a row is classified `review` where what carries it cannot be read, and it fails the diff like a
    /// breaking change until a spec revision describes it or the change is announced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unspecified: Option<String>,
    /// What the row adds, for [`super::mark_unspecified`] to look up in the spec's revisions.
    #[serde(skip)]
    pub(crate) adds: Option<Added>,
}

/// Something a row adds that a revision of the spec may or may not describe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Added {
    /// A struct (or the message of that name).
    Struct(String),
    /// An enum.
    Enum(String),
    /// A reply text, by its shape (`text_shape`).
    Reply(String),
    /// A `kv_connector_extra_config` key.
    ConfigKey(String),
    /// An environment variable.
    Env(String),
}

impl Change {
    pub(crate) fn new(
        area: Area,
        kind: Kind,
        subject: impl Into<String>,
        what: impl Into<String>,
        old_reads_new: Verdict,
        new_reads_old: Verdict,
        bytes: Bytes,
    ) -> Change {
        Change {
            area,
            kind,
            subject: subject.into(),
            what: what.into(),
            old_reads_new,
            new_reads_old,
            bytes,
            notes: vec![],
            witness: None,
            confirmed: None,
            unspecified: None,
            adds: None,
        }
    }
    pub(crate) fn note(mut self, n: impl Into<String>) -> Change {
        self.notes.push(n.into());
        self
    }
    pub(crate) fn witness(mut self, w: Option<Witness>) -> Change {
        self.witness = w;
        self
    }
    pub(crate) fn adds(mut self, a: Added) -> Change {
        self.adds = Some(a);
        self
    }
    /// The worse of the two directions.
    pub(crate) fn worst(&self) -> &Effect {
        if self.old_reads_new.effect.rank() >= self.new_reads_old.effect.rank() {
            &self.old_reads_new.effect
        } else {
            &self.new_reads_old.effect
        }
    }
    /// Whether either direction breaks.
    pub fn is_breaking(&self) -> bool {
        self.old_reads_new.effect.is_breaking() || self.new_reads_old.effect.is_breaking()
    }
}

/// Counts for the one-line summary.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Number of changes.
    pub changes: usize,
    /// Changes whose worse direction breaks every message.
    pub breaks: usize,
    /// Changes whose worse direction breaks only messages that use the change.
    pub breaks_when_sent: usize,
    /// Changes a reviewer must judge.
    pub review: usize,
    /// Changes compatible in both directions.
    pub compatible: usize,
    /// Changes after which some unchanged messages encode to different bytes.
    pub bytes_change: usize,
    /// Changes that add something no revision of the spec has (a struct, enum, reply text, config key or
    /// environment variable of vLLM source that no spec revision describes).
    pub unspecified: usize,
}

/// The diff of two revisions.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// The old revision's name.
    pub old: String,
    /// The new revision's name.
    pub new: String,
    /// The old revision's generation (1 or 2).
    pub old_generation: u32,
    /// The new revision's generation.
    pub new_generation: u32,
    /// The one-line summary (the counts in words).
    pub summary: String,
    /// The counts behind the summary.
    pub counts: Counts,
    /// Every change, in spec order.
    pub changes: Vec<Change>,
    /// Observations that are not changes (the 16-field tripwire getting close).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Report {
    /// Whether some change breaks some messages in some direction.
    pub fn is_breaking(&self) -> bool {
        self.changes.iter().any(Change::is_breaking)
    }
    /// Whether the diff fails (exit 1 unless the change is announced): a change breaks some direction, or adds
    /// something no revision of the spec describes — never an all-clear for what the spec cannot classify.
    pub fn fails(&self) -> bool {
        self.is_breaking() || self.changes.iter().any(|c| c.unspecified.is_some())
    }
}
