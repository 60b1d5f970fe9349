//! A read-only copy of one controller's expectations.

use tokio::time::Instant;

/// A copy of the expectations recorded for one controller key, as returned
/// by [`ControllerExpectations::get_expectations`](crate::ControllerExpectations::get_expectations).
///
/// The counters are signed: observing more than was expected drives them
/// below zero, exactly as upstream (a negative counter still counts as
/// fulfilled).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Expectation {
    /// Creations still expected (may be negative).
    pub add: i64,
    /// Deletions still expected (may be negative).
    pub del: i64,
    /// When the expectations were last set (by `set_expectations`,
    /// `expect_creations`, `expect_tracked_creations` or `expect_deletions`;
    /// `raise` and `lower` do not move it). The TTL counts from here.
    pub set_at: Instant,
    /// Whether creations are tracked by identity for this key (set with
    /// `expect_tracked_creations`).
    pub tracks_creations: bool,
}

impl Expectation {
    /// `true` when nothing more is expected: `add <= 0 && del <= 0`.
    pub fn fulfilled(&self) -> bool {
        self.add <= 0 && self.del <= 0
    }
}
