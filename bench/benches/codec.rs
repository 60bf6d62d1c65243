//! Decode and encode of `MooncakeXferMetadata` and `MooncakeXferResponse`, typed (owned strings, and the
//! borrowed `…Ref` variant) and spec-driven, on the
//! payloads of `mooncake_wire_bench` (small, production, large). One criterion group per payload (`<message>_
//! <size>`), with byte throughput; `scripts/bench.sh` reads the results next to msgspec's.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mooncake_wire::typed::{
    MooncakeXferMetadata, MooncakeXferMetadataRef, MooncakeXferResponse, MooncakeXferResponseRef,
};
use mooncake_wire_bench::{all, codec, METADATA};

fn codec_benches(c: &mut Criterion) {
    let codec = codec();
    for p in all() {
        let mut g = c.benchmark_group(p.id());
        g.throughput(Throughput::Bytes(p.bytes.len() as u64));
        let bytes = p.bytes.as_slice();
        if p.message == METADATA {
            let typed = MooncakeXferMetadata::decode(bytes).unwrap();
            g.bench_function("typed_decode", |b| b.iter(|| MooncakeXferMetadata::decode(black_box(bytes)).unwrap()));
            g.bench_function("typed_ref_decode", |b| {
                b.iter(|| MooncakeXferMetadataRef::decode(black_box(bytes)).unwrap())
            });
            g.bench_function("typed_encode", |b| b.iter(|| black_box(&typed).encode()));
        } else {
            let typed = MooncakeXferResponse::decode(bytes).unwrap();
            g.bench_function("typed_decode", |b| b.iter(|| MooncakeXferResponse::decode(black_box(bytes)).unwrap()));
            g.bench_function("typed_ref_decode", |b| {
                b.iter(|| MooncakeXferResponseRef::decode(black_box(bytes)).unwrap())
            });
            g.bench_function("typed_encode", |b| b.iter(|| black_box(&typed).encode()));
        }
        g.bench_function("spec_decode", |b| b.iter(|| codec.decode(p.message, black_box(bytes)).unwrap()));
        g.bench_function("spec_encode", |b| b.iter(|| codec.encode(p.message, black_box(&p.value)).unwrap()));
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3)).sample_size(50);
    targets = codec_benches
}
criterion_main!(benches);
