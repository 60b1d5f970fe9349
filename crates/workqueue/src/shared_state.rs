//! What every handle of one queue shares: the queued items and parked
//! `get`s under the main lock, the delay store under a lock of its own, the
//! atomics that let `len` and `get` read them without locking, and the
//! move of due delayed items from the one to the other.
//!
//! One thread never holds both locks at once, so they cannot deadlock and
//! an `add_after` never waits for the workers.

use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::Waker;

use parking_lot::{Mutex, MutexGuard};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::delay_store::DelayStore;
use crate::queue_state::QueueState;
use crate::rate_limiter::RateLimiter;
use crate::tuning::{FIRE_CHUNK, gets_needed, lock, lock_eager};
use crate::waiters::Waiters;

/// Everything behind the queue's main lock.
pub(crate) struct Locked<T> {
    pub(crate) queue: QueueState<T>,
    pub(crate) waiters: Waiters,
}

impl<T> Locked<T> {
    /// Chooses a parked `get` to wake if the queued items have fewer `get`s
    /// on the way to them than they need ([`gets_needed`]), and returns its
    /// waker, to be woken after the lock is released. Called after every
    /// change that may queue an item or end a chosen `get`, including a
    /// `get` taking an item, so the woken `get`s form a chain: no item
    /// waits while all `get`s sleep.
    pub(crate) fn wake_one_if_needed(&mut self) -> Option<Waker> {
        let queued = self.queue.len();
        if queued > 0 && self.waiters.notified() < gets_needed(queued) {
            self.waiters.notify_one()
        } else {
            None
        }
    }

    /// [`wake_one_if_needed`](Self::wake_one_if_needed) until no more `get`
    /// is needed, appending the wakers to `out`.
    pub(crate) fn wake_if_needed(&mut self, out: &mut Vec<Waker>) {
        while let Some(waker) = self.wake_one_if_needed() {
            out.push(waker);
        }
    }
}

/// Shared by every clone of a [`WorkQueue`](crate::WorkQueue).
pub(crate) struct SharedState<T> {
    /// `queue.len()` as of the last change, published under the lock so
    /// [`len`](Self::len) (which producers call to pace themselves) does
    /// not compete for it.
    len: AtomicUsize,
    /// The main lock; taken through [`lock`](Self::lock) and
    /// [`lock_for_add`](Self::lock_for_add).
    state: Mutex<Locked<T>>,
    /// Items waiting for a delay, under their own lock (see
    /// [`crate::delay_store`]).
    delays: Mutex<DelayStore<T>>,
    /// The queue records metrics (so the timer task must run even without
    /// delays, to refresh the work-in-progress gauges).
    pub(crate) has_metrics: bool,
    /// The earliest pending due time, in nanoseconds since `epoch`
    /// (`u64::MAX` if none), so `get` can tell without a lock whether
    /// delayed items are due.
    next_due: AtomicU64,
    epoch: Instant,
    /// Buffers of [`fire_due`](Self::fire_due); also makes firings one at a
    /// time.
    firing: Mutex<Firing<T>>,
    /// The timer task is needed but could not be started (no tokio runtime
    /// was current): the next `get` tries again.
    pub(crate) timer_task_wanted: AtomicBool,
    pub(crate) limiter: Box<dyn RateLimiter<T>>,
    /// Wakes `shut_down_with_drain` when the last in-flight item is done.
    pub(crate) drained: Notify,
    /// Wakes the timer task when its deadline moved earlier. Separate from
    /// the shared state so the task can wait on it without keeping the
    /// queue alive.
    pub(crate) timer: Arc<Notify>,
}

/// Buffers for moving due items, reused between firings.
struct Firing<T> {
    due: Vec<(T, i32)>,
    wakers: Vec<Waker>,
}

/// What a firing found.
pub(crate) enum Fired {
    /// The queue is shutting down: the timer task should end.
    Closed,
    /// Another thread is firing right now (only when not told to wait).
    Busy,
    /// Done; the earliest pending due time after it.
    Next(Option<Instant>),
}

