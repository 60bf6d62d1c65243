//! `run --list`: the cases a run would play, under every filter the run takes (`--case`, `--role`,
//! `--revision`, and the testee's hello narrowed by `--speaks`), each with what the run would do with it —
//! play it at the trace's revision, play it cross-version, or skip it and why — decided as the run decides.

use std::io::{self, Write};

use serde_json::json;

use crate::play::Case;
use crate::run::{takes_role, RunConfig, RunError};
use crate::testee::Hello;

/// What a run would do with a case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Would {
    /// Play it with the testee at the trace's revision.
    Run,
    /// Play it with the testee at this other revision (a cross-version case).
    Cross(String),
    /// Skip it, for this reason (the reason the run's report would give).
    Skip(String),
}

/// One listed case.
pub struct Listed {
    /// The case.
    pub case: Case,
    /// What the run would do with it.
    pub would: Would,
}

/// What a run against a testee with this hello would do with `case`: the role check of the runner, then the
/// cross-version rules (`crate::crossver::choose`), as [`crate::play::play`] applies them.
pub fn would(case: &Case, hello: &Hello) -> Would {
    if let Err(why) = takes_role(case, hello) {
        return Would::Skip(why);
    }
    match crate::crossver::choose(&case.model, case.role, &hello.revisions) {
        Ok(p) if p.is_cross() => Would::Cross(p.testee.revision.clone()),
        Ok(_) => Would::Run,
        Err(why) => Would::Skip(why.to_string()),
    }
}

/// The selected cases of `cfg`, each with what a run would do with it. Asks the testee for its hello (it is
/// started, and stopped at once; an implementation already running is taken at its word), as the run does.
pub async fn list(cfg: &RunConfig) -> Result<Vec<Listed>, RunError> {
    crate::run::preflight_syntax(&cfg.external)?;
    let cases = crate::run::select_cases(cfg)?;
    let hello = crate::run::testee_hello(&cfg.external, &cfg.testee, cfg.speaks.as_deref()).await?;
    Ok(cases.into_iter().map(|case| Listed { would: would(&case, &hello), case }).collect())
}

/// The skip reasons of a listing, each up to its first `;` (`the testee does not speak vllm-0.29.0`; each case's
/// line has the rest: which rule kept it from running cross-version), with how many cases each skips, most
/// first (then by reason).
pub fn skip_reasons(listed: &[Listed]) -> Vec<(usize, &str)> {
    let mut out: Vec<(usize, &str)> = vec![];
    for l in listed {
        let Would::Skip(why) = &l.would else { continue };
        let why = why.split(';').next().unwrap_or(why);
        match out.iter_mut().find(|(_, w)| *w == why) {
            Some((n, _)) => *n += 1,
            None => out.push((1, why)),
        }
    }
    out.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    out
}

/// Writes `run --list` as text: one case a line, its id, then what the run would do when it is not to play
/// it at the trace's revision; then how many would run and be skipped, with each skip reason and its count.
pub fn write_text(w: &mut impl Write, listed: &[Listed]) -> io::Result<()> {
    for l in listed {
        match &l.would {
            Would::Run => writeln!(w, "{}", l.case.id)?,
            Would::Cross(t) => writeln!(w, "{}  (cross-version: testee at {t})", l.case.id)?,
            Would::Skip(why) => writeln!(w, "{}  (skip: {why})", l.case.id)?,
        }
    }
    let skips = skip_reasons(listed);
    let skipped: usize = skips.iter().map(|(n, _)| n).sum();
    let cross = listed.iter().filter(|l| matches!(l.would, Would::Cross(_))).count();
    write!(w, "\n{} cases: {} would run", listed.len(), listed.len() - skipped)?;
    if cross > 0 {
        write!(w, " ({cross} of them cross-version)")?;
    }
    if skipped == 0 {
        return writeln!(w);
    }
    writeln!(w, ", {skipped} would be skipped (each case's line says why):")?;
    skips.iter().try_for_each(|(n, why)| writeln!(w, "  {n}: {why}"))
}

/// `run --list` as JSON: the cases with their role, revision and trace, and what the run would do
/// (`would`: `run`, `cross-version` with `testee_revision`, or `skip` with `reason`).
pub fn json(listed: &[Listed]) -> serde_json::Value {
    let one = |l: &Listed| {
        let c = &l.case;
        let mut v =
            json!({ "id": c.id, "role": c.role, "revision": c.model.revision.revision, "trace": c.model.trace.path });
        let (would, extra) = match &l.would {
            Would::Run => ("run", None),
            Would::Cross(t) => ("cross-version", Some(("testee_revision", t))),
            Would::Skip(why) => ("skip", Some(("reason", why))),
        };
        v["would"] = json!(would);
        if let Some((k, x)) = extra {
            v[k] = json!(x);
        }
        v
    };
    serde_json::Value::Array(listed.iter().map(one).collect())
}
