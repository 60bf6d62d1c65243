//! Every verdict of the diff classifier, confirmed against msgspec itself (the pinned version in the test
//! venv): for each change with a witness, the writer revision's msgspec classes encode the witness messages and
//! the reader revision's classes decode them (`tests/oracle/msgspec_cross.py`). msgspec's outcomes must give
//! the verdict of both directions and the bytes claim, and its error texts must be the examples in the report.
//!
//! Pairs: the synthetic rule pair `conformance/tests/data/diff-rules/` (one rule per struct, including the
//! rules the real history never exercises) and every pair of consecutive revisions in `spec/push/`.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;

use mooncake_trace::oracle::python;
use mooncake_wire::codec::Codec;
use mooncake_wire::diff::witness::{
    agrees, bytes_agree, confounded, counterpart, defaults, faithful, reader_value, write, Observed, Outcome, Run,
};
use mooncake_wire::diff::{diff, Probe, Report};
use mooncake_wire::spec::{Revision, Spec};
use serde_json::{json, Value as J};

struct Cross {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Cross {
    fn start(old: &Revision, new: &Revision) -> Cross {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/oracle/msgspec_cross.py");
        let mut child = Command::new(python().unwrap_or_else(|e| panic!("{e}")))
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the msgspec cross oracle");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut c = Cross { child, stdin, stdout };
        let hello = c.ask(&json!({"old": old, "new": new}));
        assert_eq!(hello["msgspec"], "0.23.0", "the oracle must run the pinned msgspec");
        c
    }

    fn ask(&mut self, req: &J) -> J {
        writeln!(self.stdin, "{req}").and_then(|_| self.stdin.flush()).expect("write to the oracle");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read from the oracle");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("oracle answer {line:?}: {e}"))
    }
}

impl Drop for Cross {
    fn drop(&mut self) {
        mooncake_trace::oracle::quit(&mut self.stdin, &mut self.child);
    }
}

struct Side<'a> {
    name: &'static str,
    codec: &'a Codec,
}

#[allow(clippy::too_many_arguments)]
/// msgspec's run of one probe message: the writer's classes encode, the reader's decode.
fn msgspec_run(
    o: &mut Cross,
    w: &Side,
    ws: &str,
    r: &Side,
    rs: &str,
    renames: &[(String, String)],
    value: &J,
    problems: &mut Vec<String>,
) -> Run {
    let (bytes, wj) = write(w.codec, ws, value).unwrap_or_else(|e| panic!("{e}"));
    let a = o.ask(&json!({"cmd": "cross", "writer": w.name, "write": ws, "read": rs, "hex": hex::encode(&bytes)}));
    if let Some(e) = a.get("writer_error") {
        problems.push(format!("msgspec's {ws} rejects our encoding of {value}: {e}"));
    }
    let writer_hex = a["writer_hex"].as_str().unwrap_or_default().to_string();
    if writer_hex != hex::encode(&bytes) {
        problems.push(format!("msgspec encodes {ws} {value} as {writer_hex}, we as {}", hex::encode(&bytes)));
    }
    let outcome = if a["ok"] == J::Bool(true) {
        match faithful(&wj, &a["value"], &defaults(r.codec, rs), renames) {
            Ok(()) => Outcome::Faithful,
            Err(m) => Outcome::Misread(m),
        }
    } else {
        Outcome::Rejected(a["error"].as_str().unwrap_or_default().to_string())
    };
    let reader_fields: Vec<String> =
        r.codec.message_struct(rs).map(|s| s.fields.iter().map(|f| f.name.clone()).collect()).unwrap_or_default();
    let same_bytes = counterpart(&wj, &defaults(w.codec, ws), &reader_fields, renames)
        .filter(|j| reader_value(r.codec, rs, j).is_some())
        .map(|j| {
            let e = o.ask(&json!({"cmd": "encode", "rev": r.name, "struct": rs, "value": j}));
            e["hex"].as_str().map(|h| h == writer_hex).unwrap_or_else(|| panic!("msgspec cannot hold {j} as {rs}: {e}"))
        });
    Run { outcome, same_bytes }
}

#[allow(clippy::too_many_arguments)]
fn msgspec_observe(
    o: &mut Cross,
    w: &Side,
    ws: &str,
    r: &Side,
    rs: &str,
    renames: &[(String, String)],
    p: &Probe,
    problems: &mut Vec<String>,
) -> Observed {
    Observed {
        plain: msgspec_run(o, w, ws, r, rs, renames, &p.plain, problems),
        using: p.using.as_ref().map(|u| msgspec_run(o, w, ws, r, rs, renames, u, problems)),
        exception: p.exception.as_ref().map(|u| msgspec_run(o, w, ws, r, rs, renames, u, problems)),
    }
}

