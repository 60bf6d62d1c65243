//! The typed model of one resolved revision. Field names here are the keys of the spec files; every struct
//! rejects unknown keys so a typo in `spec/` is an error, not a silently ignored line.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use super::behaviour::Behaviour;
use super::literal::{Literal, LiteralError};
use super::types::TypeExpr;

/// One resolved revision of a protocol family: every release with the same observable wire, and that wire.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Revision {
    /// The file format, `mooncake-wire-spec/2`.
    pub format: String,
    /// The protocol family: `push` (vLLM's MooncakeConnector) or `pull` (vllm-ascend's).
    pub family: String,
    /// Revision name, e.g. `vllm-0.25.0..0.29.0`: first and last release with this wire.
    pub revision: String,
    /// The revision this one was derived from (derived files only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// 1 (no bootstrap server, one ZeroMQ port per rank) or 2 (bootstrap HTTP); `spec/PROTOCOL.md`, "Generation 1".
    pub generation: u32,
    /// The releases covered; empty for an unreleased revision, which names its `commit` instead.
    pub releases: Vec<String>,
    /// Unreleased revisions only: the `owner/repo@commit` the facts were read at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// Each release's wheel build commit (`vllm/_version.py`).
    #[serde(default)]
    pub build_commits: IndexMap<String, String>,
    /// Where the facts were read: release and files.
    pub source: String,
    /// One line: what changed against the base revision.
    pub summary: String,
    /// Named type aliases, by name.
    #[serde(default)]
    pub aliases: IndexMap<String, Alias>,
    /// Enums on the wire, by name.
    #[serde(default)]
    pub enums: IndexMap<String, EnumDef>,
    /// Structs on the wire (messages and nested structs), by name, in the module's order.
    #[serde(default)]
    pub structs: IndexMap<String, StructDef>,
    /// Sockets, frames and message flow of the side channel (`spec/PROTOCOL.md#side-channel`).
    pub transport: Transport,
    /// What a peer can observe beyond the structs (`spec/PROTOCOL.md`, "Behaviour items").
    #[serde(default)]
    pub behaviour: Behaviour,
    /// The bootstrap HTTP server (generation 2 only; `spec/PROTOCOL.md`, "Bootstrap HTTP").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap: Option<Bootstrap>,
    /// The keys the router sets in a request's `kv_transfer_params`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_transfer_params: Option<KvTransferParams>,
    /// Every environment variable the connector reads, by name (`local` marks those that only change what a peer
    /// does by itself).
    #[serde(default)]
    pub env: IndexMap<String, EnvVar>,
    /// Every `kv_connector_extra_config` key the connector reads, by name.
    #[serde(default)]
    pub extra_config: IndexMap<String, ConfigKey>,
    /// The literal texts the prefiller sends in its answer's error field, with their statuses (generation 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replies: Option<Replies>,
    /// Spec file this revision was read from (not part of the file).
    #[serde(skip_deserializing)]
    pub path: String,
    /// The edits this revision's own file applies to its base, in order (not part of the file's body).
    #[serde(skip_deserializing)]
    pub edits: Vec<Edit>,
}

/// A named type alias.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Alias {
    /// The aliased type.
    #[serde(rename = "type")]
    pub ty: TypeExpr,
    /// What it is, in vLLM's terms (documentation; no wire effect).
    #[serde(default)]
    pub doc: String,
}

/// An enum on the wire (the reply status, `MooncakeXferResponseStatus`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EnumDef {
    /// `IntEnum` (encoded as its integer value).
    pub kind: String,
    /// What it is, in vLLM's terms (documentation; no wire effect).
    #[serde(default)]
    pub doc: String,
    /// Where it was read: release, file and function.
    pub source: String,
    /// The members, in declaration order.
    pub members: Vec<EnumMember>,
    /// The revision that introduced it (stamped when the spec is resolved).
    pub since: String,
    /// Later revisions whose edits changed it (stamped when the spec is resolved).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_in: Vec<String>,
}

/// One member of an enum.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EnumMember {
    /// The member's Python name (`FINISH`).
    pub name: String,
    /// Its integer value on the wire.
    pub value: i64,
    /// Whether this status ends a reply stream (status enums only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal: Option<bool>,
    /// What it is, in vLLM's terms (documentation; no wire effect).
    #[serde(default)]
    pub doc: String,
    /// The revision that introduced it (stamped when the spec is resolved).
    pub since: String,
    /// Where it was read: release, file and function.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Later revisions whose edits changed it (stamped when the spec is resolved).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_in: Vec<String>,
}

