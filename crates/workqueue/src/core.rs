//! The queue's state machine, without locking or waking: every public
//! operation of [`WorkQueue`](crate::WorkQueue) is one call into [`Core`]
//! under the queue's mutex.
//!
//! The item store ([`Items`]) holds every queued or processing item once,
//! with its state ([`Entry`](crate::entry::Entry)); the ready structures
//! ([`Ready`]) refer to items by cell. Items waiting for a delay are kept
//! elsewhere ([`Pending`](crate::pending::Pending)) and added here when due.

use std::hash::Hash;

use crate::entry::{PROCESSING, QUEUED, REQUEUE};
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

    /// Number of items stored (queued or processing).
    #[cfg(test)]
    pub(crate) fn known(&self) -> usize {
        self.items.len()
    }

    /// Starts shutting down: later adds are ignored. Queued items are
    /// still handed out. `drain` records whether a caller waits for
    /// in-flight items; a plain shutdown cancels that.
    pub(crate) fn shut_down(&mut self, drain: bool) {
        self.shutting_down = true;
        self.drain = drain;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn shutdown_refuses_adds_but_hands_out_queued_items() {
        let mut core = core();
        core.add(2, 0);
        core.shut_down(false);
        assert!(!core.add(3, 0));
        assert_eq!(core.known(), 1, "only the queued item remains");
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
