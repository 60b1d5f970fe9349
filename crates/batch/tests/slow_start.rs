#![allow(clippy::unwrap_used)]
//! Behaviour of `slow_start_batch` that controllers rely on.

use std::cell::{Cell, RefCell};
use std::error::Error as _;
use std::rc::Rc;
use std::time::Duration;

use ctrlkit_batch::{BatchError, BatchSizes, SLOW_START_INITIAL_BATCH_SIZE, slow_start_batch};

/// Records, for every call of the op, how many futures had completed when it
/// was made: calls made with the same value belong to the same batch.
#[derive(Default)]
struct Recorder {
    completed: Cell<usize>,
    calls: RefCell<Vec<(usize, usize)>>,
}

impl Recorder {
    fn batch_sizes(&self) -> Vec<usize> {
        let mut sizes: Vec<(usize, usize)> = Vec::new();
        for &(_, completed_before) in self.calls.borrow().iter() {
            match sizes.last_mut() {
                Some((mark, n)) if *mark == completed_before => *n += 1,
                _ => sizes.push((completed_before, 1)),
            }
        }
        sizes.into_iter().map(|(_, n)| n).collect()
    }

    fn indices(&self) -> Vec<usize> {
        self.calls.borrow().iter().map(|&(i, _)| i).collect()
    }
}

async fn run_with(
    count: usize,
    initial: usize,
    fails: impl Fn(usize) -> bool,
    rec: &Recorder,
) -> Result<usize, BatchError<usize>> {
    slow_start_batch(count, initial, |i| {
        rec.calls.borrow_mut().push((i, rec.completed.get()));
        let fail = fails(i);
        async move {
            tokio::task::yield_now().await;
            rec.completed.set(rec.completed.get() + 1);
            if fail { Err(i) } else { Ok(()) }
        }
    })
    .await
}

#[tokio::test]
async fn all_succeed_in_doubling_batches_capped_by_what_remains() {
    let rec = Recorder::default();
    let result = run_with(10, SLOW_START_INITIAL_BATCH_SIZE, |_| false, &rec).await;
    assert_eq!(result, Ok(10));
    assert_eq!(rec.batch_sizes(), [1, 2, 4, 3]);
    assert_eq!(rec.indices(), (0..10).collect::<Vec<_>>());
}

#[tokio::test]
async fn larger_initial_batch_doubles_from_there() {
    let rec = Recorder::default();
    assert_eq!(run_with(20, 3, |_| false, &rec).await, Ok(20));
    assert_eq!(rec.batch_sizes(), [3, 6, 11]);
}

#[tokio::test]
async fn zero_count_calls_nothing() {
    for initial in [0, 1, 7] {
        let rec = Recorder::default();
        assert_eq!(run_with(0, initial, |_| true, &rec).await, Ok(0));
        assert!(rec.calls.borrow().is_empty());
    }
}

#[tokio::test]
async fn zero_initial_batch_is_treated_as_one() {
    let rec = Recorder::default();
    assert_eq!(run_with(5, 0, |_| false, &rec).await, Ok(5));
    assert_eq!(rec.batch_sizes(), [1, 2, 2]);
}

#[tokio::test]
async fn huge_initial_batch_runs_everything_in_one_batch() {
    let rec = Recorder::default();
    assert_eq!(run_with(5, usize::MAX, |_| false, &rec).await, Ok(5));
    assert_eq!(rec.batch_sizes(), [5]);
    assert_eq!(
        BatchSizes::new(usize::MAX, usize::MAX).collect::<Vec<_>>(),
        [usize::MAX]
    );
}

#[tokio::test]
async fn a_failing_first_call_stops_everything_else() {
    let rec = Recorder::default();
    let err = run_with(500, 1, |_| true, &rec).await.unwrap_err();
    assert_eq!(rec.indices(), [0]);
    assert_eq!(
        (err.successes, err.failures, err.not_started, err.error),
        (0, 1, 499, 0)
    );
    assert_eq!(err.unsuccessful(), 500);
}

#[tokio::test]
async fn the_failing_batch_runs_to_completion_and_no_later_batch_starts() {
    let rec = Recorder::default();
    // Batches 0 | 1 2 | 3 4 5 6 | 7 8 9: index 4 and 6 fail.
    let err = run_with(10, 1, |i| i == 4 || i == 6, &rec)
        .await
        .unwrap_err();
    assert_eq!(rec.batch_sizes(), [1, 2, 4]);
    assert_eq!(
        rec.completed.get(),
        7,
        "every call of the failing batch completed"
    );
    assert_eq!(err.successes, 5);
    assert_eq!(err.failures, 2);
    assert_eq!(err.not_started, 3);
    assert_eq!(err.error, 4);
    assert_eq!(err.clone().into_inner(), 4);
}