/// How a struct is declared in Python, which decides how msgspec encodes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub enum StructKind {
    /// `msgspec.Struct`: options below apply.
    #[serde(rename = "msgspec.Struct")]
    MsgspecStruct,
    /// A `@dataclass` encoded by msgspec: a map of every field, defaults never omitted.
    #[serde(rename = "dataclass")]
    Dataclass,
    /// A Python tuple encoded by msgspec: an array of every field in declaration order, nothing omitted, exact
    /// length. A field may carry `const` (the control-message tags `b"get_meta_msg"`, ...).
    #[serde(rename = "tuple")]
    Tuple,
    /// A pydantic model carried as JSON (bootstrap HTTP).
    #[serde(rename = "pydantic.BaseModel")]
    Pydantic,
    /// A plain JSON object (bootstrap HTTP).
    #[serde(rename = "json")]
    Json,
}

/// msgspec's struct options that change the encoding.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StructOptions {
    /// msgspec `omit_defaults`: fields equal to their default are not written.
    #[serde(default, skip_serializing_if = "is_false")]
    pub omit_defaults: bool,
    /// msgspec `array_like`: encoded as an array in field order, not a map.
    #[serde(default, skip_serializing_if = "is_false")]
    pub array_like: bool,
    /// msgspec `forbid_unknown_fields`: the decoder rejects keys it does not declare.
    #[serde(default, skip_serializing_if = "is_false")]
    pub forbid_unknown_fields: bool,
    /// msgspec `tag`: `true` (the class name), a string or an integer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<Tag>,
    /// msgspec `tag_field`: the key the tag is written under (default `type`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag_field: Option<String>,
    /// msgspec `rename`: `lower`, `upper`, `camel`, `pascal` or `kebab`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rename: Option<String>,
    /// No wire effect; recorded because vLLM sets it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub dict: bool,
    /// No wire effect.
    #[serde(default, skip_serializing_if = "is_false")]
    pub frozen: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A msgspec struct tag.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Tag {
    /// `true`: the class name is the tag (`false`: untagged).
    Bool(bool),
    /// An integer tag.
    Int(i64),
    /// A string tag.
    Str(String),
}

/// A struct: a message, a nested struct, or a bootstrap model.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StructDef {
    /// How the class is declared, which decides its encoding.
    pub kind: StructKind,
    /// msgspec struct options (`msgspec.Struct` only).
    #[serde(default)]
    pub options: StructOptions,
    /// What it is, in vLLM's terms (documentation; no wire effect).
    #[serde(default)]
    pub doc: String,
    /// Where it was read: release, file and function.
    #[serde(default)]
    pub source: String,
    /// The fields, in declaration order.
    pub fields: Vec<FieldDef>,
    /// The revision that introduced it (stamped when the spec is resolved).
    #[serde(default)]
    pub since: String,
    /// Later revisions whose edits changed it (stamped when the spec is resolved).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_in: Vec<String>,
}

/// One field of a struct.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FieldDef {
    /// The field's Python name (the map key unless `rename` applies).
    pub name: String,
    /// The field's type.
    #[serde(rename = "type")]
    pub ty: TypeExpr,
    /// Python literal; absent together with `default_factory` means required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// `list` or `dict`: the default is a new empty one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_factory: Option<String>,
    /// A JSON-only constant value (bootstrap bodies).
    #[serde(default, rename = "const", skip_serializing_if = "Option::is_none")]
    pub const_value: Option<String>,
    /// What it is, in vLLM's terms (documentation; no wire effect).
    #[serde(default)]
    pub doc: String,
    /// The revision that introduced it (stamped when the spec is resolved).
    #[serde(default)]
    pub since: String,
    /// Where it was read: release, file and function.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Later revisions whose edits changed it (stamped when the spec is resolved).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_in: Vec<String>,
}

impl FieldDef {
    /// Whether the field has neither a default nor a default factory.
    pub fn required(&self) -> bool {
        self.default.is_none() && self.default_factory.is_none()
    }
    /// The default value, if the field has one.
    pub(crate) fn default_literal(&self) -> Result<Option<Literal>, LiteralError> {
        match (&self.default, &self.default_factory) {
            (Some(_), Some(_)) => Err(LiteralError::BothDefaults(self.name.clone())),
            (Some(d), None) => Literal::parse(d).map(Some),
            (None, Some(f)) => Literal::from_factory(f).map(Some),
            (None, None) => Ok(None),
        }
    }
    /// How the default reads in a table: `None`, `1`, `list()`.
    pub fn default_display(&self) -> String {
        match (&self.default, &self.default_factory) {
            (Some(d), _) => d.clone(),
            (None, Some(f)) => format!("{f}()"),
            (None, None) => "required".into(),
        }
    }
}

