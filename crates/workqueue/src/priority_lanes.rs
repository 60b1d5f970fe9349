//! The order in which queued items are handed out: higher priority first,
//! first-in first-out within a priority.
//!
//! One lane (a ring buffer of cell numbers) per priority in use, lanes
//! sorted by descending priority. Every plain `add` uses priority 0, so a
//! queue that never uses priorities has exactly one lane and pays 4 bytes
//! per queued item for it. Each item's sequence number lives in its cell
//! ([`ItemState`](crate::item_state::ItemState)); lanes stay sorted by it:
//! new items are appended, and an item whose priority is raised keeps its
//! sequence number and is inserted at its place among its new peers (found
//! by binary search, reading the sequence numbers through the item store).
//! Empty lanes keep their buffers, so a steady state allocates nothing.

use std::collections::VecDeque;

use crate::item_store::Slot;

/// Beyond this many lanes, empty ones are dropped again (a queue that uses
/// many distinct priorities should not keep a buffer for each forever).
const KEPT_LANES: usize = 8;

#[derive(Debug)]
struct Lane {
    priority: i32,
    items: VecDeque<Slot>,
}

/// The lanes. The item store holds the authoritative state of each item.
#[derive(Debug, Default)]
pub(crate) struct PriorityLanes {
    lanes: Vec<Lane>,
    next_seq: u64,
}

impl PriorityLanes {
    fn lane_index(&mut self, priority: i32) -> usize {
        match self
            .lanes
            .binary_search_by(|lane| priority.cmp(&lane.priority))
        {
            Ok(index) => index,
            Err(index) => {
                self.lanes.insert(
                    index,
                    Lane {
                        priority,
                        items: VecDeque::new(),
                    },
                );
                index
            }
        }
    }

    /// Queues `item` at the back of its priority and returns its sequence
    /// number, to be kept in its cell.
    #[inline]
    pub(crate) fn push(&mut self, item: Slot, priority: i32) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        let index = self.lane_index(priority);
        self.lanes[index].items.push_back(item);
        seq
    }

    /// Takes the first item of the highest non-empty priority.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<Slot> {
        let index = self.lanes.iter().position(|lane| !lane.items.is_empty())?;
        let item = self.lanes[index].items.pop_front()?;
        if self.lanes.len() > KEPT_LANES && self.lanes[index].items.is_empty() {
            self.lanes.remove(index);
        }
        Some(item)
    }

    /// Moves `item`, queued with priority `old` and sequence number `seq`,
    /// to priority `new`, keeping its sequence number so it stays in add
    /// order among its new peers. `seq_of` gives the sequence number of
    /// any queued item.
    pub(crate) fn raise(
        &mut self,
        item: Slot,
        seq: u64,
        old: i32,
        new: i32,
        seq_of: impl Fn(Slot) -> u64,
    ) {
        if let Ok(index) = self.lanes.binary_search_by(|lane| old.cmp(&lane.priority)) {
            let lane = &mut self.lanes[index].items;
            let pos = lane.partition_point(|&s| seq_of(s) < seq);
            if lane.get(pos) == Some(&item) {
                lane.remove(pos);
            }
        }
        let index = self.lane_index(new);
        let lane = &mut self.lanes[index].items;
        let pos = lane.partition_point(|&s| seq_of(s) < seq);
        lane.insert(pos, item);
    }

    /// Number of queued references.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lanes.iter().map(|lane| lane.items.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_then_fifo_and_raise_keeps_add_order() {
        let mut lanes = PriorityLanes::default();
        let mut seqs = std::collections::HashMap::new();
        for (item, priority) in [(1, 0), (2, 0), (3, 5), (4, -1)] {
            seqs.insert(item, lanes.push(item, priority));
        }
        // 1 was added before 3: it goes first among the 5s.
        lanes.raise(1, seqs[&1], 0, 5, |s| seqs[&s]);
        assert_eq!(lanes.len(), 4);
        let order: Vec<_> = std::iter::from_fn(|| lanes.pop()).collect();
        assert_eq!(order, [1, 3, 2, 4]);
    }

    #[test]
    fn many_priorities_do_not_keep_many_lanes() {
        let mut lanes = PriorityLanes::default();
        for p in 0..100 {
            lanes.push(p as Slot, p);
        }
        while lanes.pop().is_some() {}
        assert!(lanes.lanes.len() <= KEPT_LANES);
    }
}
