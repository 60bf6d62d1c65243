//! The runner does not link the implementation it judges: no normal, dev or build dependency path leads from
//! `mooncake-conformance` to `mooncake-reference` (the reference peer). The peer is the built-in testee as a
//! process (`mooncake-peer testee`), driven through the testee protocol like any other; the runner plays its
//! own side of a case with the spec's cores and `mooncake-io`.
//!
//! Dev-dependencies count too: a test that linked the peer could drive it in-process again and judge it
//! through a side door the runner does not have; and a dev-dependency would not even give the tests the
//! `mooncake-peer` program (cargo builds a package's own binaries for its tests, not a dependency's).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::process::Command;

use serde_json::Value;

/// The workspace's resolved dependency graph (`cargo metadata`): package id → (name, [(dep id, kinds)]).
fn graph() -> BTreeMap<String, (String, Vec<(String, Vec<String>)>)> {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--locked", "--manifest-path", manifest])
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON");
    let names: BTreeMap<String, String> = v["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| (p["id"].as_str().unwrap().to_string(), p["name"].as_str().unwrap().to_string()))
        .collect();
    v["resolve"]["nodes"]
        .as_array()
        .expect("resolve.nodes")
        .iter()
        .map(|n| {
            let id = n["id"].as_str().unwrap().to_string();
            let deps = n["deps"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| {
                    let kinds = d["dep_kinds"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|k| k["kind"].as_str().unwrap_or("normal").to_string())
                        .collect();
                    (d["pkg"].as_str().unwrap().to_string(), kinds)
                })
                .collect();
            (id.clone(), (names[&id].clone(), deps))
        })
        .collect()
}

/// The dependency path from package `from` to package `to`, if any: the first step may be any kind of
/// dependency (normal, dev or build), later ones normal or build (a dependency's dev-dependencies are not
/// built).
fn path(g: &BTreeMap<String, (String, Vec<(String, Vec<String>)>)>, from: &str, to: &str) -> Option<Vec<String>> {
    let root = g.iter().find(|(_, (n, _))| n == from).map(|(id, _)| id.clone()).expect("the root package");
    let mut seen = BTreeSet::from([root.clone()]);
    let mut queue = VecDeque::from([vec![root]]);
    while let Some(p) = queue.pop_front() {
        let last = p.last().unwrap();
        let (name, deps) = &g[last];
        if name == to {
            return Some(p.iter().map(|id| g[id].0.clone()).collect());
        }
        for (dep, kinds) in deps {
            let followed = p.len() == 1 || kinds.iter().any(|k| k != "dev");
            if followed && seen.insert(dep.clone()) {
                let mut q = p.clone();
                q.push(dep.clone());
                queue.push_back(q);
            }
        }
    }
    None
}

#[test]
fn the_runner_does_not_depend_on_the_reference_peer() {
    let g = graph();
    if let Some(p) = path(&g, "mooncake-conformance", "mooncake-reference") {
        panic!("mooncake-conformance depends on the implementation it judges: {}", p.join(" → "));
    }
    // The check itself: the peer does reach the crates the runner shares with it.
    assert_eq!(
        path(&g, "mooncake-reference", "mooncake-io").map(|p| p.len()),
        Some(2),
        "the peer depends on mooncake-io directly"
    );
    assert!(path(&g, "mooncake-conformance", "mooncake-io").is_some());
}