/// The side channel (`spec/PROTOCOL.md#side-channel`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Transport {
    /// `zmq`.
    pub kind: String,
    /// The socket pattern (`DEALER → ROUTER`).
    pub pattern: String,
    /// Where it was read: release, file and function.
    pub source: String,
    /// How payloads are encoded and decoded, in words.
    #[serde(default)]
    pub codec: String,
    /// Keep-alive traffic (`none`).
    #[serde(default)]
    pub heartbeats: String,
    /// Each role's socket, by role (`prefiller`, `decoder`).
    pub sockets: IndexMap<String, Socket>,
    /// Every message of the side channel, in flow order.
    pub messages: Vec<TransportMessage>,
}

/// One role's ZeroMQ socket.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Socket {
    /// The ZeroMQ socket type (`ROUTER`, `DEALER`, `REQ`).
    #[serde(rename = "type")]
    pub socket_type: String,
    /// Whether the role binds (else it connects).
    pub binds: bool,
    /// Where it binds or connects, in words.
    pub address: String,
    /// Socket options the role sets, by name.
    #[serde(default)]
    pub options: IndexMap<String, String>,
    /// How many such sockets exist (per worker, per peer, ...).
    #[serde(default)]
    pub per: String,
}

/// One message of the side channel: who sends it, its frames and how its payload is encoded.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TransportMessage {
    /// The message's name (the struct's, for `msgpack` messages).
    pub name: String,
    /// The sending role.
    pub from: String,
    /// The receiving role.
    pub to: String,
    /// `msgpack` (the struct of the same name) or `raw` (one of `constants`).
    pub encoding: String,
    /// The frames of the multipart message as the sender writes it.
    pub frames_sent: Vec<String>,
    /// The frames as the receiver reads them (a ROUTER sees the sender's identity first).
    pub frames_received: Vec<String>,
    /// The message that answers this one, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<String>,
    /// `non-terminal* terminal` (driven by the status enum's `terminal` flags) or `exactly one`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<String>,
    /// The byte constants a `raw` message can be.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constants: Vec<RawConstant>,
    /// What the sender does with an ERROR answer (absent: the spec does not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_answer: Option<ErrorAnswer>,
    /// What it is, in vLLM's terms (documentation; no wire effect).
    #[serde(default)]
    pub doc: String,
    /// The revision that introduced it (stamped when the spec is resolved).
    #[serde(default)]
    pub since: String,
    /// Where a message a derived revision inserted was read (stamped from the edit or the revision).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Later revisions whose edits changed it (stamped when the spec is resolved).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_in: Vec<String>,
}

/// What a sender does with an ERROR answer to its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorAnswer {
    /// It logs the answer's text and goes on: nothing of its own fails (a rejected lease renewal, 0.34.0).
    Logged,
}

/// A byte constant a `raw` message carries.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawConstant {
    /// The constant's name in vLLM's code.
    pub name: String,
    /// The exact bytes, as ASCII text.
    pub bytes: String,
    /// What it is, in vLLM's terms (documentation; no wire effect).
    #[serde(default)]
    pub doc: String,
}

/// An environment variable the connector reads (a port, a timeout, a transport switch).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EnvVar {
    /// The variable's type (`optional[str]` for one read as text that may be unset).
    #[serde(rename = "type")]
    pub ty: TypeExpr,
    /// The value when unset, as vLLM writes it (`None`: no value).
    pub default: String,
    /// Only what this peer does by itself changes (a device, a segment, a transport switch of its own engine):
    /// nothing another peer observes.
    #[serde(default, skip_serializing_if = "is_false")]
    pub local: bool,
    /// What it is, in vLLM's terms (documentation; no wire effect).
    #[serde(default)]
    pub doc: String,
    /// The revision that introduced it (stamped when the spec is resolved).
    #[serde(default)]
    pub since: String,
}

/// A key of `kv_connector_extra_config` (`--kv-transfer-config '{"kv_connector_extra_config": {...}}'`) the
/// connector reads.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigKey {
    /// The value's type.
    #[serde(rename = "type")]
    pub ty: TypeExpr,
    /// The value when the key is absent, as a Python literal (`'rdma'`, `10`, `None`).
    pub default: String,
    /// Only what this peer does by itself changes (its worker threads, its device): nothing another peer
    /// observes. Keys both sides of a pair must agree on, or that change what a peer sends, are not local.
    #[serde(default, skip_serializing_if = "is_false")]
    pub local: bool,
    /// What it is, in vLLM's terms (documentation; no wire effect).
    #[serde(default)]
    pub doc: String,
    /// The revision that introduced it (stamped when the spec is resolved).
    #[serde(default)]
    pub since: String,
}

