//! The state every handle of one queue shares, and the parts of `get` that
//! the future and the stream have in common.

use std::cell::Cell;
use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker, ready};

use parking_lot::{Mutex, MutexGuard};
use tokio::sync::Notify;
use tokio::task::coop::{RestoreOnPending, poll_proceed};
use tokio::time::Instant;

use crate::core::Core;
use crate::driver::{self, Firing, fire_due};
use crate::pending::Pending;
use crate::rate_limiter::RateLimiter;
use crate::waiters::Waiters;

/// Everything behind the queue's main lock.
pub(crate) struct State<T> {
    pub(crate) core: Core<T>,
    pub(crate) waiters: Waiters,
}

impl<T> State<T> {
    /// Chooses a parked `get` to wake if the queued items have fewer `get`s
    /// on the way to them than they need, and returns its waker, to be woken
    /// after the lock is released. Called after every change that may queue
    /// an item or end a chosen `get`, including a `get` taking an item, so
    /// the woken `get`s form a chain: no item waits while all `get`s sleep.
    ///
    /// Needed is one woken `get` while fewer than [`ITEMS_PER_WAKE`] items
    /// are queued, one more per [`ITEMS_PER_WAKE`] items beyond (never more
    /// than the items). Waking one `get` per queued item, as client-go
    /// does, makes a fast producer wake every idle worker, each a thread
    /// wake-up (a system call) and then lock contention between cores;
    /// workers that come one after the other instead mostly run on the
    /// thread that woke them. The number grows with the backlog so that a
    /// woken `get` stuck behind a busy task of its thread (tokio runs a task
    /// woken from a worker thread on that thread, and no other thread may
    /// take it) does not hold up a growing backlog: the next wake-up moves
    /// it where an idle thread can take it.
    pub(crate) fn wake_one_if_needed(&mut self) -> Option<Waker> {
        let queued = self.core.len();
        let needed = queued.min(1 + queued / ITEMS_PER_WAKE);
        if queued > 0 && self.waiters.notified() < needed {
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

/// See [`State::wake_one_if_needed`].
const ITEMS_PER_WAKE: usize = 256;

/// Shared by every clone of a [`WorkQueue`](crate::WorkQueue).
pub(crate) struct Shared<T> {
    /// `core.len()` as of the last change, published under the lock so
    /// [`len`](Self::len) (which producers call to pace themselves) does
    /// not compete for it.
    len: AtomicUsize,
    /// Locked through [`lock`](Self::lock).
    pub(crate) state: Mutex<State<T>>,
    /// Items waiting for a delay, under their own lock (see
    /// [`crate::pending`]). Never locked while `state` is held by the same
    /// thread, nor the other way round.
    pub(crate) pending: Mutex<Pending<T>>,
    /// The queue records metrics (so the timer task must run even without
    /// delays, to refresh the work-in-progress gauges).
    has_metrics: bool,
    /// The earliest pending due time, in nanoseconds since `epoch`
    /// (`u64::MAX` if none), so `get` can tell without a lock whether
    /// delayed items are due.
    next_due: AtomicU64,
    epoch: Instant,
    /// Buffers of [`fire_due`]; also makes firings one at a time.
    pub(crate) firing: Mutex<Firing<T>>,
    /// The timer task is needed but could not be started (no tokio runtime
    /// was current): the next `get` tries again.
    driver_wanted: AtomicBool,
    pub(crate) limiter: Box<dyn RateLimiter<T>>,
    /// Wakes `shut_down_with_drain` when the last in-flight item is done.
    pub(crate) drained: Notify,
    /// Wakes the timer task when its deadline moved earlier. Separate from
    /// `Shared` so the task can wait on it without keeping the queue alive.
    pub(crate) timer: Arc<Notify>,
}

/// Rounds of spinning for a contended lock before blocking on it. Round
/// `r` pauses `2^min(r, 6)` times and then looks at the lock once: in all
/// about 1,700 pause instructions, tens of microseconds, before falling back
/// to `parking_lot`'s blocking lock.
///
/// The lock is held for tens of nanoseconds at a time, but when a producer
/// and workers on different cores hammer it, the other side takes it again
/// right after releasing it. Blocking then costs system calls and context
/// switches on both sides (`parking_lot` first yields the thread, then
/// parks it on a futex, and the holder must wake it), and looking at the
/// lock often keeps stealing its cache line from the holder. Looking at it
/// rarely lets the holder run a burst of operations undisturbed, which
/// measured several times faster under such contention. The spin only
/// happens under contention, never on an idle queue.
const LOCK_SPIN_ROUNDS: u32 = 30;

impl<T> Shared<T> {
    /// Locks the queue's state (see [`LOCK_SPIN_ROUNDS`]).
    #[inline]
    pub(crate) fn lock(&self) -> MutexGuard<'_, State<T>> {
        lock(&self.state)
    }

    /// Locks the queue's state for an `add`: like [`lock`](Self::lock),
    /// but a contended lock is checked often, so an `add` gets it as soon
    /// as it is free while `get`/`done` (which back off longer) wait.
    ///
    /// Producers (event handlers fed by watch streams) are favoured over
    /// workers under contention: in an add storm, every moment the producer
    /// waits is lost, while a worker that waits longer finds more repeated
    /// adds already collapsed into one item. With the same policy for both,
    /// a storm of adds over a few keys ran about twice as long.
    #[inline]
    pub(crate) fn lock_for_add(&self) -> MutexGuard<'_, State<T>> {
        match self.state.try_lock() {
            Some(guard) => guard,
            None => lock_eager_contended(&self.state),
        }
    }

    /// Locks the delay store (see [`LOCK_SPIN_ROUNDS`]).
    #[inline]
    pub(crate) fn lock_pending(&self) -> MutexGuard<'_, Pending<T>> {
        lock(&self.pending)
    }

