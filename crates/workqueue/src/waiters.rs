//! The `get` calls parked on an empty queue.
//!
//! Kept under the queue's own mutex so that queuing an item and choosing the
//! waiter to wake are one atomic step: parked `get`s are woken oldest
//! first, as many as the queue's wake-up policy asks for (see
//! `Locked::wake_one_if_needed` in [`crate::shared_state`]), and no wake-up can be lost between a
//! `get` finding the queue empty and parking. Slots are reused, so parking
//! allocates only while the number of concurrent waiters grows.

use std::collections::VecDeque;
use std::task::Waker;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotState {
    Free,
    /// Parked and in the wake-up order.
    Waiting,
    /// Chosen to take an item; not in the wake-up order any more.
    Notified,
}

#[derive(Debug)]
struct Slot {
    state: SlotState,
    waker: Option<Waker>,
}

/// Parked `get` calls, woken in the order they parked.
#[derive(Debug, Default)]
pub(crate) struct Waiters {
    slots: Vec<Slot>,
    free: Vec<usize>,
    order: VecDeque<usize>,
    /// Waiters in the `Notified` state.
    notified: usize,
}

impl Waiters {
    /// Parks a new waiter and returns its slot.
    pub(crate) fn register(&mut self, waker: &Waker) -> usize {
        let slot = Slot {
            state: SlotState::Waiting,
            waker: Some(waker.clone()),
        };
        let key = match self.free.pop() {
            Some(key) => {
                self.slots[key] = slot;
                key
            }
            None => {
                self.slots.push(slot);
                self.slots.len() - 1
            }
        };
        self.order.push_back(key);
        key
    }

    /// Parks waiter `key` again (it was woken but found nothing to take, or
    /// was polled spuriously) and refreshes its waker.
    pub(crate) fn rearm(&mut self, key: usize, waker: &Waker) {
        let slot = &mut self.slots[key];
        if slot.state == SlotState::Notified {
            slot.state = SlotState::Waiting;
            self.notified -= 1;
            self.order.push_back(key);
        }
        match &mut slot.waker {
            Some(current) if current.will_wake(waker) => {}
            current => *current = Some(waker.clone()),
        }
    }

    /// Forgets waiter `key`. Returns whether it had been chosen to take an
    /// item (the caller passes that duty on if it did not take one).
    pub(crate) fn release(&mut self, key: usize) -> bool {
        let slot = &mut self.slots[key];
        let notified = slot.state == SlotState::Notified;
        if notified {
            self.notified -= 1;
        }
        if slot.state == SlotState::Waiting
            && let Some(pos) = self.order.iter().position(|k| *k == key)
        {
            self.order.remove(pos);
        }
        slot.state = SlotState::Free;
        slot.waker = None;
        self.free.push(key);
        notified
    }

    /// Chooses the longest-parked waiter to take one item and returns its
    /// waker, to be woken after the lock is released.
    pub(crate) fn notify_one(&mut self) -> Option<Waker> {
        let key = self.order.pop_front()?;
        let slot = &mut self.slots[key];
        slot.state = SlotState::Notified;
        self.notified += 1;
        slot.waker.take()
    }

    /// Number of waiters chosen to take an item that have not polled yet.
    pub(crate) fn notified(&self) -> usize {
        self.notified
    }

    /// Wakes every parked waiter (shutdown).
    pub(crate) fn notify_all(&mut self, out: &mut Vec<Waker>) {
        while !self.order.is_empty() {
            if let Some(waker) = self.notify_one() {
                out.push(waker);
            }
        }
    }

    /// Number of parked waiters.
    #[cfg(test)]
    pub(crate) fn parked(&self) -> usize {
        self.order.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct Counter(AtomicUsize);
    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn waker() -> (Arc<Counter>, Waker) {
        let counter = Arc::new(Counter(AtomicUsize::new(0)));
        (counter.clone(), Waker::from(counter))
    }

    #[test]
    fn wakes_in_parking_order_and_reuses_slots() {
        let mut waiters = Waiters::default();
        let (c1, w1) = waker();
        let (c2, w2) = waker();
        let k1 = waiters.register(&w1);
        let k2 = waiters.register(&w2);
        waiters.notify_one().unwrap().wake();
        assert_eq!(waiters.notified(), 1);
        assert_eq!(c1.0.load(Ordering::SeqCst), 1);
        assert_eq!(c2.0.load(Ordering::SeqCst), 0);
        assert!(waiters.release(k1), "k1 was chosen");
        assert!(!waiters.release(k2), "k2 was only parked");
        assert_eq!(waiters.notified(), 0);
        assert_eq!(waiters.parked(), 0);
        assert!(waiters.notify_one().is_none());
        let k3 = waiters.register(&w1);
        assert!(k3 == k1 || k3 == k2, "a freed slot is reused");
    }

    #[test]
    fn rearm_puts_a_notified_waiter_back_at_the_end() {
        let mut waiters = Waiters::default();
        let (c1, w1) = waker();
        let (c2, w2) = waker();
        let k1 = waiters.register(&w1);
        let _k2 = waiters.register(&w2);
        waiters.notify_one().unwrap().wake();
        waiters.rearm(k1, &w1);
        assert_eq!(waiters.parked(), 2);
        assert_eq!(waiters.notified(), 0);
        let mut out = Vec::new();
        waiters.notify_all(&mut out);
        out.into_iter().for_each(Waker::wake);
        assert_eq!(c1.0.load(Ordering::SeqCst), 2);
        assert_eq!(c2.0.load(Ordering::SeqCst), 1);
    }
}