/// The literal texts a peer writes into the error field of its answer (`MooncakeXferResponse.err_msg`), each
/// with the statuses it is sent with. Texts the code builds elsewhere (an exception's text, a value a helper
/// returns) are not listed: `mooncake-conformance extract` cannot read them either.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Replies {
    /// The answer struct that carries them.
    pub message: String,
    /// Its text field.
    pub field: String,
    /// What they are, in vLLM's terms (documentation; no wire effect).
    #[serde(default)]
    pub doc: String,
    /// Where they were read: release and file.
    pub source: String,
    /// The texts.
    pub texts: Vec<ReplyText>,
}

/// One reply text.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ReplyText {
    /// A short name for edits to address it by (the text itself has dots).
    pub name: String,
    /// The text; `{name}` stands for an interpolated value (`{layout_id:#x}` with its format), `{{`/`}}` for a
    /// literal brace.
    pub text: String,
    /// The status members it is sent with (several when the status depends on the moment:
    /// `CONTINUE if … else FINISH`).
    pub status: Vec<String>,
    /// When it is sent, in vLLM's terms (documentation; no wire effect).
    #[serde(default)]
    pub doc: String,
    /// The revision that introduced it (stamped when the spec is resolved).
    #[serde(default)]
    pub since: String,
    /// Where it was read: release, file and function.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Later revisions whose edits changed it (stamped when the spec is resolved).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_in: Vec<String>,
}

impl ReplyText {
    /// The text with every `{…}` placeholder as `{}`: two texts are the same reply when their shapes are.
    pub fn shape(&self) -> String {
        text_shape(&self.text)
    }
}

/// A template with every `{…}` placeholder written `{}` (`{{` and `}}` stay literal braces).
pub fn text_shape(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                out.push_str("{{");
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                out.push_str("}}");
            }
            '{' => {
                for d in chars.by_ref() {
                    if d == '}' {
                        break;
                    }
                }
                out.push_str("{}");
            }
            _ => out.push(c),
        }
    }
    out
}

/// The bootstrap HTTP server (`spec/PROTOCOL.md`, "Bootstrap HTTP").
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Bootstrap {
    /// `http`.
    pub kind: String,
    /// Where it was read: release, file and function.
    pub source: String,
    /// What serves it, in words (FastAPI under uvicorn, in which process).
    #[serde(default)]
    pub server: String,
    /// Where it listens, in words.
    #[serde(default)]
    pub bind: String,
    /// The port when `VLLM_MOONCAKE_BOOTSTRAP_PORT` is unset.
    pub default_port: u16,
    /// What the server keeps, in words.
    #[serde(default)]
    pub state: String,
    /// What `POST /register` does with a slot that is already registered.
    pub duplicate_registration: super::behaviour::DuplicateRegistration,
    /// The JSON bodies, by model name (same field syntax as structs).
    pub models: IndexMap<String, StructDef>,
    /// The routes, in declaration order.
    pub routes: Vec<Route>,
    /// Routes the web framework adds on its own (FastAPI's documentation pages).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub framework_routes: Vec<String>,
}

/// One route of the bootstrap server.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// The HTTP method.
    pub method: String,
    /// The path.
    pub path: String,
    /// The request body's model, if the route takes one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// Every documented response.
    pub responses: Vec<RouteResponse>,
    /// The revision that introduced it (stamped when the spec is resolved).
    #[serde(default)]
    pub since: String,
    /// Later revisions whose edits changed it (stamped when the spec is resolved).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_in: Vec<String>,
}

/// One documented response of a route.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RouteResponse {
    /// The HTTP status.
    pub status: u16,
    /// A model name or a type expression over models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// For `HTTPError` bodies: the `detail` text, `{placeholders}` standing for values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// When the server sends it, in words.
    #[serde(default)]
    pub when: String,
}

/// The `kv_transfer_params` of a request.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KvTransferParams {
    /// What it is, in vLLM's terms (documentation; no wire effect).
    #[serde(default)]
    pub doc: String,
    /// Where it was read: release, file and function.
    pub source: String,
    /// The keys.
    pub keys: Vec<KvParamKey>,
}

