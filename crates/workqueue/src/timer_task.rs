//! The timer task: moves `add_after` items into the queue when they are
//! due, and refreshes the work-in-progress metrics.
//!
//! One task per queue, started on the current tokio runtime by the first
//! `add_after` with a delay (or the first `get` after an `add_after` made
//! outside a runtime, or `build` when the queue records metrics). It
//! sleeps until the earliest due time with a single `tokio::time::Sleep`,
//! so paused tokio time drives it in tests, and is told through a `Notify`
//! when an earlier due time arrives. It holds only a weak reference to the
//! queue between wake-ups: it ends on shutdown, and is aborted when the
//! last handle of the queue is dropped.
//!
//! Each wake-up runs [`SharedState::fire_due`]. tokio's timer has a
//! resolution of one millisecond (and is serviced late while every thread
//! is busy), so `get` calls also fire due items themselves (see
//! [`crate::get`]); either way an item is never handed out before its due
//! time.

use std::future::poll_fn;
use std::hash::Hash;
use std::pin::pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::task::Poll;

use tokio::sync::Notify;
use tokio::time::{Instant, sleep_until};

use crate::delay_store::DelayStore;
use crate::metrics::UNFINISHED_WORK_UPDATE_PERIOD;
use crate::shared_state::{Fired, SharedState};

/// Starts the timer task on the current tokio runtime if the queue needs
/// one (delayed items or metrics) and none runs. Outside a runtime it only
/// records that the task is wanted; [`start_if_wanted`] from inside one
/// starts it.
pub(crate) fn ensure_started<T>(shared: &Arc<SharedState<T>>)
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
{
    let mut delays = shared.lock_delays();
    ensure_started_locked(shared, &mut delays);
}

/// [`ensure_started`] with the delay lock held.
pub(crate) fn ensure_started_locked<T>(shared: &Arc<SharedState<T>>, delays: &mut DelayStore<T>)
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
{
    let needed = delays.next_due().is_some() || shared.has_metrics;
    if !needed || delays.is_closed() {
        return;
    }
    if delays
        .timer_task
        .as_ref()
        .is_some_and(|task| !task.is_finished())
    {
        return;
    }
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            let task = run(Arc::downgrade(shared), Arc::clone(&shared.timer));
            delays.timer_task = Some(runtime.spawn(task));
            shared.timer_task_wanted.store(false, Ordering::Relaxed);
        }
        Err(_) => shared.timer_task_wanted.store(true, Ordering::Relaxed),
    }
}

/// Starts the timer task if an earlier attempt found no runtime.
pub(crate) fn start_if_wanted<T>(shared: &Arc<SharedState<T>>)
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
{
    if shared.timer_task_wanted.load(Ordering::Relaxed) {
        ensure_started(shared);
    }
}

/// The body of the timer task.
async fn run<T>(queue: Weak<SharedState<T>>, timer: Arc<Notify>)
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
            let mut deadline = match shared.fire_due(now, true) {
                Fired::Closed => return,
                Fired::Busy => shared.lock_delays().next_due(),
                Fired::Next(next) => next,
            };
            let state = shared.lock();
            if let Some(metrics) = state.queue.metrics() {
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
