//! Seed corpora for every target, built from the repository's ground truth (`conformance/vectors`,
//! `conformance/traces`, `spec/`) plus a few generated values, and the MessagePack dictionary. The
//! `fuzz-seeds` binary writes them out for cargo-fuzz (`scripts/fuzz-seeds.sh`); the smoke tests use them
//! in memory.

use std::path::{Path, PathBuf};

use mooncake_wire::codec::testgen::{noncanonical, random_value, Rng, Size};
use mooncake_wire::keys::spec::StoreKeySpec;
use mooncake_wire::keys::typed::{
    AscendMooncakeKey, AscendMooncakeLayerKey, AscendStoreKey, AscendStoreLayerKey, LmcacheKey, LmcacheLayerKey,
    TypedKey,
};
use mooncake_wire::msgpack::{WireInt, Writer};
use mooncake_wire::spec::Spec;
use serde_json::Value as J;

use crate::catalog;

/// The repository root (this crate lives in `fuzz/harness`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repository root")
}

fn jsonl(path: &Path) -> Vec<J> {
    let Ok(text) = std::fs::read_to_string(path) else { return vec![] };
    text.lines().filter(|l| !l.trim().is_empty()).filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// The inputs of a vectors file (`conformance/vectors/<revision>/<message>.jsonl`), header skipped.
pub fn vector_inputs(revision: &str, message: &str) -> Vec<Vec<u8>> {
    let path = repo_root().join("conformance/vectors").join(revision).join(format!("{message}.jsonl"));
    jsonl(&path).iter().skip(1).filter_map(|c| hex::decode(c["hex"].as_str()?).ok()).collect()
}

/// Random valid values of a message, canonical and non-canonical encodings.
pub fn generated(entry: &catalog::Entry, message: &str, n: usize, seed: u64) -> Vec<Vec<u8>> {
    let codec = &entry.codec;
    let ty = codec.message_type(message).expect("message of the codec");
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|i| {
            let v = random_value(codec.plan(), ty, &mut rng, Size(2 + i % 3));
            if i % 2 == 0 {
                codec.encode(message, &v).expect("generated values encode")
            } else {
                noncanonical(codec.plan(), ty, &v, &mut rng)
            }
        })
        .collect()
}

fn trace_files() -> Vec<PathBuf> {
    let mut out = vec![];
    let root = repo_root().join("conformance/traces");
    let Ok(dirs) = std::fs::read_dir(&root) else { return out };
    for d in dirs.flatten() {
        if let Ok(files) = std::fs::read_dir(d.path()) {
            out.extend(files.flatten().map(|f| f.path()).filter(|p| p.extension().is_some_and(|e| e == "jsonl")));
        }
    }
    out.sort();
    out
}

/// Every seed of a target, deterministic.
pub fn seeds(target: &str) -> Vec<Vec<u8>> {
    match target {
        "decode_spec" => {
            let mut out = vec![];
            for (ri, e) in catalog::entries().iter().enumerate() {
                for m in &e.messages {
                    let sel = catalog::selector(&e.revision.revision, m).expect("selector");
                    let mut inputs = vector_inputs(&e.revision.revision, m);
                    inputs.extend(generated(e, m, 16, ri as u64 * 31 + sel as u64));
                    out.extend(inputs.into_iter().map(|b| [&[sel][..], &b].concat()));
                }
            }
            out
        }
        "decode_typed" => {
            let e = catalog::entries()
                .iter()
                .find(|e| e.revision.revision == mooncake_wire::typed::REVISION)
                .expect("typed revision");
            let mut out = vec![];
            for m in ["MooncakeXferMetadata", "MooncakeXferResponse"] {
                out.extend(vector_inputs(&e.revision.revision, m));
                out.extend(generated(e, m, 32, m.len() as u64));
            }
            // The other revisions' messages, which the target reads through their spec codecs too.
            for o in catalog::entries().iter().filter(|o| o.revision.revision != e.revision.revision) {
                for m in ["MooncakeXferMetadata", "MooncakeXferResponse"] {
                    out.extend(vector_inputs(&o.revision.revision, m));
                }
            }
            out
        }
        "trace" => trace_files().iter().filter_map(|p| std::fs::read(p).ok()).collect(),
        "bootstrap" => bootstrap_seeds(),
        "store_keys" => key_seeds(),
        "transfer_engine" => te_seeds(),
        "zmtp_server" => zmtp_seeds(),
        "prefiller" | "decoder" | "cross" | "tap_relay" => {
            // Structured targets read any bytes as operations; random bytes of a few sizes start them off.
            let mut rng = Rng::new(match target {
                "prefiller" => 1,
                "decoder" => 2,
                "cross" => 3,
                _ => 4,
            });
            (0..32).map(|i| (0..(64 << (i % 6))).map(|_| rng.next_u64() as u8).collect()).collect()
        }
        _ => vec![],
    }
}