    /// Number of items waiting, as of the last completed operation.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Publishes the earliest pending due time; called under the delay
    /// lock after every change of it.
    pub(crate) fn publish_next_due(&self, pending: &Pending<T>) {
        let next = pending.next_due().map_or(u64::MAX, |due| self.nanos(due));
        self.next_due.store(next, Ordering::Release);
    }

    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX - 1)
    }

    /// Publishes the queue's length; called under the lock after every
    /// operation that may have changed it.
    #[inline]
    pub(crate) fn publish_len(&self, state: &State<T>) {
        self.len.store(state.core.len(), Ordering::Release);
    }
}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        if let Some(driver) = self.pending.get_mut().driver.take() {
            driver.abort();
        }
    }
}

impl<T> Shared<T>
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
{
    /// Wraps `core` and `pending`.
    pub(crate) fn new(
        core: Core<T>,
        pending: Pending<T>,
        limiter: Box<dyn RateLimiter<T>>,
    ) -> Self {
        Self {
            len: AtomicUsize::new(0),
            has_metrics: core.metrics().is_some(),
            state: Mutex::new(State {
                core,
                waiters: Waiters::default(),
            }),
            pending: Mutex::new(pending),
            driver_wanted: AtomicBool::new(false),
            next_due: AtomicU64::new(u64::MAX),
            epoch: Instant::now(),
            firing: Mutex::new(Firing::default()),
            limiter,
            drained: Notify::new(),
            timer: Arc::new(Notify::new()),
        }
    }

    /// Starts the timer task on the current tokio runtime if the queue needs
    /// one (delayed items or metrics) and none runs. Outside a runtime it
    /// only records that the task is wanted; the next `get` from inside one
    /// starts it.
    pub(crate) fn ensure_driver(self: &Arc<Self>) {
        let mut pending = self.lock_pending();
        self.ensure_driver_locked(&mut pending);
    }

    /// [`ensure_driver`](Self::ensure_driver) with the delay lock held.
    pub(crate) fn ensure_driver_locked(self: &Arc<Self>, pending: &mut Pending<T>) {
        let needed = pending.next_due().is_some() || self.has_metrics;
        if !needed || pending.is_closed() {
            return;
        }
        if pending
            .driver
            .as_ref()
            .is_some_and(|task| !task.is_finished())
        {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let task = driver::run(Arc::downgrade(self), Arc::clone(&self.timer));
                pending.driver = Some(runtime.spawn(task));
                self.driver_wanted.store(false, Ordering::Relaxed);
            }
            Err(_) => self.driver_wanted.store(true, Ordering::Relaxed),
        }
    }

    /// Starts the timer task if an earlier attempt found no runtime.
    fn retry_driver(self: &Arc<Self>) {
        if self.driver_wanted.load(Ordering::Relaxed) {
            self.ensure_driver();
        }
    }

    /// Moves due delayed items into the queue from a `get`, without waiting
    /// for the timer task. The timer task alone would hand items out late
    /// when the workers are busy: tokio checks its timers only between
    /// task polls (every few dozen of them) or when a thread idles, and a
    /// busy worker task hands out thousands of items per poll. So a `get`
    /// looks at the clock when the queue is empty, and otherwise every
    /// [`FIRE_CHECK_EVERY`] calls on its thread; it reads the clock only
    /// while delayed items are pending.
    fn fire_if_due(&self) {
        let next = self.next_due.load(Ordering::Acquire);
        if next == u64::MAX {
            return;
        }
        let check = FIRE_CHECKS.with(|checks| {
            let n = checks.get().wrapping_add(1);
            checks.set(n);
            n.is_multiple_of(FIRE_CHECK_EVERY)
        });
        if !check && self.len() > 0 {
            return;
        }
        let now = Instant::now();
        if self.nanos(now) >= next {
            fire_due(self, now, false);
        }
    }

    /// Whether a delayed item is due within 50 µs, so a `get` on an
    /// empty queue keeps polling (letting the other tasks of its thread run
    /// between polls) instead of parking until the timer task fires it.
    /// tokio's timer has a resolution of one millisecond, so an item would
    /// otherwise be handed out up to about a millisecond after its due
    /// time; this bounds the busy polling to the last 50 µs before a
    /// due time.
    fn due_soon(&self) -> bool {
        let next = self.next_due.load(Ordering::Acquire);
        next != u64::MAX && next.saturating_sub(self.nanos(Instant::now())) <= DUE_SOON_NS
    }

    /// One poll of a `get`: takes an item if one is queued, reports the end
    /// of the queue, or parks in `slot`. The item leaves the queue only
    /// when this returns `Ready(Some)`, which is what makes `get`
    /// cancel-safe.
    ///
    /// Takes part in tokio's cooperative scheduling like tokio's own
    /// channels (see [`coop_budget`]), so a worker loop on an always-full
    /// queue yields to the other tasks of its thread now and then.
    pub(crate) fn poll_get(
        self: &Arc<Self>,
        get: &mut GetState,
        cx: &mut Context<'_>,
    ) -> Poll<Option<T>> {
        let GetState { slot, spin_since } = get;
        self.fire_if_due();
        let mut state = self.lock();
        let coop = ready!(coop_budget(cx, state.core.len()));
        if let Some(item) = state.core.pop() {
            self.publish_len(&state);
            if let Some(coop) = coop {
                coop.made_progress();
            }
            if let Some(key) = slot.take() {
                state.waiters.release(key);
            }
            let waker = state.wake_one_if_needed();
            drop(state);
            wake(waker);
            *spin_since = None;
            // A queue with metrics built outside a runtime whose workers
            // never park still gets its gauge refresher.
            self.retry_driver();
            return Poll::Ready(Some(item));
        }
        if state.core.is_shutting_down() {
            if let Some(key) = slot.take() {
                state.waiters.release(key);
            }
            return Poll::Ready(None);
        }
        if self.due_soon() && spin_allowed(spin_since) {
            // Poll again instead of parking: the timer task would fire the
            // item up to a millisecond late.
            if let Some(key) = slot.take() {
                state.waiters.release(key);
            }
            drop(state);
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        match slot {
            Some(key) => state.waiters.rearm(*key, cx.waker()),
            None => *slot = Some(state.waiters.register(cx.waker())),
        }
        drop(state);
        self.retry_driver();
        Poll::Pending
    }

    /// Unparks a `get` that is dropped before it returned. If it had been
    /// chosen for an item it did not take, another waiter is chosen, so the
    /// item does not sit in the queue while workers sleep.
    pub(crate) fn cancel_get(&self, get: &mut GetState) {
        let Some(key) = get.slot.take() else {
            return;
        };
        let waker = {
            let mut state = self.lock();
            state.waiters.release(key);
            state.wake_one_if_needed()
        };
        wake(waker);
    }
}

