//! The due times of the delay store in firing order: one bucket per
//! millisecond, sorted only when it becomes due.
//!
//! A binary heap over hundreds of thousands of timers spends most of its
//! time on cache misses while sifting. Since tokio's timer fires at
//! millisecond ticks anyway, items are grouped in one bucket per
//! millisecond (a `BTreeMap` from tick to bucket): adding is a push onto a
//! `Vec`, and a bucket is sorted once, when it becomes due, then consumed
//! from its end. Emptied buckets' buffers are reused.

use std::collections::BTreeMap;

use tokio::time::Instant;

use crate::item_store::Slot;

/// One pending `add_after` copy. `seq` orders copies with equal due times
/// by call order, and lets the item store tell the live copy of an item
/// from copies superseded by an earlier due time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Delayed {
    pub(crate) due: Instant,
    pub(crate) seq: u64,
    pub(crate) item: Slot,
}

#[derive(Debug)]
struct Bucket {
    /// Sorted by descending `(due, seq)` when `sorted`, so the next copy
    /// to fire is the last.
    items: Vec<Delayed>,
    sorted: bool,
    /// Earliest due time in the bucket.
    min: Instant,
}

/// Pending delays, in due order.
#[derive(Debug)]
pub(crate) struct DueBuckets {
    epoch: Instant,
    buckets: BTreeMap<u64, Bucket>,
    spare: Vec<Vec<Delayed>>,
    next_seq: u64,
}

/// Buffers kept for reuse; beyond this, emptied buckets free theirs.
const SPARE_BUCKETS: usize = 32;

impl DueBuckets {
    /// No delays; `epoch` anchors the millisecond ticks.
    pub(crate) fn new(epoch: Instant) -> Self {
        Self {
            epoch,
            buckets: BTreeMap::new(),
            spare: Vec::new(),
            next_seq: 0,
        }
    }

    fn tick(&self, due: Instant) -> u64 {
        let ms = due.saturating_duration_since(self.epoch).as_millis();
        u64::try_from(ms).unwrap_or(u64::MAX)
    }

    /// Adds a copy of `item` due at `due` and returns its sequence number.
    pub(crate) fn push(&mut self, due: Instant, item: Slot) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        let tick = self.tick(due);
        let spare = &mut self.spare;
        let bucket = self.buckets.entry(tick).or_insert_with(|| Bucket {
            items: spare.pop().unwrap_or_default(),
            sorted: true,
            min: due,
        });
        if bucket
            .items
            .last()
            .is_some_and(|last| (due, seq) > (last.due, last.seq))
        {
            bucket.sorted = false;
        }
        bucket.min = bucket.min.min(due);
        bucket.items.push(Delayed { due, seq, item });
        seq
    }

    /// The earliest due time of any copy (superseded ones included).
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.buckets.first_key_value().map(|(_, bucket)| bucket.min)
    }

    /// Removes and returns the earliest copy if it is due at `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<Delayed> {
        let mut first = self.buckets.first_entry()?;
        let bucket = first.get_mut();
        if bucket.min > now {
            return None;
        }
        if !bucket.sorted {
            bucket
                .items
                .sort_unstable_by_key(|d| std::cmp::Reverse((d.due, d.seq)));
            bucket.sorted = true;
        }
        let delayed = bucket.items.pop()?;
        match bucket.items.last() {
            Some(next) => bucket.min = next.due,
            None => {
                let bucket = first.remove();
                if self.spare.len() < SPARE_BUCKETS {
                    self.spare.push(bucket.items);
                }
            }
        }
        Some(delayed)
    }

    /// Number of copies, superseded ones included.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.buckets.values().map(|b| b.items.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn pops_in_due_then_call_order_across_and_within_ticks() {
        let epoch = Instant::now();
        let at = |us: u64| epoch + Duration::from_micros(us);
        let mut delays = DueBuckets::new(epoch);
        for (us, item) in [(2500, 3), (900, 2), (100, 1), (2500, 4), (2100, 5)] {
            delays.push(at(us), item);
        }
        assert_eq!(delays.next_due(), Some(at(100)));
        assert!(delays.pop_due(at(50)).is_none());
        let mut out = Vec::new();
        while let Some(d) = delays.pop_due(at(2400)) {
            out.push(d.item);
        }
        assert_eq!(out, [1, 2, 5]);
        assert_eq!(delays.next_due(), Some(at(2500)));
        delays.push(at(2450), 6);
        while let Some(d) = delays.pop_due(at(3000)) {
            out.push(d.item);
        }
        assert_eq!(out, [1, 2, 5, 6, 3, 4]);
        assert_eq!(delays.len(), 0);
        assert_eq!(delays.next_due(), None);
    }
}
