//! `mooncake-conformance run`: every case of every given trace against a testee, with expected failures,
//! progress, and reports.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::play::{cases_of, play, CaseResult, PlayOptions, Role, Status};
use crate::scenarios::Scenarios;
use crate::testee::{Testee, TesteeSpec};
use crate::trace::Trace;
use crate::trace_model::TraceModel;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedFailure {
    /// Case id (`vllm-0.33.0/h1_layout_reuse_and_miss/prefiller`).
    pub id: String,
    /// Only findings of this check are expected; others still fail the case.
    #[serde(default)]
    pub check: Option<String>,
    pub reason: String,
}

#[derive(Clone, Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ExpectedFailures {
    #[serde(default, rename = "case")]
    pub cases: Vec<ExpectedFailure>,
}

impl ExpectedFailures {
    pub fn load(p: &Path) -> Result<ExpectedFailures, String> {
        let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
        toml::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))
    }
}

pub struct RunConfig {
    pub paths: Vec<PathBuf>,
    pub testee: TesteeSpec,
    pub roles: Vec<Role>,
    pub filter: Option<String>,
    pub scenarios: Scenarios,
    pub expected: ExpectedFailures,
    pub slack: Duration,
    /// Progress lines on standard error.
    pub progress: bool,
    /// An implementation that is already running (`replay --peer` / `--listen`), instead of a testee.
    pub external: crate::play::External,
    /// Take the testee to speak only these of the revisions it declares (`--speaks`): the others' traces
    /// run as cross-version cases or are skipped.
    pub speaks: Option<Vec<String>>,
}

pub struct RunReport {
    pub testee: String,
    pub results: Vec<CaseResult>,
    /// Expected-failure entries whose case passed or does not exist (they fail the run).
    pub stale: Vec<String>,
}

impl RunReport {
    pub fn ok(&self) -> bool {
        self.stale.is_empty() && self.results.iter().all(|r| r.status != Status::Fail)
    }
    pub fn count(&self, s: Status) -> usize {
        self.results.iter().filter(|r| r.status == s).count()
    }
}

pub fn load_cases(paths: &[PathBuf]) -> Result<Vec<crate::play::Case>, String> {
    let files = crate::jsonl::expand(paths)?;
    let mut out = vec![];
    for f in files {
        let trace = Trace::load(&f)?;
        let model = TraceModel::new(trace).map_err(|e| format!("{}: {e}", f.display()))?;
        out.extend(cases_of(Arc::new(model)));
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

pub async fn run(cfg: RunConfig) -> Result<RunReport, String> {
    let cases: Vec<_> = load_cases(&cfg.paths)?
        .into_iter()
        .filter(|c| cfg.roles.is_empty() || cfg.roles.contains(&c.role))
        .filter(|c| cfg.filter.as_ref().is_none_or(|f| c.id.contains(f.as_str())))
        .collect();
    // What the testee speaks (an external peer is taken at its word: any revision, the roles asked for).
    let hello = match &cfg.external {
        crate::play::External::None => {
            let (probe, hello) = Testee::start(&cfg.testee).await?;
            probe.stop().await;
            hello
        }
        e => crate::testee::Hello {
            name: format!("external peer {e:?}"),
            revisions: mooncake_wire::spec::Spec::builtin().push().revisions.iter().map(|r| r.revision.clone()).collect(),
            roles: vec!["prefiller".into(), "decoder".into(), "bootstrap".into()],
        },
    };
    let mut hello = hello;
    if let Some(only) = &cfg.speaks {
        hello.revisions.retain(|r| only.contains(r));
        if hello.revisions.is_empty() {
            return Err(format!("--speaks {}: the testee declares none of these revisions", only.join(",")));
        }
    }
    let mut opts = PlayOptions::new(cfg.testee.clone(), cfg.scenarios, cfg.slack);
    opts.external = cfg.external.clone();
    let mut results = vec![];
    let n = cases.len();
    for (i, case) in cases.iter().enumerate() {
        if cfg.progress {
            let done = i * 24 / n.max(1);
            let failed = results.iter().filter(|r: &&CaseResult| r.status == Status::Fail).count();
            eprint!("\r[{}{}] {:>3}/{n} {failed} failed  {:<56}", "#".repeat(done), "-".repeat(24 - done), i + 1, case.id);
            let _ = std::io::stderr().flush();
        }
        let mut r = if hello.roles.iter().any(|x| x == case.role.as_str()) {
            play(case, &opts, &hello.revisions).await
        } else {
            CaseResult {
                id: case.id.clone(),
                trace: case.model.trace.path.clone(),
                role: case.role,
                revision: case.model.revision.revision.clone(),
                testee_revision: None,
                status: Status::Skip,
                reason: Some(format!("the testee does not take the {} role", case.role.as_str())),
                findings: vec![],
                duration_ms: 0,
            }
        };
        let listed: Vec<&ExpectedFailure> = cfg.expected.cases.iter().filter(|e| e.id == r.id).collect();
        if r.status == Status::Fail && !listed.is_empty() {
            let covered = r.findings.iter().all(|f| listed.iter().any(|e| e.check.as_deref().is_none_or(|c| c == f.check)));
            if covered {
                r.status = Status::Xfail;
                r.reason = Some(listed.iter().map(|e| e.reason.as_str()).collect::<Vec<_>>().join("; "));
            }
        }
        results.push(r);
    }
    if cfg.progress {
        eprint!("\r{:<120}\r", "");
    }
    let stale = cfg
        .expected
        .cases
        .iter()
        .filter(|e| !results.iter().any(|r| r.id == e.id && r.status == Status::Xfail))
        .filter(|e| results.iter().any(|r| r.id == e.id) || cfg.filter.is_none())
        .map(|e| format!("{} ({}): listed as an expected failure, but {}", e.id, e.reason, match results.iter().find(|r| r.id == e.id) {
            Some(r) => format!("it is {:?}", r.status).to_lowercase(),
            None => "no such case ran".to_string(),
        }))
        .collect();
    Ok(RunReport { testee: hello.name, results, stale })
}
