//! The queue's state machine, without locking or waking: every public
//! operation of [`WorkQueue`](crate::WorkQueue) is one call into [`Core`]
//! under the queue's mutex.
//!
//! The item store ([`Items`]) holds every known item once, with its state
//! ([`Entry`]); the ready structures ([`Ready`]) and the pending delays
//! ([`Delays`]) refer to items by cell; a delay superseded by an earlier
//! one is recognised by its sequence number and skipped when it expires.

use std::hash::Hash;

use tokio::time::Instant;

use crate::delays::Delays;
use crate::entry::{PROCESSING, QUEUED, REQUEUE, WAITING};
use crate::items::{Items, Slot};
use crate::metrics::QueueMetrics;
use crate::ready::Ready;

/// What `done` changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DoneOutcome {
    /// The item had been added while processing and is queued again.
    pub(crate) requeued: bool,
    /// No item is being processed any more.
    pub(crate) idle: bool,
}

/// The state of one queue.
pub(crate) struct Core<T> {
    items: Items<T>,
    ready: Ready,
    /// Live references in `ready` (what `len` reports).
    queued: usize,
    /// Items handed out and not done.
    processing: usize,
    delays: Delays,
    shutting_down: bool,
    drain: bool,
    metrics: Option<QueueMetrics<T>>,
}

impl<T> Core<T> {
    /// Items waiting to be handed out.
    pub(crate) fn len(&self) -> usize {
        self.queued
    }

    /// Items handed out and not yet done.
    pub(crate) fn processing(&self) -> usize {
        self.processing
    }

    /// Whether `shut_down` or `shut_down_with_drain` was called.
    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutting_down
    }

    /// Whether a drain is in progress (`shut_down_with_drain` and no
    /// `shut_down` since).
    pub(crate) fn is_draining(&self) -> bool {
        self.drain
    }

    /// The metrics recorder, if the queue records metrics.
    pub(crate) fn metrics(&self) -> Option<&QueueMetrics<T>> {
        self.metrics.as_ref()
    }

    /// When the timer must fire next: the earliest pending due time
    /// (possibly of a superseded copy, which only causes an early no-op
    /// wake-up).
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.delays.next_due()
    }
}

impl<T: Hash + Eq + Clone> Core<T> {
    /// An empty queue; `metrics` is `None` unless the queue is named and has
    /// a provider.
    pub(crate) fn new(metrics: Option<QueueMetrics<T>>) -> Self {
        Self {
            items: Items::default(),
            ready: Ready::default(),
            queued: 0,
            processing: 0,
            delays: Delays::new(Instant::now()),
            shutting_down: false,
            drain: false,
            metrics,
        }
    }

    /// Adds `item` with `priority`. Returns whether it was queued (so a
    /// waiting `get` should be woken).
    pub(crate) fn add(&mut self, item: T, priority: i32) -> bool {
        if self.shutting_down {
            return false;
        }
        let (slot, _) = self.items.insert(item);
        self.add_slot(slot, priority)
    }

    /// [`add`](Self::add) for a stored item.
    fn add_slot(&mut self, slot: Slot, priority: i32) -> bool {
        let Some(entry) = self.items.entry_mut(slot) else {
            return false;
        };
        let mut counted = true;
        let queued = if entry.has(QUEUED) {
            if priority > entry.priority {
                self.ready.raise(slot, entry.seq, entry.priority, priority);
                entry.priority = priority;
            }
            counted = false;
            false
        } else if entry.has(PROCESSING) {
            if entry.has(REQUEUE) {
                entry.priority = entry.priority.max(priority);
                counted = false;
            } else {
                entry.flags |= REQUEUE;
                entry.priority = priority;
            }
            false
        } else {
            entry.flags |= QUEUED;
            entry.priority = priority;
            entry.seq = self.ready.push(slot, priority);
            self.queued += 1;
            true
        };
        if counted
            && let Some(metrics) = &mut self.metrics
            && let Some(item) = self.items.item(slot)
        {
            metrics.add(item);
        }
        queued
    }

