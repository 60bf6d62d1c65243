//! The JSON the bundled extraction script prints (`conformance/extract/extract.py`, format `mooncake-extract/1`).

use indexmap::IndexMap;
use serde::Deserialize;

/// What the script read out of one source.
#[derive(Clone, Debug, Deserialize)]
pub struct Facts {
    /// `mooncake-extract/1`.
    pub format: String,
    /// What was read.
    pub input: Input,
    /// 1 or 2 when the layout says (generation 1's single module, generation 2's package); else unknown.
    pub generation: Option<u32>,
    /// `vllm/_version.py`'s release and build commit (wheels, built checkouts).
    pub release: Option<String>,
    /// The build commit `vllm/_version.py` names, if any.
    pub build_commit: Option<String>,
    /// `git rev-parse HEAD` of a checkout.
    pub git_commit: Option<String>,
    /// SHA-256 (hex) over every file read, path and text, in path order: which sources the facts are of.
    pub sources_sha256: String,
    /// The connector files read, and other vLLM modules followed for an imported alias.
    pub files: Vec<String>,
    /// The other vLLM modules followed for an imported alias.
    #[serde(default)]
    pub followed: Vec<String>,
    /// Module-level type aliases the structs and models use, by name.
    pub aliases: IndexMap<String, AliasFact>,
    /// The integer enums a struct field refers to, in file and line order.
    pub enums: Vec<EnumFact>,
    /// Every `msgspec.Struct` class, in the order the modules define them.
    pub structs: Vec<StructFact>,
    /// The bootstrap server (generation 2), when the sources have one.
    pub bootstrap: Option<BootstrapFact>,
    /// The literal error texts of answers (`Struct(status=..., err_msg="...")`), one per call site.
    #[serde(default)]
    pub replies: Vec<ReplyFact>,
    /// The `kv_connector_extra_config` keys read, one per read.
    #[serde(default)]
    pub extra_config: Vec<ConfigFact>,
    /// The environment variables read, one per read.
    #[serde(default)]
    pub env: Vec<EnvFact>,
    /// The msgpack decoders built for a struct of the files read.
    #[serde(default)]
    pub decoders: Vec<DecoderFact>,
    /// Everything the script met that cannot be read statically, one sentence each.
    pub not_derived: Vec<String>,
}

/// What the script was given.
#[derive(Clone, Debug, Deserialize)]
pub struct Input {
    /// `wheel`, `checkout`, `package` (the connector's folder) or `file`.
    pub kind: String,
    /// The path as given (a wheel's file name only).
    pub path: String,
}

/// A module-level type alias.
#[derive(Clone, Debug, Deserialize)]
pub struct AliasFact {
    /// What it stands for, in the spec's type language.
    #[serde(rename = "type")]
    pub ty: String,
    /// Where it is defined.
    pub file: String,
}

/// An integer enum.
#[derive(Clone, Debug, Deserialize)]
pub struct EnumFact {
    /// The class name.
    pub name: String,
    /// The file defining it.
    pub file: String,
    /// Its members, in definition order.
    pub members: Vec<MemberFact>,
}

/// A member of an enum.
#[derive(Clone, Debug, Deserialize)]
pub struct MemberFact {
    /// Its name.
    pub name: String,
    /// Its integer value.
    pub value: i64,
}

/// A `msgspec.Struct` class.
#[derive(Clone, Debug, Deserialize)]
pub struct StructFact {
    /// The class name.
    pub name: String,
    /// The file defining it.
    pub file: String,
    /// What it is (`msgspec.Struct`).
    #[serde(default)]
    pub kind: String,
    /// Its class keywords (`omit_defaults`, `array_like`, `tag`, ...), with their literal values.
    #[serde(default)]
    pub options: serde_json::Map<String, serde_json::Value>,
    /// Its fields in declaration order, inherited ones first.
    pub fields: Vec<FieldFact>,
}

/// A field; `type` is None when the annotation has no spelling in the spec's type language, `default` is
/// `Some(None)` when there is a default that is not a literal (both reported under `not_derived`).
#[derive(Clone, Debug, Deserialize)]
pub struct FieldFact {
    /// The field's name.
    pub name: String,
    /// Its annotation, in the spec's type language.
    #[serde(rename = "type")]
    pub ty: Option<String>,
    /// Its default literal, as the script spells it; `None` without a default, `Some(None)` for one that is not
    /// a literal.
    #[serde(default, deserialize_with = "some")]
    pub default: Option<Option<String>>,
    /// The `default_factory` (`list`, `dict`), if it has one.
    pub default_factory: Option<String>,
}

