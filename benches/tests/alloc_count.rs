//! Counts heap allocations made by the queue in steady state: once warmed
//! up, an add → get → done cycle of `u64` items must not allocate.
//!
//! A counting global allocator records allocations made on the current
//! thread while counting is switched on, so the other test threads of this
//! binary do not disturb the count. Run with `--nocapture` to see the counts.
#![allow(clippy::unwrap_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;
use std::task::{Context, Poll, Waker};

use std::sync::Arc;

use ctrlkit_benches::memory::AtomicMetrics;
use ctrlkit_workqueue::WorkQueue;

struct Counting;

thread_local! {
    // Per thread, so tests running in parallel do not see each other's
    // allocations. `const` and `Copy`: using them never allocates, so the
    // allocator may touch them without recursing.
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// `unsafe_code` is denied workspace-wide. Implementing `GlobalAlloc` requires
// `unsafe impl`; this one only forwards every call unchanged to `System` and
// bumps a counter, so it upholds `GlobalAlloc`'s contract exactly as
// `System` does.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: as above; `ptr` was allocated by `System` through us.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn count() {
    // `try_with`: during thread teardown the slot may be gone.
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
    }
}

/// Allocations made on this thread while running `f`.
fn allocations_in(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.with(Cell::get);
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCATIONS.with(Cell::get) - before
}

const WARM_UP: u64 = 10_000;
const CYCLES: u64 = 100_000;

/// Polls a future that must be ready at once (a `get` with an item queued).
fn ready<F: Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    match fut.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("get() was pending with an item queued"),
    }
}

fn sync_cycle(queue: &WorkQueue<u64>, key: u64) {
    queue.add(key);
    let item = queue.try_get().unwrap();
    queue.done(&item);
}

fn async_cycle(queue: &WorkQueue<u64>, key: u64) {
    queue.add(key);
    let item = ready(queue.get()).unwrap();
    queue.done(&item);
}

fn priority_cycle(queue: &WorkQueue<u64>, key: u64) {
    queue.add_with_priority(key, 10);
    let item = queue.try_get().unwrap();
    queue.done(&item);
}

fn assert_no_allocation(name: &str, cycle: fn(&WorkQueue<u64>, u64)) {
    assert_no_allocation_on(name, WorkQueue::<u64>::new(), cycle);
}

fn assert_no_allocation_on(name: &str, queue: WorkQueue<u64>, cycle: fn(&WorkQueue<u64>, u64)) {
    for key in 0..WARM_UP {
        cycle(&queue, key);
    }
    let allocations = allocations_in(|| {
        for key in WARM_UP..WARM_UP + CYCLES {
            cycle(&queue, key);
        }
    });
    println!(
        "{name}: {allocations} allocations over {CYCLES} cycles ({} per cycle)",
        allocations as f64 / CYCLES as f64
    );
    assert_eq!(allocations, 0, "{name} allocates in steady state");
    assert_eq!(queue.len(), 0);
}

#[test]
fn the_counter_sees_allocations() {
    // Guards the other tests against a counter that never counts.
    let n = allocations_in(|| drop(std::hint::black_box(Box::new(7u64))));
    assert_eq!(n, 1);
}

#[test]
fn add_try_get_done_does_not_allocate() {
    assert_no_allocation("add/try_get/done", sync_cycle);
}

#[test]
fn add_get_done_does_not_allocate() {
    assert_no_allocation("add/get().await/done", async_cycle);
}

#[test]
fn dedup_add_does_not_allocate() {
    let queue = WorkQueue::<u64>::new();
    queue.add(1);
    let allocations = allocations_in(|| {
        for _ in 0..CYCLES {
            queue.add(1);
        }
    });
    println!("dedup add: {allocations} allocations over {CYCLES} adds");
    assert_eq!(allocations, 0);
    assert_eq!(queue.len(), 1);
}

#[test]
fn priority_add_get_done_does_not_allocate() {
    assert_no_allocation("add_with_priority/try_get/done", priority_cycle);
}

#[test]
fn add_get_done_with_metrics_does_not_allocate() {
    // Metrics keep an add time per queued item and a start time per item
    // being processed; once warmed up, recording them allocates nothing.
    let queue = WorkQueue::<u64>::builder()
        .name("alloc_count")
        .metrics_provider(Arc::new(AtomicMetrics))
        .build();
    assert_no_allocation_on("add/try_get/done with metrics", queue, sync_cycle);
}
