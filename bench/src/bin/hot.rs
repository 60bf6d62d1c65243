//! Runs one codec operation on one payload many times, for profilers (`perf record`, `valgrind
//! --tool=callgrind --toggle-collect='hot::run_*'`, whose instruction counts stay exact on a busy machine).
//!
//! usage: hot OP PAYLOAD_ID ITERATIONS, OP one of typed_decode typed_ref_decode typed_encode spec_decode
//! spec_encode

use std::hint::black_box;

use mooncake_wire::codec::{Codec, Value};
use mooncake_wire::typed::{
    MooncakeXferMetadata, MooncakeXferMetadataRef, MooncakeXferResponse, MooncakeXferResponseRef,
};
use mooncake_wire_bench::{codec, payload, MESSAGES, METADATA, SIZES};

#[inline(never)]
fn run_typed_decode_metadata(b: &[u8]) -> usize {
    MooncakeXferMetadata::decode(b).unwrap().req_blocks.len()
}
#[inline(never)]
fn run_typed_decode_response(b: &[u8]) -> usize {
    MooncakeXferResponse::decode(b).unwrap().ok_reqs.map_or(0, |v| v.len())
}
#[inline(never)]
fn run_typed_ref_decode_metadata(b: &[u8]) -> usize {
    MooncakeXferMetadataRef::decode(b).unwrap().req_blocks.len()
}
#[inline(never)]
fn run_typed_ref_decode_response(b: &[u8]) -> usize {
    MooncakeXferResponseRef::decode(b).unwrap().ok_reqs.map_or(0, |v| v.len())
}
#[inline(never)]
fn run_typed_encode_metadata(m: &MooncakeXferMetadata) -> usize {
    m.encode().len()
}
#[inline(never)]
fn run_typed_encode_response(m: &MooncakeXferResponse) -> usize {
    m.encode().len()
}
#[inline(never)]
fn run_spec_decode(c: &Codec, message: &str, b: &[u8]) -> usize {
    c.decode(message, b).unwrap().as_struct().unwrap().fields.len()
}
#[inline(never)]
fn run_spec_encode(c: &Codec, message: &str, v: &Value) -> usize {
    c.encode(message, v).unwrap().len()
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let (op, id, n) = (a[1].as_str(), a[2].as_str(), a[3].parse::<usize>().unwrap());
    let p = SIZES
        .iter()
        .flat_map(|s| MESSAGES.iter().map(move |m| (m, s)))
        .map(|(m, s)| payload(m, *s))
        .find(|p| p.id() == id);
    let p = p.expect("payload id");
    let codec = codec();
    let meta = p.message == METADATA;
    let tm = MooncakeXferMetadata::decode(&p.bytes).ok();
    let tr = MooncakeXferResponse::decode(&p.bytes).ok();
    let b = p.bytes.as_slice();
    let mut total = 0usize;
    for _ in 0..n {
        total += match (op, meta) {
            ("typed_decode", true) => run_typed_decode_metadata(black_box(b)),
            ("typed_decode", false) => run_typed_decode_response(black_box(b)),
            ("typed_ref_decode", true) => run_typed_ref_decode_metadata(black_box(b)),
            ("typed_ref_decode", false) => run_typed_ref_decode_response(black_box(b)),
            ("typed_encode", true) => run_typed_encode_metadata(black_box(tm.as_ref().unwrap())),
            ("typed_encode", false) => run_typed_encode_response(black_box(tr.as_ref().unwrap())),
            ("spec_decode", _) => run_spec_decode(&codec, p.message, black_box(b)),
            ("spec_encode", _) => run_spec_encode(&codec, p.message, black_box(&p.value)),
            _ => panic!("unknown op {op}"),
        };
    }
    println!("{total}");
}
