//! The batch-size schedule: `initial`, `2 × initial`, `4 × initial`, … capped
//! by what remains.

/// The batch sizes [`slow_start_batch`](crate::slow_start_batch) uses when
/// every batch succeeds.
///
/// Each size is `initial_batch × 2ᵏ`, capped by the number of operations not
/// yet started, so the sizes always add up to exactly `count`. An
/// `initial_batch` of 0 is treated as 1. A `count` of 0 yields nothing.
/// Doubling saturates at `usize::MAX`, so no input can overflow or loop.
///
/// ```
/// use ctrlkit_batch::BatchSizes;
///
/// assert_eq!(BatchSizes::new(10, 1).collect::<Vec<_>>(), [1, 2, 4, 3]);
/// assert_eq!(BatchSizes::new(10, 3).collect::<Vec<_>>(), [3, 6, 1]);
/// assert_eq!(BatchSizes::new(3, 0).collect::<Vec<_>>(), [1, 2]);
/// assert_eq!(BatchSizes::new(0, 1).count(), 0);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchSizes {
    remaining: usize,
    next: usize,
}

impl BatchSizes {
    /// The schedule for `count` operations starting with `initial_batch`
    /// (0 is treated as 1).
    pub fn new(count: usize, initial_batch: usize) -> Self {
        Self {
            remaining: count,
            next: initial_batch.max(1),
        }
    }
}

impl Iterator for BatchSizes {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.remaining == 0 {
            return None;
        }
        let size = self.next.min(self.remaining);
        self.remaining -= size;
        self.next = self.next.saturating_mul(2);
        Some(size)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.remaining == 0 {
            (0, Some(0))
        } else {
            // At least one more batch; at most one per bit of `remaining`
            // plus the capped last one.
            let max = (usize::BITS - self.remaining.leading_zeros()) as usize + 1;
            (1, Some(max))
        }
    }
}

impl std::iter::FusedIterator for BatchSizes {}
