//! `mooncake-conformance validate` on recorded traces: one trace (the 0.33.0 layout reuse / miss scenario, the
//! longest) and every bundled trace, as the CLI runs them (load, decode every frame, every check).

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mooncake_trace::validate::validate_file;

fn traces() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../conformance/traces")
}

fn every_trace() -> Vec<PathBuf> {
    let mut out = vec![];
    for rev in std::fs::read_dir(traces()).unwrap() {
        let rev = rev.unwrap().path();
        if rev.is_dir() {
            for f in std::fs::read_dir(&rev).unwrap() {
                let f = f.unwrap().path();
                if f.extension().is_some_and(|e| e == "jsonl") {
                    out.push(f);
                }
            }
        }
    }
    out.sort();
    out
}

fn validate_benches(c: &mut Criterion) {
    let one = traces().join("vllm-0.33.0/h1_layout_reuse_and_miss.jsonl");
    let all = every_trace();
    let len = |fs: &[PathBuf]| fs.iter().map(|f| std::fs::metadata(f).unwrap().len()).sum::<u64>();
    for f in &all {
        let r = validate_file(f);
        assert!(r.ok(), "{}: {:?}", f.display(), r.findings);
    }
    let mut g = c.benchmark_group("validate");
    g.throughput(Throughput::Bytes(len(std::slice::from_ref(&one))));
    g.bench_function("h1_layout_reuse_and_miss", |b| b.iter(|| assert!(validate_file(black_box(&one)).ok())));
    g.throughput(Throughput::Bytes(len(&all)));
    g.bench_function(format!("all_{}_traces", all.len()), |b| {
        b.iter(|| {
            for f in &all {
                assert!(validate_file(black_box(f)).ok());
            }
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3)).sample_size(30);
    targets = validate_benches
}
criterion_main!(benches);
