//! The machine-readable spec (`spec/`): loading, resolving and checking revisions.
//!
//! The files under `spec/` are embedded at build time; [`Spec::builtin`] returns them resolved.
//! [`Spec::load_dir`] reads another copy (for `diff` against a branch or a proposed change).

pub mod behaviour;
mod implementation;
mod literal;
mod model;
mod resolve;
pub(crate) mod tree;
mod types;

pub use behaviour::{Behaviour, BehaviourKey};
pub(crate) use behaviour::{ExpiredPull, KvLeases, LayoutCaching, LeaseRenewal};
pub use implementation::{Difference, Implementation};
pub use literal::{Literal, LiteralError};
pub use model::*;
pub use resolve::{ResolveError, Resolved};
pub use types::{TypeExpr, TypeParseError};

use std::collections::HashSet;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, OnceLock};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded_spec.rs"));
}

/// A problem in a spec file, with the file it is in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError {
    /// The file (or directory), relative to `spec/` for the embedded spec.
    pub path: String,
    /// What is wrong.
    pub msg: String,
}

impl SpecError {
    pub(crate) fn new(path: &str, msg: impl Into<String>) -> Self {
        SpecError { path: path.to_string(), msg: msg.into() }
    }
}
impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.msg)
    }
}
impl std::error::Error for SpecError {}

