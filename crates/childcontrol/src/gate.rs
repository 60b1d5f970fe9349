//! The write gate: a check before every write that can refuse it.

use crate::{Operation, WriteRefused};

/// One write about to be sent, as a [`WriteGate`] sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteAttempt<'a> {
    /// Create, delete or patch.
    pub operation: Operation,
    /// The child's kind, e.g. `Pod`.
    pub kind: &'a str,
    /// The child's namespace; empty for cluster-scoped kinds.
    pub namespace: &'a str,
    /// The child's name; `None` for a create whose name the API server
    /// generates.
    pub name: Option<&'a str>,
}

/// A cheap check run before every write a child control sends (create,
/// delete, patch) that can refuse it, e.g. to stop writes as soon as this
/// process has lost its leader lease (fencing).
///
/// A refusal fails the call with
/// [`ChildControlError::WriteRefused`](crate::ChildControlError::WriteRefused)
/// before any request is made and without an event. The check runs on the
/// caller's task and must not block; it is called for every write, so it
/// should cost no more than reading an atomic.
///
/// Any `Fn(&WriteAttempt) -> Result<(), WriteRefused>` is a gate:
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use ctrlkit_childcontrol::{Operation, WriteAttempt, WriteGate, WriteRefused};
///
/// let leading = Arc::new(AtomicBool::new(true));
/// let flag = leading.clone();
/// let gate = move |_: &WriteAttempt<'_>| {
///     if flag.load(Ordering::Acquire) { Ok(()) } else { Err(WriteRefused::new("not the leader")) }
/// };
/// let attempt = WriteAttempt { operation: Operation::Create, kind: "Pod", namespace: "ns", name: None };
/// assert!(gate.check(&attempt).is_ok());
/// leading.store(false, Ordering::Release);
/// assert_eq!(gate.check(&attempt).unwrap_err().reason(), "not the leader");
/// ```
pub trait WriteGate: Send + Sync {
    /// `Ok(())` lets the write through; an error refuses it.
    ///
    /// # Errors
    /// The [`WriteRefused`] that the call then fails with.
    fn check(&self, attempt: &WriteAttempt<'_>) -> Result<(), WriteRefused>;
}

impl<F> WriteGate for F
where
    F: Fn(&WriteAttempt<'_>) -> Result<(), WriteRefused> + Send + Sync,
{
    fn check(&self, attempt: &WriteAttempt<'_>) -> Result<(), WriteRefused> {
        self(attempt)
    }
}
