//! The typed pull structs (generated from `spec/pull/`: `mooncake_wire::typed::generated::pull`, with
//! `mooncake_wire::typed::pull` re-exporting vllm-ascend 0.23.0.post1) against msgspec's ground truth:
//! every committed vector of every pull revision (`conformance/vectors/pull/`) — an accepted case decodes to
//! the vector's value and re-encodes to msgspec's canonical bytes; a rejected case is rejected with msgspec's
//! error text — and every payload of the committed pull traces (`conformance/traces-pull/`) decodes as the
//! message its sender sends and re-encodes to the bytes on the wire.

use mooncake_trace::trace::sender;
use mooncake_trace::trace::{Event, Trace};
use mooncake_wire::codec::Codec;
use mooncake_wire::typed::generated::pull::{ControlTag, REVISIONS};
use mooncake_wire::typed::pull::{self, ControlMsg, MooncakeAgentMetadata};
use mooncake_wire::typed::{GeneratedRevision, Strictness};
use serde_json::Value as J;

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// Decode with the generated struct, re-encode; the re-encoding as hex and, read back by the spec codec, as
/// `msgspec.to_builtins` JSON (the vectors' `value`); or msgspec's error text.
fn typed(gen: &GeneratedRevision, message: &str, b: &[u8]) -> Result<(J, String), String> {
    let bytes = (gen.round_trip)(message, b, Strictness::Msgspec)
        .expect("a generated message")
        .map_err(|e| e.msgspec_message())?;
    let codec = Codec::builtin(gen.revision).unwrap();
    let value = Codec::to_json(&codec.decode(message, &bytes).map_err(|e| format!("own encoding: {e}"))?);
    Ok((value, hex::encode(bytes)))
}

#[test]
fn generated_pull_structs_agree_with_every_msgspec_vector() {
    let table: J =
        serde_json::from_str(&std::fs::read_to_string(crate::here().join("vectors/pull/revisions.json")).unwrap())
            .unwrap();
    let mut total = 0;
    for gen in &REVISIONS {
        let dir = crate::here().join("vectors/pull").join(gen.revision);
        let rev = table["revisions"].as_array().unwrap().iter().find(|r| r["revision"] == gen.revision).unwrap();
        let mut summary = vec![];
        for (message, counts) in rev["messages"].as_object().unwrap() {
            let text = std::fs::read_to_string(dir.join(format!("{message}.jsonl"))).unwrap();
            let mut lines = text.lines();
            let header: J = serde_json::from_str(lines.next().unwrap()).unwrap();
            assert_eq!(header["revision"], gen.revision);
            let (mut accepted, mut rejected) = (0, 0);
            for line in lines {
                let c: J = serde_json::from_str(line).unwrap();
                let id = c["id"].as_str().unwrap();
                let got = typed(gen, message, &unhex(c["hex"].as_str().unwrap()));
                if c["expect"] == "accept" {
                    let (value, canonical) = got.unwrap_or_else(|e| {
                        panic!("{} {message} {id}: msgspec accepts, typed rejects: {e}", gen.revision)
                    });
                    assert_eq!(canonical, c["canonical_hex"].as_str().unwrap(), "{message} {id}: canonical bytes");
                    assert_eq!(value, c["value"], "{message} {id}: decoded value");
                    accepted += 1;
                } else {
                    assert_eq!(
                        got.err().as_deref(),
                        Some(c["error"].as_str().unwrap()),
                        "{message} {id}: msgspec rejects"
                    );
                    rejected += 1;
                }
            }
            assert_eq!(
                (accepted, rejected),
                (counts["accept"].as_u64().unwrap(), counts["reject"].as_u64().unwrap()),
                "{} {message}",
                gen.revision
            );
            summary.push(format!("{message}: {accepted} accepted, {rejected} rejected"));
            total += accepted + rejected;
        }
        println!("{}:\n  {}", gen.revision, summary.join("\n  "));
        assert_eq!(summary.len(), gen.messages.len(), "{}: vectors for every message", gen.revision);
    }
    assert!(total > 800, "{total}");
}

