//! The wire fingerprint computed in Rust from the spec equals the one `tests/hash/wire_fingerprint.py`
//! computes with `msgspec.inspect` from live msgspec classes built from the same revision (the test venv
//! cannot install vLLM; the real vLLM classes were checked once against the wheels, see the report in
//! `spec/README.md`, "Wire fingerprint"). The pull family's revisions are compared with the classes of
//! `tests/pull/gen_pull_vectors.py` (written from the facts, independently of `spec/`).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use mooncake_trace::{jsonl, oracle::python};
use mooncake_wire::hash::fingerprint::{wire_document, wire_fingerprint};
use mooncake_wire::hash::tagged::to_tagged_json;
use mooncake_wire::spec::{Revision, Spec};
use serde_json::Value as J;

fn script() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/hash/wire_fingerprint.py")
}

fn python_fingerprints(revs: &[&Revision]) -> Vec<J> {
    let mut child = Command::new(python().unwrap_or_else(|e| panic!("{e}")))
        .arg(script())
        .arg("--spec")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start wire_fingerprint.py");
    {
        let mut stdin = child.stdin.take().unwrap();
        for r in revs {
            writeln!(stdin, "{}", serde_json::to_string(r).unwrap()).unwrap();
        }
    }
    let out: Vec<J> = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    assert!(child.wait().unwrap().success());
    out
}

#[test]
fn rust_and_msgspec_inspect_agree_on_every_revision() {
    if !crate::python_env("wire_fingerprint::rust_and_msgspec_inspect_agree_on_every_revision") {
        return;
    }
    let spec = Spec::builtin();
    let text = include_str!("../data/struct-options.toml");
    let synthetic = Spec::from_files([("struct-options.toml".to_string(), text.to_string())]).unwrap();
    let mut revs: Vec<&Revision> = spec.push().revisions.iter().map(|r| r.as_ref()).collect();
    revs.push(synthetic.revision("struct-options").unwrap());
    let answers = python_fingerprints(&revs);
    assert_eq!(answers.len(), revs.len());
    for (rev, a) in revs.iter().zip(&answers) {
        let ours = wire_fingerprint(rev).unwrap();
        let doc = to_tagged_json(&wire_document(rev).unwrap());
        assert!(
            jsonl::eq_ordered(&doc, &a["document"]) || ours == a["fingerprint"],
            "{}: documents differ at {}",
            rev.revision,
            jsonl::first_difference(&doc, &a["document"], "$").unwrap_or_default()
        );
        assert_eq!(ours, a["fingerprint"].as_str().unwrap(), "{}", rev.revision);
        println!("{:<22} {ours}", rev.revision);
    }
}

/// Every pull revision: the Rust fingerprint of the spec equals the one `msgspec.inspect` gives for the pull
/// vector generator's classes (msgspec Structs, dataclasses and the RemotePortInfo TypedDict; control tuples
/// are not in the fingerprint), and `spec/README.md` states it.
#[test]
fn pull_revisions_agree_with_the_vector_generators_classes() {
    if !crate::python_env("wire_fingerprint::pull_revisions_agree_with_the_vector_generators_classes") {
        return;
    }
    let out = Command::new(python().unwrap_or_else(|e| panic!("{e}")))
        .arg(script())
        .arg("--pull")
        .output()
        .expect("start wire_fingerprint.py");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let answers: Vec<J> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let spec = Spec::builtin();
    let revs = &spec.pull().revisions;
    let names = |v: Vec<&str>| v.into_iter().map(String::from).collect::<Vec<_>>();
    assert_eq!(
        names(answers.iter().map(|a| a["revision"].as_str().unwrap()).collect()),
        names(revs.iter().map(|r| r.revision.as_str()).collect()),
        "the generator and the spec describe the same pull revisions"
    );
    let readme =
        std::fs::read_to_string(std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../spec/README.md"))
            .unwrap();
    for (rev, a) in revs.iter().zip(&answers) {
        let ours = wire_fingerprint(rev).unwrap();
        let doc = to_tagged_json(&wire_document(rev).unwrap());
        assert!(
            jsonl::eq_ordered(&doc, &a["document"]),
            "{}: documents differ at {}",
            rev.revision,
            jsonl::first_difference(&doc, &a["document"], "$").unwrap_or_default()
        );
        assert_eq!(ours, a["fingerprint"].as_str().unwrap(), "{}", rev.revision);
        assert!(
            readme.contains(&format!("| {} (pull) | `{ours}` |", rev.revision)),
            "spec/README.md does not list {} = {ours}",
            rev.revision
        );
        println!("{:<28} {ours}", rev.revision);
    }
}