fn bootstrap_seeds() -> Vec<Vec<u8>> {
    let revs: Vec<String> =
        Spec::builtin().push().revisions.iter().filter(|r| r.bootstrap.is_some()).map(|r| r.revision.clone()).collect();
    let mut out = vec![];
    for p in trace_files() {
        let lines = jsonl(&p);
        let Some(version) = lines.first().and_then(|h| h["vllm_version"].as_str()) else { continue };
        let Some(rev) = Spec::builtin().push().for_release(version) else { continue };
        let Some(ri) = revs.iter().position(|r| *r == rev.revision) else { continue };
        let b = rev.bootstrap.as_ref().expect("listed");
        let mut session = vec![];
        for l in &lines[1..] {
            if l["kind"] != "http" || l["body"].is_null() {
                continue;
            }
            let body = serde_json::to_vec(&l["body"]).expect("JSON");
            let route = b
                .routes
                .iter()
                .position(|r| {
                    Some(r.method.as_str()) == l["method"].as_str() && Some(r.path.as_str()) == l["path"].as_str()
                })
                .unwrap_or(0);
            let op: u8 = if l["dir"] == "request" { 1 } else { 2 };
            out.push([&[ri as u8, op | (route as u8) << 2][..], &body].concat());
            for t in 0..4u8 {
                out.push([&[ri as u8, t << 2][..], &body].concat());
            }
            if l["dir"] == "request" {
                session.push(l["body"].clone());
            }
        }
        session.push(J::String("/query".into()));
        session.push(J::String("/docs".into()));
        out.push([&[ri as u8, 3][..], &serde_json::to_vec(&session).expect("JSON")].concat());
    }
    out
}

