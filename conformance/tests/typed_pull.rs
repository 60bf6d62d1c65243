//! The typed pull structs (`mooncake_wire::typed::pull`, vllm-ascend 0.23.0.post1) against msgspec's ground
//! truth for that revision: every committed vector (`conformance/vectors/pull/vllm-ascend-0.23.0.post1/`) —
//! an accepted case decodes to the vector's value, field by field, and re-encodes to msgspec's canonical
//! bytes; a rejected case is rejected with msgspec's error text — and every payload of the committed pull
//! traces of that revision (`conformance/traces-pull/vllm-ascend-0.23.0.post1/`) decodes as the message its
//! sender sends and re-encodes to the bytes on the wire.

use std::path::PathBuf;

use mooncake_conformance::trace::sender;
use mooncake_conformance::trace::{Event, Trace};
use mooncake_wire::codec::{Codec, Value};
use mooncake_wire::msgpack::WireInt;
use mooncake_wire::typed::pull::{
    self, DoneRecvingMsg, GetMetaMsg, MooncakeAgentMetadata, RemotePortInfo, Request, Untyped,
};
use serde_json::{json, Map, Value as J};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn int(i: WireInt) -> J {
    Codec::to_json(&Value::Int(i))
}
fn ints(v: &[WireInt]) -> J {
    J::Array(v.iter().map(|i| int(*i)).collect())
}
fn ints2(v: &[Vec<WireInt>]) -> J {
    J::Array(v.iter().map(|l| ints(l)).collect())
}
fn bytes(b: &[u8]) -> J {
    Codec::to_json(&Value::Bytes(b.to_vec()))
}
/// A dict key as `msgspec.to_builtins` writes it into JSON: a str as is, anything else as its JSON text.
fn key(k: J) -> String {
    match k {
        J::String(s) => s,
        other => other.to_string(),
    }
}
fn untyped(u: &Untyped) -> J {
    match u {
        Untyped::Nil => J::Null,
        Untyped::Bool(b) => json!(b),
        Untyped::Int(i) => int(*i),
        Untyped::Float(x) => Codec::to_json(&Value::Float(*x)),
        Untyped::Str(s) => json!(s),
        Untyped::Bytes(b) => bytes(b),
        Untyped::Array(xs) => J::Array(xs.iter().map(untyped).collect()),
        Untyped::Map(m) => J::Object(m.iter().map(|(k, v)| (key(untyped(k)), untyped(v))).collect()),
    }
}

// The typed values as the vectors' `value` (every field by name, defaults included), written from the
// typed structs' own fields so that a field decoded into the wrong place shows.
fn metadata_json(m: &MooncakeAgentMetadata) -> J {
    let groups: Map<String, J> = m
        .kv_group2layeridx
        .iter()
        .map(|(g, kv)| {
            let spec: Map<String, J> = kv.spec.iter().map(|(k, v)| (k.clone(), untyped(v))).collect();
            (key(int(*g)), json!([spec, ints(&kv.layer_indices)]))
        })
        .collect();
    json!({
        "engine_id": m.engine_id, "te_rpc_port": int(m.te_rpc_port), "kv_group2layeridx": groups,
        "block_size": int(m.block_size), "kv_caches_base_addr": ints2(&m.kv_caches_base_addr),
        "block_size_scale": ints2(&m.block_size_scale), "num_blocks": int(m.num_blocks),
        "block_lens": ints2(&m.block_lens), "block_strides": ints2(&m.block_strides),
        "local_ip": m.local_ip, "handshake_port": int(m.handshake_port),
    })
}
fn port_info_json(p: &RemotePortInfo) -> J {
    json!({"num": int(p.num), "host": p.host})
}
fn get_meta_json(m: &GetMetaMsg) -> J {
    json!({"tag": bytes(GetMetaMsg::TAG.as_bytes()), "unused": m.unused})
}
fn done_json(m: &DoneRecvingMsg) -> J {
    let ports: Map<String, J> = m.remote_port_send_num.iter().map(|(p, i)| (key(int(*p)), port_info_json(i))).collect();
    json!({"tag": bytes(DoneRecvingMsg::TAG.as_bytes()), "request_id": m.request_id, "remote_port_send_num": ports})
}

/// Decode, then (value as JSON, re-encoding as hex), or msgspec's error text.
fn typed(message: &str, b: &[u8]) -> Result<(J, String), String> {
    let err = |e: mooncake_wire::codec::DecodeError| e.msgspec_message();
    match message {
        "MooncakeAgentMetadata" => {
            MooncakeAgentMetadata::decode(b).map(|v| (metadata_json(&v), hex::encode(v.encode()))).map_err(err)
        }
        "RemotePortInfo" => {
            RemotePortInfo::decode(b).map(|v| (port_info_json(&v), hex::encode(v.encode()))).map_err(err)
        }
        "GetMetaMsg" => GetMetaMsg::decode(b).map(|v| (get_meta_json(&v), hex::encode(v.encode()))).map_err(err),
        "DoneRecvingMsg" => DoneRecvingMsg::decode(b).map(|v| (done_json(&v), hex::encode(v.encode()))).map_err(err),
        m => panic!("no typed struct for {m}"),
    }
}

