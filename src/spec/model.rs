//! The typed model of one resolved revision. Field names here are the keys of the spec files; every struct
//! rejects unknown keys so a typo in `spec/` is an error, not a silently ignored line.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use super::behaviour::Behaviour;
use super::literal::Literal;
use super::types::TypeExpr;

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Revision {
    pub format: String,
    pub family: String,
    /// Revision name, e.g. `vllm-0.25.0..0.29.0`: first and last release with this wire.
    pub revision: String,
    /// The revision this one was derived from (derived files only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    pub generation: u32,
    /// The releases covered; empty for an unreleased revision, which names its `commit` instead.
    pub releases: Vec<String>,
    /// Unreleased revisions only: the `owner/repo@commit` the facts were read at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    #[serde(default)]
    pub build_commits: IndexMap<String, String>,
    pub source: String,
    pub summary: String,
    #[serde(default)]
    pub aliases: IndexMap<String, Alias>,
    #[serde(default)]
    pub enums: IndexMap<String, EnumDef>,
    #[serde(default)]
    pub structs: IndexMap<String, StructDef>,
    pub transport: Transport,
    #[serde(default)]
    pub behaviour: Behaviour,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap: Option<Bootstrap>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_transfer_params: Option<KvTransferParams>,
    #[serde(default)]
    pub env: IndexMap<String, EnvVar>,
    /// Spec file this revision was read from (not part of the file).
    #[serde(skip_deserializing)]
    pub path: String,
    /// The edits this revision's own file applies to its base, in order (not part of the file's body).
    #[serde(skip_deserializing)]
    pub edits: Vec<Edit>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Alias {
    #[serde(rename = "type")]
    pub ty: TypeExpr,
    #[serde(default)]
    pub doc: String,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EnumDef {
    /// `IntEnum` (encoded as its integer value).
    pub kind: String,
    #[serde(default)]
    pub doc: String,
    pub source: String,
    pub members: Vec<EnumMember>,
    pub since: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_in: Vec<String>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EnumMember {
    pub name: String,
    pub value: i64,
    /// Whether this status ends a reply stream (status enums only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal: Option<bool>,
    #[serde(default)]
    pub doc: String,
    pub since: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_in: Vec<String>,
}

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

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StructOptions {
    #[serde(default, skip_serializing_if = "is_false")]
    pub omit_defaults: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub array_like: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub forbid_unknown_fields: bool,
    /// msgspec `tag`: `true` (the class name), a string or an integer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<Tag>,
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

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Tag {
    Bool(bool),
    Int(i64),
    Str(String),
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StructDef {
    pub kind: StructKind,
    #[serde(default)]
    pub options: StructOptions,
    #[serde(default)]
    pub doc: String,
    #[serde(default)]
    pub source: String,
    pub fields: Vec<FieldDef>,
    #[serde(default)]
    pub since: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_in: Vec<String>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FieldDef {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: TypeExpr,
    /// Python literal; absent together with `default_factory` means required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_factory: Option<String>,
    /// A JSON-only constant value (bootstrap bodies).
    #[serde(default, rename = "const", skip_serializing_if = "Option::is_none")]
    pub const_value: Option<String>,
    #[serde(default)]
    pub doc: String,
    #[serde(default)]
    pub since: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_in: Vec<String>,
}

impl FieldDef {
    pub fn required(&self) -> bool {
        self.default.is_none() && self.default_factory.is_none()
    }
    /// The default value, if the field has one.
    pub fn default_literal(&self) -> Result<Option<Literal>, String> {
        match (&self.default, &self.default_factory) {
            (Some(_), Some(_)) => Err(format!("field `{}` has both default and default_factory", self.name)),
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

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Transport {
    pub kind: String,
    pub pattern: String,
    pub source: String,
    #[serde(default)]
    pub codec: String,
    #[serde(default)]
    pub heartbeats: String,
    pub sockets: IndexMap<String, Socket>,
    pub messages: Vec<TransportMessage>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Socket {
    #[serde(rename = "type")]
    pub socket_type: String,
    pub binds: bool,
    pub address: String,
    #[serde(default)]
    pub options: IndexMap<String, String>,
    #[serde(default)]
    pub per: String,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TransportMessage {
    pub name: String,
    pub from: String,
    pub to: String,
    /// `msgpack` (the struct of the same name) or `raw` (one of `constants`).
    pub encoding: String,
    pub frames_sent: Vec<String>,
    pub frames_received: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<String>,
    /// `non-terminal* terminal` (driven by the status enum's `terminal` flags) or `exactly one`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constants: Vec<RawConstant>,
    #[serde(default)]
    pub doc: String,
    #[serde(default)]
    pub since: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_in: Vec<String>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawConstant {
    pub name: String,
    /// The exact bytes, as ASCII text.
    pub bytes: String,
    #[serde(default)]
    pub doc: String,
}

/// An environment variable that sets a wire-visible number (port, timeout).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EnvVar {
    #[serde(rename = "type")]
    pub ty: TypeExpr,
    pub default: String,
    #[serde(default)]
    pub doc: String,
    #[serde(default)]
    pub since: String,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Bootstrap {
    pub kind: String,
    pub source: String,
    #[serde(default)]
    pub server: String,
    #[serde(default)]
    pub bind: String,
    pub default_port: u16,
    #[serde(default)]
    pub state: String,
    pub duplicate_registration: super::behaviour::DuplicateRegistration,
    pub models: IndexMap<String, StructDef>,
    pub routes: Vec<Route>,
    /// Routes the web framework adds on its own (FastAPI's documentation pages).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub framework_routes: Vec<String>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    pub method: String,
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    pub responses: Vec<RouteResponse>,
    #[serde(default)]
    pub since: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_in: Vec<String>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RouteResponse {
    pub status: u16,
    /// A model name or a type expression over models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// For `HTTPError` bodies: the `detail` text, `{placeholders}` standing for values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(default)]
    pub when: String,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KvTransferParams {
    #[serde(default)]
    pub doc: String,
    pub source: String,
    pub keys: Vec<KvParamKey>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KvParamKey {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: TypeExpr,
    /// `prefiller`, `decoder` or `both`.
    pub to: String,
    #[serde(default, skip_serializing_if = "is_false")]
    pub internal: bool,
    #[serde(default)]
    pub doc: String,
    #[serde(default)]
    pub since: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changed_in: Vec<String>,
}

/// One edit of a derived revision file.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Edit {
    pub op: String,
    pub at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<toml::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<toml::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl Revision {
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
    pub fn unreleased(&self) -> bool {
        self.releases.is_empty()
    }
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
    pub fn fallback_value(&self, f: &FieldDef) -> Result<Option<Literal>, String> {
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
    pub fn status_enum(&self) -> Option<(&str, &EnumDef)> {
        self.enums.iter().find(|(_, e)| e.members.iter().any(|m| m.terminal.is_some())).map(|(n, e)| (n.as_str(), e))
    }
}