fn key_seeds() -> Vec<Vec<u8>> {
    let spec = StoreKeySpec::builtin();
    let mut keys: Vec<(String, String)> = vec![]; // (grammar, key)
    let dir = repo_root().join("conformance/vectors/keys");
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let Some(release) = name.strip_prefix("pool_key_").and_then(|n| n.strip_suffix(".jsonl")) else { continue };
        let Ok(g) = spec.vllm_grammar(release) else { continue };
        for c in jsonl(&entry.path()).iter().skip(1).take(40) {
            for k in ["to_string", "build_prefix", "rank_local_key_for"] {
                if let Some(s) = c["output"][k].as_str() {
                    keys.push((g.name.clone(), s.to_string()));
                }
            }
        }
    }
    let typed: Vec<(&str, Option<String>)> = vec![
        (
            AscendMooncakeKey::GRAMMAR,
            AscendMooncakeKey {
                model_name: "/models/Qwen/Qwen3".into(),
                world_size: 8,
                worker_id: 3,
                chunk_hash: "abc".into(),
            }
            .build()
            .ok(),
        ),
        (
            AscendMooncakeLayerKey::GRAMMAR,
            AscendMooncakeLayerKey {
                model_name: "m@x".into(),
                world_size: 2,
                worker_id: 1,
                chunk_hash: "ff".into(),
                layer_id: 4,
            }
            .build()
            .ok(),
        ),
        (
            AscendStoreKey::GRAMMAR,
            AscendStoreKey {
                model_name: "llama".into(),
                dcp_rank: 3,
                head_or_tp_rank: 1,
                cache_role: "kv".into(),
                cache_family: "default".into(),
                chunk_hash: "ab12".into(),
                ..Default::default()
            }
            .build()
            .ok(),
        ),
        (
            AscendStoreLayerKey::GRAMMAR,
            AscendStoreLayerKey {
                model_name: "llama".into(),
                layer_id: 7,
                cache_role: "kv".into(),
                cache_family: "c4".into(),
                chunk_hash: "ff".into(),
                ..Default::default()
            }
            .build()
            .ok(),
        ),
        (
            LmcacheKey::GRAMMAR,
            LmcacheKey {
                model_name: "meta-llama/Llama-3.1-8B".into(),
                world_size: 1,
                worker_id: 0,
                chunk_hash: "-1f".into(),
                dtype: "bfloat16".into(),
                tags: vec![("user".into(), "a%b".into())],
            }
            .build()
            .ok(),
        ),
        (
            LmcacheLayerKey::GRAMMAR,
            LmcacheLayerKey {
                model_name: "m".into(),
                world_size: 2,
                worker_id: 1,
                chunk_hash: "00ff".into(),
                dtype: "half".into(),
                layer_id: 3,
                tags: vec![],
            }
            .build()
            .ok(),
        ),
    ];
    keys.extend(typed.into_iter().filter_map(|(g, k)| Some((g.to_string(), k?))));
    keys.sort();
    keys.dedup();
    let mut out = vec![];
    for (g, k) in keys {
        let gi = spec.grammars.iter().position(|x| x.name == g).expect("grammar") as u8;
        for flags in [0u8, 1, 3] {
            out.push([&[gi, flags][..], k.as_bytes()].concat());
        }
    }
    out
}

/// Dictionary tokens for the MessagePack targets: every field and tag name of every revision as a
/// MessagePack string, the enum values, and heads that declare huge or edge lengths and integers.
/// Transfer Engine streams: handshake frames with descriptors (fed whole and byte by byte), request headers
/// and status frames.
fn te_seeds() -> Vec<Vec<u8>> {
    use mooncake_wire::te::data::{Header, Opcode, Status};
    use mooncake_wire::te::handshake::{encode, MsgType};
    let desc = r#"{"buffers":[{"addr":94720244883792,"length":4096,"name":"127.0.0.1:15195"}],"name":"127.0.0.1:15195","protocol":"tcp","rdma_server_name":"","tcp_data_host":"127.0.0.1","tcp_data_port":16998,"tcp_proto_version":2,"timestamp":"2026-12-01 17:54:16.272098"}"#;
    let old = r#"{"buffers":[],"name":"10.0.0.2:15001","protocol":"tcp","tcp_data_port":16000}"#;
    let mut out = vec![];
    for (chunk, body, ty) in [(0u8, desc, MsgType::Metadata), (1, old, MsgType::Metadata), (7, desc, MsgType::Untyped)]
    {
        out.push([&[0, chunk][..], &encode(ty, format!("{body}\n").as_bytes())].concat());
    }
    let mut reqs = vec![1u8, 0];
    for (op, v2) in [(Opcode::Write, true), (Opcode::Read, true), (Opcode::Write, false)] {
        reqs.extend(Header { size: 4096, addr: 94720244883792, op, v2 }.encode());
    }
    reqs.extend(Status::Ok.encode());
    reqs.extend(Status::AddrRejected.encode());
    out.push(reqs);
    out
}

