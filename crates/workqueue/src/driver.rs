//! The timer task: moves `add_after` items into the queue when they are
//! due, and refreshes the work-in-progress metrics.
//!
//! One task per queue, started lazily on the current tokio runtime by the
//! first `add_after` with a delay (or the first `get` that parks, or `build`
//! when the queue records metrics). It sleeps until the earliest due time
//! in the delay heap with a single `tokio::time::Sleep`, so paused tokio time
//! drives it in tests, and is told through a `Notify` when an earlier due
//! time arrives. It holds only a weak reference to the queue between
//! wake-ups: it ends on shutdown, and is aborted when the last handle of
//! the queue is dropped.

use std::future::poll_fn;
use std::hash::Hash;
use std::pin::pin;
use std::sync::{Arc, Weak};
use std::task::Poll;

use tokio::sync::Notify;
use tokio::time::{Instant, sleep_until};

use crate::metrics::UNFINISHED_WORK_UPDATE_PERIOD;
use crate::shared::Shared;

/// The body of the timer task.
pub(crate) async fn run<T>(queue: Weak<Shared<T>>, timer: Arc<Notify>)
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
{
    let mut wakers = Vec::new();
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
            let mut state = shared.lock();
            if state.core.is_shutting_down() {
                return;
            }
            let now = Instant::now();
            let queued = state.core.fire_due(now);
            if queued > 0 {
                shared.publish_len(&state);
            }
            state.waiters.notify_many(queued, &mut wakers);
            let mut deadline = state.core.next_due();
            if let Some(metrics) = state.core.metrics() {
                let mut tick = *metrics_tick.get_or_insert(now + UNFINISHED_WORK_UPDATE_PERIOD);
                if tick <= now {
                    metrics.update_unfinished_work();
                    tick = now + UNFINISHED_WORK_UPDATE_PERIOD;
                    metrics_tick = Some(tick);
                }
                deadline = Some(deadline.map_or(tick, |due| due.min(tick)));
            }
            drop(state);
            wakers.drain(..).for_each(|waker| waker.wake());
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
