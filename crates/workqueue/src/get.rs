//! How a `get` takes an item or parks, shared by [`WorkQueue::get`] and
//! the queue's stream.
//!
//! A `get` moves due delayed items into the queue itself rather than wait
//! for the timer task, polls briefly instead of parking when a delayed item
//! is due within microseconds, and takes part in tokio's cooperative
//! scheduling; the numbers for all three are in [`crate::tuning`].
//!
//! [`WorkQueue::get`]: crate::WorkQueue::get

use std::hash::Hash;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use tokio::time::Instant;

use crate::shared_state::{SharedState, wake};
use crate::timer_task;
use crate::tuning::{DUE_SOON_NS, coop_budget, fire_check_now, spin_allowed};

/// Where one `get` (or the stream) stands.
#[derive(Debug, Default)]
pub(crate) struct GetState {
    /// Its key in the waiter list while parked.
    slot: Option<usize>,
    /// When it started polling for an item due soon (see
    /// [`crate::tuning::SPIN_LIMIT`]).
    spin_since: Option<std::time::Instant>,
}

/// One poll of a `get`: takes an item if one is queued, reports the end of
/// the queue, or parks in `get`. The item leaves the queue only when this
/// returns `Ready(Some)`, which is what makes `get` cancel-safe.
pub(crate) fn poll_get<T>(
    shared: &Arc<SharedState<T>>,
    get: &mut GetState,
    cx: &mut Context<'_>,
) -> Poll<Option<T>>
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
{
    let GetState { slot, spin_since } = get;
    fire_if_due(shared);
    let mut state = shared.lock();
    let coop = ready!(coop_budget(cx, state.queue.len()));
    if let Some(item) = state.queue.pop() {
        shared.publish_len(&state);
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
        // A queue with metrics built outside a runtime whose workers never
        // park still gets its gauge refresher.
        timer_task::start_if_wanted(shared);
        return Poll::Ready(Some(item));
    }
    if state.queue.is_shutting_down() {
        if let Some(key) = slot.take() {
            state.waiters.release(key);
        }
        return Poll::Ready(None);
    }
    if due_soon(shared) && spin_allowed(spin_since) {
        // Poll again instead of parking: the timer task would fire the item
        // up to a millisecond late.
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
    timer_task::start_if_wanted(shared);
    Poll::Pending
}

/// Unparks a `get` that is dropped before it returned. If it had been
/// chosen for an item it did not take, another waiter is chosen, so the
/// item does not sit in the queue while workers sleep.
pub(crate) fn cancel_get<T>(shared: &SharedState<T>, get: &mut GetState) {
    let Some(key) = get.slot.take() else {
        return;
    };
    let waker = {
        let mut state = shared.lock();
        state.waiters.release(key);
        state.wake_one_if_needed()
    };
    wake(waker);
}

/// Moves due delayed items into the queue from a `get`, without waiting
/// for the timer task (which tokio services late while the workers are
/// busy). Reads the clock only while delayed items are pending, and on a
/// non-empty queue only now and then (see
/// [`FIRE_CHECK_EVERY`](crate::tuning::FIRE_CHECK_EVERY)).
fn fire_if_due<T>(shared: &SharedState<T>)
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
{
    let Some(next) = shared.next_due_nanos() else {
        return;
    };
    if !fire_check_now(shared.len() == 0) {
        return;
    }
    let now = Instant::now();
    if shared.nanos(now) >= next {
        shared.fire_due(now, false);
    }
}

/// Whether a delayed item is due within
/// [`DUE_SOON_NS`], so a `get` on an empty queue keeps polling instead of
/// parking.
fn due_soon<T>(shared: &SharedState<T>) -> bool {
    shared
        .next_due_nanos()
        .is_some_and(|next| next.saturating_sub(shared.nanos(Instant::now())) <= DUE_SOON_NS)
}
