//! Revision names as people type them, resolved against a spec: the one resolver every command uses (the
//! `mooncake-conformance` subcommands, `mooncake-peer --revision`). It is driven by the spec alone — each
//! revision's name, project and `releases` list — so renaming or splitting a revision, or adding one, needs
//! no change here.
//!
//! Accepted forms:
//! * a revision name: `vllm-0.25.0..0.29.0`, `vllm-ascend-0.23.0.post1`, `vllm-ascend-main@3e486e317`;
//! * a vLLM release, bare or with a `v`: `0.27.1`, `v0.27.1` — always vLLM's, never another project's;
//! * a release (or unreleased commit) qualified by its project: `vllm-0.19.1`, `vllm-ascend-0.18.0`, or with a
//!   colon: `vllm:0.19.1`, `vllm-ascend:0.18.0`, `ascend:0.18.0` (a project's name without `vllm-`), or by a
//!   family: `push:0.19.1`, `pull:0.18.0`.
//!
//! A name that resolves to nothing gets suggestions ("did you mean `0.33.0`?") from the same spec.

use std::fmt;
use std::sync::Arc;

use super::{version_key, Revision, Spec};

/// What a name resolved to.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The revision.
    pub revision: Arc<Revision>,
    /// The release the name picked (`0.18.1` of `vllm-0.16.0..0.18.1`); `None` when it named the revision.
    pub release: Option<String>,
}

impl Resolved {
    /// `0.18.1 (vllm-0.16.0..0.18.1)` for a release, the revision name otherwise.
    pub fn describe(&self) -> String {
        match &self.release {
            Some(r) if *r != self.revision.revision => {
                format!("{} {r} ({})", project_label(self.revision.project()), self.revision.revision)
            }
            _ => self.revision.revision.clone(),
        }
    }
}

/// A name that resolves to no revision, or to several.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolveError {
    /// The name asked for.
    pub name: String,
    /// Why it does not resolve.
    pub message: String,
    /// Names that would resolve, nearest first (at most a few).
    pub suggestions: Vec<String>,
}

impl fmt::Display for ResolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        match self.suggestions.as_slice() {
            [] => Ok(()),
            [one] => write!(f, "; did you mean `{one}`?"),
            many => {
                let quoted: Vec<String> = many.iter().map(|s| format!("`{s}`")).collect();
                write!(f, "; did you mean {}?", quoted.join(" or "))
            }
        }
    }
}

impl std::error::Error for ResolveError {}

/// The project a bare release belongs to.
const DEFAULT_PROJECT: &str = "vllm";

/// How a project is named in messages: `vLLM` for vLLM, its own name otherwise.
fn project_label(p: &str) -> &str {
    if p == DEFAULT_PROJECT {
        "vLLM"
    } else {
        p
    }
}

/// `v0.18.0` → `0.18.0` (a `v` only when a digit follows).
fn strip_v(s: &str) -> &str {
    match s.strip_prefix('v') {
        Some(rest) if rest.starts_with(|c: char| c.is_ascii_digit()) => rest,
        _ => s,
    }
}

impl Spec {
    /// Every revision, of every family.
    fn all_revisions(&self) -> impl Iterator<Item = &Arc<Revision>> {
        self.families.iter().flat_map(|f| f.revisions.iter())
    }

    /// The projects whose revisions the spec holds, longest name first (so `vllm-ascend-` is tried before `vllm-`).
    fn projects(&self) -> Vec<String> {
        let mut ps: Vec<String> = vec![];
        for r in self.all_revisions() {
            let p = r.project().to_string();
            if !ps.contains(&p) {
                ps.push(p);
            }
        }
        ps.sort_by_key(|p| std::cmp::Reverse(p.len()));
        ps
    }