impl<T> SharedState<T> {
    /// Locks the queued items (see [`crate::tuning::lock`]).
    #[inline]
    pub(crate) fn lock(&self) -> MutexGuard<'_, Locked<T>> {
        lock(&self.state)
    }

    /// Locks the queued items for an `add`, which goes first under
    /// contention (see [`crate::tuning::lock_eager`]).
    #[inline]
    pub(crate) fn lock_for_add(&self) -> MutexGuard<'_, Locked<T>> {
        lock_eager(&self.state)
    }

    /// Locks the delay store.
    #[inline]
    pub(crate) fn lock_delays(&self) -> MutexGuard<'_, DelayStore<T>> {
        lock(&self.delays)
    }

    /// Number of items waiting, as of the last completed operation.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Publishes the queue's length; called under the main lock after every
    /// operation that may have changed it.
    #[inline]
    pub(crate) fn publish_len(&self, state: &Locked<T>) {
        self.len.store(state.queue.len(), Ordering::Release);
    }

    /// Publishes the earliest pending due time; called under the delay
    /// lock after every change of it.
    pub(crate) fn publish_next_due(&self, delays: &DelayStore<T>) {
        let next = delays.next_due().map_or(u64::MAX, |due| self.nanos(due));
        self.next_due.store(next, Ordering::Release);
    }

    /// The earliest pending due time in nanoseconds since the queue was
    /// built, as last published; `None` if nothing waits.
    pub(crate) fn next_due_nanos(&self) -> Option<u64> {
        let next = self.next_due.load(Ordering::Acquire);
        (next != u64::MAX).then_some(next)
    }

    /// `at` in nanoseconds since the queue was built.
    pub(crate) fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX - 1)
    }
}

impl<T> Drop for SharedState<T> {
    fn drop(&mut self) {
        if let Some(task) = self.delays.get_mut().timer_task.take() {
            task.abort();
        }
    }
}

impl<T> SharedState<T>
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
{
    /// Wraps `queue` and `delays`.
    pub(crate) fn new(
        queue: QueueState<T>,
        delays: DelayStore<T>,
        limiter: Box<dyn RateLimiter<T>>,
    ) -> Self {
        Self {
            len: AtomicUsize::new(0),
            has_metrics: queue.metrics().is_some(),
            state: Mutex::new(Locked {
                queue,
                waiters: Waiters::default(),
            }),
            delays: Mutex::new(delays),
            timer_task_wanted: AtomicBool::new(false),
            next_due: AtomicU64::new(u64::MAX),
            epoch: Instant::now(),
            firing: Mutex::new(Firing {
                due: Vec::new(),
                wakers: Vec::new(),
            }),
            limiter,
            drained: Notify::new(),
            timer: Arc::new(Notify::new()),
        }
    }

    /// Moves every item due at `now` from the delay store into the queue:
    /// takes them out under the delay lock, then adds them under the main
    /// lock in chunks of [`FIRE_CHUNK`] and wakes parked `get`s as needed.
    /// Called by the timer task and by `get`s that find an item due. Only
    /// one thread fires at a time; with `wait` false a second one returns
    /// [`Fired::Busy`] at once instead of waiting for the first.
    pub(crate) fn fire_due(&self, now: Instant, wait: bool) -> Fired {
        let mut firing = if wait {
            lock(&self.firing)
        } else {
            match self.firing.try_lock() {
                Some(firing) => firing,
                None => return Fired::Busy,
            }
        };
        let Firing { due, wakers } = &mut *firing;
        let next = {
            let mut delays = self.lock_delays();
            if delays.is_closed() {
                return Fired::Closed;
            }
            delays.take_due(now, due);
            self.publish_next_due(&delays);
            delays.next_due()
        };
        let mut items = due.drain(..);
        loop {
            let mut state = self.lock();
            if state.queue.is_shutting_down() {
                return Fired::Closed;
            }
            let mut queued = 0;
            let mut added = 0;
            for (item, priority) in items.by_ref() {
                if state.queue.add(item, priority) {
                    queued += 1;
                }
                added += 1;
                if added == FIRE_CHUNK {
                    break;
                }
            }
            if queued > 0 {
                self.publish_len(&state);
                state.wake_if_needed(wakers);
            }
            drop(state);
            wakers.drain(..).for_each(Waker::wake);
            if added < FIRE_CHUNK {
                return Fired::Next(next);
            }
        }
    }
}

/// Wakes `waker` if there is one. Called after the lock is released so the
/// woken task does not find it held.
pub(crate) fn wake(waker: Option<Waker>) {
    if let Some(waker) = waker {
        waker.wake();
    }
}
