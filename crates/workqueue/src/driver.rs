//! The timer task: moves `add_after` items into the queue when they are
//! due, and refreshes the work-in-progress metrics.
//!
//! One task per queue, started lazily on the current tokio runtime by the
//! first `add_after` with a delay (or the first `get` after an `add_after`
//! made outside a runtime, or `build` when the queue records metrics). It
//! sleeps until the earliest due time with a single `tokio::time::Sleep`,
//! so paused tokio time drives it in tests, and is told through a `Notify`
//! when an earlier due time arrives. It holds only a weak reference to the
//! queue between wake-ups: it ends on shutdown, and is aborted when the
//! last handle of the queue is dropped.
//!
//! Each wake-up takes every due item out of the delay store under the delay
//! lock, then adds them to the queue under the main lock in chunks of
//! [`FIRE_CHUNK`], so workers get the lock between chunks of a large batch.
//! tokio's timer has a resolution of one millisecond (and is serviced late
//! while every thread is busy), so `get` calls also run [`fire_due`] when
//! they find a delayed item due (see `Shared::fire_if_due`); either way an
//! item is never handed out before its due time.

use std::future::poll_fn;
use std::hash::Hash;
use std::pin::pin;
use std::sync::{Arc, Weak};
use std::task::{Poll, Waker};

use tokio::sync::Notify;
use tokio::time::{Instant, sleep_until};

use crate::metrics::UNFINISHED_WORK_UPDATE_PERIOD;
use crate::shared::Shared;

/// Due items added to the queue per acquisition of its lock.
const FIRE_CHUNK: usize = 256;

/// Buffers for moving due items, reused between firings.
pub(crate) struct Firing<T> {
    due: Vec<(T, i32)>,
    wakers: Vec<Waker>,
}

impl<T> Default for Firing<T> {
    fn default() -> Self {
        Self {
            due: Vec::new(),
            wakers: Vec::new(),
        }
    }
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

/// Moves every item due at `now` from the delay store into the queue: takes
/// them out under the delay lock, then adds them under the main lock in
/// chunks of [`FIRE_CHUNK`] and wakes a parked `get` per queued item. Only
/// one thread fires at a time; with `wait` false a second one returns
/// [`Fired::Busy`] at once instead of waiting for the first.
pub(crate) fn fire_due<T>(shared: &Shared<T>, now: Instant, wait: bool) -> Fired
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
{
    let mut firing = if wait {
        crate::shared::lock(&shared.firing)
    } else {
        match shared.firing.try_lock() {
            Some(firing) => firing,
            None => return Fired::Busy,
        }
    };
    let Firing { due, wakers } = &mut *firing;
    let next = {
        let mut pending = shared.lock_pending();
        if pending.is_closed() {
            return Fired::Closed;
        }
        pending.take_due(now, due);
        shared.publish_next_due(&pending);
        pending.next_due()
    };
    let mut items = due.drain(..);
    loop {
        let mut state = shared.lock();
        if state.core.is_shutting_down() {
            return Fired::Closed;
        }
        let mut queued = 0;
        let mut added = 0;
        for (item, priority) in items.by_ref() {
            if state.core.add(item, priority) {
                queued += 1;
            }
            added += 1;
            if added == FIRE_CHUNK {
                break;
            }
        }
        if queued > 0 {
            shared.publish_len(&state);
            state.wake_if_needed(wakers);
        }
        drop(state);
        wakers.drain(..).for_each(Waker::wake);
        if added < FIRE_CHUNK {
            return Fired::Next(next);
        }
    }
}

/// The body of the timer task.
pub(crate) async fn run<T>(queue: Weak<Shared<T>>, timer: Arc<Notify>)
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
{
    let mut metrics_tick: Option<Instant> = None;
    loop {
        // Registered before the state is read, so an earlier deadline set
        // after this point always interrupts the sleep below.
        let mut notified = pin!(timer.notified());
        notified.as_mut().enable();
        let deadline = {
            let Some(shared) = queue.upgrade() else {
                return;
            };
            let now = Instant::now();
            let mut deadline = match fire_due(&shared, now, true) {
                Fired::Closed => return,
                Fired::Busy => shared.lock_pending().next_due(),
                Fired::Next(next) => next,
            };
            let state = shared.lock();
            if let Some(metrics) = state.core.metrics() {
                let mut tick = *metrics_tick.get_or_insert(now + UNFINISHED_WORK_UPDATE_PERIOD);
                if tick <= now {
                    metrics.update_unfinished_work();
                    tick = now + UNFINISHED_WORK_UPDATE_PERIOD;
                    metrics_tick = Some(tick);
                }
                deadline = Some(deadline.map_or(tick, |due| due.min(tick)));
            }
            deadline
        };
        match deadline {
            None => notified.await,
            Some(deadline) => {
                let mut sleep = pin!(sleep_until(deadline));
                poll_fn(|cx| {
                    if notified.as_mut().poll(cx).is_ready() || sleep.as_mut().poll(cx).is_ready() {
                        Poll::Ready(())
                    } else {
                        Poll::Pending
                    }
                })
                .await;
            }
        }
    }
}