    /// Hands out the next item: highest priority first, oldest first within
    /// a priority. The item is marked as being processed.
    pub(crate) fn pop(&mut self) -> Option<T> {
        if self.queued == 0 {
            return None;
        }
        let slot = loop {
            let slot = self.ready.pop()?;
            if let Some(entry) = self.items.entry_mut(slot)
                && entry.has(QUEUED)
            {
                entry.flags = (entry.flags & !QUEUED) | PROCESSING;
                break slot;
            }
            debug_assert!(false, "a ready reference to an item that is not queued");
        };
        let item = self.items.item(slot)?.clone();
        self.queued -= 1;
        self.processing += 1;
        if let Some(metrics) = &mut self.metrics {
            metrics.get(&item);
        }
        Some(item)
    }

    /// Marks `item` as no longer being processed. If it was added meanwhile
    /// it is queued again (at the back of its priority). Does nothing for an
    /// item that is not being processed.
    pub(crate) fn done(&mut self, item: &T) -> DoneOutcome {
        let mut outcome = DoneOutcome {
            requeued: false,
            idle: self.processing == 0,
        };
        let Self {
            items,
            ready,
            queued,
            processing,
            ..
        } = self;
        let was_processing = items.update(item, |slot, entry| {
            if !entry.has(PROCESSING) {
                return false;
            }
            *processing -= 1;
            if entry.has(REQUEUE) {
                entry.flags = (entry.flags & !(PROCESSING | REQUEUE)) | QUEUED;
                entry.seq = ready.push(slot, entry.priority);
                *queued += 1;
                outcome.requeued = true;
            } else {
                entry.flags &= !PROCESSING;
            }
            true
        });
        if was_processing != Some(true) {
            return outcome;
        }
        outcome.idle = self.processing == 0;
        if let Some(metrics) = &mut self.metrics {
            metrics.done(item);
        }
        outcome
    }

    /// Counts an `add_after` call in the retries metric (not after
    /// shutdown, as client-go).
    pub(crate) fn record_retry(&self) {
        if !self.shutting_down
            && let Some(metrics) = &self.metrics
        {
            metrics.retry();
        }
    }

    /// Schedules `item` to be added with `priority` at `due`. An item that
    /// already waits keeps the earlier of the two times and the higher of
    /// the two priorities; the wait is independent of the item being queued
    /// or processed meanwhile. Returns `true` if `due` became the earliest
    /// pending time (so the timer must be moved earlier).
    pub(crate) fn add_at(&mut self, item: T, due: Instant, priority: i32) -> bool {
        if self.shutting_down {
            return false;
        }
        let (slot, _) = self.items.insert(item);
        let earliest = self.next_due().is_none_or(|head| due < head);
        let Some(entry) = self.items.entry_mut(slot) else {
            return false;
        };
        match entry.due {
            Some(current) => {
                entry.due_priority = entry.due_priority.max(priority);
                if due >= current {
                    return false;
                }
            }
            None => {
                entry.flags |= WAITING;
                entry.due_priority = priority;
            }
        }
        entry.due = Some(due);
        entry.due_seq = self.delays.push(due, slot);
        earliest
    }

    /// Adds every waiting item due at or before `now`, in due order.
    /// Returns how many items were queued (how many `get`s to wake).
    pub(crate) fn fire_due(&mut self, now: Instant) -> usize {
        let mut queued = 0;
        while let Some(delayed) = self.delays.pop_due(now) {
            let Some(entry) = self.items.entry_mut(delayed.item) else {
                continue;
            };
            if !entry.has(WAITING) || entry.due_seq != delayed.seq {
                continue; // superseded by an earlier due time
            }
            entry.due = None;
            entry.flags &= !WAITING;
            let priority = entry.due_priority;
            if self.add_slot(delayed.item, priority) {
                queued += 1;
            }
        }
        queued
    }

    /// Number of `add_after` copies, superseded ones included.
    #[cfg(test)]
    pub(crate) fn delayed_copies(&self) -> usize {
        self.delays.len()
    }