/// Why a resolved revision fails the semantic checks the file format cannot express ([`check_revision`]); its
/// text becomes the [`SpecError`]'s message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RevisionError {
    /// A revision with `releases` that also names a `commit`.
    #[error("a released revision has no `commit` (its build commits go in `build_commits`)")]
    ReleasedWithCommit,
    /// A `commit` that is not `owner/repo@<hex commit>` (at least 9 hex digits).
    #[error("`commit` must be owner/repo@<hex commit>, found `{0}`")]
    BadCommit(String),
    /// Neither `releases` nor `commit`.
    #[error("`releases` is empty (only an unreleased revision may name a `commit` instead)")]
    NoReleases,
    /// A revision whose name does not match its releases (or commit).
    #[error("revision is named `{name}` but its releases make it `{want}`")]
    Misnamed {
        /// The name the file gives.
        name: String,
        /// The name its releases (or commit) make it.
        want: String,
    },
    /// An alias, enum or struct name defined more than once.
    #[error("name `{0}` is defined twice")]
    DefinedTwice(String),
    /// A type expression naming a type the revision does not define.
    #[error("{what}: unknown type name `{name}`")]
    UnknownTypeName {
        /// Where the type expression is (`alias X`, `Struct.field`, `route GET /query`, ...).
        what: String,
        /// The unknown name.
        name: String,
    },
    /// An enum with two members of the same name or value.
    #[error("enum {name}: duplicate member {member} = {value}")]
    DuplicateMember {
        /// The enum.
        name: String,
        /// The member's name.
        member: String,
        /// The member's value.
        value: i64,
    },
    /// A pydantic or JSON model under `[structs]`.
    #[error("struct {0}: JSON models belong under [bootstrap.models]")]
    JsonModelInStructs(String),
    /// A msgpack transport message without a struct of its name.
    #[error("transport message {0} has no struct of that name")]
    NoStructForMessage(String),
    /// A raw transport message without constants.
    #[error("raw transport message {0} lists no constants")]
    RawWithoutConstants(String),
    /// A transport message encoding other than `msgpack` and `raw`.
    #[error("transport message {message}: unknown encoding `{encoding}`")]
    UnknownEncoding {
        /// The message.
        message: String,
        /// The encoding it names.
        encoding: String,
    },
    /// A transport message from or to a role without a socket.
    #[error("transport message {message}: no socket for role `{role}`")]
    NoSocket {
        /// The message.
        message: String,
        /// The role without a socket.
        role: String,
    },
    /// `[behaviour]` items every revision of the generation must state, missing here.
    #[error(
        "[behaviour] does not state {} (every generation-{generation} revision must)",
        .missing.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
    )]
    BehaviourMissing {
        /// The missing items.
        missing: Vec<BehaviourKey>,
        /// The revision's generation.
        generation: u32,
    },
    /// `behaviour.<item> = true` for an item that is `false` or a table (`layout_caching`, `kv_leases`, …).
    #[error("behaviour.{0} is `false` or a table")]
    FeatureTrue(BehaviourKey),
    /// A status a behaviour item names that is no member of the revision's status enum.
    #[error("behaviour.{item}: status `{status}` is not an enum member")]
    StatusNotMember {
        /// The item.
        item: BehaviourKey,
        /// The status it names.
        status: String,
    },
    /// A fraction of the lease duration with a zero denominator or above 1.
    #[error("behaviour.{0}: a fraction of the lease duration must be in (0, 1]")]
    BadFraction(BehaviourKey),
    /// `[replies]` names a message that is no struct of the revision, or a field it does not have.
    #[error("replies: `{message}.{field}` is not a struct field of the revision")]
    RepliesField {
        /// The message named.
        message: String,
        /// The field named.
        field: String,
    },
    /// A reply text whose status is no enum member, that lists no status, or whose name is taken.
    #[error("replies.texts.{name}: {problem}")]
    ReplyText {
        /// The text's name.
        name: String,
        /// What is wrong.
        problem: String,
    },
    /// A `kv_connector_extra_config` key whose default is not a Python literal.
    #[error("extra_config.{key}: default: {source}")]
    ConfigDefault {
        /// The key.
        key: String,
        /// Why the default does not read.
        source: LiteralError,
    },
    /// A behaviour item naming a `kv_connector_extra_config` key the revision does not list.
    #[error("behaviour.{item}: config_key `{key}` is not a key of [extra_config]")]
    UnknownConfigKey {
        /// The item.
        item: BehaviourKey,
        /// The key it names.
        key: String,
    },
    /// A behaviour item's reply text that `[replies]` does not list.
    #[error("behaviour.{item}: its text {text:?} is not a text of [replies]")]
    TextNotAReply {
        /// The item.
        item: BehaviourKey,
        /// Its text.
        text: String,
    },
    /// A `layout_caching.miss_status` that is no enum member.
    #[error("layout_caching.miss_status `{0}` is not an enum member")]
    MissStatusNotMember(String),
    /// A behaviour item naming a field the decoder's request does not have.
    #[error("behaviour.{item} names `{field}`, which is not a field of the request")]
    NotARequestField {
        /// The behaviour item.
        item: BehaviourKey,
        /// The field it names.
        field: String,
    },
    /// A bootstrap route whose request model is not among `[bootstrap.models]`.
    #[error("route {method} {path}: unknown request model {model}")]
    UnknownRequestModel {
        /// The route's method.
        method: String,
        /// The route's path.
        path: String,
        /// The model it names.
        model: String,
    },
    /// A bootstrap route whose response body is not a type expression.
    #[error("route {method} {path}: {source}")]
    RouteBody {
        /// The route's method.
        method: String,
        /// The route's path.
        path: String,
        /// Why the body's type does not parse.
        source: TypeParseError,
    },
    /// A struct field declared twice.
    #[error("struct {strukt}: field {field} is declared twice")]
    FieldTwice {
        /// The struct.
        strukt: String,
        /// The field.
        field: String,
    },
    /// A field whose default cannot be read.
    #[error("{strukt}.{field}: {source}")]
    FieldDefault {
        /// The struct.
        strukt: String,
        /// The field.
        field: String,
        /// Why the default cannot be read.
        source: LiteralError,
    },
    /// A required field after a defaulted one in a msgspec struct that is not `array_like`.
    #[error("struct {strukt}: required field {field} follows a defaulted field")]
    RequiredAfterDefault {
        /// The struct.
        strukt: String,
        /// The required field.
        field: String,
    },
    /// `tag_field` without `tag`.
    #[error("struct {0}: tag_field without tag")]
    TagFieldWithoutTag(String),
}

/// All revisions of one protocol family, oldest first.
#[derive(Clone, Debug)]
pub struct Family {
    /// The family's name: `push` or `pull`.
    pub name: String,
    /// Its revisions: released ones by first release, then unreleased ones by name.
    pub revisions: Vec<Arc<Revision>>,
}