    /// Resolves a revision name, a vLLM release or a qualified release (see the module documentation).
    pub fn resolve(&self, name: &str) -> Result<Resolved, ResolveError> {
        let name = name.trim();
        if name.is_empty() {
            return Err(ResolveError {
                name: name.into(),
                message: "an empty revision name".into(),
                suggestions: vec![],
            });
        }
        if let Some(r) = self.revision(name) {
            return Ok(Resolved { revision: r.clone(), release: None });
        }
        // `qualifier:rest`: a project, a project without its `vllm-`, or a family.
        if let Some((q, rest)) = name.split_once(':') {
            let q = q.trim().to_ascii_lowercase();
            let rest = strip_v(rest.trim());
            if let Some(p) =
                self.projects().into_iter().find(|p| *p == q || p.strip_prefix("vllm-") == Some(q.as_str()))
            {
                return self.resolve_in(name, |r| r.project() == p, &p, rest);
            }
            if self.family(&q).is_some() {
                return self.resolve_in(name, |r| r.family == q, &q, rest);
            }
            let mut known: Vec<String> = self.projects();
            known.extend(self.projects().iter().filter_map(|p| p.strip_prefix("vllm-").map(String::from)));
            known.extend(self.families.iter().map(|f| f.name.clone()));
            let near = nearest(&q, known.iter().map(String::as_str));
            return Err(ResolveError {
                name: name.into(),
                message: format!("`{name}`: no project or family `{q}` (known: {})", known.join(", ")),
                suggestions: near.into_iter().map(|k| format!("{k}:{rest}")).collect(),
            });
        }
        // `project-rest` (`vllm-0.19.1`, `vllm-ascend-0.18.0`), longest project first.
        for p in self.projects() {
            if let Some(rest) = name.strip_prefix(&format!("{p}-")) {
                if rest.starts_with(|c: char| c.is_ascii_digit() || c == 'v')
                    || self.revision(&format!("{p}-{rest}")).is_some()
                {
                    return self.resolve_in(name, |r| r.project() == p, &p, strip_v(rest));
                }
            }
        }
        let bare = strip_v(name);
        if bare.starts_with(|c: char| c.is_ascii_digit()) {
            return self.resolve_in(name, |r| r.project() == DEFAULT_PROJECT, DEFAULT_PROJECT, bare);
        }
        // Another project's connector (`mooncake`, `mooncake-0.3.13.post1`) is no revision: say which it speaks.
        if let Some(imp) =
            self.implementations.iter().find(|i| name == i.name || name.starts_with(&format!("{}-", i.name)))
        {
            return Err(ResolveError {
                name: name.into(),
                message: format!(
                    "`{name}` names an implementation (spec/implementations/: {}), not a revision; it speaks `{}` (the cases of its recordings carry `@{}-<release>` in their ids)",
                    imp.title, imp.speaks, imp.name
                ),
                suggestions: vec![imp.speaks.clone()],
            });
        }
        Err(ResolveError {
            name: name.into(),
            message: format!("`{name}` is not a revision or release of the spec ({})", self.coverage()),
            suggestions: nearest(name, self.all_revisions().map(|r| r.revision.as_str()))
                .into_iter()
                .map(String::from)
                .collect(),
        })
    }

    /// A name that must pick one release (store keys, compatibility hashes are per release): a release in any
    /// form [`Spec::resolve`] takes, or the name of a revision that covers exactly one release.
    pub fn resolve_release(&self, name: &str) -> Result<(Arc<Revision>, String), ResolveError> {
        let r = self.resolve(name)?;
        match (r.release, r.revision.releases.as_slice()) {
            (Some(rel), _) => Ok((r.revision, rel)),
            (None, [one]) => {
                let one = one.clone();
                Ok((r.revision, one))
            }
            (None, many) => Err(ResolveError {
                name: name.into(),
                message: format!(
                    "`{name}` is a revision of {} releases; name one of them",
                    if many.is_empty() { "no".to_string() } else { many.len().to_string() }
                ),
                suggestions: many.iter().take(3).cloned().collect(),
            }),
        }
    }

    /// A version as a trace header of `family` states it: a release of a revision of that family, or the
    /// `<project>-<version>` name of an unreleased one (`main@3e486e317`).
    pub fn resolve_in_family(&self, family: &str, version: &str) -> Result<Resolved, ResolveError> {
        if self.family(family).is_none() {
            return Err(ResolveError {
                name: version.into(),
                message: format!("the spec has no `{family}` family"),
                suggestions: vec![],
            });
        }
        self.resolve_in(version, |r| r.family == family, family, strip_v(version.trim()))
    }

