//! How decode cost grows with the work (issue 17, item 3): `MooncakeXferMetadata` along three axes — requests
//! (1 → 4,096, with 4 groups of 256 blocks and 122 regions), KV-cache groups (1 → 8, with 64 requests) and
//! registered regions (1 → 512, with 64 requests) — and the FINISH reply along the request axis. For each
//! point it writes the payload for the msgspec side (`<dir>/<id>.msgpack`, `manifest.json`, `revision.json`,
//! the files `msgspec_bench.py` reads) and measures the Rust decoders: typed and spec-driven decode time
//! (median and best of `REPEAT` loops of about `MIN_TIME` each) and the heap of one typed decode.
//! Writes `<dir>/rust.json`.
//!
//!   scale <dir> [--quick]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use mooncake_wire::spec::Spec;
use mooncake_wire::typed::{self, MooncakeXferMetadata, MooncakeXferResponse};
use mooncake_wire_bench::heap::{measure, Counting};
use mooncake_wire_bench::{codec, metadata, response, Size, METADATA, PRODUCTION, RESPONSE};
use serde_json::json;

#[global_allocator]
static A: Counting = Counting;

/// One point: the axis it varies, the value there, the message and its shape.
struct Point {
    axis: &'static str,
    x: usize,
    message: &'static str,
    size: Size,
}

fn points() -> Vec<Point> {
    let mut out = vec![];
    for &n in &[1, 4, 16, 64, 256, 1024, 4096] {
        let size = Size { name: "requests", requests: n, ..PRODUCTION };
        out.push(Point { axis: "requests", x: n, message: METADATA, size });
        out.push(Point { axis: "reply_requests", x: n, message: RESPONSE, size });
    }
    for &g in &[1, 2, 4, 8] {
        out.push(Point {
            axis: "groups",
            x: g,
            message: METADATA,
            size: Size { name: "groups", groups: g, ..PRODUCTION },
        });
    }
    for &r in &[1, 2, 8, 32, 128, 512] {
        out.push(Point {
            axis: "regions",
            x: r,
            message: METADATA,
            size: Size { name: "regions", regions: r, ..PRODUCTION },
        });
    }
    out
}

/// (median, best) seconds per call of `f` over `repeat` loops, each long enough to last about `min_time`.
fn time<T>(mut f: impl FnMut() -> T, repeat: usize, min_time: Duration) -> (f64, f64) {
    let mut loops = 1u64;
    loop {
        let t = Instant::now();
        for _ in 0..loops {
            std::hint::black_box(f());
        }
        if t.elapsed() >= min_time || loops >= 1 << 24 {
            break;
        }
        loops *= 2;
    }
    let mut runs: Vec<f64> = (0..repeat)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..loops {
                std::hint::black_box(f());
            }
            t.elapsed().as_secs_f64() / loops as f64
        })
        .collect();
    runs.sort_by(f64::total_cmp);
    (runs[runs.len() / 2], runs[0])
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().expect("usage: scale <dir> [--quick]"));
    let quick = args.next().as_deref() == Some("--quick");
    let (repeat, min_time) = if quick { (3, Duration::from_millis(10)) } else { (9, Duration::from_millis(60)) };
    std::fs::create_dir_all(&dir).expect("create the output directory");
    let codec = codec();
    let (mut manifest, mut rows) = (vec![], vec![]);
    for p in points() {
        let id = format!("{}_{}", p.axis, p.x);
        let bytes = if p.message == METADATA { metadata(p.size).encode() } else { response(p.size).encode() };
        std::fs::write(dir.join(format!("{id}.msgpack")), &bytes).expect("write a payload");
        manifest.push(
            json!({"id": id, "message": p.message, "size": id, "file": format!("{id}.msgpack"), "bytes": bytes.len()}),
        );
        // Both decoders must accept it and agree with the encoder, or the timing means nothing.
        let value = codec.decode(p.message, &bytes).expect("spec-driven decode");
        assert_eq!(codec.encode(p.message, &value).expect("re-encode"), bytes, "{id}: round trip");
        let (typed, heap) = if p.message == METADATA {
            let (peak, kept, n, v) = measure(|| MooncakeXferMetadata::decode(&bytes).unwrap());
            drop(v);
            (time(|| MooncakeXferMetadata::decode(&bytes).unwrap(), repeat, min_time), (peak, kept, n))
        } else {
            let (peak, kept, n, v) = measure(|| MooncakeXferResponse::decode(&bytes).unwrap());
            drop(v);
            (time(|| MooncakeXferResponse::decode(&bytes).unwrap(), repeat, min_time), (peak, kept, n))
        };
        let spec = time(|| codec.decode(p.message, &bytes).unwrap(), repeat, min_time);
        eprintln!("{id:<22} {:>9} B  typed {:>10.2} µs  spec {:>10.2} µs", bytes.len(), typed.0 * 1e6, spec.0 * 1e6);
        rows.push(json!({
            "id": id, "axis": p.axis, "x": p.x, "message": p.message, "wire_bytes": bytes.len(),
            "typed_median_s": typed.0, "typed_best_s": typed.1, "spec_median_s": spec.0, "spec_best_s": spec.1,
            "typed_peak_bytes": heap.0, "typed_retained_bytes": heap.1, "typed_allocations": heap.2,
        }));
    }
    let rev = Spec::builtin().revision(typed::REVISION).expect("built-in revision").clone();
    std::fs::write(dir.join("revision.json"), serde_json::to_string(&*rev).expect("revision serializes"))
        .expect("write revision.json");
    std::fs::write(dir.join("manifest.json"), serde_json::to_string_pretty(&manifest).unwrap()).expect("manifest");
    std::fs::write(dir.join("rust.json"), serde_json::to_string_pretty(&rows).unwrap()).expect("rust.json");
    println!("{} points in {}", rows.len(), dir.display());
}
