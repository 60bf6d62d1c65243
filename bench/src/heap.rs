//! A counting global allocator for the heap measurements (`peak_alloc`, `scale`): a binary installs
//! [`Counting`] as its `#[global_allocator]`, and [`measure`] reports, around one call, the peak of live heap
//! bytes above what was live before, the bytes still held after it, and the number of allocations.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// The system allocator, counting live bytes, their peak and the allocations.
pub struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static COUNT: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call goes to `System` unchanged; only counters are updated around it.
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

/// (peak bytes above the baseline, bytes retained by the result, allocations, result) of one call of `f`.
/// Meaningful only in a binary whose global allocator is [`Counting`] (all zero otherwise).
pub fn measure<T>(f: impl FnOnce() -> T) -> (usize, usize, usize, T) {
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    let count = COUNT.load(Relaxed);
    let v = f();
    let peak = PEAK.load(Relaxed) - base;
    let retained = LIVE.load(Relaxed) - base;
    (peak, retained, COUNT.load(Relaxed) - count, v)
}
