//! Issue 16: the generated typed decode of the production `MooncakeXferMetadata` in every generation-2 push
//! revision (`mooncake_wire_bench::revisions`), owned strings and borrowed. One criterion group,
//! `typed_revision_decode`, one function per revision (`<module>` owned, `<module>_ref` borrowed), with byte
//! throughput; `scripts/bench.sh` sets them against msgspec decoding the same bytes with that revision's class.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mooncake_wire_bench::revisions::generation2;

fn revision_benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("typed_revision_decode");
    for p in generation2() {
        g.throughput(Throughput::Bytes(p.bytes.len() as u64));
        let bytes = p.bytes.as_slice();
        g.bench_function(&p.id, |b| b.iter(|| p.typed_decode(black_box(bytes), false)));
        g.bench_function(format!("{}_ref", p.id), |b| b.iter(|| p.typed_decode(black_box(bytes), true)));
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(2)).sample_size(30);
    targets = revision_benches
}
criterion_main!(benches);
