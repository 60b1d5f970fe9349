#![allow(clippy::unwrap_used)]
//! Property test: for any count, initial batch and set of failing indices,
//! slow_start_batch calls exactly the operations of the batches up to and
//! including the first failing one, in the documented sizes.

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;

use ctrlkit_batch::{BatchSizes, slow_start_batch};
use futures::executor::block_on;
use proptest::prelude::*;

/// A future that returns `Pending` once before completing, so every
/// operation of a batch is in flight before any finishes.
struct YieldOnce(bool);

impl std::future::Future for YieldOnce {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if self.0 {
            std::task::Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }
}

proptest! {
    #[test]
    fn slow_start_batch_matches_its_model(
        count in 0usize..200,
        initial in 0usize..9,
        failing in proptest::collection::btree_set(0usize..220, 0..4),
    ) {
        let completed = Cell::new(0usize);
        let in_flight = Cell::new(0usize);
        // (index, completed-before-call) per call.
        let calls = RefCell::new(Vec::new());
        let peaks = RefCell::new(Vec::<usize>::new());
        let peak = Cell::new(0usize);

        let result = block_on(slow_start_batch(count, initial, |i| {
            calls.borrow_mut().push((i, completed.get()));
            let fail = failing.contains(&i);
            let (completed, in_flight, peak, peaks) = (&completed, &in_flight, &peak, &peaks);
            async move {
                in_flight.set(in_flight.get() + 1);
                peak.set(peak.get().max(in_flight.get()));
                YieldOnce(false).await;
                in_flight.set(in_flight.get() - 1);
                completed.set(completed.get() + 1);
                if in_flight.get() == 0 {
                    peaks.borrow_mut().push(peak.replace(0));
                }
                if fail { Err(i) } else { Ok(()) }
            }
        }));

        // Model: walk the schedule until a batch contains a failing index.
        let mut expected_sizes = Vec::new();
        let mut start = 0;
        let mut failed_batch: Option<BTreeSet<usize>> = None;
        for size in BatchSizes::new(count, initial) {
            expected_sizes.push(size);
            let batch: BTreeSet<usize> = (start..start + size).collect();
            start += size;
            let failures: BTreeSet<usize> = batch.intersection(&failing).copied().collect();
            if !failures.is_empty() {
                failed_batch = Some(failures);
                break;
            }
        }
        let called = start;

        let calls = calls.into_inner();
        // Every index up to the end of the failing batch, once, in order.
        prop_assert_eq!(calls.iter().map(|c| c.0).collect::<Vec<_>>(), (0..called).collect::<Vec<_>>());
        // Batch boundaries: every call of a batch is made before any of its
        // futures completes, and after the whole previous batch completed.
        let mut observed_sizes: Vec<usize> = Vec::new();
        let mut boundary = None;
        for &(_, done) in &calls {
            if boundary == Some(done) {
                *observed_sizes.last_mut().unwrap() += 1;
            } else {
                prop_assert_eq!(done, observed_sizes.iter().sum::<usize>(), "batch started before the previous one finished");
                observed_sizes.push(1);
                boundary = Some(done);
            }
        }
        prop_assert_eq!(&observed_sizes, &expected_sizes);
        // Operations of one batch are all in flight together.
        prop_assert_eq!(&peaks.into_inner(), &expected_sizes);
        prop_assert_eq!(completed.get(), called);
        if let Some(first) = expected_sizes.first() {
            prop_assert_eq!(*first, initial.max(1).min(count));
        }

        match failed_batch {
            None => prop_assert_eq!(result, Ok(count)),
            Some(failures) => {
                let err = result.unwrap_err();
                prop_assert_eq!(err.failures, failures.len());
                prop_assert_eq!(err.successes, called - failures.len());
                prop_assert_eq!(err.not_started, count - called);
                prop_assert_eq!(err.error, *failures.iter().next().unwrap());
                prop_assert_eq!(err.successes + err.failures + err.not_started, count);
            }
        }
    }
}
