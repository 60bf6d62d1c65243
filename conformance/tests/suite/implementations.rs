//! Recordings of implementations other than vLLM's own connector (`spec/implementations/`), bundled under
//! `traces/<name>-<release>/`: what they are, and that every scenario of the generation they speak is there.
//! That their cases pass against the reference peer is `run::every_bundled_case_passes_against_the_reference_peer`.

use std::collections::BTreeSet;

use mooncake_wire::spec::{Implementation, Spec};
use serde_json::Value as J;

/// Every directory of `traces/` with the header of its first trace.
fn directories() -> Vec<(String, Vec<J>)> {
    let mut out = vec![];
    let entries = mooncake_trace::walk::entries(&crate::here().join("traces")).unwrap();
    for d in entries.into_iter().filter(|p| p.is_dir()) {
        let headers = crate::common::trace_files(&d)
            .iter()
            .map(|f| {
                let text = std::fs::read_to_string(f).unwrap();
                serde_json::from_str::<J>(text.lines().next().unwrap()).unwrap()
            })
            .collect();
        out.push((d.file_name().unwrap().to_string_lossy().into_owned(), headers));
    }
    out
}

/// A directory is named after what its traces recorded: `vllm-<vllm_version>` for vLLM's own connector,
/// `<implementation>-<implementation_version>` for another one, which the spec knows.
#[test]
fn trace_directories_are_named_after_what_they_recorded() {
    let spec = Spec::builtin();
    let mut seen = 0;
    for (dir, headers) in directories() {
        assert!(!headers.is_empty(), "{dir}: no traces");
        for h in &headers {
            let want = match h["implementation"].as_str() {
                Some(name) => {
                    let version = h["implementation_version"].as_str().unwrap_or_else(|| panic!("{dir}: no version"));
                    assert!(spec.implementation(name).is_some(), "{dir}: {name} is not in spec/implementations/");
                    seen += 1;
                    Implementation::label(name, version)
                }
                None => format!("vllm-{}", h["vllm_version"].as_str().unwrap()),
            };
            assert_eq!(dir, want, "{dir}: {}", h["scenario"]);
        }
    }
    assert!(seen > 0, "no recording of another implementation is bundled");
}

/// Each bundled implementation's recordings were made by the recorder from its own code, ran to completion, and
/// cover every scenario of the generation it speaks, as vLLM's own recordings of that revision do.
#[test]
fn every_implementation_is_recorded_in_every_scenario_of_its_generation() {
    let spec = Spec::builtin();
    let scenarios = mooncake_conformance::bundled::scenarios();
    for imp in &spec.implementations {
        let generation = spec.revision(&imp.speaks).unwrap().generation;
        let wanted: BTreeSet<&str> = scenarios
            .scenario
            .iter()
            .filter(|(_, s)| s.generations.is_empty() || s.generations.contains(&generation))
            .map(|(name, _)| name.as_str())
            .collect();
        let dirs: Vec<(String, Vec<J>)> =
            directories().into_iter().filter(|(d, _)| d.starts_with(&format!("{}-", imp.name))).collect();
        assert!(!dirs.is_empty(), "{}: no recordings bundled", imp.name);
        for (dir, headers) in dirs {
            let recorded: BTreeSet<&str> = headers.iter().map(|h| h["scenario"].as_str().unwrap()).collect();
            assert_eq!(recorded, wanted, "{dir}: the scenarios of generation {generation}");
            for h in &headers {
                let at = format!("{dir}/{}", h["scenario"]);
                assert_eq!(h["recorded_by"], "tools/record (mooncake-wire)", "{at}");
                assert!(h["error"].is_null(), "{at}: {}", h["error"]);
                assert_eq!(h["connector_generation"], generation, "{at}");
                let from = h["recorded_from"].as_str().unwrap_or_else(|| panic!("{at}: no recorded_from"));
                assert!(from.contains(&imp.package) && from.contains(&imp.module), "{at}: {from}");
            }
        }
    }
}

/// The expected failures of Mooncake's connector on its other attention backends (opt-in runs of
/// `scripts/mooncake-v1.sh run --attn-backend …`) name cases that exist: a renamed id would otherwise only show in
/// that heavy run.
#[test]
fn the_mooncake_drivers_expected_failures_name_bundled_cases() {
    let Some(dir) =
        crate::in_repository("tools/mooncake_v1", "implementations::expected failures of tools/mooncake_v1")
    else {
        return;
    };
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mooncake-conformance"))
        .args(["run", "--list", "--revision", "vllm-0.13.0..0.15.1", "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let listed: J = serde_json::from_slice(&out.stdout).unwrap();
    let ids: BTreeSet<&str> = listed.as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert!(ids.iter().any(|id| id.contains("@mooncake-")), "{ids:?}");
    let files = mooncake_trace::walk::files(&dir, 1, &|p| {
        p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("expected-failures-"))
    })
    .unwrap();
    assert!(files.len() >= 2, "{files:?}");
    for f in files {
        let xf = mooncake_conformance::expected::ExpectedFailures::load(&f).unwrap();
        assert!(!xf.cases.is_empty(), "{}", f.display());
        for c in &xf.cases {
            assert!(ids.contains(c.id.as_str()), "{}: {} is no case of the bundled traces", f.display(), c.id);
        }
    }
}