#[tokio::test(start_paused = true)]
async fn first_error_is_the_lowest_index_not_the_earliest_to_fail() {
    // Index 1 fails late, index 2 fails early; both in the second batch.
    let err = slow_start_batch(3, 1, |i| async move {
        match i {
            1 => {
                tokio::time::sleep(Duration::from_secs(10)).await;
                Err("late")
            }
            2 => {
                tokio::time::sleep(Duration::from_millis(1)).await;
                Err("early")
            }
            _ => Ok(()),
        }
    })
    .await
    .unwrap_err();
    assert_eq!(err.error, "late");
    assert_eq!(err.failures, 2);
}

#[tokio::test(start_paused = true)]
async fn operations_of_one_batch_are_in_flight_together() {
    let in_flight = Cell::new(0usize);
    let peaks = RefCell::new(Vec::new());
    let peak = Cell::new(0usize);
    let started = tokio::time::Instant::now();
    let result = slow_start_batch(15, 1, |_| {
        let (in_flight, peak, peaks) = (&in_flight, &peak, &peaks);
        async move {
            in_flight.set(in_flight.get() + 1);
            peak.set(peak.get().max(in_flight.get()));
            tokio::time::sleep(Duration::from_secs(1)).await;
            in_flight.set(in_flight.get() - 1);
            if in_flight.get() == 0 {
                peaks.borrow_mut().push(peak.replace(0));
            }
            Ok::<(), ()>(())
        }
    })
    .await;
    assert_eq!(result, Ok(15));
    assert_eq!(*peaks.borrow(), [1, 2, 4, 8]);
    // One (virtual) second per batch, not per operation.
    assert_eq!(started.elapsed(), Duration::from_secs(4));
}

/// Counts futures dropped before they finished.
struct DropGuard {
    finished: bool,
    dropped_unfinished: Rc<Cell<usize>>,
}

impl Drop for DropGuard {
    fn drop(&mut self) {
        if !self.finished {
            self.dropped_unfinished
                .set(self.dropped_unfinished.get() + 1);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn dropping_the_future_cancels_the_batch_in_flight() {
    let called = RefCell::new(Vec::new());
    let finished = Cell::new(0usize);
    let dropped_unfinished = Rc::new(Cell::new(0usize));
    let run = slow_start_batch(10, 1, |i| {
        called.borrow_mut().push(i);
        let dropped_unfinished = dropped_unfinished.clone();
        let finished = &finished;
        async move {
            let mut guard = DropGuard {
                finished: false,
                dropped_unfinished,
            };
            // Batch k (0-based) takes k+1 virtual seconds.
            let secs = u64::try_from(i + 1).unwrap().ilog2() + 1;
            tokio::time::sleep(Duration::from_secs(u64::from(secs))).await;
            guard.finished = true;
            finished.set(finished.get() + 1);
            Ok::<(), ()>(())
        }
    });
    // Batches finish at t=1, 3, 6; cancel at t=4, during the third batch.
    let outcome = tokio::time::timeout(Duration::from_secs(4), run).await;
    assert!(outcome.is_err(), "timed out");
    assert_eq!(
        *called.borrow(),
        (0..7).collect::<Vec<_>>(),
        "batch 4 never started"
    );
    assert_eq!(finished.get(), 3, "the first two batches completed");
    assert_eq!(
        dropped_unfinished.get(),
        4,
        "the third batch was dropped mid-flight"
    );
}

#[derive(Debug, PartialEq)]
struct Refused;

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("refused")
    }
}

impl std::error::Error for Refused {}

#[tokio::test]
async fn batch_error_is_a_std_error_with_the_first_error_as_source() {
    let err = slow_start_batch(4, 1, |i| async move {
        if i == 2 { Err(Refused) } else { Ok(()) }
    })
    .await
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "slow-start batch stopped after 2 succeeded, 1 failed and 1 were not started: refused"
    );
    assert_eq!(err.source().unwrap().to_string(), "refused");
    let boxed: Box<dyn std::error::Error> = Box::new(err);
    assert!(boxed.source().unwrap().downcast_ref::<Refused>().is_some());
}

#[test]
fn batch_sizes_always_sum_to_count() {
    for count in 0..300 {
        for initial in 0..6 {
            let sizes: Vec<usize> = BatchSizes::new(count, initial).collect();
            assert_eq!(sizes.iter().sum::<usize>(), count);
            assert!(sizes.iter().all(|&s| s > 0));
            let (lo, hi) = BatchSizes::new(count, initial).size_hint();
            assert!(lo <= sizes.len() && sizes.len() <= hi.unwrap());
        }
    }
}
