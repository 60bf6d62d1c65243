//! Differential tests against CPython (the test venv's interpreter, `tests/hash/python_oracle.py`):
//! `json.dumps(v, sort_keys=True)` for random nested Python values — every string escape, float repr, big
//! ints, tuples, dicts with non-string, NaN and incomparable keys (which exercise CPython's exact `list.sort`
//! comparison order), bytes and sets — must give the same text or the same exception; and
//! `pickle.dumps(v, protocol=5)` of the values vLLM hashes into block hashes (parent hash, token tuples of
//! every int width and of lengths that cross the 64 KiB frame boundary, extra-key tuples with shared and
//! unshared strings, large str/bytes payloads) must give the same bytes.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::process::{Command, Stdio};

use mooncake_trace::oracle::python;
use mooncake_wire::codec::testgen::Rng;
use mooncake_wire::hash::pyjson::dumps_sorted;
use mooncake_wire::hash::tagged::to_tagged_json;
use mooncake_wire::hash::{PyInt, PyValue};
use mooncake_wire::keys::pickle;
use serde_json::{json, Value as J};

fn oracle_script() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/hash/python_oracle.py")
}

/// Sends requests to a fresh Python oracle and returns its answers, in order.
fn ask_python(requests: &[J]) -> Vec<J> {
    let mut child = Command::new(python().unwrap_or_else(|e| panic!("{e}")))
        .arg(oracle_script())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start python oracle");
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let answers = std::thread::scope(|s| {
        s.spawn(move || {
            let mut w = BufWriter::new(stdin);
            for (i, r) in requests.iter().enumerate() {
                let mut r = r.clone();
                r["flush"] = json!(i + 1 == requests.len());
                writeln!(w, "{r}").unwrap();
            }
            writeln!(w, "{}", json!({"op": "quit"})).unwrap();
        });
        BufReader::new(stdout).lines().map(|l| serde_json::from_str::<J>(&l.unwrap()).unwrap()).collect::<Vec<_>>()
    });
    assert!(child.wait().unwrap().success());
    assert_eq!(answers.len(), requests.len(), "the oracle answers every request");
    answers
}

const CHARS: &[char] = &[
    'a',
    'Z',
    '0',
    ' ',
    '_',
    '"',
    '\\',
    '/',
    '\n',
    '\r',
    '\t',
    '\u{8}',
    '\u{c}',
    '\u{0}',
    '\u{1f}',
    '\u{7f}',
    '\u{80}',
    'é',
    'É',
    '\u{ff}',
    '名',
    '\u{2028}',
    '\u{d7ff}',
    '\u{e000}',
    '\u{fffe}',
    '\u{ffff}',
    '😀',
    '\u{10000}',
    '\u{10ffff}',
];

fn random_string(rng: &mut Rng) -> String {
    let n = if rng.chance(10) { rng.below(40) } else { rng.below(6) };
    (0..n).map(|_| *rng.pick(CHARS)).collect()
}

fn random_float(rng: &mut Rng) -> f64 {
    match rng.below(10) {
        0 => *rng.pick(&[
            0.0,
            -0.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
            1e16,
            1e15,
            9999999999999998.0,
            1e-4,
            1e-5,
            0.1,
        ]),
        1..=3 => {
            // Any finite double (random bit pattern).
            loop {
                let f = f64::from_bits(rng.next_u64());
                if f.is_finite() {
                    return f;
                }
            }
        }
        4 => (rng.below(2_000_001) as f64 - 1_000_000.0) / 8.0,
        // Exact binary fractions with 16-17 significant digits: ties between two shortest strings.
        9 => (rng.next_u64() % 8_000_000_000_000_000) as f64 / 8.0 + *rng.pick(&[0.125, 0.25, 0.5, 0.75]),
        5 => (rng.next_u64() >> rng.below(64)) as f64 * if rng.chance(50) { 1.0 } else { -1.0 },
        _ => {
            // Around the fixed/exponent switch: decimal exponents -8 … 20.
            let e = rng.below(29) as i32 - 8;
            (rng.below(1_000_000) as f64 / 1000.0) * 10f64.powi(e)
        }
    }
}

