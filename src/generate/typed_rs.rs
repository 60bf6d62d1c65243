//! The typed layer, generated from `spec/` (issue 16): for every revision of both families, one Rust struct per
//! MessagePack struct of the spec with its field list, required mask, defaults, decoder and encoder; the int
//! enums as open newtypes with the terminal flags of the spec; the control-tuple tags as an open newtype; the
//! raw reply constants; and a table of every revision for dispatch. The output is
//! `src/typed/generated/push.rs`, `src/typed/generated/pull.rs` and (the push family's conversions to and
//! from its newest revision) `src/typed/generated/via_newest.rs`, committed and kept fresh by
//! `tests/generated.rs` like `schema/` (`BLESS=1 cargo test --test generated` rewrites them).
//!
//! One model, built once (`typed_rs/model.rs`): it reads a family of the spec into what is generated — each
//! revision's messages with their fields' `Ty` (one type model for every position: a field, a list's element, a
//! tuple's item), which revision first defines each struct, the family's merged enums and control tags. The writers
//! turn it into `quote` token trees, one file of `typed_rs/` per kind of item — `structs` (a message's struct and
//! impls), `enums` (the int enums), `tags` (the control tags and each revision's control-tuple enum), `revisions`
//! (a family's file: one module per revision and the revision table), `via_newest` (the push family's conversions)
//! — over `ty` (one value's Rust type, decoder, encoder, size hint, owned copy, default and conversion), and
//! `prettyplease` prints them (`emit`).
//!
//! The generated decoders are straight-line code over the toolkit of `src/typed/de.rs` (the same path and
//! error stack as the spec-driven codec, `src/codec/path.rs`); they hold no rule of their own, so a revision
//! added to `spec/` needs no hand edit here. The type vocabulary: `str` (and aliases of it), `int`, `bool`,
//! `bytes`, `any`, lists and `tuple[T, ...]` of any of these, fixed tuples, `dict` with `int` or `str` keys,
//! `optional[str]`, `optional[list[str]]`, an int enum, a nested struct encoded as a map, and the push
//! family's `req_blocks` value (`tuple[str, list[list[int]]]` or, before 0.20.0, `tuple[str, list[int]]`,
//! held as [`crate::typed::ReqBlocks`]). Messages are `msgspec.Struct`s encoded as maps, dataclasses, and
//! tuples (whose `bytes` constants, the control tags, are checked and written but not stored). Anything else
//! is an error naming the field, so a revision using a new type fails to generate instead of generating
//! something wrong.

use std::collections::BTreeMap;

use crate::spec::Spec;

mod emit;
mod enums;
mod model;
mod revisions;
mod structs;
mod tags;
mod ty;
mod via_newest;

/// Where the generated push layer is written, relative to the repository root.
pub const PUSH_PATH: &str = "src/typed/generated/push.rs";
/// Where the generated pull layer (vllm-ascend) is written, relative to the repository root.
pub const PULL_PATH: &str = "src/typed/generated/pull.rs";
/// Where the conversions between each push revision and the newest are written (`from_newest`, `to_newest`,
/// the `…_VIA_NEWEST` codecs the sans-IO cores use): apart from `push.rs`, so a change to the newest revision
/// shows in the older revisions' conversions only.
pub(crate) const VIA_NEWEST_PATH: &str = "src/typed/generated/via_newest.rs";

