//! Heap cost of decoding one message: a counting global allocator records, around a single decode, the peak of
//! live heap bytes above what was live before (the decoded message plus any scratch space), the bytes still
//! held by the result, and the number of allocations. Prints one JSON object per payload and decoder.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use mooncake_wire::typed::{
    MooncakeXferMetadata, MooncakeXferMetadataRef, MooncakeXferResponse, MooncakeXferResponseRef,
};
use mooncake_wire_bench::{all, codec, Payload, METADATA};

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static COUNT: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = System.alloc(l);
        if !p.is_null() {
            let live = LIVE.fetch_add(l.size(), Relaxed) + l.size();
            PEAK.fetch_max(live, Relaxed);
            COUNT.fetch_add(1, Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l);
        LIVE.fetch_sub(l.size(), Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = System.realloc(p, l, new);
        if !q.is_null() {
            if new >= l.size() {
                let live = LIVE.fetch_add(new - l.size(), Relaxed) + (new - l.size());
                PEAK.fetch_max(live, Relaxed);
            } else {
                LIVE.fetch_sub(l.size() - new, Relaxed);
            }
            COUNT.fetch_add(1, Relaxed);
        }
        q
    }
}

#[global_allocator]
static A: Counting = Counting;

/// (peak bytes above the baseline, bytes retained by the result, allocations) of one call of `f`.
fn measure<T>(f: impl FnOnce() -> T) -> (usize, usize, usize, T) {
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    let count = COUNT.load(Relaxed);
    let v = f();
    let peak = PEAK.load(Relaxed) - base;
    let retained = LIVE.load(Relaxed) - base;
    (peak, retained, COUNT.load(Relaxed) - count, v)
}

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