/// Locks `mutex`, spinning for a while if it is contended (see
/// [`LOCK_SPIN_ROUNDS`]).
#[inline]
pub(crate) fn lock<S>(mutex: &Mutex<S>) -> MutexGuard<'_, S> {
    match mutex.try_lock() {
        Some(guard) => guard,
        None => lock_contended(mutex),
    }
}

#[cold]
fn lock_contended<S>(mutex: &Mutex<S>) -> MutexGuard<'_, S> {
    for round in 0..LOCK_SPIN_ROUNDS {
        for _ in 0..(1u32 << round.min(6)) {
            std::hint::spin_loop();
        }
        if !mutex.is_locked()
            && let Some(guard) = mutex.try_lock()
        {
            return guard;
        }
    }
    mutex.lock()
}

/// Checks of a contended lock by an `add` before it falls back to
/// [`lock_contended`]: one every two pause instructions, in all a couple
/// of hundred microseconds at most (see [`Shared::lock_for_add`]).
const EAGER_CHECKS: u32 = 2000;

#[cold]
fn lock_eager_contended<S>(mutex: &Mutex<S>) -> MutexGuard<'_, S> {
    for _ in 0..EAGER_CHECKS {
        std::hint::spin_loop();
        std::hint::spin_loop();
        if !mutex.is_locked()
            && let Some(guard) = mutex.try_lock()
        {
            return guard;
        }
    }
    lock_contended(mutex)
}

