//! The order in which waiting items are handed out: higher priority first,
//! first-in first-out within a priority.
//!
//! One lane (a ring buffer of `(sequence number, cell)`) per priority in
//! use, lanes sorted by descending priority. Every plain `add` uses priority
//! 0, so a queue that never uses priorities has exactly one lane and pays
//! for a ring buffer and nothing else. Lanes stay sorted by sequence number:
//! new items are appended, and an item whose priority is raised keeps its
//! sequence number and is inserted at its place among its new peers. Empty
//! lanes keep their buffers, so a steady state allocates nothing.

use std::collections::VecDeque;

use crate::items::Slot;

/// Beyond this many lanes, empty ones are dropped again (a queue that uses
/// many distinct priorities should not keep a buffer for each forever).
const KEPT_LANES: usize = 8;

#[derive(Debug)]
struct Lane {
    priority: i32,
    items: VecDeque<(u64, Slot)>,
}

/// The ready structures. The item store holds the authoritative state.
#[derive(Debug, Default)]
pub(crate) struct Ready {
    lanes: Vec<Lane>,
    next_seq: u64,
}

impl Ready {
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
    /// number.
    pub(crate) fn push(&mut self, item: Slot, priority: i32) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        let index = self.lane_index(priority);
        self.lanes[index].items.push_back((seq, item));
        seq
    }

    /// Takes the first item of the highest non-empty priority.
    pub(crate) fn pop(&mut self) -> Option<Slot> {
        let index = self.lanes.iter().position(|lane| !lane.items.is_empty())?;
        let (_, item) = self.lanes[index].items.pop_front()?;
        if self.lanes.len() > KEPT_LANES && self.lanes[index].items.is_empty() {
            self.lanes.remove(index);
        }
        Some(item)
    }

    /// Moves the item queued as `(old, seq)` to priority `new`, keeping its
    /// sequence number so it stays in add order among its new peers.
    pub(crate) fn raise(&mut self, item: Slot, seq: u64, old: i32, new: i32) {
        if let Ok(index) = self.lanes.binary_search_by(|lane| old.cmp(&lane.priority)) {
            let lane = &mut self.lanes[index].items;
            if let Ok(pos) = lane.binary_search_by_key(&seq, |(s, _)| *s) {
                lane.remove(pos);
            }
        }
        let index = self.lane_index(new);
        let lane = &mut self.lanes[index].items;
        let pos = lane.partition_point(|(s, _)| *s < seq);
        lane.insert(pos, (seq, item));
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
        let mut ready = Ready::default();
        let a = ready.push(1, 0);
        ready.push(2, 0);
        ready.push(3, 5);
        ready.push(4, -1);
        ready.raise(1, a, 0, 5); // added before 3: goes first among 5s
        assert_eq!(ready.len(), 4);
        let order: Vec<_> = std::iter::from_fn(|| ready.pop()).collect();
        assert_eq!(order, [1, 3, 2, 4]);
    }

    #[test]
    fn many_priorities_do_not_keep_many_lanes() {
        let mut ready = Ready::default();
        for p in 0..100 {
            ready.push(p as Slot, p);
        }
        while ready.pop().is_some() {}
        assert!(ready.lanes.len() <= KEPT_LANES);
    }
}