/// The example a verdict quotes must be msgspec's text for the message that breaks.
fn example_of(effect: &mooncake_wire::diff::Effect, o: &Observed) -> Option<String> {
    use mooncake_wire::diff::Effect;
    match effect {
        Effect::Breaks { .. } => o.plain.outcome.text(),
        Effect::BreaksWhenSent { .. } => o.using.as_ref().and_then(|u| u.outcome.text()),
        _ => None,
    }
}

/// Checks every witnessed change of a report; returns (changes checked, problems).
fn check(old: &Arc<Revision>, new: &Arc<Revision>) -> (Report, usize, Vec<String>) {
    let r = diff(old, new);
    let (co, cn) = (Codec::new(old.clone()).unwrap(), Codec::new(new.clone()).unwrap());
    let (so, sn) = (Side { name: "old", codec: &co }, Side { name: "new", codec: &cn });
    let mut oracle = Cross::start(old, new);
    let skips = confounded(&r.changes);
    let mut problems = vec![];
    let mut checked = 0;
    for (c, skip) in r.changes.iter().zip(skips) {
        let Some(w) = &c.witness else { continue };
        checked += 1;
        let mut p = vec![];
        let to_old: Vec<(String, String)> = w.renames.iter().map(|(a, b)| (b.clone(), a.clone())).collect();
        let orn =
            msgspec_observe(&mut oracle, &sn, &w.new_struct, &so, &w.old_struct, &to_old, &w.old_reads_new, &mut p);
        let nro =
            msgspec_observe(&mut oracle, &so, &w.old_struct, &sn, &w.new_struct, &w.renames, &w.new_reads_old, &mut p);
        if !skip.old_reads_new && !agrees(&c.old_reads_new.effect, &orn) {
            p.push(format!("old reads new: verdict {:?}, msgspec {orn:?}", c.old_reads_new.effect));
        }
        if !skip.new_reads_old && !agrees(&c.new_reads_old.effect, &nro) {
            p.push(format!("new reads old: verdict {:?}, msgspec {nro:?}", c.new_reads_old.effect));
        }
        let check_bytes = !skip.bytes && !skip.old_reads_new && !skip.new_reads_old;
        if check_bytes && !bytes_agree(&c.bytes, [&orn, &nro]) {
            p.push(format!("bytes: verdict {:?}, msgspec {orn:?} / {nro:?}", c.bytes));
        }
        for (v, obs) in [(&c.old_reads_new, &orn), (&c.new_reads_old, &nro)] {
            if v.example != example_of(&v.effect, obs) {
                p.push(format!("example {:?} but msgspec says {:?}", v.example, example_of(&v.effect, obs)));
            }
        }
        problems.extend(p.into_iter().map(|m| format!("{} → {} {}: {m}", r.old, r.new, c.subject)));
    }
    (r, checked, problems)
}

#[test]
fn synthetic_rules_agree_with_msgspec() {
    if !crate::python_env("diff_msgspec::synthetic_rules_agree_with_msgspec") {
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/diff-rules");
    let spec = Spec::load_dir(&dir).unwrap();
    let f = spec.family("diff-rules").unwrap();
    let (r, checked, problems) = check(f.revision("rules-old").unwrap(), f.revision("rules-new").unwrap());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // Every row of this pair has a witness (they are all struct and enum rules).
    assert_eq!(checked, r.changes.len());
    assert!(checked >= 40, "only {checked} rules checked");
    println!("diff rules: {checked} changes confirmed against msgspec");
}

#[test]
fn real_history_agrees_with_msgspec() {
    if !crate::python_env("diff_msgspec::real_history_agrees_with_msgspec") {
        return;
    }
    let push = Spec::builtin().push();
    let mut total = 0;
    let mut problems = vec![];
    for w in push.revisions.windows(2) {
        let (_, checked, p) = check(&w[0], &w[1]);
        total += checked;
        problems.extend(p);
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // block_lens, req_blocks, 2 × 0.24, 2 × 0.25, remote_pp_size, 2 × 0.32, 2 × layout_id, LAYOUT_MISS, the
    // gen-1 → gen-2 message replacement.
    assert!(total >= 13, "only {total} witnessed changes in the real history");
    println!("real history: {total} changes confirmed against msgspec");
}
