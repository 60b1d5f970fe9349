//! The one way handlers put keys on the queue: with a priority, through
//! the admission seam, spaced by the batch period.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ctrlkit_informer::ObjectKey;
use ctrlkit_workqueue::WorkQueue;
use tokio::time::Instant;

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

    fn value(self) -> i32 {
        match self {
            Self::Normal => 0,
            Self::Low => LOW_PRIORITY,
        }
    }
}

/// The batch period ([`ControllerBuilder::batch_period`](crate::ControllerBuilder::batch_period)):
/// hands each key at most one slot per period. An event for a key whose
/// last slot began a period or more ago takes a slot now (queued at
/// once); any other event is queued for the key's next slot, which the
/// workqueue's delayed adds of one key share. A deferred add never comes
/// before the event it stands for, so no change goes unsynced; it comes at
/// most one period after it.
struct BatchPeriod {
    period: Duration,
    hasher: RandomState,
    slots: Mutex<Slots>,
}

struct Slots {
    /// When each key's latest slot begins, by a hash of the key: no key is
    /// copied per event. Two keys sharing a hash only share their slots,
    /// which can defer an event (by at most one period), never drop one.
    last: HashMap<u64, Instant>,
    /// The size at which slots more than a period old are dropped.
    prune_at: usize,
}

/// Below this many keys the slots are never pruned.
const MIN_PRUNE_AT: usize = 1024;

impl BatchPeriod {
    fn new(period: Duration) -> Self {
        Self {
            period,
            hasher: RandomState::new(),
            slots: Mutex::new(Slots {
                last: HashMap::new(),
                prune_at: MIN_PRUNE_AT,
            }),
        }
    }

    /// How long an event for `key` waits now: zero for a key without a
    /// slot in the last period, else until its next slot.
    fn delay(&self, key: &ObjectKey) -> Duration {
        let hash = self.hasher.hash_one(key);
        let now = Instant::now();
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        let period = self.period;
        // Durations, not `slot + period`: any period is valid, however long.
        let open = |slot: Instant| slot > now || now - slot < period;
        match slots.last.get_mut(&hash) {
            Some(slot) if *slot > now => *slot - now,
            Some(slot) if open(*slot) => {
                // The current slot has begun: the event needs the next.
                let wait = period - (now - *slot);
                // Past the clock's range the slot stays: the same wait again.
                *slot = now.checked_add(wait).unwrap_or(*slot);
                wait
            }
            Some(slot) => {
                *slot = now;
                Duration::ZERO
            }
            None => {
                slots.last.insert(hash, now);
                if slots.last.len() >= slots.prune_at {
                    slots.last.retain(|_, slot| open(*slot));
                    slots.prune_at = (slots.last.len() * 2).max(MIN_PRUNE_AT);
                }
                Duration::ZERO
            }
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
    batch: Option<Arc<BatchPeriod>>,
}

impl Enqueuer {
    #[cfg(test)]
    pub(crate) fn new(queue: WorkQueue<ObjectKey>) -> Self {
        Self {
            queue,
            admission: None,
            batch: None,
        }
    }

    /// An enqueuer that asks `admission` (if any) about every key.
    pub(crate) fn with_admission(
        queue: WorkQueue<ObjectKey>,
        admission: Option<Arc<dyn Admission>>,
    ) -> Self {
        Self {
            queue,
            admission,
            batch: None,
        }
    }

    /// Spaces the adds of each key by `period` (none if zero), as
    /// [`BatchPeriod`] describes.
    pub(crate) fn with_batch_period(mut self, period: Duration) -> Self {
        self.batch = (!period.is_zero()).then(|| Arc::new(BatchPeriod::new(period)));
        self
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
        // A key still waiting in the queue takes the event into its coming
        // sync (which reads the cache after it), as without a batch period.
        let delay = match &self.batch {
            Some(batch) if !self.queue.is_queued(&key) => batch.delay(&key),
            _ => Duration::ZERO,
        };
        if delay.is_zero() {
            self.queue.add_with_priority(key, priority.value());
        } else {
            self.queue
                .add_after_with_priority(key, delay, priority.value());
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
        let enqueuer =
            Enqueuer::with_admission(queue.clone(), Some(Arc::new(OnlyNamespace("mine"))));
        enqueuer.add(ObjectKey::new("theirs", "a"), Some("u"), Priority::Normal);
        enqueuer.add_after(ObjectKey::new("theirs", "b"), None, Duration::ZERO);
        enqueuer.add(ObjectKey::new("mine", "c"), None, Priority::Low);
        assert_eq!(queue.len(), 1);
        assert_eq!(queue.get().await, Some(ObjectKey::new("mine", "c")));
    }

    #[tokio::test(start_paused = true)]
    async fn any_batch_period_is_valid_and_never_drops_a_key() {
        for period in [Duration::from_millis(1), Duration::MAX] {
            let queue = WorkQueue::new();
            let enqueuer = Enqueuer::new(queue.clone()).with_batch_period(period);
            let key = ObjectKey::new("ns", "a");
            enqueuer.add(key.clone(), None, Priority::Normal);
            assert_eq!(queue.try_get(), Some(key.clone()), "the first at once");
            queue.done(&key);
            enqueuer.add(key.clone(), None, Priority::Normal);
            enqueuer.add(key.clone(), None, Priority::Low);
            assert!(queue.is_empty(), "the others wait for the next slot");
            if period == Duration::from_millis(1) {
                assert_eq!(queue.get().await, Some(key.clone()));
                queue.done(&key);
                tokio::time::sleep(Duration::from_millis(5)).await;
                assert!(queue.is_empty(), "one add for both events");
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_event_for_a_key_waiting_in_the_queue_folds_into_it() {
        let queue = WorkQueue::new();
        let enqueuer = Enqueuer::new(queue.clone()).with_batch_period(Duration::from_secs(1));
        let key = ObjectKey::new("ns", "a");
        enqueuer.add(key.clone(), None, Priority::Normal);
        enqueuer.add(key.clone(), None, Priority::Normal);
        assert_eq!(queue.try_get(), Some(key.clone()));
        queue.done(&key);
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(queue.is_empty(), "no delayed add for the folded event");
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