impl Family {
    /// A revision by name (`vllm-0.33.0`).
    pub fn revision(&self, name: &str) -> Option<&Arc<Revision>> {
        self.revisions.iter().find(|r| r.revision == name)
    }
    /// The revision that covers a vLLM release (`0.33.0`).
    pub fn for_release(&self, release: &str) -> Option<&Arc<Revision>> {
        self.revisions.iter().find(|r| r.covers_release(release))
    }
    /// The last revision (released ones sort before unreleased ones).
    pub fn newest(&self) -> Option<&Arc<Revision>> {
        self.revisions.last()
    }
}

/// Every revision of every family, resolved and checked.
#[derive(Clone, Debug)]
pub struct Spec {
    /// The families, by name.
    pub families: Vec<Family>,
    /// Other projects' connectors that speak one of the families' revisions (`spec/implementations/`), by name.
    pub implementations: Vec<Arc<Implementation>>,
}

/// Release versions compare numerically, part by part.
pub fn version_key(v: &str) -> Vec<u64> {
    v.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).map(|s| s.parse().unwrap_or(u64::MAX)).collect()
}

impl Spec {
    /// The spec compiled into this library.
    pub fn builtin() -> &'static Spec {
        static SPEC: OnceLock<Spec> = OnceLock::new();
        SPEC.get_or_init(|| {
            Spec::from_files(embedded::FILES.iter().map(|(p, t)| (p.to_string(), t.to_string())))
                .unwrap_or_else(|e| panic!("the embedded spec is invalid (a test catches this before release): {e}"))
        })
    }

    /// The embedded files, as (path relative to `spec/`, text): wire revisions and the other data tables.
    pub fn builtin_files() -> &'static [(&'static str, &'static str)] {
        embedded::FILES
    }

    /// Reads every `*.toml` under `dir` (recursively).
    pub fn load_dir(dir: &Path) -> Result<Spec, SpecError> {
        let mut files = Vec::new();
        collect(dir, dir, &mut files).map_err(|e| SpecError::new(&dir.display().to_string(), e.to_string()))?;
        if files.is_empty() {
            return Err(SpecError::new(&dir.display().to_string(), "no spec files (*.toml) found"));
        }
        Spec::from_files(files)
    }

    /// Reads spec files given as (path relative to `spec/`, text): resolves derived revisions against their
    /// bases, checks each revision and that the releases of a family do not overlap.
    pub fn from_files(files: impl IntoIterator<Item = (String, String)>) -> Result<Spec, SpecError> {
        let (mut raw, mut implementation_files) = (vec![], vec![]);
        for (p, t) in files {
            match tree::parse_file(&p, &t)? {
                tree::SpecFile::Revision(r) => raw.push(r),
                tree::SpecFile::Data { format, file } if format == implementation::FORMAT => {
                    implementation_files.push(file)
                }
                tree::SpecFile::Data { .. } => {}
            }
        }
        let resolved = tree::resolve_all(&raw)?;
        let mut families: Vec<Family> = Vec::new();
        for ((family, _), r) in resolved {
            let mut rev: Revision = toml::Value::Table(r.table)
                .try_into()
                .map_err(|e: toml::de::Error| SpecError::new(&r.path, format!("resolved revision: {e}")))?;
            rev.path = r.path.clone();
            rev.edits = r
                .edits
                .into_iter()
                .map(|e| toml::Value::Table(e).try_into())
                .collect::<Result<_, toml::de::Error>>()
                .map_err(|e| SpecError::new(&r.path, format!("edit: {e}")))?;
            check_revision(&rev).map_err(|e| SpecError::new(&r.path, e.to_string()))?;
            match families.iter_mut().find(|f| f.name == family) {
                Some(f) => f.revisions.push(Arc::new(rev)),
                None => families.push(Family { name: family, revisions: vec![Arc::new(rev)] }),
            }
        }
        for f in &mut families {
            // Released revisions by release; unreleased ones (read at a commit) after them, by name.
            f.revisions.sort_by_key(|r| (r.unreleased(), version_key(r.first_release()), r.revision.clone()));
            for pair in f.revisions.windows(2) {
                let (a, b) = (&pair[0], &pair[1]);
                if a.unreleased() || b.unreleased() {
                    continue;
                }
                let last_a = a.releases.last().map(|s| version_key(s)).unwrap_or_default();
                if last_a >= version_key(b.first_release()) {
                    return Err(SpecError::new(&b.path, format!("releases overlap with {}", a.revision)));
                }
            }
        }
        let implementations = implementations(implementation_files, &families)?;
        Ok(Spec { families, implementations })
    }

    /// An implementation by name (`mooncake`).
    pub fn implementation(&self, name: &str) -> Option<&Arc<Implementation>> {
        self.implementations.iter().find(|i| i.name == name)
    }

    /// A family by name.
    pub fn family(&self, name: &str) -> Option<&Family> {
        self.families.iter().find(|f| f.name == name)
    }

    /// The push family (vLLM's MooncakeConnector).
    pub fn push(&self) -> &Family {
        self.family("push").expect("the spec has a push family")
    }

    /// The pull family (vllm-ascend's pull connectors; vLLM's own pull connector joins it once released —
    /// see `spec/README.md`, "The pull family").
    pub fn pull(&self) -> &Family {
        self.family("pull").expect("the spec has a pull family")
    }

    /// A revision by name, searching every family.
    pub fn revision(&self, name: &str) -> Option<&Arc<Revision>> {
        self.families.iter().find_map(|f| f.revision(name))
    }
}

