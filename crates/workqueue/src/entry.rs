//! The per-item state kept in the queue's item map.
//!
//! An item is stored while it is queued, being processed, or waiting for a
//! delay; it is removed as soon as none of these holds.

use tokio::time::Instant;

/// The item is in the ready structures, waiting to be handed out.
pub(crate) const QUEUED: u8 = 1;
/// The item was handed out by `get` and `done` was not called yet.
pub(crate) const PROCESSING: u8 = 2;
/// The item was added while being processed: `done` queues it again.
pub(crate) const REQUEUE: u8 = 4;
/// The item waits in the delay heap (`add_after`).
pub(crate) const WAITING: u8 = 8;

/// State of one item. Small and `Copy` so the map stays compact.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry {
    /// Combination of [`QUEUED`], [`PROCESSING`], [`REQUEUE`], [`WAITING`].
    pub(crate) flags: u8,
    /// Priority it is queued with (`QUEUED`) or will be queued with
    /// (`REQUEUE`).
    pub(crate) priority: i32,
    /// Sequence number of its place in the ready lanes (`QUEUED`).
    pub(crate) seq: u64,
    /// Priority it is added with when its delay ends (`WAITING`).
    pub(crate) due_priority: i32,
    /// Sequence number of the live pending-delay copy (`WAITING`).
    pub(crate) due_seq: u64,
    /// Earliest time its delay ends (`Some` exactly when `WAITING`).
    pub(crate) due: Option<Instant>,
}

impl Entry {
    /// An entry with no flags; the caller sets the fields its flags need.
    pub(crate) fn empty() -> Self {
        Self {
            flags: 0,
            priority: 0,
            seq: 0,
            due_priority: 0,
            due_seq: 0,
            due: None,
        }
    }

    /// Whether any of `flag` is set.
    pub(crate) fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}