fn random_int(rng: &mut Rng) -> PyInt {
    match rng.below(8) {
        0 => PyInt::from(*rng.pick(&[
            0i128,
            1,
            -1,
            i64::MAX as i128,
            i64::MIN as i128,
            u64::MAX as i128,
            1 << 53,
            (1 << 53) + 1,
            -(1 << 63) - 1,
        ])),
        1 => {
            let digits: String = (0..1 + rng.below(60)).map(|_| char::from(b'0' + rng.below(10) as u8)).collect();
            PyInt::parse(&format!("{}{digits}", if rng.chance(50) { "-" } else { "" })).unwrap()
        }
        2 if rng.chance(3) => PyInt::parse(&"7".repeat(4299 + rng.below(4))).unwrap(),
        _ => PyInt::from(rng.below(2001) as i64 - 1000),
    }
}

fn random_key(rng: &mut Rng, kinds: u32) -> PyValue {
    // kinds: 0 = str only, 1 = numbers and constants, 2 = anything hashable.
    match (kinds, rng.below(8)) {
        (0, _) | (_, 0..=1) => PyValue::Str(random_string(rng)),
        (_, 2..=3) => PyValue::Int(random_int(rng)),
        (_, 4..=5) => PyValue::Float(random_float(rng)),
        (_, 6) => rng.pick(&[PyValue::Bool(true), PyValue::Bool(false), PyValue::None]).clone(),
        (2, _) => PyValue::Tuple((0..rng.below(3)).map(|_| random_key(rng, 1)).collect()),
        _ => PyValue::Bool(rng.chance(50)),
    }
}

/// A dict with string keys, as `dict(items)` builds it (a repeated key keeps its first position, last value).
fn str_dict(items: Vec<(String, PyValue)>) -> PyValue {
    let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut out: Vec<(PyValue, PyValue)> = Vec::new();
    for (k, v) in items {
        match index.get(&k) {
            Some(&i) => out[i].1 = v,
            None => {
                index.insert(k.clone(), out.len());
                out.push((PyValue::Str(k), v));
            }
        }
    }
    PyValue::Dict(out)
}

fn random_value(rng: &mut Rng, depth: u32) -> PyValue {
    let leaf = depth == 0 || rng.chance(45);
    if leaf {
        return match rng.below(20) {
            0 => PyValue::None,
            1 => PyValue::Bool(rng.chance(50)),
            2..=6 => PyValue::Int(random_int(rng)),
            7..=11 => PyValue::Float(random_float(rng)),
            12 if rng.chance(20) => PyValue::Bytes(vec![1, 2]),
            13 if rng.chance(20) => PyValue::Set(vec![PyValue::int(1)]),
            _ => PyValue::Str(random_string(rng)),
        };
    }
    // Long collections only near the top, so values stay small.
    let n = if depth >= 3 && rng.chance(5) { 40 + rng.below(100) } else { rng.below(6) };
    match rng.below(5) {
        0 => PyValue::List((0..n).map(|_| random_value(rng, depth - 1)).collect()),
        1 => PyValue::Tuple((0..n).map(|_| random_value(rng, depth - 1)).collect()),
        2 if rng.chance(40) => {
            let kinds = if rng.chance(30) { 2 } else { 1 };
            let items = (0..n).map(|_| (random_key(rng, kinds), random_value(rng, depth - 1))).collect::<Vec<_>>();
            PyValue::dict(items).expect("hashable keys")
        }
        _ => str_dict((0..n).map(|_| (random_string(rng), random_value(rng, depth - 1))).collect()),
    }
}

