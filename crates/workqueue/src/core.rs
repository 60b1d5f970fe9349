//! The queue's state machine, without locking or waking: every public
//! operation of [`WorkQueue`](crate::WorkQueue) is one call into [`Core`]
//! under the queue's mutex.
//!
//! One hash map holds the state of every known item ([`Entry`]); the ready
//! structures ([`Ready`]) and the pending delays ([`Delays`]) hold copies of items that the
//! map validates, so updates never search a list.

use std::cmp::Reverse;
use std::hash::Hash;

use hashbrown::HashMap;
use hashbrown::hash_map::Entry as MapEntry;
use hashbrown::hash_map::RawEntryMut;
use tokio::time::Instant;

use crate::delays::Delays;
use crate::entry::{Entry, PROCESSING, QUEUED, REQUEUE, WAITING};
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
    entries: HashMap<T, Entry>,
    ready: Ready<T>,
    /// Live copies in `ready` (what `len` reports).
    queued: usize,
    /// Items handed out and not done.
    processing: usize,
    delays: Delays<T>,
    /// Removals from `entries` since it was last reset (see `removed`).
    removals: usize,
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
            entries: HashMap::new(),
            ready: Ready::default(),
            queued: 0,
            processing: 0,
            delays: Delays::new(Instant::now()),
            removals: 0,
            shutting_down: false,
            drain: false,
            metrics,
        }
    }

    /// Adds `item` with `priority`. Returns whether a copy was queued (so a
    /// waiting `get` should be woken).
    pub(crate) fn add(&mut self, item: T, priority: i32) -> bool {
        if self.shutting_down {
            return false;
        }
        match self.entries.entry(item) {
            MapEntry::Occupied(mut slot) => {
                let mut entry = *slot.get();
                let queued = if entry.has(QUEUED) {
                    if priority > entry.priority {
                        self.ready
                            .raise(slot.key(), entry.seq, entry.priority, priority);
                        entry.priority = priority;
                    }
                    false
                } else if entry.has(PROCESSING) {
                    if entry.has(REQUEUE) {
                        entry.priority = entry.priority.max(priority);
                    } else {
                        entry.flags |= REQUEUE;
                        entry.priority = priority;
                        if let Some(metrics) = &mut self.metrics {
                            metrics.add(slot.key());
                        }
                    }
                    false
                } else {
                    // Only waiting for a delay: queue it now as well.
                    entry.flags |= QUEUED;
                    entry.priority = priority;
                    entry.seq = self.ready.push(slot.key().clone(), priority);
                    self.queued += 1;
                    if let Some(metrics) = &mut self.metrics {
                        metrics.add(slot.key());
                    }
                    true
                };
                *slot.get_mut() = entry;
                queued
            }
            MapEntry::Vacant(slot) => {
                let seq = self.ready.push(slot.key().clone(), priority);
                let mut entry = Entry::empty();
                entry.flags = QUEUED;
                entry.priority = priority;
                entry.seq = seq;
                let slot = slot.insert_entry(entry);
                self.queued += 1;
                if let Some(metrics) = &mut self.metrics {
                    metrics.add(slot.key());
                }
                true
            }
        }
    }

    /// Hands out the next item: highest priority first, oldest first within
    /// a priority. The item is marked as being processed.
    pub(crate) fn pop(&mut self) -> Option<T> {
        if self.queued == 0 {
            return None;
        }
        let item = if self.ready.ranked.is_empty() {
            self.pop_fifo()
        } else {
            self.pop_mixed()
        };
        debug_assert!(item.is_some(), "queued count and ready copies disagree");
        let item = item?;
        self.queued -= 1;
        self.processing += 1;
        if let Some(metrics) = &mut self.metrics {
            metrics.get(&item);
        }
        Some(item)
    }

    /// Fast path: only priority-0 copies exist.
    fn pop_fifo(&mut self) -> Option<T> {
        while let Some((seq, item)) = self.ready.fifo.pop_front() {
            if let Some(entry) = self.entries.get_mut(&item)
                && entry.is_ready_copy(seq)
            {
                entry.flags = (entry.flags & !QUEUED) | PROCESSING;
                return Some(item);
            }
        }
        None
    }

    /// General path: merge the ring buffer and the ranked map by rank.
    fn pop_mixed(&mut self) -> Option<T> {
        // Drop stale copies at the front of the ring buffer first.
        let fifo_seq = loop {
            match self.ready.fifo.front() {
                None => break None,
                Some((seq, item)) => {
                    if self
                        .entries
                        .get(item)
                        .is_some_and(|e| e.is_ready_copy(*seq))
                    {
                        break Some(*seq);
                    }
                    self.ready.fifo.pop_front();
                }
            }
        };
        let ranked = self.ready.ranked.first_key_value().map(|(rank, _)| *rank);
        let from_fifo = match (fifo_seq, ranked) {
            (None, None) => return None,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(seq), Some(rank)) => (Reverse(0), seq) < rank,
        };
        if from_fifo {
            let (_, item) = self.ready.fifo.pop_front()?;
            if let Some(entry) = self.entries.get_mut(&item) {
                entry.flags = (entry.flags & !QUEUED) | PROCESSING;
            }
            return Some(item);
        }
        let ((Reverse(priority), seq), item) = self.ready.ranked.pop_first()?;
        match self.entries.get_mut(&item) {
            Some(entry) if entry.has(QUEUED) && entry.seq == seq && entry.priority == priority => {
                entry.flags = (entry.flags & !QUEUED) | PROCESSING;
                Some(item)
            }
            // Never expected: `raise` moves ranked copies. Skip rather than
            // hand out an item twice.
            _ => self.pop_mixed(),
        }
    }

    /// Marks `item` as no longer being processed. If it was added meanwhile
    /// it is queued again (at the back of its priority). Does nothing for an
    /// item that is not being processed.
    pub(crate) fn done(&mut self, item: &T) -> DoneOutcome {
        let mut outcome = DoneOutcome {
            requeued: false,
            idle: self.processing == 0,
        };
        let RawEntryMut::Occupied(mut slot) = self.entries.raw_entry_mut().from_key(item) else {
            return outcome;
        };
        let (key, entry) = slot.get_key_value_mut();
        if !entry.has(PROCESSING) {
            return outcome;
        }
        if let Some(metrics) = &mut self.metrics {
            metrics.done(key);
        }
        self.processing -= 1;
        outcome.idle = self.processing == 0;
        if entry.has(REQUEUE) {
            entry.flags = (entry.flags & !(PROCESSING | REQUEUE)) | QUEUED;
            entry.seq = self.ready.push(key.clone(), entry.priority);
            self.queued += 1;
            outcome.requeued = true;
        } else {
            entry.flags &= !PROCESSING;
            if entry.flags == 0 {
                slot.remove();
                self.removed();
            }
        }
        outcome
    }

    /// Book-keeping after an entry was removed from the map.
    ///
    /// A removal leaves a tombstone in the hash table, and lookups of absent
    /// items (every fresh `add`) probe past tombstones: after a burst grew
    /// the table, a long run of adds and removals would slow every lookup
    /// down. Resetting the table when it is empty (which a queue that keeps
    /// up is, often) costs a memset of its control bytes, amortised over at
    /// least half its capacity in removals.
    fn removed(&mut self) {
        self.removals += 1;
        if self.entries.is_empty() && self.removals > self.entries.capacity() / 2 {
            self.entries.clear();
            self.removals = 0;
        }
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
        let copy = match self.entries.entry(item) {
            MapEntry::Occupied(mut slot) => {
                let entry = slot.get_mut();
                match entry.due {
                    Some(current) => {
                        entry.due_priority = entry.due_priority.max(priority);
                        if due < current {
                            entry.due = Some(due);
                            Some(slot.key().clone())
                        } else {
                            None
                        }
                    }
                    None => {
                        entry.flags |= WAITING;
                        entry.due = Some(due);
                        entry.due_priority = priority;
                        Some(slot.key().clone())
                    }
                }
            }
            MapEntry::Vacant(slot) => {
                let copy = slot.key().clone();
                let mut entry = Entry::empty();
                entry.flags = WAITING;
                entry.due = Some(due);
                entry.due_priority = priority;
                slot.insert(entry);
                Some(copy)
            }
        };
        let Some(item) = copy else {
            return false;
        };
        let earliest = self.next_due().is_none_or(|head| due < head);
        self.delays.push(due, item);
        earliest
    }

    /// Adds every waiting item due at or before `now`, in due order.
    /// Returns how many copies were queued (how many `get`s to wake).
    pub(crate) fn fire_due(&mut self, now: Instant) -> usize {
        let mut queued = 0;
        while let Some(delayed) = self.delays.pop_due(now) {
            let Some(entry) = self.entries.get_mut(&delayed.item) else {
                continue;
            };
            if entry.due != Some(delayed.due) {
                continue; // superseded by an earlier due time
            }
            entry.due = None;
            entry.flags &= !WAITING;
            let priority = entry.due_priority;
            if self.add(delayed.item, priority) {
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

    /// Number of items the map knows (queued, processing or waiting).
    #[cfg(test)]
    pub(crate) fn known(&self) -> usize {
        self.entries.len()
    }

    /// Starts shutting down: later adds are ignored and waiting delays are
    /// dropped. Queued items are still handed out. `drain` records whether
    /// a caller waits for in-flight items; a plain shutdown cancels that.
    pub(crate) fn shut_down(&mut self, drain: bool) {
        self.shutting_down = true;
        self.drain = drain;
        for delayed in self.delays.take_all() {
            if let Some(entry) = self.entries.get_mut(&delayed.item)
                && entry.has(WAITING)
            {
                entry.flags &= !WAITING;
                entry.due = None;
                if entry.flags == 0 {
                    self.entries.remove(&delayed.item);
                    self.removed();
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
        assert_eq!(core.removals, 0, "table was cleared when it emptied");
    }
}
