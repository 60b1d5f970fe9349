//! The queue's rules, without locking or waking: which items are queued,
//! being processed, or to be queued again on `done`, and which goes next.
//! Every operation of [`WorkQueue`](crate::WorkQueue) on queued items is one
//! call into [`QueueState`] under the queue's main lock.
//!
//! The item store holds every queued or processing item once, with its
//! [`ItemState`]; the [`PriorityLanes`] refer to items by cell. Items
//! waiting for a delay are kept elsewhere (see [`crate::delay_store`]) and
//! added here when due.

use std::hash::Hash;

use crate::item_state::{ItemState, PROCESSING, QUEUED, REQUEUE};
use crate::item_store::{ItemStore, Slot};
use crate::metrics::QueueMetrics;
use crate::priority_lanes::PriorityLanes;

/// What `done` changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DoneOutcome {
    /// The item had been added while processing and is queued again.
    pub(crate) requeued: bool,
    /// No item is being processed any more.
    pub(crate) idle: bool,
}

/// The queued and processing items of one queue.
pub(crate) struct QueueState<T> {
    items: ItemStore<T, ItemState>,
    lanes: PriorityLanes,
    /// Items in `lanes` (what `len` reports).
    queued: usize,
    /// Items handed out and not done.
    processing: usize,
    shutting_down: bool,
    drain: bool,
    metrics: Option<QueueMetrics>,
}

impl<T> QueueState<T> {
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
    pub(crate) fn metrics(&self) -> Option<&QueueMetrics> {
        self.metrics.as_ref()
    }

    /// Starts shutting down: later adds are ignored. Queued items are
    /// still handed out. `drain` records whether a caller waits for
    /// in-flight items; a plain shutdown cancels that.
    pub(crate) fn shut_down(&mut self, drain: bool) {
        self.shutting_down = true;
        self.drain = drain;
    }
}

impl<T: Hash + Eq + Clone> QueueState<T> {
    /// An empty queue; `metrics` is `None` unless the queue is named and has
    /// a provider.
    pub(crate) fn new(metrics: Option<QueueMetrics>) -> Self {
        Self {
            items: ItemStore::default(),
            lanes: PriorityLanes::default(),
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
        let Some(state) = self.items.state_mut(slot) else {
            return false;
        };
        let (queued, counted) = if state.has(QUEUED) {
            if priority > state.priority {
                let (seq, old) = (state.seq(), state.priority);
                state.priority = priority;
                let items = &self.items;
                self.lanes.raise(slot, seq, old, priority, |s| {
                    items.state(s).map_or(u64::MAX, ItemState::seq)
                });
            }
            (false, false)
        } else if state.has(PROCESSING) {
            if state.has(REQUEUE) {
                state.priority = state.priority.max(priority);
                (false, false)
            } else {
                state.change(REQUEUE, 0);
                state.priority = priority;
                (false, true)
            }
        } else {
            state.change(QUEUED, 0);
            state.priority = priority;
            state.set_seq(self.lanes.push(slot, priority));
            self.queued += 1;
            (true, true)
        };
        if counted && let Some(metrics) = &mut self.metrics {
            metrics.add(slot);
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
            let slot = self.lanes.pop()?;
            if let Some(state) = self.items.state_mut(slot)
                && state.has(QUEUED)
            {
                state.change(PROCESSING, QUEUED);
                break slot;
            }
            debug_assert!(false, "a lane refers to an item that is not queued");
        };
        let item = self.items.item(slot)?.clone();
        self.queued -= 1;
        self.processing += 1;
        if let Some(metrics) = &mut self.metrics {
            metrics.get(slot);
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
            lanes,
            queued,
            processing,
            ..
        } = self;
        let done_slot = items.update(item, |slot, state| {
            if !state.has(PROCESSING) {
                return None;
            }
            *processing -= 1;
            if state.has(REQUEUE) {
                state.change(QUEUED, PROCESSING | REQUEUE);
                state.set_seq(lanes.push(slot, state.priority));
                *queued += 1;
                outcome.requeued = true;
            } else {
                state.change(0, PROCESSING);
            }
            Some(slot)
        });
        let Some(Some(slot)) = done_slot else {
            return outcome;
        };
        outcome.idle = self.processing == 0;
        if let Some(metrics) = &mut self.metrics {
            metrics.done(slot);
        }
        outcome
    }

    /// Whether `item` waits to be handed out.
    pub(crate) fn is_queued(&self, item: &T) -> bool {
        self.items
            .find(item)
            .and_then(|slot| self.items.state(slot))
            .is_some_and(|state| state.has(QUEUED))
    }

    /// Number of items stored (queued or processing).
    #[cfg(test)]
    pub(crate) fn known(&self) -> usize {
        self.items.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue() -> QueueState<u32> {
        QueueState::new(None)
    }

    #[test]
    fn finished_items_leave_no_state_behind() {
        let mut queue = queue();
        assert!(queue.add(1, 0));
        assert!(!queue.add(1, 0));
        assert!(queue.add(2, 5));
        assert_eq!(queue.pop(), Some(2));
        assert!(!queue.add(2, 0), "marked for requeue only");
        assert_eq!(queue.known(), 2);
        let out = queue.done(&2);
        assert!(out.requeued && out.idle);
        assert_eq!(queue.pop(), Some(1));
        assert_eq!(queue.pop(), Some(2));
        assert!(!queue.done(&1).idle);
        assert!(queue.done(&2).idle);
        assert_eq!(queue.known(), 0);
        assert_eq!(queue.len(), 0);
        assert_eq!(queue.processing(), 0);
    }

    #[test]
    fn done_on_an_idle_item_changes_nothing() {
        let mut queue = queue();
        queue.add(1, 0);
        let out = queue.done(&1);
        assert!(!out.requeued);
        assert_eq!(queue.len(), 1);
        assert_eq!(queue.processing(), 0);
        assert_eq!(queue.pop(), Some(1));
        assert_eq!(queue.pop(), None);
    }

    #[test]
    fn shutdown_refuses_adds_but_hands_out_queued_items() {
        let mut queue = queue();
        queue.add(2, 0);
        queue.shut_down(false);
        assert!(!queue.add(3, 0));
        assert_eq!(queue.known(), 1, "only the queued item remains");
        assert_eq!(queue.pop(), Some(2));
        assert_eq!(queue.pop(), None);
    }

    #[test]
    fn the_map_is_reset_after_a_burst_drains() {
        let mut queue = queue();
        for i in 0..10_000 {
            queue.add(i, 0);
        }
        while let Some(i) = queue.pop() {
            queue.done(&i);
        }
        assert_eq!(queue.known(), 0);
        assert_eq!(
            queue.items.state(0).map(ItemState::flags),
            None,
            "store was reset"
        );
    }
}
