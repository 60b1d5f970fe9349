//! The per-item state kept in the queue's item store.
//!
//! An item is stored while it is queued or being processed; it is removed
//! as soon as neither holds. Items waiting for an `add_after` delay live in
//! a separate store (see [`crate::pending`]).

/// The item is in the ready structures, waiting to be handed out.
pub(crate) const QUEUED: u8 = 1;
/// The item was handed out by `get` and `done` was not called yet.
pub(crate) const PROCESSING: u8 = 2;
/// The item was added while being processed: `done` queues it again.
pub(crate) const REQUEUE: u8 = 4;

/// State of one item. Small and `Copy` so the store stays compact.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry {
    /// Combination of [`QUEUED`], [`PROCESSING`], [`REQUEUE`].
    pub(crate) flags: u8,
    /// Priority it is queued with (`QUEUED`) or will be queued with
    /// (`REQUEUE`).
    pub(crate) priority: i32,
    /// Sequence number of its place in the ready lanes (`QUEUED`).
    pub(crate) seq: u64,
}

impl Entry {
    /// An entry with no flags; the caller sets the fields its flags need.
    pub(crate) fn empty() -> Self {
        Self {
            flags: 0,
            priority: 0,
            seq: 0,
        }
    }

    /// Whether any of `flag` is set.
    pub(crate) fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}
