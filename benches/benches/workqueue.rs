//! Criterion micro-benchmarks of single queue operations, on one thread.
//!
//! Tuned to finish in well under a minute: `cargo bench -p ctrlkit-benches`.
#![allow(clippy::unwrap_used, missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ctrlkit_workqueue::WorkQueue;
use ctrlkit_workqueue::rate_limiter::default_controller_rate_limiter;

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2))
}

fn benches(c: &mut Criterion) {
    // Delays need a tokio runtime for their timer.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = runtime.enter();

    let mut group = c.benchmark_group("workqueue");
    group.throughput(Throughput::Elements(1));

    group.bench_function("add_get_done_cycle", |b| {
        let queue = WorkQueue::<u64>::new();
        let mut key = 0u64;
        b.iter(|| {
            key += 1;
            queue.add(black_box(key));
            let item = queue.try_get().unwrap();
            queue.done(black_box(&item));
        });
    });

    group.bench_function("dedup_add", |b| {
        let queue = WorkQueue::<u64>::new();
        for key in 0..1024 {
            queue.add(key);
        }
        let mut key = 0u64;
        b.iter(|| {
            key = (key + 1) % 1024;
            queue.add(black_box(key));
        });
    });

    group.bench_function("add_after", |b| {
        // Bounded key space: re-adding a waiting key keeps the earliest due
        // time, so the delay structure stays at 10,000 entries.
        let queue = WorkQueue::<u64>::new();
        let mut key = 0u64;
        b.iter(|| {
            key = (key + 1) % 10_000;
            queue.add_after(black_box(key), Duration::from_secs(3600));
        });
    });

    group.bench_function("add_rate_limited", |b| {
        let queue = WorkQueue::<u64>::builder()
            .rate_limiter(default_controller_rate_limiter())
            .build();
        let mut key = 0u64;
        b.iter(|| {
            key = (key + 1) % 10_000;
            queue.add_rate_limited(black_box(key));
        });
    });

    group.bench_function("priority_add_get_done_cycle", |b| {
        let queue = WorkQueue::<u64>::new();
        let mut key = 0u64;
        b.iter(|| {
            key += 1;
            queue.add_with_priority(black_box(key), (key % 3) as i32 - 1);
            let item = queue.try_get().unwrap();
            queue.done(&item);
        });
    });
    group.finish();
}

criterion_group! {
    name = workqueue;
    config = config();
    targets = benches
}
criterion_main!(workqueue);