/// Every payload of a trace decoded by the generated struct of its sender's message (a decoder's payload is
/// matched to its message by element 0, as the prefiller does; a prefiller's is the raw `ACK` or the reply);
/// returns (reply, first tuple, second tuple, ack) counts or the first failure.
fn decode_trace(gen: &GeneratedRevision, t: &Trace) -> Result<[usize; 4], String> {
    let rev = mooncake_wire::spec::Spec::builtin().revision(gen.revision).unwrap();
    let reply = rev.transport.messages.iter().find(|m| m.from == "prefiller" && m.encoding == "msgpack").unwrap();
    let tuples: Vec<&str> = ControlTag::ALL.iter().map(|(_, m)| *m).filter(|m| rev.structs.contains_key(*m)).collect();
    let mut n = [0; 4];
    for ev in &t.events {
        let Event::Zmq(z) = ev else { return Err(format!("seq {}: not a zmq event", ev.seq())) };
        let payload = z.frames.last().ok_or(format!("seq {}: no frames", z.seq))?;
        let fail = |e: String| format!("seq {}: {e}", z.seq);
        let message = match sender(z).as_str() {
            "decoder" => {
                let m = ControlTag::first_of(payload).and_then(|t| t.message()).unwrap_or(tuples[0]);
                n[1 + tuples.iter().position(|x| *x == m).unwrap_or(0)] += 1;
                m
            }
            _ if rev
                .message("Ack")
                .is_some_and(|a| a.constants.iter().any(|c| c.bytes.as_bytes() == payload.as_slice())) =>
            {
                n[3] += 1;
                continue;
            }
            _ => {
                n[0] += 1;
                reply.name.as_str()
            }
        };
        let again =
            (gen.round_trip)(message, payload, Strictness::Msgspec).unwrap().map_err(|e| fail(e.msgspec_message()))?;
        if &again != payload {
            return Err(fail(format!("re-encoded {} != {}", hex::encode(&again), hex::encode(payload))));
        }
    }
    Ok(n)
}

#[test]
fn generated_pull_structs_decode_every_trace_payload() {
    for gen in &REVISIONS {
        let dir = crate::here().join("traces-pull").join(gen.revision);
        let files = mooncake_trace::jsonl::expand(&[dir]).unwrap();
        assert!(!files.is_empty(), "{}", gen.revision);
        let mut all = [0; 4];
        for f in &files {
            let t = Trace::load(f).unwrap();
            let n = decode_trace(gen, &t).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            println!("{}: {} replies, {} + {} control tuples, {} ACK", f.display(), n[0], n[1], n[2], n[3]);
            for i in 0..4 {
                all[i] += n[i];
            }
        }
        assert!(all.iter().all(|&k| k > 0), "{}: every message kind occurs: {all:?}", gen.revision);
    }
}

/// `typed::pull` is vllm-ascend 0.23.0.post1: its control tuples match by tag and re-encode, and 0.18.0's
/// metadata (one flat address list) is refused while its control tuples, unchanged, decode.
#[test]
fn typed_pull_is_the_newest_released_revision() {
    assert_eq!(pull::REVISION, "vllm-ascend-0.23.0.post1");
    let files = mooncake_trace::jsonl::expand(&[crate::here().join("traces-pull/vllm-ascend-0.18.0")]).unwrap();
    let t = Trace::load(&files[0]).unwrap();
    let (mut tuples, mut refused) = (0, 0);
    for ev in &t.events {
        let Event::Zmq(z) = ev else { continue };
        let payload = z.frames.last().unwrap();
        if sender(z).as_str() == "decoder" {
            let m = ControlMsg::decode(payload).unwrap();
            assert_eq!(&m.encode(), payload);
            tuples += 1;
        } else if payload.as_slice() != pull::ACK {
            // 0.18.0 sends one flat address list where 0.23.0.post1 expects one list per layer.
            let e = MooncakeAgentMetadata::decode(payload).unwrap_err().msgspec_message();
            assert_eq!(e, "Expected `array`, got `int` - at `$.kv_caches_base_addr[0]`");
            refused += 1;
        }
    }
    assert!(tuples > 0 && refused > 0, "{tuples} tuples, {refused} replies");
}