/// The implementation files, checked against `families`, names unique.
fn implementations(files: Vec<tree::RawFile>, families: &[Family]) -> Result<Vec<Arc<Implementation>>, SpecError> {
    let mut out: Vec<Arc<Implementation>> = vec![];
    for f in files {
        let imp = Implementation::parse(&f.path, f.table, families)?;
        if out.iter().any(|o| o.name == imp.name) {
            return Err(SpecError::new(&f.path, format!("implementation `{}` is defined twice", imp.name)));
        }
        out.push(Arc::new(imp));
    }
    Ok(out)
}

fn collect(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<Vec<_>, _>>()?;
    entries.sort_by_key(|e| e.path());
    for e in entries {
        let p = e.path();
        if p.is_dir() {
            collect(&p, root, out)?;
        } else if p.extension().and_then(|x| x.to_str()) == Some("toml") {
            let rel = p.strip_prefix(root).unwrap_or(&p).to_string_lossy().replace('\\', "/");
            out.push((rel, std::fs::read_to_string(&p)?));
        }
    }
    Ok(())
}

/// Semantic checks the file format cannot express.
fn check_revision(rev: &Revision) -> Result<(), RevisionError> {
    // The name states the project and the release range (or, unreleased, the commit).
    let project = match rev.family.as_str() {
        "push" => "vllm".to_string(),
        _ => rev
            .revision
            .split('-')
            .next()
            .map(|p| if rev.revision.starts_with("vllm-ascend-") { "vllm-ascend".to_string() } else { p.to_string() })
            .unwrap_or_default(),
    };
    let want = match (rev.releases.first(), rev.releases.last(), &rev.commit) {
        (Some(_), _, Some(_)) => return Err(RevisionError::ReleasedWithCommit),
        (Some(a), Some(b), None) if a == b => format!("{project}-{a}"),
        (Some(a), Some(b), None) => format!("{project}-{a}..{b}"),
        (None, _, Some(c)) => {
            let sha = c.rsplit('@').next().unwrap_or_default();
            if sha.len() < 9 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(RevisionError::BadCommit(c.clone()));
            }
            // Named `<project>-<label>@<first 9 hex digits>`: `main` for a branch read at a commit, `extracted`
            // for a revision `mooncake-conformance extract` derived from source.
            let label = rev
                .revision
                .strip_prefix(&format!("{project}-"))
                .and_then(|r| r.split_once('@'))
                .map(|(l, _)| l)
                .filter(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b)))
                .unwrap_or("main");
            format!("{project}-{label}@{}", &sha[..9])
        }
        _ => return Err(RevisionError::NoReleases),
    };
    if ["push", "pull"].contains(&rev.family.as_str()) && rev.revision != want {
        return Err(RevisionError::Misnamed { name: rev.revision.clone(), want });
    }
    let mut known: HashSet<&str> = HashSet::new();
    for n in rev.aliases.keys().chain(rev.enums.keys()).chain(rev.structs.keys()) {
        if !known.insert(n) {
            return Err(RevisionError::DefinedTwice(n.to_string()));
        }
    }
    let check_type = |t: &TypeExpr, known: &HashSet<&str>, what: &str| -> Result<(), RevisionError> {
        let mut names = vec![];
        t.names(&mut names);
        for n in names {
            if !known.contains(n.as_str()) {
                return Err(RevisionError::UnknownTypeName { what: what.to_string(), name: n });
            }
        }
        Ok(())
    };
    for (n, a) in &rev.aliases {
        check_type(&a.ty, &known, &format!("alias {n}"))?;
    }
    for (n, e) in &rev.enums {
        let mut names = HashSet::new();
        let mut values = HashSet::new();
        for m in &e.members {
            if !names.insert(&m.name) || !values.insert(m.value) {
                return Err(RevisionError::DuplicateMember { name: n.clone(), member: m.name.clone(), value: m.value });
            }
        }
    }
    for (n, s) in &rev.structs {
        check_struct(n, s, &known, &check_type)?;
        if s.kind == StructKind::Pydantic || s.kind == StructKind::Json {
            return Err(RevisionError::JsonModelInStructs(n.clone()));
        }
    }
    for m in &rev.transport.messages {
        match m.encoding.as_str() {
            "msgpack" if rev.structs.contains_key(&m.name) => {}
            "msgpack" => return Err(RevisionError::NoStructForMessage(m.name.clone())),
            "raw" if !m.constants.is_empty() => {}
            "raw" => return Err(RevisionError::RawWithoutConstants(m.name.clone())),
            e => return Err(RevisionError::UnknownEncoding { message: m.name.clone(), encoding: e.to_string() }),
        }
        for role in [&m.from, &m.to] {
            if !rev.transport.sockets.contains_key(role) {
                return Err(RevisionError::NoSocket { message: m.name.clone(), role: role.clone() });
            }
        }
    }
    let missing = rev.behaviour.missing(&rev.family, rev.generation);
    if !missing.is_empty() {
        return Err(RevisionError::BehaviourMissing { missing, generation: rev.generation });
    }
    let b = &rev.behaviour;
    for (item, is_true) in [
        (BehaviourKey::LayoutCaching, b.layout_caching.as_ref().is_some_and(|i| i.value.is_true())),
        (BehaviourKey::KvLeases, b.kv_leases.as_ref().is_some_and(|i| i.value.is_true())),
        (BehaviourKey::ExpiredPull, b.expired_pull.as_ref().is_some_and(|i| i.value.is_true())),
        (BehaviourKey::LeaseRenewal, b.lease_renewal.as_ref().is_some_and(|i| i.value.is_true())),
    ] {
        if is_true {
            return Err(RevisionError::FeatureTrue(item));
        }
    }
    let is_member = |s: &str| rev.enums.values().any(|e| e.members.iter().any(|m| m.name == s));
    if let Some(l) = b.kv_leases() {
        for s in [&l.renewed_status, &l.off_status] {
            if !is_member(s) {
                return Err(RevisionError::StatusNotMember { item: BehaviourKey::KvLeases, status: s.clone() });
            }
        }
    }
    let proper = |f: &[u32; 2]| f[1] != 0 && f[0] != 0 && f[0] <= f[1];
    if b.kv_leases().is_some_and(|l| !proper(&l.renew_to)) {
        return Err(RevisionError::BadFraction(BehaviourKey::KvLeases));
    }
    if b.lease_renewal().is_some_and(|l| !proper(&l.interval) || !proper(&l.reply_timeout)) {
        return Err(RevisionError::BadFraction(BehaviourKey::LeaseRenewal));
    }
    if let Some(lc) = rev.behaviour.layout_caching() {
        if !rev.enums.values().any(|e| e.members.iter().any(|m| m.name == lc.miss_status)) {
            return Err(RevisionError::MissStatusNotMember(lc.miss_status.clone()));
        }
    }
    if let Some(rp) = &rev.replies {
        if !rev.structs.get(&rp.message).is_some_and(|st| st.fields.iter().any(|f| f.name == rp.field)) {
            return Err(RevisionError::RepliesField { message: rp.message.clone(), field: rp.field.clone() });
        }
        let mut names = HashSet::new();
        for t in &rp.texts {
            let bad = |problem: String| RevisionError::ReplyText { name: t.name.clone(), problem };
            if !names.insert(t.name.as_str()) {
                return Err(bad("the name is used twice".into()));
            }
            if t.status.is_empty() {
                return Err(bad("no status".into()));
            }
            if let Some(st) = t.status.iter().find(|st| !is_member(st)) {
                return Err(bad(format!("status `{st}` is not an enum member")));
            }
        }
    }
    for (key, k) in &rev.extra_config {
        Literal::parse(&k.default).map_err(|source| RevisionError::ConfigDefault { key: key.clone(), source })?;
    }
    for (item, key) in [
        (BehaviourKey::KvLeases, b.kv_leases().map(|l| &l.config_key)),
        (BehaviourKey::LeaseRenewal, b.lease_renewal().map(|l| &l.config_key)),
    ] {
        if let Some(key) = key.filter(|k| !rev.extra_config.contains_key(*k)) {
            return Err(RevisionError::UnknownConfigKey { item, key: key.clone() });
        }
    }
    // A text a behaviour item says the prefiller answers must be one of the revision's reply texts.
    if let Some(rp) = &rev.replies {
        for (item, text) in [
            (BehaviourKey::LayoutCaching, b.layout_caching().map(|l| &l.miss_message)),
            (BehaviourKey::KvLeases, b.kv_leases().map(|l| &l.off_message)),
            (BehaviourKey::ExpiredPull, b.expired_pull().map(|l| &l.message)),
        ] {
            if let Some(text) = text.filter(|t| !rp.texts.iter().any(|x| x.shape() == text_shape(t))) {
                return Err(RevisionError::TextNotAReply { item, text: text.clone() });
            }
        }
    }
    // Field names a behaviour item names must be fields of the request this revision's decoder sends.
    let request_fields: Vec<&str> = rev
        .transport
        .messages
        .iter()
        .filter(|m| m.answered_by.is_some())
        .filter_map(|m| rev.structs.get(&m.name))
        .flat_map(|s| s.fields.iter().map(|f| f.name.as_str()))
        .collect();
    let named: Vec<(BehaviourKey, &[String])> = [
        (BehaviourKey::EqualLengthFields, rev.behaviour.equal_length_fields.as_ref().map(|i| &i.value.fields[..])),
        (BehaviourKey::MinusOneSentinels, rev.behaviour.minus_one_sentinels.as_ref().map(|i| &i.value[..])),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.map(|v| (k, v)))
    .collect();
    for (item, fields) in named {
        if let Some(f) = fields.iter().find(|f| !request_fields.contains(&f.as_str())) {
            return Err(RevisionError::NotARequestField { item, field: f.clone() });
        }
    }
    if let Some(b) = &rev.bootstrap {
        let mut bknown: HashSet<&str> = rev.aliases.keys().map(String::as_str).collect();
        bknown.extend(b.models.keys().map(String::as_str));
        for (n, s) in &b.models {
            check_struct(n, s, &bknown, &check_type)?;
        }
        for r in &b.routes {
            if let Some(req) = &r.request {
                if !b.models.contains_key(req) {
                    return Err(RevisionError::UnknownRequestModel {
                        method: r.method.clone(),
                        path: r.path.clone(),
                        model: req.clone(),
                    });
                }
            }
            for resp in &r.responses {
                if let Some(body) = &resp.body {
                    let t = TypeExpr::parse(body).map_err(|source| RevisionError::RouteBody {
                        method: r.method.clone(),
                        path: r.path.clone(),
                        source,
                    })?;
                    check_type(&t, &bknown, &format!("route {} {}", r.method, r.path))?;
                }
            }
        }
    }
    if let Some(kv) = &rev.kv_transfer_params {
        for k in &kv.keys {
            check_type(&k.ty, &known, &format!("kv_transfer_params.{}", k.name))?;
        }
    }
    Ok(())
}