/// A DEALER's stream as libzmq sends it (greeting, READY with and without an identity, one-frame and multi-frame
/// messages, a long frame, a PING), fed whole and in small chunks, accepted or not.
fn zmtp_seeds() -> Vec<Vec<u8>> {
    use mooncake_wire::zmtp::{command, frame, greeting, put_frame, ready, FLAG_MORE};
    let mut stream = greeting().to_vec();
    stream.extend(ready("DEALER", &[("Identity", b"decoder-1")]));
    stream.extend(frame(b"\x81\xa6status\x00"));
    put_frame(&mut stream, FLAG_MORE, b"");
    put_frame(&mut stream, 0, &[0x42; 300]);
    stream.extend(command(b"PING", b"\x00\x10ctx"));
    let mut req = greeting().to_vec();
    req.extend(ready("REQ", &[]));
    put_frame(&mut req, FLAG_MORE, b"");
    put_frame(&mut req, 0, b"pull");
    let mut out = vec![];
    for (chunk, accept, s) in [(255u8, 0u8, &stream), (1, 0, &stream), (7, 1, &stream), (3, 0, &req)] {
        out.push([&[chunk, accept][..], s].concat());
    }
    out
}

/// The MessagePack dictionary: every field name (as a str) and enum value (as an int) of every revision.
pub(crate) fn msgpack_dict() -> Vec<Vec<u8>> {
    let mut names: Vec<String> = vec![];
    let mut ints: Vec<i64> = vec![];
    for e in catalog::entries() {
        for s in e.revision.structs.values() {
            names.extend(s.fields.iter().map(|f| f.name.clone()));
        }
        for en in e.revision.enums.values() {
            ints.extend(en.members.iter().map(|m| m.value));
        }
        for st in &e.codec.plan().structs {
            names.extend(st.fields.iter().map(|f| f.wire_name.clone()));
            if let Some((field, _)) = &st.tag {
                names.push(field.clone());
            }
        }
    }
    names.sort();
    names.dedup();
    ints.sort();
    ints.dedup();
    let mut out: Vec<Vec<u8>> = names
        .iter()
        .map(|n| {
            let mut w = Writer::new();
            w.str(n);
            w.into_bytes()
        })
        .collect();
    for i in ints {
        let mut w = Writer::new();
        w.sint(i);
        out.push(w.into_bytes());
    }
    for v in [WireInt::MAX, WireInt::MIN, WireInt::from_u64(1 << 63), WireInt::from_u64(u32::MAX as u64)] {
        let mut w = Writer::new();
        w.int(v);
        out.push(w.into_bytes());
    }
    for head in [
        &b"\xdd\xff\xff\xff\xff"[..],
        b"\xdf\xff\xff\xff\xff",
        b"\xdb\xff\xff\xff\xff",
        b"\xc6\xff\xff\xff\xff",
        b"\xc9\xff\xff\xff\xff\x01",
        b"\xdc\xff\xff",
        b"\xde\xff\xff",
        b"\xda\xff\xff",
        b"\xd9\xff",
        b"\xcb\x7f\xf8\x00\x00\x00\x00\x00\x00",
        b"\xca\x7f\x80\x00\x00",
        b"\xd3\x80\x00\x00\x00\x00\x00\x00\x00",
        b"\xc0",
        b"\xc1",
        b"\xc2",
        b"\xc3",
        b"\x90",
        b"\x80",
        b"\xa0",
        b"\xd4\x00\x00",
        b"\xc4\x00",
    ] {
        out.push(head.to_vec());
    }
    out
}

