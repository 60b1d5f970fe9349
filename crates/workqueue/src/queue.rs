//! The public queue handle.

use std::fmt;
use std::future::poll_fn;
use std::hash::Hash;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::builder::WorkQueueBuilder;
use crate::get::{GetState, cancel_get, poll_get};
use crate::shared_state::{SharedState, wake};
use crate::stream::WorkQueueStream;
use crate::timer_task;

/// A deduplicating, delaying, rate-limited, prioritised work queue for
/// controller workers, with client-go's semantics.
///
/// `WorkQueue` is a cheap handle: clone it into every event handler and
/// worker; all clones use the same queue. See the [crate documentation]
/// for the concepts and a worker loop.
///
/// # Guarantees
///
/// - **Stingy**: an item is handed out by [`get`](Self::get) to at most one
///   worker at a time, from `get` until that worker calls
///   [`done`](Self::done). Adding an item that is already waiting does not
///   queue it twice.
/// - **Nothing lost**: an item added while it is being processed is queued
///   again when `done` is called, so the latest add is always processed
///   after it happened.
/// - **Fair**: items of one priority are handed out in the order they were
///   first added (a repeated add keeps the first position); higher
///   priorities go first.
/// - **Shutdown**: after [`shut_down`](Self::shut_down) adds are ignored,
///   delayed items are dropped, already queued items are still handed out,
///   and `get` returns `None` once the queue is empty.
///
/// Every method takes `&self` and may be called from any thread; the state
/// sits behind short-held `parking_lot` mutexes (see the crate's
/// performance notes).
///
/// [crate documentation]: crate
pub struct WorkQueue<T> {
    pub(crate) shared: Arc<SharedState<T>>,
}

impl<T> Clone for WorkQueue<T> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<T> fmt::Debug for WorkQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.shared.lock();
        f.debug_struct("WorkQueue")
            .field("len", &state.queue.len())
            .field("processing", &state.queue.processing())
            .field("shutting_down", &state.queue.is_shutting_down())
            .finish_non_exhaustive()
    }
}

impl<T> Default for WorkQueue<T>
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
{
    fn default() -> Self {
        Self::new()
    }
}

