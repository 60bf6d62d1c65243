//! The model of a wire diff: one [`Change`] per difference between two resolved revisions, each with a
//! [`Verdict`] for both directions of a mixed deployment and what happens to the bytes of messages that did
//! not change.
//!
//! The two directions follow msgspec's decoding rules (`/work/shared/reference/msgspec-encoding.md` §5):
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
    BreaksWhenSent { when: String },
    /// Every message fails or is misread — except, if `except` says so, degenerate ones.
    Breaks {
        #[serde(skip_serializing_if = "Option::is_none")]
        except: Option<String>,
    },
    /// Behaviour whose cross-version effect the spec data does not determine: a reviewer must decide.
    Review,
}

impl Effect {
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
    #[serde(flatten)]
    pub effect: Effect,
    /// Who sends and who reads in this direction: `new D → old P`.
    pub peers: String,
    /// Why, in a few words.
    pub reason: String,
    /// What msgspec does with a witness message in this direction (its error text, or the misread), observed
    /// by running the spec-driven codec (byte-identical to msgspec) on it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub example: Option<String>,
}

impl Verdict {
    pub fn new(effect: Effect, peers: &str, reason: impl Into<String>) -> Verdict {
        Verdict { effect, peers: peers.to_string(), reason: reason.into(), example: None }
    }
}

/// Whether messages that mean the same under both revisions are encoded to the same bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "bytes", content = "why", rename_all = "kebab-case")]
pub enum Bytes {
    Same,
    /// Some unchanged messages encode differently: those described.
    DifferWhen(String),
    /// Every message encodes differently.
    Differ(String),
    /// No message means the same under both revisions (e.g. every new message carries a new required field).
    NotApplicable(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Area {
    Generation,
    Struct,
    Enum,
    Alias,
    Transport,
    Bootstrap,
    KvTransferParams,
    Behaviour,
    Env,
}

/// What changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Generation,
    FieldAdded,
    FieldRemoved,
    FieldRenamed,
    FieldsReordered,
    FieldType,
    TupleArity,
    FieldDefault,
    FieldRequired,
    StructOption,
    StructKind,
    MapHeader,
    MessageAdded,
    MessageRemoved,
    MessageReplaced,
    EnumValueAdded,
    EnumValueRemoved,
    EnumValueChanged,
    EnumMemberRenamed,
    EnumTerminal,
    AliasType,
    TransportPattern,
    Socket,
    FrameLayout,
    Encoding,
    ReplySequence,
    RawConstant,
    BootstrapServer,
    BootstrapModel,
    Route,
    DuplicateRegistration,
    KvParam,
    Behaviour,
    Env,
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
        }
    }
}

/// A concrete way to confirm a schema verdict by encoding: writer values (JSON, `msgspec.to_builtins`
/// form; omitted fields take their defaults) for each direction.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Witness {
    /// The struct that is encoded and decoded, in the old and in the new revision.
    pub old_struct: String,
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

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Change {
    pub area: Area,
    pub kind: Kind,
    /// Where: `MooncakeXferMetadata.block_lens`, `MooncakeXferResponseStatus.LAYOUT_MISS`, `behaviour.reply_rounds`.
    pub subject: String,
    /// What changed, in a few words (``added `block_lens: list[int]`, required, at 7 of 7``).
    pub what: String,
    pub old_reads_new: Verdict,
    pub new_reads_old: Verdict,
    /// Bytes of messages that mean the same under both revisions.
    #[serde(flatten)]
    pub bytes: Bytes,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub witness: Option<Witness>,
    /// Whether the witness, run through the codecs of both revisions, behaves as the verdicts say (`None`: no
    /// witness — transport, bootstrap and behaviour rules are not decodable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confirmed: Option<bool>,
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
    /// The worse of the two directions.
    pub(crate) fn worst(&self) -> &Effect {
        if self.old_reads_new.effect.rank() >= self.new_reads_old.effect.rank() {
            &self.old_reads_new.effect
        } else {
            &self.new_reads_old.effect
        }
    }
    pub fn is_breaking(&self) -> bool {
        self.old_reads_new.effect.is_breaking() || self.new_reads_old.effect.is_breaking()
    }
}

/// Counts for the one-line summary.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub changes: usize,
    pub breaks: usize,
    pub breaks_when_sent: usize,
    pub review: usize,
    pub compatible: usize,
    /// Changes after which some unchanged messages encode to different bytes.
    pub bytes_change: usize,
}

/// The diff of two revisions.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    pub old: String,
    pub new: String,
    pub old_generation: u32,
    pub new_generation: u32,
    pub summary: String,
    pub counts: Counts,
    pub changes: Vec<Change>,
    /// Observations that are not changes (the 16-field tripwire getting close).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Report {
    pub fn is_breaking(&self) -> bool {
        self.changes.iter().any(Change::is_breaking)
    }
}
