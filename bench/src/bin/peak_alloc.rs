//! Heap cost of decoding one message: a counting global allocator records, around a single decode, the peak of
//! live heap bytes above what was live before (the decoded message plus any scratch space), the bytes still
//! held by the result, and the number of allocations. Prints one JSON object per payload and decoder.

use mooncake_wire::typed::{
    MooncakeXferMetadata, MooncakeXferMetadataRef, MooncakeXferResponse, MooncakeXferResponseRef,
};
use mooncake_wire_bench::heap::{measure, Counting};
use mooncake_wire_bench::{all, codec, Payload, METADATA};

#[global_allocator]
static A: Counting = Counting;

fn main() {
    let codec = codec();
    let payloads: Vec<Payload> = all();
    let mut rows = vec![];
    for p in &payloads {
        let typed = if p.message == METADATA {
            let (peak, kept, n, v) = measure(|| MooncakeXferMetadata::decode(&p.bytes).unwrap());
            drop(v);
            (peak, kept, n)
        } else {
            let (peak, kept, n, v) = measure(|| MooncakeXferResponse::decode(&p.bytes).unwrap());
            drop(v);
            (peak, kept, n)
        };
        let typed_ref = if p.message == METADATA {
            let (peak, kept, n, v) = measure(|| MooncakeXferMetadataRef::decode(&p.bytes).unwrap());
            drop(v);
            (peak, kept, n)
        } else {
            let (peak, kept, n, v) = measure(|| MooncakeXferResponseRef::decode(&p.bytes).unwrap());
            drop(v);
            (peak, kept, n)
        };
        let (peak, kept, n, v) = measure(|| codec.decode(p.message, &p.bytes).unwrap());
        drop(v);
        for (decoder, (peak, kept, n)) in [("typed", typed), ("typed_ref", typed_ref), ("spec", (peak, kept, n))] {
            rows.push(serde_json::json!({
                "id": p.id(), "decoder": decoder, "wire_bytes": p.bytes.len(),
                "peak_bytes": peak, "retained_bytes": kept, "allocations": n,
            }));
        }
    }
    println!("{}", serde_json::to_string_pretty(&rows).unwrap());
}