fn check_struct(
    n: &str,
    s: &StructDef,
    known: &HashSet<&str>,
    check_type: &dyn Fn(&TypeExpr, &HashSet<&str>, &str) -> Result<(), RevisionError>,
) -> Result<(), RevisionError> {
    let mut names = HashSet::new();
    let mut seen_default = false;
    for f in &s.fields {
        if !names.insert(&f.name) {
            return Err(RevisionError::FieldTwice { strukt: n.to_string(), field: f.name.clone() });
        }
        check_type(&f.ty, known, &format!("{n}.{}", f.name))?;
        let d = f.default_literal().map_err(|source| RevisionError::FieldDefault {
            strukt: n.to_string(),
            field: f.name.clone(),
            source,
        })?;
        if d.is_some() {
            seen_default = true;
        } else if seen_default && s.kind == StructKind::MsgspecStruct && !s.options.array_like {
            // msgspec requires required fields first unless kw_only; vLLM never uses kw_only.
            return Err(RevisionError::RequiredAfterDefault { strukt: n.to_string(), field: f.name.clone() });
        }
    }
    if s.options.tag_field.is_some() && s.options.tag.is_none() {
        return Err(RevisionError::TagFieldWithoutTag(n.to_string()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_spec_resolves() {
        let spec = Spec::builtin();
        let push = spec.push();
        let names: Vec<_> = push.revisions.iter().map(|r| r.revision.as_str()).collect();
        assert_eq!(names.first(), Some(&"vllm-0.13.0..0.15.1"));
        assert_eq!(names.last(), Some(&"vllm-0.34.0"));
        let r33 = push.revision("vllm-0.33.0").unwrap();
        assert_eq!(r33.structs["MooncakeXferMetadata"].fields.len(), 15);
        let r34 = push.revision("vllm-0.34.0").unwrap();
        assert_eq!(r34.structs["MooncakeLeaseHeartbeat"].fields[0].name, "lease_transfer_ids");
        assert_eq!(r34.structs["MooncakeLeaseHeartbeat"].since, "vllm-0.34.0");
        assert!(r34.behaviour.kv_leases().is_some() && r33.behaviour.kv_leases().is_none());
        assert_eq!(push.for_release("0.27.1").unwrap().revision, "vllm-0.26.0..0.28.0");
    }

    #[test]
    fn derived_file_cannot_redefine_sections() {
        let base = Spec::builtin_files().iter().find(|(p, _)| p.ends_with("vllm-0.16.0..0.18.1.toml")).unwrap();
        let bad = r#"format = "mooncake-wire-spec/2"
family = "push"
revision = "vllm-0.19.0"
base = "vllm-0.16.0..0.18.1"
generation = 2
releases = ["0.19.0"]
source = "x"
summary = "x"
[structs.X]
kind = "msgspec.Struct"
fields = []
"#;
        let err =
            Spec::from_files([(base.0.to_string(), base.1.to_string()), ("bad.toml".into(), bad.into())]).unwrap_err();
        assert!(err.msg.contains("change `structs` with an [[edit]]"), "{err}");
    }

    #[test]
    fn edit_errors_name_the_edit() {
        let base = Spec::builtin_files().iter().find(|(p, _)| p.ends_with("vllm-0.16.0..0.18.1.toml")).unwrap();
        let bad = r#"format = "mooncake-wire-spec/2"
family = "push"
revision = "vllm-0.19.0"
base = "vllm-0.16.0..0.18.1"
generation = 2
releases = ["0.19.0"]
source = "x"
summary = "x"
[[edit]]
op = "insert"
at = "structs.MooncakeXferMetadata.fields"
after = "no_such_field"
item = { name = "x", type = "int" }
"#;
        let err =
            Spec::from_files([(base.0.to_string(), base.1.to_string()), ("bad.toml".into(), bad.into())]).unwrap_err();
        assert_eq!(err.path, "bad.toml");
        assert!(err.msg.contains("edit #1") && err.msg.contains("no_such_field"), "{err}");
    }

    #[test]
    fn an_older_spec_format_is_refused_by_name_not_skipped() {
        // Version 1 files (untyped behaviour values) must not be taken for "another mooncake-* data format".
        let (path, text) = Spec::builtin_files().iter().find(|(p, _)| p.ends_with("vllm-0.33.0.toml")).unwrap();
        let old = text.replace(tree::FORMAT, "mooncake-wire-spec/1");
        assert_ne!(old.as_str(), *text);
        let err = Spec::from_files([(path.to_string(), old)]).unwrap_err();
        assert!(err.msg.contains("mooncake-wire-spec/1") && err.msg.contains(tree::FORMAT), "{err}");
    }
}
