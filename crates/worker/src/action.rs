//! What a successful sync asks the worker to do next.

use std::time::Duration;

/// The result of a successful sync: whether and when the key should be
/// synced again.
///
/// A failed sync does not return an `Action`; it returns an error and the
/// worker retries it with backoff (see [`SyncError`](crate::SyncError)).
///
/// | constructor | the worker then calls | `result` label |
/// |---|---|---|
/// | [`Action::done`] | `forget(key)` | `success` |
/// | [`Action::requeue_after`] | `forget(key)`, `add_after(key, delay)` | `requeue_after` |
/// | [`Action::requeue`] | `add_rate_limited(key)` | `requeue` |
///
/// The default is [`Action::done`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Action {
    kind: ActionKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(crate) enum ActionKind {
    #[default]
    Done,
    RequeueAfter(Duration),
    Requeue,
}

impl Action {
    /// The key is in its desired state: reset its backoff and sync it again
    /// only when it is added to the queue again.
    pub const fn done() -> Self {
        Self {
            kind: ActionKind::Done,
        }
    }

    /// The sync succeeded but the key must be looked at again after `delay`
    /// (controller-runtime's `RequeueAfter`; the ReplicaSet controller uses it
    /// to re-check when a pod becomes available after `minReadySeconds`).
    ///
    /// The key's backoff is reset and the key is queued with
    /// [`add_after`](ctrlkit_workqueue::WorkQueue::add_after), so an
    /// earlier add (an event) still syncs it sooner, and of several pending
    /// delays the earliest wins. A zero delay queues the key again at once.
    pub const fn requeue_after(delay: Duration) -> Self {
        Self {
            kind: ActionKind::RequeueAfter(delay),
        }
    }

    /// The sync made progress but is not finished, and wants to run again
    /// after the rate limiter's delay, without counting as an error
    /// (controller-runtime's `Requeue: true`). The backoff is *not* reset,
    /// so repeated requeues back off like errors do.
    pub const fn requeue() -> Self {
        Self {
            kind: ActionKind::Requeue,
        }
    }

    /// The delay asked for by [`requeue_after`](Self::requeue_after), if that
    /// is what this action is.
    pub const fn requeue_delay(&self) -> Option<Duration> {
        match self.kind {
            ActionKind::RequeueAfter(delay) => Some(delay),
            ActionKind::Done | ActionKind::Requeue => None,
        }
    }

    pub(crate) const fn kind(&self) -> ActionKind {
        self.kind
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_action_is_done() {
        assert_eq!(Action::default(), Action::done());
        assert_eq!(Action::done().requeue_delay(), None);
        assert_eq!(Action::requeue().requeue_delay(), None);
        let delay = Duration::from_secs(3);
        assert_eq!(Action::requeue_after(delay).requeue_delay(), Some(delay));
    }
}
