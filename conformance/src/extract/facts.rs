//! The JSON the bundled extraction script prints (`tools/extract/extract.py`, format `mooncake-extract/1`).

use indexmap::IndexMap;
use serde::Deserialize;

/// What the script read out of one source.
#[derive(Clone, Debug, Deserialize)]
pub struct Facts {
    pub format: String,
    pub input: Input,
    /// 1 or 2 when the layout says (generation 1's single module, generation 2's package); else unknown.
    pub generation: Option<u32>,
    /// `vllm/_version.py`'s release and build commit (wheels, built checkouts).
    pub release: Option<String>,
    pub build_commit: Option<String>,
    /// `git rev-parse HEAD` of a checkout.
    pub git_commit: Option<String>,
    pub sources_sha256: String,
    /// The connector files read, and other vLLM modules followed for an imported alias.
    pub files: Vec<String>,
    #[serde(default)]
    pub followed: Vec<String>,
    pub aliases: IndexMap<String, AliasFact>,
    pub enums: Vec<EnumFact>,
    pub structs: Vec<StructFact>,
    pub bootstrap: Option<BootstrapFact>,
    pub not_derived: Vec<String>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Input {
    pub kind: String,
    pub path: String,
}

#[derive(Clone, Debug, Deserialize)]
pub struct AliasFact {
    #[serde(rename = "type")]
    pub ty: String,
    pub file: String,
}

#[derive(Clone, Debug, Deserialize)]
pub struct EnumFact {
    pub name: String,
    pub file: String,
    pub members: Vec<MemberFact>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct MemberFact {
    pub name: String,
    pub value: i64,
}

#[derive(Clone, Debug, Deserialize)]
pub struct StructFact {
    pub name: String,
    pub file: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub options: serde_json::Map<String, serde_json::Value>,
    pub fields: Vec<FieldFact>,
}

/// A field; `type` is None when the annotation has no spelling in the spec's type language, `default` is
/// `Some(None)` when there is a default that is not a literal (both reported under `not_derived`).
#[derive(Clone, Debug, Deserialize)]
pub struct FieldFact {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: Option<String>,
    #[serde(default, deserialize_with = "some")]
    pub default: Option<Option<String>>,
    pub default_factory: Option<String>,
}

fn some<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

#[derive(Clone, Debug, Deserialize)]
pub struct BootstrapFact {
    pub file: String,
    pub routes: Vec<RouteFact>,
    pub models: Vec<ModelFact>,
    pub duplicate_registration: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct RouteFact {
    pub method: String,
    pub path: String,
    pub handler: Option<String>,
    pub request: Option<String>,
    pub responses: Vec<ResponseFact>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct ResponseFact {
    pub status: u16,
    /// An HTTPException raised by the handler.
    #[serde(default)]
    pub error: bool,
    /// FastAPI's own validation answer (422) for a route with a request model.
    #[serde(default)]
    pub framework: bool,
    pub detail: Option<String>,
    /// A literal dict the handler returns.
    pub json: Option<serde_json::Map<String, serde_json::Value>>,
    /// The response model or return annotation, in the type language.
    pub body: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct ModelFact {
    pub name: String,
    pub kind: String,
    pub fields: Vec<FieldFact>,
}
