//! The error returned when a batch had a failing operation.

use std::fmt;

/// A batch had at least one failing operation, so
/// [`slow_start_batch`](crate::slow_start_batch) stopped after it.
///
/// Besides the first error it says how far the run got, so a controller can
/// account for every operation it planned: `successes + failures +
/// not_started` always equals the `count` passed in.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchError<E> {
    /// Operations that returned `Ok`, over all batches run (the failing one
    /// included).
    pub successes: usize,
    /// Operations that returned `Err` in the failing batch (at least 1).
    pub failures: usize,
    /// Operations that were never started because a batch failed.
    pub not_started: usize,
    /// The error of the failing operation with the lowest index in the
    /// failing batch. The other errors of that batch are dropped.
    pub error: E,
}

impl<E> BatchError<E> {
    /// The operations that did not succeed: failed or never started. This is
    /// what a controller lowers its creation expectations by, because the
    /// informer will never see those objects.
    pub fn unsuccessful(&self) -> usize {
        self.failures.saturating_add(self.not_started)
    }

    /// Drops the counts and returns the first error.
    pub fn into_inner(self) -> E {
        self.error
    }
}

impl<E: fmt::Display> fmt::Display for BatchError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "slow-start batch stopped after {} succeeded, {} failed and {} were not started: {}",
            self.successes, self.failures, self.not_started, self.error
        )
    }
}

impl<E: std::error::Error + 'static> std::error::Error for BatchError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}
