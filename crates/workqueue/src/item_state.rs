//! Where one item of the queue stands: queued, being processed, or to be
//! queued again on `done`; with its priority and its place in line.
//!
//! An item is stored while it is queued or being processed and removed as
//! soon as neither holds. Items waiting for an `add_after` delay live in
//! the delay store instead (see [`crate::delay_store`]).

use crate::item_store::CellState;

/// The item is in the priority lanes, waiting to be handed out.
pub(crate) const QUEUED: u8 = 1;
/// The item was handed out by `get` and `done` was not called yet.
pub(crate) const PROCESSING: u8 = 2;
/// The item was added while being processed: `done` queues it again.
pub(crate) const REQUEUE: u8 = 4;

/// Bits of the packed word that hold the sequence number; the flags sit
/// above them. 2^61 adds outlast any process.
const SEQ_BITS: u32 = 61;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;

/// State of one stored item: 12 bytes, 4-byte aligned.
///
/// The sequence number and the flags share one 64-bit word, kept as two
/// `u32`s: with a `u64` field the state would be 8-byte aligned and 16
/// bytes long, and a cell holding a `u64` key would grow from 32 to 40
/// bytes (the item store's cell is item + 32-bit hash + state). A million
/// queued items make that 8 MB.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ItemState {
    /// Priority it is queued with (`QUEUED`) or will be queued with
    /// (`REQUEUE`).
    pub(crate) priority: i32,
    /// Low and high half of `flags << SEQ_BITS | seq`.
    word: [u32; 2],
}

impl ItemState {
    #[inline]
    fn word(&self) -> u64 {
        u64::from(self.word[0]) | (u64::from(self.word[1]) << 32)
    }

    #[inline]
    fn set_word(&mut self, word: u64) {
        self.word = [word as u32, (word >> 32) as u32];
    }

    /// Combination of [`QUEUED`], [`PROCESSING`], [`REQUEUE`].
    #[inline]
    pub(crate) fn flags(&self) -> u8 {
        (self.word() >> SEQ_BITS) as u8
    }

    /// Whether any of `flags` is set.
    #[inline]
    pub(crate) fn has(&self, flags: u8) -> bool {
        self.flags() & flags != 0
    }

    /// Sets `set` and clears `clear` (in that order).
    #[inline]
    pub(crate) fn change(&mut self, set: u8, clear: u8) {
        let flags = (self.flags() | set) & !clear;
        self.set_word((self.word() & SEQ_MASK) | (u64::from(flags) << SEQ_BITS));
    }

    /// Sequence number of its place in the priority lanes (`QUEUED`).
    #[inline]
    pub(crate) fn seq(&self) -> u64 {
        self.word() & SEQ_MASK
    }

    /// Sets the sequence number (wrapping at 2^61).
    #[inline]
    pub(crate) fn set_seq(&mut self, seq: u64) {
        self.set_word((self.word() & !SEQ_MASK) | (seq & SEQ_MASK));
    }
}

impl CellState for ItemState {
    fn empty() -> Self {
        Self {
            priority: 0,
            word: [0; 2],
        }
    }

    fn is_empty(&self) -> bool {
        self.flags() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_and_sequence_number_do_not_disturb_each_other() {
        let mut state = ItemState::empty();
        assert!(state.is_empty());
        state.set_seq(SEQ_MASK - 1);
        state.change(QUEUED | REQUEUE, 0);
        assert_eq!(state.seq(), SEQ_MASK - 1);
        state.change(PROCESSING, QUEUED);
        assert_eq!(state.flags(), PROCESSING | REQUEUE);
        state.set_seq(7);
        assert!(state.has(REQUEUE) && !state.has(QUEUED));
        assert_eq!(state.seq(), 7);
        state.change(0, PROCESSING | REQUEUE);
        assert!(state.is_empty());
        assert_eq!(std::mem::size_of::<ItemState>(), 12);
    }
}