/// Wakes `waker` if there is one. Called after the lock is released so the
/// woken task does not find it held.
pub(crate) fn wake(waker: Option<Waker>) {
    if let Some(waker) = waker {
        waker.wake();
    }
}

/// Items a thread hands out per unit of tokio's cooperative budget.
const GETS_PER_BUDGET_UNIT: u32 = 16;

/// See [`Shared::due_soon`].
const DUE_SOON_NS: u64 = 50_000;

/// How long (in real time) one `get` polls again for an item due soon
/// before it parks anyway. Bounds the busy polling even where tokio's clock
/// does not move while tasks run (paused time only advances when the
/// runtime idles).
const SPIN_LIMIT: std::time::Duration = std::time::Duration::from_micros(100);

/// Whether a `get` that started polling for an item due soon at
/// `spin_since` (now, if it did not) may poll once more.
fn spin_allowed(spin_since: &mut Option<std::time::Instant>) -> bool {
    let now = std::time::Instant::now();
    let since = *spin_since.get_or_insert(now);
    now.duration_since(since) < SPIN_LIMIT
}

/// Where one `get` (or the stream) stands.
#[derive(Debug, Default)]
pub(crate) struct GetState {
    /// Its key in the waiter list while parked.
    slot: Option<usize>,
    /// When it started polling for an item due soon (see [`SPIN_LIMIT`]).
    spin_since: Option<std::time::Instant>,
}

/// How often (in `get` polls on one thread) a `get` on a non-empty queue
/// checks whether delayed items are due (see [`Shared::fire_if_due`]).
const FIRE_CHECK_EVERY: u32 = 32;

thread_local! {
    static GETS: Cell<u32> = const { Cell::new(0) };
    static FIRE_CHECKS: Cell<u32> = const { Cell::new(0) };
}

/// Charges tokio's cooperative budget (128 units per task poll) one unit
/// per [`GETS_PER_BUDGET_UNIT`] items handed out on this thread, so a worker
/// loop on a queue that never empties yields to the other tasks of its
/// thread every couple of thousand items instead of starving them (tokio's
/// own channels budget too). Charging every item would make workers yield
/// every 128 items, which measurably lets a fast producer outrun them and
/// grow the queue. `queued` is the number of items waiting; nothing is
/// charged when there is nothing to take. `Ready(None)` means nothing was
/// charged.
fn coop_budget(cx: &mut Context<'_>, queued: usize) -> Poll<Option<RestoreOnPending>> {
    if queued == 0 {
        return Poll::Ready(None);
    }
    let n = GETS.with(|gets| {
        let n = gets.get().wrapping_add(1);
        gets.set(n);
        n
    });
    if !n.is_multiple_of(GETS_PER_BUDGET_UNIT) {
        return Poll::Ready(None);
    }
    poll_proceed(cx).map(Some)
}
