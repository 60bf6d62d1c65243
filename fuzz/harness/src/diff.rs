//! Differential fuzzing against msgspec: a mutation loop over a corpus, with batches sent to the long-lived
//! msgspec oracle (`mooncake_trace::oracle`, `tests/oracle/msgspec_oracle.py`), failing on any
//! disagreement in verdict, decoded value, re-encoding or error text (`oracle::disagreement`).
//!
//! Why a mutation loop and not a cargo-fuzz target calling the oracle: libFuzzer runs one input at a time, so
//! the oracle would be asked one input per pipe round trip (two orders of magnitude slower than a batch of
//! 2,000), and cargo-fuzz needs nightly flags, which CI has not. Here, the inputs are mutations of a corpus
//! that starts from every msgspec vector of the revision, generated values, and — when present — the corpora
//! the coverage-guided cargo-fuzz runs left in `fuzz/corpus/decode_spec` and `fuzz/corpus/decode_typed`; and
//! the loop keeps libFuzzer's feedback idea without instrumentation: a mutant joins the corpus when it shows a
//! feature no earlier input showed (an outcome — verdict and error text with numbers blanked — or a shape: the
//! kinds, opcodes and nesting of its MessagePack values).
//!
//! Each revision (and the synthetic struct-options revision) gets its own oracle process and a share of the
//! cases; the newest revision the largest.

use std::collections::HashSet;
use std::path::PathBuf;

use mooncake_trace::oracle::{self, Answer, Oracle};
use mooncake_wire::codec::testgen::Rng;
use mooncake_wire::codec::DecodeErrorKind;
use mooncake_wire::typed;

use crate::catalog::{self, Entry};
use crate::mutate::{self, Span};
use crate::seeds;

/// Longest input the loop produces (bytes).
const MAX_LEN: usize = 4096;
const BATCH: usize = 2000;
const MAX_CORPUS: usize = 20_000;

/// What one lane (one message of one revision) ran and found.
#[derive(Debug, Default, Clone)]
pub struct LaneReport {
    /// The revision's name.
    pub revision: String,
    /// The message's name.
    pub message: String,
    /// Mutants sent to msgspec.
    pub cases: usize,
    /// Of those, the ones msgspec accepted.
    pub accepted: usize,
    /// Of those, the ones msgspec rejected.
    pub rejected: usize,
    /// Corpus inputs before the loop (vectors, generated values, cargo-fuzz corpora).
    pub corpus_start: usize,
    /// Corpus inputs after it (mutants that showed a new feature joined).
    pub corpus_end: usize,
    /// Distinct features seen.
    pub features: usize,
    /// Each disagreement with msgspec: revision, message, input in hex, and what differed.
    pub disagreements: Vec<String>,
}

/// What a differential run found, lane by lane.
#[derive(Debug, Default)]
pub struct Report {
    /// One per (revision, message), in spec order.
    pub lanes: Vec<LaneReport>,
    /// The msgspec version the oracle ran.
    pub msgspec_version: String,
}

impl Report {
    /// Cases run over every lane.
    pub fn cases(&self) -> usize {
        self.lanes.iter().map(|l| l.cases).sum()
    }
    /// Every lane's disagreements, in lane order.
    pub fn disagreements(&self) -> Vec<String> {
        self.lanes.iter().flat_map(|l| l.disagreements.iter().cloned()).collect()
    }
}

/// Corpus inputs for a lane found in cargo-fuzz corpus directories (`<dir>/decode_spec`, `<dir>/decode_typed`).
fn fuzz_corpus(dirs: &[PathBuf], entry: &Entry, message: &str) -> Vec<Vec<u8>> {
    let mut out = vec![];
    let sel = catalog::selector(&entry.revision.revision, message);
    for d in dirs {
        for f in std::fs::read_dir(d.join("decode_spec")).into_iter().flatten().flatten() {
            if let Ok(b) = std::fs::read(f.path()) {
                if let Some((&s, rest)) = b.split_first() {
                    let (e, m) = catalog::select(s);
                    if e.revision.revision == entry.revision.revision && m == message && rest.len() <= MAX_LEN {
                        out.push(rest.to_vec());
                    }
                }
            }
        }
        if entry.revision.revision == typed::REVISION && sel.is_some() {
            for f in std::fs::read_dir(d.join("decode_typed")).into_iter().flatten().flatten() {
                if let Ok(b) = std::fs::read(f.path()) {
                    if b.len() <= MAX_LEN {
                        out.push(b);
                    }
                }
            }
        }
    }
    out
}

