//! The order in which waiting items are handed out: higher priority first,
//! first-in first-out within a priority.
//!
//! Items are referred to by their cell in the item store. Priority 0
//! (every plain `add`) lives in a `VecDeque`, so a queue that never uses
//! priorities pays for a ring buffer and nothing else. Other priorities live
//! in a `BTreeMap` keyed by `(priority, sequence number)`. Raising the
//! priority of an item that waits in the ring buffer leaves a stale
//! reference behind; [`Entry::is_ready_copy`](crate::entry::Entry::is_ready_copy)
//! tells live references from stale ones, and stale ones are dropped when
//! they reach the front.

use std::cmp::Reverse;
use std::collections::{BTreeMap, VecDeque};

use crate::items::Slot;

/// Position of one queued item: its priority and the sequence number taken
/// when it was queued (which keeps FIFO order within a priority).
pub(crate) type Rank = (Reverse<i32>, u64);

/// The ready structures. The item store holds the authoritative state.
#[derive(Debug, Default)]
pub(crate) struct Ready {
    /// Priority-0 items in queueing order, possibly with stale references.
    pub(crate) fifo: VecDeque<(u64, Slot)>,
    /// Items with another priority, or raised out of `fifo`.
    pub(crate) ranked: BTreeMap<Rank, Slot>,
    /// Next sequence number.
    next_seq: u64,
}

impl Ready {
    /// Queues `item` at the back of its priority and returns its sequence
    /// number.
    pub(crate) fn push(&mut self, item: Slot, priority: i32) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        if priority == 0 {
            self.fifo.push_back((seq, item));
        } else {
            self.ranked.insert((Reverse(priority), seq), item);
        }
        seq
    }

    /// Moves the item queued as `(old, seq)` to priority `new` (> `old`),
    /// keeping its sequence number so it stays in add order among its new
    /// peers. A reference in `fifo` is left behind as stale; one in
    /// `ranked` (any priority, 0 included when it was raised from below 0)
    /// is moved.
    pub(crate) fn raise(&mut self, item: Slot, seq: u64, old: i32, new: i32) {
        self.ranked.remove(&(Reverse(old), seq));
        self.ranked.insert((Reverse(new), seq), item);
    }
}
