//! Differential test against real msgspec (the pinned version in the test venv): random valid, non-canonical
//! and mutated inputs for every message of the newest revision; Rust and msgspec must agree on the verdict,
//! the decoded value, the re-encoded bytes and the error text.

use mooncake_trace::oracle::{self, Answer, Oracle};
use mooncake_wire::codec::testgen::{mutate, noncanonical, random_value, Rng, Size};
use mooncake_wire::codec::Codec;
use mooncake_wire::spec::{Revision, Spec};
use mooncake_wire::typed;
use std::sync::Arc;

const PER_MESSAGE: usize = 12_000;

fn run_revision(revision: &str, per_message: usize, seed: u64) -> usize {
    let rev = Spec::builtin().revision(revision).unwrap().clone();
    let codec = Codec::builtin(revision).unwrap();
    run(rev, &codec, per_message, seed)
}

fn run(rev: Arc<Revision>, codec: &Codec, per_message: usize, seed: u64) -> usize {
    let revision = rev.revision.clone();
    let check_typed = revision == typed::REVISION;
    let mut oracle = Oracle::start(&rev).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(oracle.msgspec_version, "0.23.0", "the oracle must run the pinned msgspec");
    let mut rng = Rng::new(seed);
    let mut total = 0;
    for message in codec.messages().collect::<Vec<_>>() {
        let ty = codec.message_type(message).unwrap();
        let mut inputs = Vec::with_capacity(per_message);
        for i in 0..per_message {
            let v = random_value(codec.plan(), ty, &mut rng, Size(3));
            inputs.push(match i % 3 {
                0 => codec.encode(message, &v).unwrap(),
                1 => noncanonical(codec.plan(), ty, &v, &mut rng),
                _ => {
                    let base = if rng.chance(50) {
                        codec.encode(message, &v).unwrap()
                    } else {
                        noncanonical(codec.plan(), ty, &v, &mut rng)
                    };
                    mutate(&base, &mut rng)
                }
            });
        }
        let mut disagreements = vec![];
        let (mut accepted, mut rejected) = (0, 0);
        for chunk in inputs.chunks(2000) {
            let batch: Vec<(&str, Vec<u8>)> = chunk.iter().map(|b| (message, b.clone())).collect();
            let answers = oracle.ask(&batch).unwrap();
            for (input, answer) in chunk.iter().zip(answers) {
                match answer {
                    Answer::Accept { .. } => accepted += 1,
                    Answer::Reject { .. } => rejected += 1,
                }
                let problem = oracle::disagreement(codec, message, input, &answer, check_typed);
                if let Some(p) = problem {
                    disagreements.push(format!("{message} {}: {p}", hex::encode(input)));
                }
            }
        }
        println!(
            "{revision} {message}: {} cases ({accepted} accepted, {rejected} rejected by both), {} disagreements",
            inputs.len(),
            disagreements.len()
        );
        assert!(
            disagreements.is_empty(),
            "{} disagreements with msgspec, first:\n{}",
            disagreements.len(),
            disagreements[..disagreements.len().min(10)].join("\n")
        );
        assert!(accepted > per_message / 2 && rejected > per_message / 10, "the inputs must exercise both verdicts");
        total += inputs.len();
    }
    total
}

#[test]
fn newest_revision_agrees_with_msgspec() {
    if !crate::python_env("differential_msgspec::newest_revision_agrees_with_msgspec") {
        return;
    }
    let newest = Spec::builtin().push().newest().unwrap().revision.clone();
    let n = run_revision(&newest, PER_MESSAGE, 20261129);
    println!("differential: {n} cases against msgspec, all agree");
}

#[test]
fn every_older_revision_agrees_with_msgspec() {
    if !crate::python_env("differential_msgspec::every_older_revision_agrees_with_msgspec") {
        return;
    }
    let mut n = 0;
    for rev in Spec::builtin().push().revisions.iter().rev().skip(1) {
        n += run_revision(&rev.revision, 1500, 7);
    }
    println!("differential: {n} cases against msgspec over the older revisions, all agree");
}

#[test]
fn every_struct_option_agrees_with_msgspec() {
    if !crate::python_env("differential_msgspec::every_struct_option_agrees_with_msgspec") {
        return;
    }
    let text = include_str!("../data/struct-options.toml");
    let spec = Spec::from_files([("struct-options.toml".to_string(), text.to_string())]).unwrap();
    let rev = spec.revision("struct-options").unwrap().clone();
    let codec = Codec::new(rev.clone()).unwrap();
    let n = run(rev, &codec, 2000, 99);
    println!("differential: {n} cases over synthetic structs with every struct option, all agree");
}

/// Our generated JSON Schemas, without the annotations we add, equal `msgspec.json.schema` of the same classes.
#[test]
fn generated_schemas_equal_msgspecs() {
    if !crate::python_env("differential_msgspec::generated_schemas_equal_msgspecs") {
        return;
    }
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                m.retain(|k, _| k != "description" && k != "$schema" && k != "$comment" && !k.starts_with("x-"));
                m.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let text = include_str!("../data/struct-options.toml");
    let synthetic = Spec::from_files([("struct-options.toml".to_string(), text.to_string())]).unwrap();
    let mut revs: Vec<Arc<Revision>> = Spec::builtin().push().revisions.clone();
    revs.push(synthetic.revision("struct-options").unwrap().clone());
    let mut n = 0;
    for rev in revs {
        let codec = Codec::new(rev.clone()).unwrap();
        let mut oracle = Oracle::start(&rev).unwrap();
        for m in codec.messages().collect::<Vec<_>>() {
            let mut ours = mooncake_wire::schema::message_schema(&codec, m).unwrap();
            strip(&mut ours);
            let theirs = oracle.schema(m).unwrap();
            assert_eq!(ours, theirs, "{} {m}", rev.revision);
            n += 1;
        }
    }
    println!("{n} generated schemas equal msgspec.json.schema");
}