impl<T> WorkQueue<T>
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
{
    /// A queue with the
    /// [default controller rate limiter](crate::rate_limiter::default_controller_rate_limiter)
    /// and no metrics. Can be called outside a tokio runtime.
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// Starts configuring a queue (name, rate limiter, metrics).
    pub fn builder() -> WorkQueueBuilder<T> {
        WorkQueueBuilder::new()
    }

    /// Queues `item` with priority 0.
    ///
    /// - If the item is already waiting, nothing changes (it keeps its place).
    /// - If it is being processed, it is marked and queued again when
    ///   [`done`](Self::done) is called for it.
    /// - After shutdown the call is ignored.
    ///
    /// Wakes a parked [`get`](Self::get) if the item was queued and no woken
    /// `get` is already on its way to it. Never blocks beyond the queue's
    /// short internal lock.
    pub fn add(&self, item: T) {
        self.add_with_priority(item, 0);
    }

    /// Queues `item` with `priority`: higher priorities are handed out first,
    /// equal priorities in the order they were added.
    ///
    /// Adding an item that is already waiting with a *higher* priority raises
    /// it (it keeps its original add order among its new peers); with a
    /// lower or equal one, nothing changes. An item being processed is
    /// queued again on [`done`](Self::done) with the highest priority it was
    /// added with meanwhile. Otherwise as [`add`](Self::add).
    pub fn add_with_priority(&self, item: T, priority: i32) {
        let waker = {
            let mut state = self.shared.lock_for_add();
            if !state.queue.add(item, priority) {
                return;
            }
            self.shared.publish_len(&state);
            state.wake_one_if_needed()
        };
        wake(waker);
    }

    /// Queues `item` with priority 0 once `delay` has passed; a zero delay
    /// queues it now, exactly as [`add`](Self::add).
    ///
    /// If the item already waits for a delay, it keeps the *earlier* of the
    /// two due times (so a longer delay never postpones a pending one). The
    /// wait is independent of the item being queued or processed meanwhile:
    /// when it ends the item is added as by `add`. Ignored after shutdown;
    /// shutdown drops pending delays.
    ///
    /// Delays are measured with tokio's clock (paused time in tests drives
    /// them). The item is **never handed out before its due time**; it is
    /// moved into the queue by the queue's timer task (one per queue,
    /// started on the current tokio runtime) or by a `get` that finds it due,
    /// whichever comes first, typically within microseconds while workers
    /// poll the queue and within about a millisecond (tokio's timer
    /// resolution) when they are all parked. Called outside a runtime, the
    /// timer task is started by a later `get` from inside one. Takes only
    /// the delay store's lock, not the queue's.
    pub fn add_after(&self, item: T, delay: Duration) {
        self.add_after_with_priority(item, delay, 0);
    }

    /// [`add_after`](Self::add_after) with a priority. If the item already
    /// waits for a delay, it keeps the higher of the two priorities.
    pub fn add_after_with_priority(&self, item: T, delay: Duration, priority: i32) {
        if delay.is_zero() {
            {
                let delays = self.shared.lock_delays();
                if delays.is_closed() {
                    return;
                }
                delays.record_retry();
            }
            let waker = {
                let mut state = self.shared.lock_for_add();
                if !state.queue.add(item, priority) {
                    return;
                }
                self.shared.publish_len(&state);
                state.wake_one_if_needed()
            };
            wake(waker);
            return;
        }
        let now = Instant::now();
        let due = now.checked_add(delay).unwrap_or_else(|| far_future(now));
        let mut delays = self.shared.lock_delays();
        if delays.is_closed() {
            return;
        }
        delays.record_retry();
        if delays.add_at(item, due, priority) {
            self.shared.publish_next_due(&delays);
            self.shared.timer.notify_one();
        }
        timer_task::ensure_started_locked(&self.shared, &mut delays);
    }

    /// Queues `item` after the delay the rate limiter chooses for it
    /// (which counts one more failure of the item). Use it when a sync
    /// failed; call [`forget`](Self::forget) when it succeeds.
    pub fn add_rate_limited(&self, item: T) {
        let delay = self.shared.limiter.when(&item);
        self.add_after(item, delay);
    }

    /// Clears the rate limiter's failure history of `item`, so its next
    /// [`add_rate_limited`](Self::add_rate_limited) waits the shortest
    /// delay again. Does not remove the item from the queue, and does not
    /// replace [`done`](Self::done).
    pub fn forget(&self, item: &T) {
        self.shared.limiter.forget(item);
    }

    /// How many failures of `item` the rate limiter is tracking (the
    /// [`add_rate_limited`](Self::add_rate_limited) calls since the last
    /// [`forget`](Self::forget), for the default limiter).
    pub fn num_requeues(&self, item: &T) -> u32 {
        self.shared.limiter.num_requeues(item)
    }

    /// Waits for the next item and marks it as being processed. The caller
    /// must call [`done`](Self::done) with it when finished.
    ///
    /// Returns `None` once the queue is shut down **and** empty: items queued
    /// before shutdown are still handed out. Parked callers are woken
    /// longest-waiting first, one after the other while items remain, so no
    /// queued item waits while every caller sleeps.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: an item leaves the queue only when the future returns
    /// it. Dropping the future (for example when it loses a
    /// `tokio::select!`) never loses an item; if it had been chosen to take
    /// one, another parked `get` is woken instead.
    pub async fn get(&self) -> Option<T> {
        let mut waiter = Waiter {
            shared: &self.shared,
            get: GetState::default(),
        };
        poll_fn(|cx| poll_get(waiter.shared, &mut waiter.get, cx)).await
    }

    /// Takes the next item if one is queued, without waiting; the caller
    /// must call [`done`](Self::done) with it. Returns `None` if nothing is
    /// queued (whether or not the queue is shut down).
    pub fn try_get(&self) -> Option<T> {
        let mut state = self.shared.lock();
        let item = state.queue.pop();
        if item.is_some() {
            self.shared.publish_len(&state);
        }
        item
    }

    /// Marks `item`, returned earlier by [`get`](Self::get), as finished. If
    /// it was added again while being processed it is queued again now.
    ///
    /// Calling `done` for an item that is not being processed does nothing.
    /// (client-go's queue would queue a second copy of such an item when it
    /// is waiting; this one does not.)
    pub fn done(&self, item: &T) {
        let (waker, drained) = {
            let mut state = self.shared.lock();
            let outcome = state.queue.done(item);
            let waker = if outcome.requeued {
                self.shared.publish_len(&state);
                state.wake_one_if_needed()
            } else {
                None
            };
            (waker, outcome.idle && state.queue.is_draining())
        };
        wake(waker);
        if drained {
            self.shared.drained.notify_waiters();
        }
    }

    /// Whether `item` waits to be handed out (queued, not being processed
    /// and not only waiting for a delay). A snapshot: a `get` may take it
    /// right after. An event a waiting item already stands for needs no
    /// delayed add of its own.
    pub fn is_queued(&self, item: &T) -> bool {
        self.shared.lock().queue.is_queued(item)
    }

    /// Number of items waiting to be handed out. Items being processed
    /// (even if added again meanwhile) and items waiting for a delay are not
    /// counted, as in client-go.
    pub fn len(&self) -> usize {
        self.shared.len()
    }

    /// Whether no item is waiting to be handed out (see [`len`](Self::len)).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Shuts the queue down without waiting for in-flight items.
    ///
    /// Later adds are ignored, pending delays are dropped, queued items are
    /// still handed out, and every parked [`get`](Self::get) is woken so it
    /// returns the remaining items and then `None`. Ends a concurrent
    /// [`shut_down_with_drain`](Self::shut_down_with_drain) wait. Idempotent.
    pub fn shut_down(&self) {
        self.start_shutdown(false);
        self.shared.drained.notify_waiters();
    }

    /// Shuts the queue down like [`shut_down`](Self::shut_down), then waits
    /// until every item handed out by [`get`](Self::get) is
    /// [`done`](Self::done) (including items queued again by `done`, which
    /// keep being handed out meanwhile). Workers must keep calling `get` and
    /// `done` or this waits forever; a concurrent `shut_down` ends the wait
    /// early.
    ///
    /// Cancel-safe: dropping the future stops waiting; the queue stays shut
    /// down.
    pub async fn shut_down_with_drain(&self) {
        self.start_shutdown(true);
        loop {
            let mut notified = pin!(self.shared.drained.notified());
            notified.as_mut().enable();
            {
                let state = self.shared.lock();
                if state.queue.processing() == 0 || !state.queue.is_draining() {
                    return;
                }
            }
            notified.await;
        }
    }

    fn start_shutdown(&self, drain: bool) {
        let mut wakers = Vec::new();
        {
            let mut state = self.shared.lock();
            state.queue.shut_down(drain);
            state.waiters.notify_all(&mut wakers);
        }
        {
            let mut delays = self.shared.lock_delays();
            delays.close();
            self.shared.publish_next_due(&delays);
            if let Some(task) = delays.timer_task.take() {
                task.abort();
            }
        }
        wakers.into_iter().for_each(|waker| waker.wake());
    }

    /// Whether [`shut_down`](Self::shut_down) or
    /// [`shut_down_with_drain`](Self::shut_down_with_drain) was called.
    pub fn is_shutting_down(&self) -> bool {
        self.shared.lock().queue.is_shutting_down()
    }

    /// The queue as a [`Stream`](futures_core::Stream) of items, for
    /// consumers such as kube-runtime's `applier` or `StreamExt` combinators.
    ///
    /// Each item yielded counts as handed out by [`get`](Self::get): the
    /// consumer must call [`done`](Self::done) for it (keep a clone of the
    /// queue for that), or the item is never handed out again. The stream
    /// ends when the queue is shut down and empty. Polling it is cancel-safe
    /// in the same way as `get`.
    pub fn stream(&self) -> WorkQueueStream<T> {
        WorkQueueStream::new(self.clone())
    }
}

/// A time far enough ahead to mean "never" without overflowing `Instant`.
fn far_future(now: Instant) -> Instant {
    // About thirty years, as tokio itself uses for "never".
    now + Duration::from_secs(86400 * 365 * 30)
}

/// A parked `get`; unparks on drop so cancelling is safe.
struct Waiter<'a, T>
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
{
    shared: &'a Arc<SharedState<T>>,
    get: GetState,
}

impl<T> Drop for Waiter<'_, T>
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
{
    fn drop(&mut self) {
        cancel_get(self.shared, &mut self.get);
    }
}