/// Why the typed layer cannot be generated from a spec ([`sources`]): something the spec says that the
/// generator does not write, or revisions of a family that do not agree (a tag, an enum member).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum GenerateError {
    /// The spec has no family of this name (`push`, `pull`).
    #[error("the spec has no {0} family")]
    NoFamily(&'static str),
    /// A family without a revision, or without a released one.
    #[error("the {family} family has no {}revision", if *.released { "released " } else { "" })]
    NoRevision {
        /// The family.
        family: String,
        /// A released revision was looked for.
        released: bool,
    },
    /// A type the generator has no Rust shape for.
    #[error("unsupported type {ty}{}", .why.map(|w| format!(" ({w})")).unwrap_or_default())]
    UnsupportedType {
        /// The type, as the spec writes it.
        ty: String,
        /// What rules it out, when more than its kind.
        why: Option<&'static str>,
    },
    /// A struct that holds itself (directly or through others).
    #[error("struct {0} holds itself")]
    HoldsItself(String),
    /// A default (or fallback) value the generator cannot write for a field of this shape.
    #[error("unsupported default {default} for a field of shape {shape}")]
    UnsupportedDefault {
        /// The literal, rendered.
        default: String,
        /// The field's Rust shape, rendered.
        shape: String,
    },
    /// An int default outside the MessagePack range.
    #[error("default {0} is out of the wire's range")]
    DefaultOutOfRange(i128),
    /// A message name that is no struct of the revision.
    #[error("{revision}: no struct {name}")]
    NoStruct {
        /// The revision.
        revision: String,
        /// The name.
        name: String,
    },
    /// A struct kind and options the generator does not write (array-like, tagged, renamed, ...).
    #[error("{revision}: {name} is a {kind} with options {options}, which the generator does not write")]
    UnsupportedStruct {
        /// The revision.
        revision: String,
        /// The struct.
        name: String,
        /// Its kind, rendered.
        kind: String,
        /// Its options, rendered.
        options: String,
    },
    /// A struct with more fields than a required-field mask holds.
    #[error("{revision}: {name} has more than 64 fields")]
    TooManyFields {
        /// The revision.
        revision: String,
        /// The struct.
        name: String,
    },
    /// A default or constant that is not a literal the spec supports.
    #[error(transparent)]
    Literal(#[from] crate::spec::LiteralError),
    /// A tuple message's constant other than `bytes` (rendered).
    #[error("a constant {0} (only bytes constants are written)")]
    UnsupportedConstant(String),
    /// A constant on a field of a map-encoded struct.
    #[error("a constant in a map-encoded struct")]
    ConstantInMap,
    /// A default on a field of a tuple message.
    #[error("a tuple has no defaults")]
    TupleDefault,
    /// A field the newest revision has and an older one lacks, with no value it stands at when absent.
    #[error("no value it stands at when absent")]
    NoFallback,
    /// Two field shapes the generated conversions cannot turn into each other.
    #[error("no conversion from {from} to {to}")]
    NoConversion {
        /// The source shape, rendered.
        from: String,
        /// The target shape, rendered.
        to: String,
    },
    /// A control tuple whose tag differs from an earlier revision's, or a tag another message had.
    #[error("{revision}: {name} is tagged {tag} here; {earlier} was tagged {earlier_tag} before")]
    TagClash {
        /// The revision.
        revision: String,
        /// The message.
        name: String,
        /// Its tag here (Python bytes repr).
        tag: String,
        /// The message seen with either before.
        earlier: String,
        /// Its tag then.
        earlier_tag: String,
    },
    /// An enum that is not an `IntEnum`.
    #[error("{revision}: enum {name} is a {kind}, not an IntEnum")]
    NotIntEnum {
        /// The revision.
        revision: String,
        /// The enum.
        name: String,
        /// Its kind.
        kind: String,
    },
    /// An enum value named differently than in an earlier revision.
    #[error("{revision}: {name} value {value} is {member} here and {earlier} before")]
    MemberRenamed {
        /// The revision.
        revision: String,
        /// The enum.
        name: String,
        /// The value, rendered.
        value: String,
        /// Its name here.
        member: String,
        /// Its name before.
        earlier: String,
    },
    /// The error is about this field of a struct of a revision.
    #[error("{revision}: {owner}.{field}: {source}")]
    InField {
        /// The revision.
        revision: String,
        /// The struct.
        owner: String,
        /// The field.
        field: String,
        /// What is wrong.
        source: Box<GenerateError>,
    },
}

impl GenerateError {
    /// This error, about field `field` of struct `owner` of `revision`.
    fn in_field(self, revision: &str, owner: &str, field: &str) -> Self {
        GenerateError::InField {
            revision: revision.to_string(),
            owner: owner.to_string(),
            field: field.to_string(),
            source: Box::new(self),
        }
    }
}

/// Every generated typed source, as (path relative to the repository root, contents).
pub fn sources(spec: &Spec) -> Result<BTreeMap<String, String>, GenerateError> {
    let push = model::FamilyModel::build(spec.family("push").ok_or(GenerateError::NoFamily("push"))?)?;
    let pull = model::FamilyModel::build(spec.family("pull").ok_or(GenerateError::NoFamily("pull"))?)?;
    Ok(BTreeMap::from([
        (PUSH_PATH.to_string(), revisions::family_file(&push)?),
        (VIA_NEWEST_PATH.to_string(), via_newest::file_of(&push)?),
        (PULL_PATH.to_string(), revisions::family_file(&pull)?),
    ]))
}

/// A Rust module name for a revision: `vllm-0.16.0..0.18.1` → `vllm_0_16_0_to_0_18_1`,
/// `vllm-ascend-main@3e486e317` → `vllm_ascend_main_3e486e317`.
pub fn module_name(revision: &str) -> String {
    revision
        .replace("..", "_to_")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' })
        .collect()
}