    /// Number of items stored (queued, processing or waiting).
    #[cfg(test)]
    pub(crate) fn known(&self) -> usize {
        self.items.len()
    }

    /// Starts shutting down: later adds are ignored and waiting delays are
    /// dropped. Queued items are still handed out. `drain` records whether
    /// a caller waits for in-flight items; a plain shutdown cancels that.
    pub(crate) fn shut_down(&mut self, drain: bool) {
        self.shutting_down = true;
        self.drain = drain;
        for delayed in self.delays.take_all() {
            if let Some(entry) = self.items.entry_mut(delayed.item)
                && entry.has(WAITING)
                && entry.due_seq == delayed.seq
            {
                entry.flags &= !WAITING;
                entry.due = None;
                if entry.flags == 0 {
                    self.items.remove(delayed.item);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn core() -> Core<u32> {
        Core::new(None)
    }

    #[test]
    fn finished_items_leave_no_state_behind() {
        let mut core = core();
        assert!(core.add(1, 0));
        assert!(!core.add(1, 0));
        assert!(core.add(2, 5));
        assert_eq!(core.pop(), Some(2));
        assert!(!core.add(2, 0), "marked for requeue only");
        assert_eq!(core.known(), 2);
        let out = core.done(&2);
        assert!(out.requeued && out.idle);
        assert_eq!(core.pop(), Some(1));
        assert_eq!(core.pop(), Some(2));
        assert!(!core.done(&1).idle);
        assert!(core.done(&2).idle);
        assert_eq!(core.known(), 0);
        assert_eq!(core.len(), 0);
        assert_eq!(core.processing(), 0);
    }

    #[test]
    fn done_on_an_idle_item_changes_nothing() {
        let mut core = core();
        core.add(1, 0);
        let out = core.done(&1);
        assert!(!out.requeued);
        assert_eq!(core.len(), 1);
        assert_eq!(core.processing(), 0);
        assert_eq!(core.pop(), Some(1));
        assert_eq!(core.pop(), None);
    }

    #[test]
    fn an_earlier_due_time_supersedes_the_pending_copy() {
        let mut core = core();
        let now = Instant::now();
        assert!(core.add_at(1, now + Duration::from_secs(5), 0));
        assert!(
            !core.add_at(1, now + Duration::from_secs(9), 0),
            "later: ignored"
        );
        assert_eq!(core.delayed_copies(), 1);
        assert!(core.add_at(1, now + Duration::from_secs(2), 0));
        assert_eq!(core.delayed_copies(), 2, "the old copy is left to expire");
        assert_eq!(core.next_due(), Some(now + Duration::from_secs(2)));
        assert_eq!(core.fire_due(now + Duration::from_secs(3)), 1);
        assert_eq!(core.fire_due(now + Duration::from_secs(6)), 0, "stale copy");
        assert_eq!(core.delayed_copies(), 0);
        assert_eq!(core.pop(), Some(1));
        core.done(&1);
        assert_eq!(core.known(), 0);
    }

    #[test]
    fn shutdown_drops_delays_and_their_state() {
        let mut core = core();
        let now = Instant::now();
        core.add_at(1, now + Duration::from_secs(1), 0);
        core.add(2, 0);
        core.add_at(2, now + Duration::from_secs(1), 0);
        core.shut_down(false);
        assert_eq!(core.delayed_copies(), 0);
        assert_eq!(core.known(), 1, "only the queued item remains");
        assert!(!core.add(3, 0));
        assert!(!core.add_at(3, now, 0));
        assert_eq!(core.pop(), Some(2));
        assert_eq!(core.pop(), None);
    }

    #[test]
    fn the_map_is_reset_after_a_burst_drains() {
        let mut core = core();
        for i in 0..10_000 {
            core.add(i, 0);
        }
        while let Some(i) = core.pop() {
            core.done(&i);
        }
        assert_eq!(core.known(), 0);
        assert_eq!(
            core.items.entry(0).map(|e| e.flags),
            None,
            "store was reset"
        );
    }
}