/// Dictionary tokens for the JSON targets (traces, bootstrap bodies): the trace format's keys and values, the
/// bootstrap models' field names and the routes, as JSON text.
pub fn json_dict() -> Vec<Vec<u8>> {
    let mut words: Vec<String> = [
        "format",
        "format_version",
        "vllm_version",
        "connector",
        "connector_generation",
        "scenario",
        "roles",
        "conn_endpoints",
        "transfer_engine_calls",
        "observed_outcome",
        "kind",
        "seq",
        "side",
        "conn",
        "socket",
        "endpoint",
        "bound",
        "dir",
        "frames",
        "decoded",
        "payload_text",
        "method",
        "path",
        "status",
        "body",
        "body_raw",
        "mooncake-trace",
        "zmq",
        "http",
        "send",
        "recv",
        "request",
        "response",
        "decoder",
        "prefiller",
        "bootstrap",
        "DEALER",
        "ROUTER",
        "GET",
        "POST",
        "0.33.0",
        "0.32.0",
        "0.18.1",
        "MooncakeConnector",
        "session",
        "n",
        "bytes",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for r in &Spec::builtin().push().revisions {
        if let Some(b) = &r.bootstrap {
            for m in b.models.values() {
                words.extend(m.fields.iter().map(|f| f.name.clone()));
            }
            words.extend(b.routes.iter().map(|x| x.path.clone()));
        }
    }
    words.sort();
    words.dedup();
    let mut out: Vec<Vec<u8>> = words.iter().map(|w| serde_json::to_vec(w).expect("JSON")).collect();
    for t in [
        "{",
        "}",
        "[",
        "]",
        ":",
        ",",
        "null",
        "true",
        "false",
        "-1",
        "18446744073709551615",
        "-9223372036854775809",
        "1e999",
        "1.0",
        r"\u0000",
        r"\ud800",
        r"\n",
    ] {
        out.push(t.as_bytes().to_vec());
    }
    out
}

/// Dictionary tokens for the store-key target: every literal text, choice word and pattern text of every
/// grammar, and the separators.
pub fn keys_dict() -> Vec<Vec<u8>> {
    use mooncake_wire::keys::grammar::{FieldType, Part, PatternItem};
    let mut words: Vec<String> = vec![];
    for g in &StoreKeySpec::builtin().grammars {
        words.push(g.separator.clone());
        for p in &g.parts {
            match p {
                Part::Text(t) => words.push(t.clone()),
                Part::Field { ty, suffix, .. } => {
                    words.push(suffix.clone());
                    match ty {
                        FieldType::Choice(set) => words.extend(set.iter().cloned()),
                        FieldType::Pattern(forms) => {
                            for item in forms.iter().flatten() {
                                match item {
                                    PatternItem::Text(t) => words.push(t.clone()),
                                    PatternItem::Set(set) => words.extend(set.iter().cloned()),
                                    PatternItem::Int | PatternItem::Hex(_) => {}
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
    }
    words.extend(
        ["%", "-", "0", "-1", "9223372036854775807", "-9223372036854775808", "99999999999999999999", "ff", "é"]
            .iter()
            .map(|s| s.to_string()),
    );
    words.retain(|w| !w.is_empty());
    words.sort();
    words.dedup();
    words.into_iter().map(String::into_bytes).collect()
}

/// The dictionaries and their files under `fuzz/dict/`.
pub fn dicts() -> Vec<(&'static str, Vec<Vec<u8>>, &'static str)> {
    vec![
        ("msgpack.dict", msgpack_dict(), "MessagePack tokens for the mooncake-wire decoder targets"),
        ("json.dict", json_dict(), "JSON tokens for the trace and bootstrap targets"),
        ("keys.dict", keys_dict(), "Store-key tokens for the store_keys target"),
    ]
}

/// A dictionary in libFuzzer's format (`-dict=`): one quoted token per line, bytes outside printable ASCII
/// as `\xNN`.
pub fn dict_file(tokens: &[Vec<u8>], title: &str) -> String {
    let mut s =
        format!("# {title}\n# Generated by `scripts/fuzz-seeds.sh` (fuzz/harness/src/seeds.rs); do not edit.\n");
    for t in tokens {
        s.push('"');
        for &b in t {
            match b {
                b'"' | b'\\' => s.push_str(&format!("\\x{b:02x}")),
                0x20..=0x7e => s.push(b as char),
                _ => s.push_str(&format!("\\x{b:02x}")),
            }
        }
        s.push_str("\"\n");
    }
    s
}

/// A stable file name for a corpus input (FNV-1a, as hex).
pub fn name_of(input: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in input {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Up to `n` seeds spread evenly over all of them (the committed small seed set).
pub fn sample(all: &[Vec<u8>], n: usize) -> Vec<Vec<u8>> {
    if all.len() <= n {
        return all.to_vec();
    }
    (0..n).map(|i| all[i * all.len() / n].clone()).collect()
}