#[test]
fn typed_pull_structs_agree_with_every_msgspec_vector() {
    let dir = root().join("conformance/vectors/pull").join(pull::REVISION);
    let table: J =
        serde_json::from_str(&std::fs::read_to_string(root().join("conformance/vectors/pull/revisions.json")).unwrap())
            .unwrap();
    let rev = table["revisions"].as_array().unwrap().iter().find(|r| r["revision"] == pull::REVISION).unwrap();
    let mut total = 0;
    let mut summary = vec![];
    for (message, counts) in rev["messages"].as_object().unwrap() {
        let text = std::fs::read_to_string(dir.join(format!("{message}.jsonl"))).unwrap();
        let mut lines = text.lines();
        let header: J = serde_json::from_str(lines.next().unwrap()).unwrap();
        assert_eq!(header["revision"], pull::REVISION);
        let (mut accepted, mut rejected) = (0, 0);
        for line in lines {
            let c: J = serde_json::from_str(line).unwrap();
            let id = c["id"].as_str().unwrap();
            let got = typed(message, &hex::decode(c["hex"].as_str().unwrap()).unwrap());
            if c["expect"] == "accept" {
                let (value, canonical) =
                    got.unwrap_or_else(|e| panic!("{message} {id}: msgspec accepts, typed rejects: {e}"));
                assert_eq!(canonical, c["canonical_hex"].as_str().unwrap(), "{message} {id}: canonical bytes");
                assert_eq!(value, c["value"], "{message} {id}: decoded value");
                accepted += 1;
            } else {
                assert_eq!(got.err().as_deref(), Some(c["error"].as_str().unwrap()), "{message} {id}: msgspec rejects");
                rejected += 1;
            }
        }
        assert_eq!(
            (accepted, rejected),
            (counts["accept"].as_u64().unwrap(), counts["reject"].as_u64().unwrap()),
            "{message}"
        );
        summary.push(format!("{message}: {accepted} accepted, {rejected} rejected"));
        total += accepted + rejected;
    }
    println!("{}: {total} vectors\n  {}", pull::REVISION, summary.join("\n  "));
    assert_eq!(summary.len(), 4, "the four messages of {}", pull::REVISION);
    assert!(total > 200);
}

/// Every payload of a trace decoded by the typed struct of its sender's message; returns (metadata, get
/// meta, done, ack) counts or the first failure.
fn decode_trace(t: &Trace) -> Result<[usize; 4], String> {
    let mut n = [0; 4];
    for ev in &t.events {
        let Event::Zmq(z) = ev else { return Err(format!("seq {}: not a zmq event", ev.seq())) };
        let payload = z.frames.last().ok_or(format!("seq {}: no frames", z.seq))?;
        let fail = |e: String| format!("seq {}: {e}", z.seq);
        let again = match sender(z).as_str() {
            "decoder" => {
                let r = Request::decode(payload).map_err(|e| fail(e.msgspec_message()))?;
                n[if matches!(r, Request::GetMeta(_)) { 1 } else { 2 }] += 1;
                r.encode()
            }
            _ if payload.as_slice() == pull::ACK => {
                n[3] += 1;
                continue;
            }
            _ => {
                n[0] += 1;
                MooncakeAgentMetadata::decode(payload).map_err(|e| fail(e.msgspec_message()))?.encode()
            }
        };
        if &again != payload {
            return Err(fail(format!("re-encoded {} != {}", hex::encode(&again), hex::encode(payload))));
        }
    }
    Ok(n)
}

#[test]
fn typed_pull_structs_decode_every_trace_payload() {
    let dir = root().join("conformance/traces-pull").join(pull::REVISION);
    let files = mooncake_conformance::jsonl::expand(&[dir]).unwrap();
    assert_eq!(files.len(), 2);
    let mut all = [0; 4];
    for f in &files {
        let t = Trace::load(f).unwrap();
        let n = decode_trace(&t).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        println!("{}: {} metadata, {} GetMetaMsg, {} DoneRecvingMsg, {} ACK", f.display(), n[0], n[1], n[2], n[3]);
        for i in 0..4 {
            all[i] += n[i];
        }
    }
    assert!(all.iter().all(|&k| k > 0), "every message kind occurs: {all:?}");
    assert_eq!(all.iter().sum::<usize>(), 24, "{all:?}");
}

/// The typed structs are those of one revision: vllm-ascend 0.18.0's metadata (flat address list) is refused, while its control tuples, unchanged in 0.23.0.post1, decode.
#[test]
fn older_metadata_is_refused() {
    let files =
        mooncake_conformance::jsonl::expand(&[root().join("conformance/traces-pull/vllm-ascend-0.18.0")]).unwrap();
    let t = Trace::load(&files[0]).unwrap();
    let e = decode_trace(&t).unwrap_err();
    // 0.18.0 sends one flat address list where 0.23.0.post1 expects one list per layer.
    assert!(e.contains("Expected `array`, got `int` - at `$.kv_caches_base_addr[0]`"), "{e}");
    let meta = "92c40c6765745f6d6574615f6d7367a0";
    assert!(Request::decode(&hex::decode(meta).unwrap()).is_ok());
}