    /// `rest` (a release, or what follows `<project>-` in a revision name) among the revisions `keep` selects.
    fn resolve_in(
        &self,
        name: &str,
        keep: impl Fn(&Revision) -> bool,
        scope: &str,
        rest: &str,
    ) -> Result<Resolved, ResolveError> {
        let revs: Vec<&Arc<Revision>> = self.all_revisions().filter(|r| keep(r)).collect();
        let mut hits: Vec<Resolved> = vec![];
        for r in &revs {
            if r.covers_release(rest) {
                hits.push(Resolved { revision: (*r).clone(), release: Some(rest.to_string()) });
            } else if r.revision == rest || r.revision == format!("{}-{rest}", r.project()) {
                hits.push(Resolved { revision: (*r).clone(), release: None });
            }
        }
        match hits.len() {
            1 => return Ok(hits.remove(0)),
            n if n > 1 => {
                let names: Vec<String> = hits.iter().map(|h| h.revision.revision.clone()).collect();
                return Err(ResolveError {
                    name: name.into(),
                    message: format!("`{name}` is ambiguous: {}", names.join(", ")),
                    suggestions: hits.iter().map(|h| format!("{}:{rest}", h.revision.project())).collect(),
                });
            }
            _ => {}
        }
        // Nothing: suggest releases and names of the same scope, spelled as the user would type them.
        let spell = |r: &Revision, release: &str| -> String {
            if r.project() == DEFAULT_PROJECT {
                release.to_string()
            } else {
                format!("{}-{release}", r.project())
            }
        };
        let mut candidates: Vec<(String, String)> = vec![];
        for r in &revs {
            for rel in &r.releases {
                candidates.push((rel.clone(), spell(r, rel)));
            }
            let tail = r.revision.strip_prefix(&format!("{}-", r.project())).unwrap_or(&r.revision);
            candidates.push((tail.to_string(), r.revision.clone()));
        }
        let keys: Vec<&str> = candidates.iter().map(|(k, _)| k.as_str()).collect();
        // A well-formed release that no revision covers (`0.99.0`) gets no look-alike suggestions.
        let well_formed = rest.split('.').count() >= 3 && rest.split('.').take(3).all(|p| p.parse::<u64>().is_ok());
        let mut suggestions: Vec<String> = vec![];
        for k in nearest(rest, keys.iter().copied()).into_iter().filter(|k| !well_formed || k.starts_with(rest)) {
            if let Some((_, s)) = candidates.iter().find(|(c, _)| c == k) {
                if !suggestions.contains(s) {
                    suggestions.push(s.clone());
                }
            }
        }
        let label = project_label(scope);
        let span = self.scope_span(&revs);
        let message = if well_formed && suggestions.is_empty() {
            format!("{label} {rest} is in no revision of the spec (it covers {label} {span})")
        } else {
            format!("`{name}` is not a revision or release of the spec ({label}: {span})")
        };
        Err(ResolveError { name: name.into(), message, suggestions })
    }

    /// `0.13.0 … 0.33.0` (and unreleased revisions by name) for the given revisions.
    fn scope_span(&self, revs: &[&Arc<Revision>]) -> String {
        let mut releases: Vec<&str> = revs.iter().flat_map(|r| r.releases.iter().map(String::as_str)).collect();
        releases.sort_by_key(|r| version_key(r));
        let mut parts = vec![];
        match releases.as_slice() {
            [] => {}
            [one] => parts.push(one.to_string()),
            [first, .., last] => parts.push(format!("{first} … {last}")),
        }
        parts.extend(revs.iter().filter(|r| r.unreleased()).map(|r| r.revision.clone()));
        parts.join(", ")
    }