/// The features of one input: its outcome, and the shape of its MessagePack values.
fn features(lane: u64, input: &[u8], outcome: &Result<(), String>) -> Vec<u64> {
    fn h(parts: &[u64]) -> u64 {
        let mut x: u64 = 0xcbf2_9ce4_8422_2325;
        for p in parts {
            x = (x ^ p).wrapping_mul(0x0100_0000_01b3).rotate_left(17);
        }
        x
    }
    let mut out = vec![];
    match outcome {
        Ok(()) => out.push(h(&[lane, 1])),
        Err(text) => {
            let blanked: String = text.chars().map(|c| if c.is_ascii_digit() { '#' } else { c }).collect();
            let text: Vec<u64> = blanked.bytes().map(u64::from).collect();
            out.push(h(&[&[lane, 2][..], &text].concat()));
        }
    }
    let sp: Vec<Span> = mutate::spans(input);
    let mut counts = std::collections::HashMap::<u64, u32>::new();
    for s in &sp {
        let op = input[s.start] as u64;
        // Fix-size opcodes by family, others by opcode.
        let class = match op {
            0x00..=0x7f => 0x00,
            0x80..=0x8f => 0x80,
            0x90..=0x9f => 0x90,
            0xa0..=0xbf => 0xa0,
            0xe0..=0xff => 0xe0,
            o => o,
        };
        *counts.entry(h(&[class, s.depth.min(8) as u64, s.complete as u64])).or_default() += 1;
    }
    for (k, n) in counts {
        // libFuzzer-style hit-count buckets.
        let bucket = match n {
            1 => 1,
            2 => 2,
            3 => 3,
            4..=7 => 4,
            8..=15 => 5,
            16..=31 => 6,
            32..=127 => 7,
            _ => 8,
        };
        out.push(h(&[lane, 3, k, bucket]));
    }
    out
}

/// Why a differential run stopped before its cases were done: the oracle failed (a disagreement does not stop
/// it; it goes into the [`Report`]).
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    /// The oracle could not be started or asked.
    #[error(transparent)]
    Oracle(#[from] oracle::OracleError),
    /// The oracle answered fewer (or more) inputs than the batch held.
    #[error("the oracle answered {answered} of {asked} inputs")]
    ShortAnswer {
        /// How many answers came back.
        answered: usize,
        /// How many inputs were sent.
        asked: usize,
    },
}