/// Dicts built to make CPython's sort order observable: many float keys with NaNs among sorted and reversed
/// runs (the result depends on every comparison timsort makes, merges and galloping included), and many
/// comparable keys with one incomparable key (the `TypeError` names the first incomparable pair compared).
fn sort_probe(rng: &mut Rng) -> PyValue {
    let limit = if rng.chance(50) { 64 } else { 600 };
    let n = 2 + rng.below(limit);
    let mut keys: Vec<PyValue> = Vec::with_capacity(n);
    let mut x = rng.below(1000) as i64;
    while keys.len() < n {
        let run = 1 + rng.below(80);
        let down = rng.chance(30);
        for _ in 0..run {
            x += if down { -(1 + rng.below(3) as i64) } else { 1 + rng.below(3) as i64 };
            let as_int = rng.chance(50);
            keys.push(if as_int { PyValue::int(x) } else { PyValue::Float(x as f64 + 0.5) });
        }
    }
    keys.truncate(n);
    if rng.chance(25) {
        // Big magnitudes: ints beyond i128 and floats up to 1e308, with exact powers of two written both ways
        // (equal keys merge when the dict is built).
        for k in keys.iter_mut() {
            let e = 100 + rng.below(900) as i32;
            let p = 2f64.powi(e) * if rng.chance(50) { 1.0 } else { -1.0 };
            *k = match rng.below(4) {
                0 => PyValue::Float(p),
                1 => PyValue::Int(PyInt::parse(&format!("{p:.0}")).unwrap()),
                2 => PyValue::Float(f64::from_bits(p.to_bits() + 1)),
                _ => PyValue::Int(
                    PyInt::parse(&format!(
                        "{}{}",
                        if rng.chance(50) { "-" } else { "" },
                        "9".repeat(30 + rng.below(300))
                    ))
                    .unwrap(),
                ),
            };
        }
    }
    match rng.below(3) {
        0 => {
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(n);
                keys[i] = PyValue::Float(f64::NAN);
            }
        }
        1 => {
            let i = rng.below(n);
            keys[i] = rng.pick(&[PyValue::str("s"), PyValue::None, PyValue::Tuple(vec![])]).clone();
        }
        _ => {}
    }
    PyValue::dict(keys.into_iter().map(|k| (k, PyValue::None))).unwrap()
}

#[test]
fn json_dumps_sort_keys_agrees_with_cpython() {
    if !crate::python_env("differential_python::json_dumps_sort_keys_agrees_with_cpython") {
        return;
    }
    let mut rng = Rng::new(20260534);
    let mut values: Vec<PyValue> = (0..6000)
        .map(|_| str_dict((0..rng.below(5)).map(|_| (random_string(&mut rng), random_value(&mut rng, 4))).collect()))
        .collect();
    values.extend((0..1500).map(|_| random_value(&mut rng, 3)));
    values.extend((0..1500).map(|_| sort_probe(&mut rng)));
    let requests: Vec<J> = values.iter().map(|v| json!({"op": "dumps", "value": to_tagged_json(v)})).collect();
    let answers = ask_python(&requests);
    let (mut ok, mut err, mut bad) = (0, 0, vec![]);
    for (v, a) in values.iter().zip(&answers) {
        let ours = dumps_sorted(v).map_err(|e| e.to_string());
        let theirs = match (a.get("ok").and_then(J::as_str), a.get("error").and_then(J::as_str)) {
            (Some(t), _) => Ok(t.to_string()),
            (_, Some(e)) => Err(e.to_string()),
            _ => panic!("bad oracle answer {a}"),
        };
        match &theirs {
            Ok(_) => ok += 1,
            Err(_) => err += 1,
        }
        if ours != theirs {
            bad.push(format!("{}\n  ours   {:?}\n  python {:?}", to_tagged_json(v), ours, theirs));
        }
    }
    println!(
        "json.dumps differential: {} values ({ok} encoded, {err} raised in both), {} disagreements",
        values.len(),
        bad.len()
    );
    assert!(
        bad.is_empty(),
        "{} disagreements with CPython json.dumps; first:\n{}",
        bad.len(),
        bad[..bad.len().min(5)].join("\n")
    );
    assert!(ok > values.len() / 2 && err > values.len() / 20, "the values must exercise both outcomes");
}