/// One key of `kv_transfer_params`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KvParamKey {
    /// The key.
    pub name: String,
    /// Its value's type.
    #[serde(rename = "type")]
    pub ty: TypeExpr,
    /// `prefiller`, `decoder` or `both`.
    pub to: String,
    /// Set by the engine for itself, not by the router.
    #[serde(default, skip_serializing_if = "is_false")]
    pub internal: bool,
    /// What it is, in vLLM's terms (documentation; no wire effect).
    #[serde(default)]
    pub doc: String,
    /// The revision that introduced it (stamped when the spec is resolved).
    #[serde(default)]
    pub since: String,
    /// Where it was read: release, file and function.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Later revisions whose edits changed it (stamped when the spec is resolved).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_in: Vec<String>,
}

/// One edit of a derived revision file.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Edit {
    /// `insert`, `set`, `remove` or `replace` (`spec/README.md`, "Derived revisions: edits").
    pub op: String,
    /// What it edits: a dotted path whose array items are addressed by name.
    pub at: String,
    /// `insert`: the item to insert after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// `insert`: the item to insert before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    /// `insert` / `replace`: the new item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<toml::Value>,
    /// `set`: the new value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<toml::Value>,
    /// The reason, shown in the revision's wire table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// Where the change was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl Revision {
    /// The first release covered (empty for an unreleased revision).
    pub fn first_release(&self) -> &str {
        self.releases.first().map(String::as_str).unwrap_or("")
    }
    /// The project whose code this revision describes: `vllm` for the push family; otherwise the revision name
    /// before its release or commit (`vllm-ascend-0.23.0.post1`, `vllm-ascend-main@3e486e317` → `vllm-ascend`;
    /// `vllm-X.Y.Z` → `vllm`).
    pub fn project(&self) -> &str {
        if self.family == "push" {
            return "vllm";
        }
        let n = &self.revision;
        let at = n
            .match_indices('-')
            .map(|(i, _)| i)
            .find(|&i| n[i + 1..].starts_with(|c: char| c.is_ascii_digit()) || n[i + 1..].starts_with("main@"));
        at.map_or(n.as_str(), |i| &n[..i])
    }
    /// Whether this revision is in no release (read at a commit).
    pub(crate) fn unreleased(&self) -> bool {
        self.releases.is_empty()
    }
    /// Whether `release` (`0.33.0`) speaks this revision.
    pub fn covers_release(&self, release: &str) -> bool {
        self.releases.iter().any(|r| r == release)
    }
    /// The transport message of this name.
    pub fn message(&self, name: &str) -> Option<&TransportMessage> {
        self.transport.messages.iter().find(|m| m.name == name)
    }
    /// The message a socket role sends (first match).
    pub fn message_from(&self, role: &str) -> Option<&TransportMessage> {
        self.transport.messages.iter().find(|m| m.from == role)
    }
    /// The value field `f` (of a struct of this revision) stands at when it is not there: its default, or for
    /// a required field the neutral value of its type — empty for a string, list or dict, `None` for an
    /// optional, `False`, the first member of an enum, 0 for an int (1 for a `…_size`, the neutral size).
    /// One rule for every place that needs it: a generated struct's `Default`, and a conversion between
    /// revisions (a field one revision lacks reads as this value in the other, and must hold it to be said in
    /// the one lacking it). `None`: the type has no such value (a struct, a tuple, `bytes`, `any`).
    pub fn fallback_value(&self, f: &FieldDef) -> Result<Option<Literal>, LiteralError> {
        if let Some(d) = f.default_literal()? {
            return Ok(Some(d));
        }
        let mut t = &f.ty;
        while let TypeExpr::Named(n) = t {
            match self.aliases.get(n) {
                Some(a) => t = &a.ty,
                None => break,
            }
        }
        Ok(match t {
            TypeExpr::Str => Some(Literal::Str(String::new())),
            TypeExpr::Int if f.name.ends_with("_size") => Some(Literal::Int(1)),
            TypeExpr::Int => Some(Literal::Int(0)),
            TypeExpr::Bool => Some(Literal::Bool(false)),
            TypeExpr::List(_) | TypeExpr::VarTuple(_) => Some(Literal::EmptyList),
            TypeExpr::Dict(..) => Some(Literal::EmptyDict),
            TypeExpr::Optional(_) => Some(Literal::None),
            TypeExpr::Named(n) => {
                self.enums.get(n).and_then(|e| e.members.first()).map(|m| Literal::Int(m.value.into()))
            }
            _ => None,
        })
    }
    /// Statuses that end a reply stream, from the status enum's `terminal` flags.
    pub(crate) fn status_enum(&self) -> Option<(&str, &EnumDef)> {
        self.enums.iter().find(|(_, e)| e.members.iter().any(|m| m.terminal.is_some())).map(|(n, e)| (n.as_str(), e))
    }
}
