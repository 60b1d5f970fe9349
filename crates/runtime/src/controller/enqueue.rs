//! The one way handlers put keys on the queue: with a priority, through
//! the admission seam.

use std::sync::Arc;
use std::time::Duration;

use ctrlkit_informer::ObjectKey;
use ctrlkit_workqueue::WorkQueue;

/// The queue priority of keys from an informer's initial list and from
/// periodic resyncs: below the default 0 of live changes, so changes made
/// while a controller works through a backlog overtake it. The value is
/// controller-runtime's `handler.LowPriority`.
pub const LOW_PRIORITY: i32 = -100;

/// How urgent an event is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Priority {
    /// A live change: priority 0.
    Normal,
    /// The initial list or a resync: [`LOW_PRIORITY`].
    Low,
}

impl Priority {
    /// Low for an object of the initial list.
    pub(crate) fn of_add(is_in_initial_list: bool) -> Self {
        if is_in_initial_list {
            Self::Low
        } else {
            Self::Normal
        }
    }

    /// Low for a resync (the informer passes the same object twice, or two
    /// copies with one resourceVersion), as controller-runtime decides.
    pub(crate) fn of_update<K: kube::Resource>(old: &Arc<K>, new: &Arc<K>) -> Self {
        if Arc::ptr_eq(old, new) || old.meta().resource_version == new.meta().resource_version {
            Self::Low
        } else {
            Self::Normal
        }
    }
}

/// Decides whether a key may enter the queue at all. The seam sharding
/// will use to drop the keys of owners another replica handles before they
/// cost a queue slot; `owner_uid` is known for owner and child events and
/// `None` for keys mapped from other kinds.
pub(crate) trait Admission: Send + Sync {
    fn admit(&self, key: &ObjectKey, owner_uid: Option<&str>) -> bool;
}

/// Adds keys to the controller's queue.
#[derive(Clone)]
pub(crate) struct Enqueuer {
    queue: WorkQueue<ObjectKey>,
    admission: Option<Arc<dyn Admission>>,
}

impl Enqueuer {
    #[cfg(test)]
    pub(crate) fn new(queue: WorkQueue<ObjectKey>) -> Self {
        Self {
            queue,
            admission: None,
        }
    }

    /// An enqueuer that asks `admission` (if any) about every key.
    pub(crate) fn with_admission(
        queue: WorkQueue<ObjectKey>,
        admission: Option<Arc<dyn Admission>>,
    ) -> Self {
        Self { queue, admission }
    }

    fn admitted(&self, key: &ObjectKey, owner_uid: Option<&str>) -> bool {
        self.admission
            .as_ref()
            .is_none_or(|a| a.admit(key, owner_uid))
    }

    pub(crate) fn add(&self, key: ObjectKey, owner_uid: Option<&str>, priority: Priority) {
        if !self.admitted(&key, owner_uid) {
            return;
        }
        match priority {
            Priority::Normal => self.queue.add(key),
            Priority::Low => self.queue.add_with_priority(key, LOW_PRIORITY),
        }
    }

    pub(crate) fn add_after(&self, key: ObjectKey, owner_uid: Option<&str>, delay: Duration) {
        if self.admitted(&key, owner_uid) {
            self.queue.add_after(key, delay);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct OnlyNamespace(&'static str);

    impl Admission for OnlyNamespace {
        fn admit(&self, key: &ObjectKey, _owner_uid: Option<&str>) -> bool {
            key.namespace == self.0
        }
    }

    #[tokio::test]
    async fn the_admission_seam_drops_keys_before_the_queue() {
        let queue = WorkQueue::new();
        let enqueuer = Enqueuer {
            queue: queue.clone(),
            admission: Some(Arc::new(OnlyNamespace("mine"))),
        };
        enqueuer.add(ObjectKey::new("theirs", "a"), Some("u"), Priority::Normal);
        enqueuer.add_after(ObjectKey::new("theirs", "b"), None, Duration::ZERO);
        enqueuer.add(ObjectKey::new("mine", "c"), None, Priority::Low);
        assert_eq!(queue.len(), 1);
        assert_eq!(queue.get().await, Some(ObjectKey::new("mine", "c")));
    }

    #[tokio::test]
    async fn low_priority_keys_wait_behind_live_changes() {
        let queue = WorkQueue::new();
        let enqueuer = Enqueuer::new(queue.clone());
        enqueuer.add(ObjectKey::new("ns", "listed"), None, Priority::Low);
        enqueuer.add(ObjectKey::new("ns", "changed"), None, Priority::Normal);
        assert_eq!(queue.get().await.unwrap().name, "changed");
        assert_eq!(queue.get().await.unwrap().name, "listed");
    }
}