/// Runs about `cases` differential cases over every revision, with `seed` for the mutator and the
/// cargo-fuzz corpora under `corpus_dirs` added to the starting corpus. Stops early only on an oracle failure.
pub fn run(cases: usize, seed: u64, corpus_dirs: &[PathBuf]) -> Result<Report, DiffError> {
    let entries = catalog::entries();
    let dict = seeds::msgpack_dict();
    let mut report = Report::default();
    let newest = entries.iter().rposition(|e| e.revision.revision != "struct-options").expect("a built-in revision");
    for (ri, entry) in entries.iter().enumerate() {
        // The newest revision gets 40 %, the synthetic one 15 %, the older ones share the rest.
        let share = if ri == newest {
            0.40
        } else if entry.revision.revision == "struct-options" {
            0.15
        } else {
            0.45 / (entries.len() - 2) as f64
        };
        let rev_cases = ((cases as f64 * share) as usize).max(entry.messages.len() * 100);
        let mut oracle = Oracle::start(&entry.revision)?;
        report.msgspec_version = oracle.msgspec_version.clone();
        let check_typed = entry.revision.revision == typed::REVISION;
        let per_message = rev_cases / entry.messages.len();
        for (mi, message) in entry.messages.iter().enumerate() {
            let lane_id = (ri * 64 + mi) as u64;
            let mut rng = Rng::new(seed ^ lane_id.wrapping_mul(0x9e37_79b9));
            let mut corpus: Vec<Vec<u8>> = seeds::vector_inputs(&entry.revision.revision, message);
            corpus.extend(seeds::generated(entry, message, 64, seed.wrapping_add(lane_id)));
            corpus.extend(fuzz_corpus(corpus_dirs, entry, message));
            corpus.retain(|c| c.len() <= MAX_LEN);
            let mut seen: HashSet<u64> = HashSet::new();
            // Accepted inputs, as parents: most mutants are taken from them, so that both verdicts stay common.
            let mut accepted: Vec<Vec<u8>> = vec![];
            for c in &corpus {
                let outcome = entry.codec.decode(message, c).map(|_| ()).map_err(|e| e.msgspec_message());
                seen.extend(features(lane_id, c, &outcome));
                if outcome.is_ok() {
                    accepted.push(c.clone());
                }
            }
            let mut lane = LaneReport {
                revision: entry.revision.revision.clone(),
                message: message.clone(),
                corpus_start: corpus.len(),
                ..Default::default()
            };
            while lane.cases < per_message {
                let n = BATCH.min(per_message - lane.cases);
                let inputs: Vec<Vec<u8>> = (0..n)
                    .map(|_| {
                        let parent = if !accepted.is_empty() && rng.chance(70) {
                            rng.pick(&accepted)
                        } else {
                            rng.pick(&corpus)
                        }
                        .clone();
                        mutate::mutate(&mut rng, &parent, &corpus, &dict, MAX_LEN)
                    })
                    .collect();
                let batch: Vec<(&str, Vec<u8>)> = inputs.iter().map(|b| (message.as_str(), b.clone())).collect();
                let answers = oracle.ask(&batch)?;
                if answers.len() != inputs.len() {
                    return Err(DiffError::ShortAnswer { answered: answers.len(), asked: inputs.len() });
                }
                for (input, answer) in inputs.into_iter().zip(answers) {
                    lane.cases += 1;
                    match &answer {
                        Answer::Accept { .. } => lane.accepted += 1,
                        Answer::Reject { .. } => lane.rejected += 1,
                    }
                    if let Some(p) = oracle::disagreement(&entry.codec, message, &input, &answer, check_typed) {
                        if !depth_band(&entry.codec, message, &input, &answer) {
                            lane.disagreements.push(format!(
                                "{} {message} {}: {p}",
                                entry.revision.revision,
                                hex::encode(&input)
                            ));
                        }
                    }
                    let outcome = match &answer {
                        Answer::Accept { .. } => Ok(()),
                        Answer::Reject { error, .. } => Err(error.clone()),
                    };
                    let fresh: Vec<u64> =
                        features(lane_id, &input, &outcome).into_iter().filter(|f| !seen.contains(f)).collect();
                    if !fresh.is_empty() {
                        seen.extend(fresh);
                        if outcome.is_ok() {
                            if accepted.len() < MAX_CORPUS {
                                accepted.push(input.clone());
                            } else {
                                let i = rng.below(accepted.len());
                                accepted[i] = input.clone();
                            }
                        }
                        if corpus.len() < MAX_CORPUS {
                            corpus.push(input);
                        } else {
                            let i = rng.below(corpus.len());
                            corpus[i] = input;
                        }
                    }
                }
            }
            lane.corpus_end = corpus.len();
            lane.features = seen.len();
            report.lanes.push(lane);
        }
    }
    Ok(report)
}

/// An input whose only disagreement is the depth limit within the band where msgspec's verdict depends on
/// the Python caller's own stack depth (`limits::MAX_DEPTH`: accepted up to 997 nested containers when called
/// from module level, fewer from deeper callers). Such inputs are counted as agreeing.
fn depth_band(codec: &mooncake_wire::codec::Codec, message: &str, input: &[u8], answer: &Answer) -> bool {
    let ours_too_deep = matches!(codec.decode(message, input), Err(e) if e.kind == DecodeErrorKind::TooDeep);
    let theirs_too_deep = matches!(answer, Answer::Reject { error_type, .. } if error_type == "RecursionError");
    if ours_too_deep == theirs_too_deep {
        return false;
    }
    (985..=1000).contains(&nesting(input))
}

/// How deeply the containers of a MessagePack document nest (iteratively; stops at the first bad byte).
pub fn nesting(input: &[u8]) -> usize {
    let mut r = mooncake_wire::msgpack::Reader::new(input);
    let mut pending: Vec<usize> = vec![];
    let mut todo = 1usize;
    let mut deepest = 0;
    loop {
        while todo == 0 {
            match pending.pop() {
                Some(t) => todo = t,
                None => return deepest,
            }
        }
        todo -= 1;
        let n = match r.read_obj() {
            Ok(mooncake_wire::msgpack::Obj::Array(n)) => n,
            Ok(mooncake_wire::msgpack::Obj::Map(n)) => n.saturating_mul(2),
            Ok(_) => continue,
            Err(_) => return deepest,
        };
        pending.push(todo);
        todo = n;
        deepest = deepest.max(pending.len());
    }
}

/// The cargo-fuzz corpus directories to add: `MOONCAKE_FUZZ_CORPUS`, separated like `PATH` (none by default,
/// so the test suite's run does not depend on what a local fuzzing session left behind).
pub fn corpus_dirs_from_env() -> Vec<PathBuf> {
    std::env::var_os("MOONCAKE_FUZZ_CORPUS").map(|v| std::env::split_paths(&v).collect()).unwrap_or_default()
}