fn some<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// The FastAPI bootstrap server.
#[derive(Clone, Debug, Deserialize)]
pub struct BootstrapFact {
    /// The file defining it.
    pub file: String,
    /// Its routes.
    pub routes: Vec<RouteFact>,
    /// The pydantic and dataclass models the routes use.
    pub models: Vec<ModelFact>,
    /// How a second registration of a taken slot is answered: `accept-identical` or `reject`; `None` when the
    /// script could not tell.
    pub duplicate_registration: Option<String>,
}

/// One route of the bootstrap server.
#[derive(Clone, Debug, Deserialize)]
pub struct RouteFact {
    /// The HTTP method (`POST`, `GET`).
    pub method: String,
    /// The path (`/register`).
    pub path: String,
    /// The handler function's name.
    pub handler: Option<String>,
    /// The request body's model, in the type language; `None` without one.
    pub request: Option<String>,
    /// The answers the handler (or FastAPI) can give.
    pub responses: Vec<ResponseFact>,
}

/// One answer a route can give.
#[derive(Clone, Debug, Deserialize)]
pub struct ResponseFact {
    /// The HTTP status.
    pub status: u16,
    /// An HTTPException raised by the handler.
    #[serde(default)]
    pub error: bool,
    /// FastAPI's own validation answer (422) for a route with a request model.
    #[serde(default)]
    pub framework: bool,
    /// The HTTPException's `detail`, as a template.
    pub detail: Option<String>,
    /// A literal dict the handler returns.
    pub json: Option<serde_json::Map<String, serde_json::Value>>,
    /// The response model or return annotation, in the type language.
    pub body: Option<String>,
}

/// A request or response model of the bootstrap server.
#[derive(Clone, Debug, Deserialize)]
pub struct ModelFact {
    /// The class name.
    pub name: String,
    /// `pydantic.BaseModel` or `dataclass`.
    pub kind: String,
    /// Its fields.
    pub fields: Vec<FieldFact>,
}

/// Where a fact was read: file, enclosing function, line.
#[derive(Clone, Debug, Deserialize)]
pub struct Site {
    /// The file.
    pub file: String,
    /// The enclosing function (`None` at module level).
    pub function: Option<String>,
    /// The line.
    pub line: Option<u32>,
}

impl Site {
    /// `file, function` as the spec's `source` keys write it.
    pub fn describe(&self) -> String {
        match &self.function {
            Some(f) => format!("{}, {f}", self.file),
            None => self.file.clone(),
        }
    }
}

/// One answer with a literal error text.
#[derive(Clone, Debug, Deserialize)]
pub struct ReplyFact {
    /// The answer struct (`MooncakeXferResponse`).
    pub message: String,
    /// The text as a template (`{name}` per interpolated value).
    pub text: String,
    /// The status members it can be sent with.
    pub status: Vec<String>,
    /// Where.
    #[serde(flatten)]
    pub site: Site,
}

/// One read of a `kv_connector_extra_config` key.
#[derive(Clone, Debug, Deserialize)]
pub struct ConfigFact {
    /// The key.
    pub name: String,
    /// Its default as a Python literal (`None` when the read gives none); absent when not a literal.
    pub default: Option<String>,
    /// Where.
    #[serde(flatten)]
    pub site: Site,
}

/// One read of an environment variable.
#[derive(Clone, Debug, Deserialize)]
pub struct EnvFact {
    /// The variable.
    pub name: String,
    /// Its type in the spec's language, when the source says (`vllm/envs.py`, or a literal default).
    #[serde(rename = "type")]
    pub ty: Option<String>,
    /// Its value when unset, when the source says.
    pub default: Option<String>,
    /// `envs` (vLLM's envs module), `os` (os.environ / os.getenv) or `presence` (`"X" in os.environ`).
    pub how: String,
    /// Where.
    #[serde(flatten)]
    pub site: Site,
}

/// A msgpack decoder built for a struct.
#[derive(Clone, Debug, Deserialize)]
pub struct DecoderFact {
    /// The struct it decodes.
    #[serde(rename = "struct")]
    pub strukt: String,
    /// What holds it (`self._xfer_meta_decoder`), when it is assigned.
    pub target: Option<String>,
    /// The functions that call its `decode`.
    #[serde(default)]
    pub used_in: Vec<String>,
    /// Where it is built.
    #[serde(flatten)]
    pub site: Site,
}
