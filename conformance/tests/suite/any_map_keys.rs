//! Maps decoded untyped (`any`) fold their keys as a Python dict does — `1`, `True` and `1.0` are one entry,
//! `0` and `-0.0` are one, every NaN its own, `b"a"` is not `"a"` — keeping the first key at its position
//! with the last value. Checked against msgspec: the re-encoded bytes of each map must be msgspec's.

use std::io::Write;
use std::process::{Command, Stdio};

use mooncake_trace::oracle::python;
use mooncake_wire::codec::Codec;
use mooncake_wire::msgpack::{WireInt, Writer};
use mooncake_wire::spec::Spec;

enum K {
    Nil,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'static str),
    Bin(&'static [u8]),
}

fn write_key(w: &mut Writer, k: &K) {
    match k {
        K::Nil => w.nil(),
        K::Bool(b) => w.bool(*b),
        K::Int(i) => w.int(WireInt::from_i64(*i)),
        K::Float(x) => w.f64(*x),
        K::Str(s) => w.str(s),
        K::Bin(b) => w.bin(b),
    }
}

/// `{"m": {k0: 0, k1: 1, ...}}`
fn message(keys: &[K]) -> Vec<u8> {
    let mut w = Writer::new();
    w.map_len(1);
    w.str("m");
    w.map_len(keys.len());
    for (i, k) in keys.iter().enumerate() {
        write_key(&mut w, k);
        w.uint(i as u64);
    }
    w.into_bytes()
}

fn codec() -> Codec {
    let text = r#"format = "mooncake-wire-spec/2"
family = "test"
revision = "t"
generation = 2
releases = ["1.0"]
source = "test"
summary = "test"
[structs.A]
kind = "msgspec.Struct"
fields = [ { name = "m", type = "any" } ]
[transport]
kind = "zmq"
pattern = "x"
source = "x"
sockets = { a = { type = "DEALER", binds = false, address = "x" } }
messages = [ { name = "A", from = "a", to = "a", encoding = "msgpack", frames_sent = ["payload"], frames_received = ["payload"] } ]
"#;
    let spec = Spec::from_files([("t.toml".to_string(), text.to_string())]).unwrap();
    Codec::new(spec.revision("t").unwrap().clone()).unwrap()
}

/// msgspec's re-encoding of each message (hex lines in, hex lines out).
fn msgspec_reencode(messages: &[Vec<u8>]) -> Vec<String> {
    let script = "import sys, typing, msgspec\n\
class A(msgspec.Struct):\n    m: typing.Any\n\
for line in sys.stdin:\n    print(msgspec.msgpack.encode(msgspec.msgpack.decode(bytes.fromhex(line.strip()), type=A)).hex())\n";
    let mut child = Command::new(python().unwrap())
        .arg("-c")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    {
        let mut stdin = child.stdin.take().unwrap();
        for m in messages {
            writeln!(stdin, "{}", hex::encode(m)).unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().lines().map(String::from).collect()
}

#[test]
fn untyped_map_keys_fold_as_in_python() {
    if !crate::python_env("any_map_keys::untyped_map_keys_fold_as_in_python") {
        return;
    }
    use K::*;
    let cases: Vec<Vec<K>> = vec![
        vec![Int(1), Bool(true), Float(1.0)],
        vec![Int(0), Float(-0.0), Bool(false), Float(0.0)],
        vec![Float(f64::NAN), Float(f64::NAN), Float(f64::NAN)],
        vec![Str("a"), Bin(b"a"), Str("a")],
        vec![Float(2.5), Int(2), Float(2.5), Float(2.0)],
        vec![Int(-7), Float(-7.0), Nil, Nil],
        vec![Float(f64::INFINITY), Float(f64::NEG_INFINITY), Float(f64::INFINITY)],
        vec![Int(i64::MIN), Float(-9223372036854775808.0)],
        vec![Bool(true), Int(1), Str("x"), Float(1.0), Str("x"), Bool(false)],
    ];
    let messages: Vec<Vec<u8>> = cases.iter().map(|c| message(c)).collect();
    let expected = msgspec_reencode(&messages);
    let codec = codec();
    for (m, want) in messages.iter().zip(&expected) {
        let v = codec.decode("A", m).unwrap();
        let got = hex::encode(codec.encode("A", &v).unwrap());
        assert_eq!(&got, want, "input {}", hex::encode(m));
    }
}

#[test]
fn many_distinct_untyped_keys_decode() {
    // 200,000 distinct keys: a quadratic duplicate search would take minutes here.
    let mut w = Writer::new();
    w.map_len(1);
    w.str("m");
    let n = 200_000u64;
    w.map_len(n as usize + 1);
    for i in 0..n {
        w.uint(i);
        w.nil();
    }
    w.f64(7.0); // equal to the key 7: folds into it
    w.bool(true);
    let v = codec().decode("A", &w.into_bytes()).unwrap();
    let mooncake_wire::codec::Value::Dict(entries) = v.field("m").unwrap() else { panic!("a dict") };
    assert_eq!(entries.len(), n as usize);
    assert_eq!(entries[7].1, mooncake_wire::codec::Value::Bool(true));
}
