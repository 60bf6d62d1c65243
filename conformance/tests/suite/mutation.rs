//! The mutation suite (`conformance/CHECKS.md` § Mutation suite): the reference peer started with one deliberate
//! fault at a time must fail the case the table names with a finding of the check it names; the table and the
//! peer's own list of faults (`mooncake-peer faults --json`) must agree.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use mooncake_conformance::play::Role;
use mooncake_conformance::run::{run, RunConfig};
use mooncake_conformance::testee::{builtin_peer, TesteeSpec};

fn here() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One row of the table.
#[derive(Clone, Debug)]
struct Row {
    fault: String,
    role: String,
    case: String,
    check: String,
    /// What the finding's text must contain (empty: anything).
    says: String,
}

/// The rows of CHECKS.md's mutation table.
fn table() -> Vec<Row> {
    let text = std::fs::read_to_string(here().join("CHECKS.md")).unwrap();
    let section = text.split("\n## Mutation suite\n").nth(1).expect("CHECKS.md has a `## Mutation suite`");
    let section = section.split("\n## ").next().unwrap();
    let cell = |c: &str| c.trim().trim_matches('`').to_string();
    let rows: Vec<Row> = section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let c: Vec<&str> = l.trim_matches('|').split('|').collect();
            assert_eq!(c.len(), 5, "a row of five cells: {l}");
            let says = c[4].trim().to_string();
            Row { fault: cell(c[0]), role: cell(c[1]), case: cell(c[2]), check: cell(c[3]), says }
        })
        .collect();
    assert!(rows.len() >= 30, "the table has {} rows", rows.len());
    rows
}

/// (fault, role) for every fault the built-in peer has, from `mooncake-peer faults --json`.
fn peer_faults() -> BTreeSet<(String, String)> {
    let out = std::process::Command::new(builtin_peer().unwrap()).args(["faults", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut all = BTreeSet::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        for role in v["roles"].as_array().unwrap() {
            all.insert((v["name"].as_str().unwrap().to_string(), role.as_str().unwrap().to_string()));
        }
    }
    all
}

#[test]
fn the_table_and_the_peer_name_the_same_faults() {
    let rows: BTreeSet<(String, String)> = table().into_iter().map(|r| (r.fault, r.role)).collect();
    let peer = peer_faults();
    let untested: Vec<_> = peer.difference(&rows).collect();
    let unknown: Vec<_> = rows.difference(&peer).collect();
    assert!(untested.is_empty(), "faults of the peer no row of CHECKS.md's mutation table tries: {untested:?}");
    assert!(unknown.is_empty(), "rows of CHECKS.md's mutation table the peer has no such fault for: {unknown:?}");
}

/// Runs the row's case with its fault; the findings (check, text), or why the run is no catch.
async fn try_row(row: &Row) -> Result<Vec<(String, String)>, String> {
    let sets = [here().join("traces"), here().join("traces-pull")];
    let mut c =
        RunConfig::paths(&sets, TesteeSpec::BuiltinWithFaults(vec![row.fault.clone()])).map_err(|e| e.to_string())?;
    c.roles = vec![Role::parse(&row.role).ok_or_else(|| format!("no role {}", row.role))?];
    c.cases = vec![row.case.clone()];
    c.slack = Duration::from_secs(2);
    let r = run(c).await.map_err(|e| e.to_string())?;
    if r.results.is_empty() {
        return Err(format!("no case {}/{}", row.case, row.role));
    }
    if r.ok() {
        return Err("the case passed".into());
    }
    Ok(r.results.iter().flat_map(|x| &x.findings).map(|f| (f.check.as_str().to_string(), f.detail.clone())).collect())
}

/// Whether a finding is the catch the row asks for: its check, its text, and for a descriptor or handshake finding
/// what the real engine does.
fn catches(row: &Row, check: &str, text: &str) -> bool {
    let engine = matches!(check, "TE-DESCRIPTOR" | "TE-HANDSHAKE");
    check == row.check && text.contains(&row.says) && (!engine || text.contains("real engine"))
}

/// Every row of one role, side by side (the runs mostly wait on timers); each must be caught by its check.
fn suite(role_name: &str) {
    let rows: Vec<Row> = table().into_iter().filter(|r| r.role == role_name).collect();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let results = rt.block_on(async {
        // Four at a time: the runs mostly wait on timers, but each starts a peer process, and the test command
        // runs this beside the rest of the suite on 2 cores.
        let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(4));
        let tasks: Vec<_> = rows
            .iter()
            .cloned()
            .map(|row| {
                let slots = slots.clone();
                tokio::spawn(async move {
                    let _slot = slots.acquire_owned().await.expect("the semaphore is never closed");
                    (try_row(&row).await, row)
                })
            })
            .collect();
        let mut results = vec![];
        for t in tasks {
            results.push(t.await.expect("a run does not panic"));
        }
        results
    });
    let mut missed = vec![];
    for (r, row) in &results {
        match r {
            Ok(found) if found.iter().any(|(check, text)| catches(row, check, text)) => {
                let mut checks: Vec<&str> = found.iter().map(|(c, _)| c.as_str()).collect();
                checks.dedup();
                println!("mutation: {} fault {} in {}: caught by {checks:?}", row.role, row.fault, row.case)
            }
            Ok(found) => missed
                .push(format!("{}: expected {} saying {:?}, the run found {found:?}", row.fault, row.check, row.says)),
            Err(why) => missed.push(format!("{}: {why}", row.fault)),
        }
    }
    println!("MUTATION SUITE: {role_name} {}/{} faults caught", rows.len() - missed.len(), rows.len());
    assert!(missed.is_empty(), "{role_name} faults not caught by their check:\n{}", missed.join("\n"));
}

#[test]
fn every_prefiller_fault_is_caught() {
    suite("prefiller");
}

#[test]
fn every_decoder_fault_is_caught() {
    suite("decoder");
}

#[test]
fn every_bootstrap_fault_is_caught() {
    suite("bootstrap");
}