fn random_token(rng: &mut Rng) -> PyValue {
    match rng.below(12) {
        0 => PyValue::int(-(rng.below(70000) as i64)),
        1 => PyValue::int(rng.below(65536) as i64 + 256),
        2 => PyValue::int((rng.next_u64() >> 33) as i64),
        3 => PyValue::int((rng.next_u64() >> rng.below(40)) as i64 - (1 << 40)),
        4 => PyValue::Int(random_int(rng)),
        _ => PyValue::int(rng.below(256) as i64),
    }
}

fn random_extra(rng: &mut Rng, depth: u32) -> PyValue {
    const TAGS: &[&str] = &["lora", "mm", "cache_salt", "prompt_embeds"];
    match rng.below(if depth == 0 { 7 } else { 9 }) {
        0 => PyValue::None,
        1 => PyValue::Bool(rng.chance(50)),
        2 => PyValue::Float(random_float(rng)),
        3 => PyValue::str(*rng.pick(TAGS)),
        4 => PyValue::Str(if rng.chance(5) { "é".repeat(rng.below(40_000)) } else { random_string(rng) }),
        5 => PyValue::Bytes(match rng.below(5) {
            0 => vec![],
            1 => vec![rng.below(256) as u8],
            2 => vec![7; 32],
            3 => vec![1; 300],
            _ => vec![2; 65_536 + rng.below(3)],
        }),
        6 => random_token(rng),
        _ => PyValue::Tuple((0..rng.below(6)).map(|_| random_extra(rng, depth - 1)).collect()),
    }
}

#[test]
fn pickle_protocol_5_agrees_with_cpython() {
    if !crate::python_env("differential_python::pickle_protocol_5_agrees_with_cpython") {
        return;
    }
    let mut rng = Rng::new(20260535);
    let mut values = vec![];
    for i in 0..2000 {
        let n = match i % 40 {
            // Token counts around the 64 KiB frame: 32,750 one-byte tokens fill a frame.
            0 => 32_700 + rng.below(100),
            1 => 10_000 + rng.below(30_000),
            _ => rng.below(80),
        };
        let small = i % 40 == 0;
        let tokens: Vec<PyValue> =
            (0..n).map(|_| if small { PyValue::int(rng.below(256) as i64) } else { random_token(&mut rng) }).collect();
        let parent = if rng.chance(10) {
            PyValue::Bytes(vec![])
        } else {
            PyValue::Bytes((0..32).map(|_| rng.below(256) as u8).collect())
        };
        let extra = if rng.chance(30) { PyValue::None } else { random_extra(&mut rng, 3) };
        values.push(PyValue::Tuple(vec![parent, PyValue::Tuple(tokens), extra]));
    }
    // The seeds init_none_hash pickles.
    for s in ["vllm-none-hash", "0", "12345", ""] {
        values.push(PyValue::str(s));
    }
    let requests: Vec<J> = values.iter().map(|v| json!({"op": "pickle", "value": to_tagged_json(v)})).collect();
    let answers = ask_python(&requests);
    let mut bad = vec![];
    for (v, a) in values.iter().zip(&answers) {
        let ours = pickle::dumps(v).map(hex::encode).map_err(|e| e.to_string());
        let theirs = a.get("ok").and_then(J::as_str).map(str::to_string).ok_or_else(|| a.to_string());
        if ours != theirs {
            let first = ours
                .as_ref()
                .ok()
                .zip(theirs.as_ref().ok())
                .and_then(|(x, y)| x.bytes().zip(y.bytes()).position(|(p, q)| p != q));
            bad.push(format!(
                "first difference at hex offset {first:?}, lengths {:?} vs {:?}",
                ours.as_ref().map(String::len),
                theirs.as_ref().map(String::len)
            ));
        }
    }
    println!("pickle differential: {} values, {} disagreements", values.len(), bad.len());
    assert!(
        bad.is_empty(),
        "{} disagreements with CPython pickle; first: {}",
        bad.len(),
        bad[..bad.len().min(5)].join("; ")
    );
}
