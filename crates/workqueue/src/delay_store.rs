//! The delay store: items waiting for their `add_after` delay, each with
//! its due time and the priority it will be added with.
//!
//! Kept apart from the queued items, under a lock of its own: `add_after`
//! touches only this store, so a producer scheduling many delays does not
//! compete with the workers for the queue's lock. Due items are taken out of
//! here in one batch and then added to the queue (see
//! [`SharedState::fire_due`](crate::shared_state::SharedState::fire_due)).
//!
//! Each waiting item is stored once ([`ItemStore`]); [`DueBuckets`] orders
//! the due times. An earlier `add_after` of a waiting item pushes a second
//! copy into the buckets and leaves the first to be skipped when it expires
//! (its sequence number no longer matches).

use std::hash::Hash;

use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::due_buckets::DueBuckets;
use crate::item_store::{CellState, ItemStore};
use crate::metrics::CounterMetric;

/// The delay of one waiting item.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Wait {
    /// Earliest time the delay ends (`None` only in a free cell).
    due: Option<Instant>,
    /// Sequence number of the live copy in [`DueBuckets`].
    seq: u64,
    /// Priority the item is added with when the delay ends.
    priority: i32,
}

impl CellState for Wait {
    fn empty() -> Self {
        Wait {
            due: None,
            seq: u64::MAX,
            priority: 0,
        }
    }

    fn is_empty(&self) -> bool {
        // Waiting items are removed explicitly when they fire.
        false
    }
}

/// Everything behind the delay lock.
pub(crate) struct DelayStore<T> {
    items: ItemStore<T, Wait>,
    delays: DueBuckets,
    /// Set by shutdown: later `add_after`s are ignored.
    closed: bool,
    /// The retries counter, if the queue records metrics.
    retries: Option<Box<dyn CounterMetric>>,
    /// The timer task, once started (see [`crate::timer_task`]).
    pub(crate) timer_task: Option<JoinHandle<()>>,
}

impl<T> DelayStore<T> {
    /// Nothing waiting.
    pub(crate) fn new(retries: Option<Box<dyn CounterMetric>>) -> Self {
        Self {
            items: ItemStore::default(),
            delays: DueBuckets::new(Instant::now()),
            closed: false,
            retries,
            timer_task: None,
        }
    }

    /// Whether shutdown closed the store.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed
    }

    /// When the timer must fire next: the earliest pending due time
    /// (possibly of a superseded copy, which only causes an early no-op
    /// wake-up).
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.delays.next_due()
    }

    /// Counts an `add_after` call in the retries metric (not after
    /// shutdown, as client-go).
    pub(crate) fn record_retry(&self) {
        if !self.closed
            && let Some(retries) = &self.retries
        {
            retries.inc();
        }
    }

    /// Drops every waiting item and refuses later ones (shutdown).
    pub(crate) fn close(&mut self) {
        self.closed = true;
        self.delays = DueBuckets::new(Instant::now());
        self.items.clear();
    }

    /// Number of waiting items.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Number of copies in [`DueBuckets`], superseded ones included.
    #[cfg(test)]
    pub(crate) fn copies(&self) -> usize {
        self.delays.len()
    }
}

impl<T: Hash + Eq> DelayStore<T> {
    /// Schedules `item` to be added with `priority` at `due`. An item that
    /// already waits keeps the earlier of the two times and the higher of
    /// the two priorities. Returns `true` if `due` became the earliest
    /// pending time (so the timer must be moved earlier).
    pub(crate) fn add_at(&mut self, item: T, due: Instant, priority: i32) -> bool {
        if self.closed {
            return false;
        }
        let earliest = self.next_due().is_none_or(|head| due < head);
        let (slot, _) = self.items.insert(item);
        let Some(wait) = self.items.state_mut(slot) else {
            return false;
        };
        match wait.due {
            Some(current) => {
                wait.priority = wait.priority.max(priority);
                if due >= current {
                    return false;
                }
            }
            None => wait.priority = priority,
        }
        wait.due = Some(due);
        wait.seq = self.delays.push(due, slot);
        earliest
    }

    /// Moves every item due at or before `now` to `out`, in due order (call
    /// order among equal due times), with the priority to add it with.
    pub(crate) fn take_due(&mut self, now: Instant, out: &mut Vec<(T, i32)>) {
        while let Some(delayed) = self.delays.pop_due(now) {
            let Some(wait) = self.items.state_mut(delayed.item) else {
                continue;
            };
            if wait.due.is_none() || wait.seq != delayed.seq {
                continue; // superseded by an earlier due time
            }
            let priority = wait.priority;
            if let Some(item) = self.items.take(delayed.item) {
                out.push((item, priority));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn an_earlier_due_time_supersedes_the_waiting_copy() {
        let mut store = DelayStore::new(None);
        let now = Instant::now();
        let at = |s| now + Duration::from_secs(s);
        assert!(store.add_at(1, at(5), 0));
        assert!(!store.add_at(1, at(9), 3), "later: ignored");
        assert_eq!(store.copies(), 1);
        assert!(store.add_at(1, at(2), 0));
        assert_eq!(store.copies(), 2, "the old copy is left to expire");
        assert_eq!(store.next_due(), Some(at(2)));
        let mut out = Vec::new();
        store.take_due(at(3), &mut out);
        assert_eq!(out, [(1, 3)], "the higher priority is kept");
        out.clear();
        store.take_due(at(6), &mut out);
        assert!(out.is_empty(), "stale copy");
        assert_eq!(store.copies(), 0);
        assert_eq!(store.len(), 0);
    }

    #[test]
    fn close_drops_everything_and_refuses_more() {
        let mut store = DelayStore::new(None);
        let now = Instant::now();
        store.add_at(1, now + Duration::from_secs(1), 0);
        store.add_at(2, now + Duration::from_secs(2), 0);
        store.close();
        assert_eq!(store.len(), 0);
        assert_eq!(store.next_due(), None);
        assert!(!store.add_at(3, now, 0));
        let mut out = Vec::new();
        store.take_due(now + Duration::from_secs(9), &mut out);
        assert!(out.is_empty());
    }
}