    /// What the spec covers, per project: `vLLM 0.13.0 … 0.33.0; vllm-ascend 0.18.0 … 0.23.0.post1, …`.
    pub(crate) fn coverage(&self) -> String {
        self.projects()
            .iter()
            .rev()
            .map(|p| {
                let revs: Vec<&Arc<Revision>> = self.all_revisions().filter(|r| r.project() == p).collect();
                format!("{} {}", project_label(p), self.scope_span(&revs))
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Up to three candidates near `typed`: those it is a prefix of at a part boundary (`0.33` → `0.33.0`), else
/// those within a small edit distance; nearest first.
fn nearest<'a>(typed: &str, candidates: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let typed_l = typed.to_ascii_lowercase();
    let mut scored: Vec<(usize, &'a str)> = vec![];
    for c in candidates {
        let cl = c.to_ascii_lowercase();
        let score = if cl.starts_with(&typed_l) && cl[typed_l.len()..].starts_with(['.', '-', '@']) {
            0
        } else {
            let d = levenshtein(&typed_l, &cl);
            if d > (typed_l.len() / 4).clamp(1, 3) {
                continue;
            }
            d
        };
        if !scored.iter().any(|(_, x)| *x == c) {
            scored.push((score, c));
        }
    }
    scored.sort_by_key(|(s, c)| (*s, version_key(c)));
    scored.into_iter().take(3).map(|(_, c)| c).collect()
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            cur.push((prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> String {
        Spec::builtin().resolve(s).map(|r| r.revision.revision.clone()).unwrap_or_else(|e| format!("error: {e}"))
    }

    #[test]
    fn every_revision_name_and_release_resolves_to_its_revision() {
        let spec = Spec::builtin();
        for r in spec.all_revisions() {
            assert_eq!(name(&r.revision), r.revision);
            for rel in &r.releases {
                let p = r.project();
                assert_eq!(name(&format!("{p}-{rel}")), r.revision);
                assert_eq!(name(&format!("{p}:{rel}")), r.revision);
                assert_eq!(name(&format!("{p}:v{rel}")), r.revision);
                assert_eq!(name(&format!("{}:{rel}", r.family)), r.revision, "{rel} in {}", r.family);
                if p == DEFAULT_PROJECT {
                    assert_eq!(name(rel), r.revision);
                    assert_eq!(name(&format!("v{rel}")), r.revision);
                } else {
                    assert_eq!(name(&format!("{}:{rel}", p.trim_start_matches("vllm-"))), r.revision);
                }
            }
        }
    }

    #[test]
    fn an_implementation_is_no_revision_and_says_which_it_speaks() {
        for n in ["mooncake", "mooncake-0.3.13.post1"] {
            let e = Spec::builtin().resolve(n).unwrap_err();
            assert!(e.message.contains("names an implementation") && e.message.contains("vllm-0.13.0..0.15.1"), "{e}");
            assert_eq!(e.suggestions, ["vllm-0.13.0..0.15.1"]);
        }
    }

    #[test]
    fn a_bare_release_is_vllms() {
        let r = Spec::builtin().resolve("0.18.0").unwrap();
        assert_eq!(r.revision.project(), "vllm");
        assert_eq!(r.release.as_deref(), Some("0.18.0"));
        assert_eq!(Spec::builtin().resolve("ascend:0.18.0").unwrap().revision.project(), "vllm-ascend");
        assert_eq!(name("ascend:main@3e486e317"), "vllm-ascend-main@3e486e317");
    }

    #[test]
    fn near_misses_suggest() {
        let e = Spec::builtin().resolve("0.33").unwrap_err();
        assert_eq!(e.suggestions, ["0.33.0"], "{e}");
        assert!(e.to_string().ends_with("did you mean `0.33.0`?"), "{e}");
        assert_eq!(Spec::builtin().resolve("vllm-0.33").unwrap_err().suggestions, ["0.33.0"]);
        assert_eq!(Spec::builtin().resolve("v0.33").unwrap_err().suggestions, ["0.33.0"]);
        assert_eq!(Spec::builtin().resolve("0.33.O").unwrap_err().suggestions, ["0.33.0"]);
        let e = Spec::builtin().resolve("0.99.0").unwrap_err();
        assert!(e.message.contains("vLLM 0.99.0 is in no revision"), "{e}");
        let e = Spec::builtin().resolve("ascnd:0.18.0").unwrap_err();
        assert_eq!(e.suggestions, ["ascend:0.18.0"], "{e}");
        assert!(Spec::builtin().resolve("frobnicate").is_err());
    }

    #[test]
    fn a_release_is_picked_or_asked_for() {
        let s = Spec::builtin();
        assert_eq!(s.resolve_release("vllm-0.33.0").unwrap().1, "0.33.0");
        assert_eq!(s.resolve_release("v0.27.1").unwrap().1, "0.27.1");
        let e = s.resolve_release("vllm-0.26.0..0.28.0").unwrap_err();
        assert!(e.to_string().contains("name one of them"), "{e}");
    }

    #[test]
    fn trace_versions_resolve_within_their_family() {
        let s = Spec::builtin();
        assert_eq!(s.resolve_in_family("pull", "0.18.0").unwrap().revision.revision, "vllm-ascend-0.18.0");
        assert_eq!(
            s.resolve_in_family("pull", "main@3e486e317").unwrap().revision.revision,
            "vllm-ascend-main@3e486e317"
        );
        assert_eq!(s.resolve_in_family("push", "0.18.0").unwrap().revision.revision, "vllm-0.16.0..0.18.1");
        assert!(s.resolve_in_family("push", "0.99.0").is_err());
    }
}
