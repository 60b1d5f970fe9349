//! The queue as a `Stream`.

use std::fmt;
use std::hash::Hash;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_core::{FusedStream, Stream};

use crate::WorkQueue;
use crate::get::{GetState, cancel_get, poll_get};

/// A [`Stream`] of the items of a [`WorkQueue`], from
/// [`WorkQueue::stream`].
///
/// Every yielded item has been handed out as by [`WorkQueue::get`]: call
/// [`WorkQueue::done`] for it when it is processed. The stream ends once the
/// queue is shut down and empty. Dropping the stream while it waits loses no
/// item.
pub struct WorkQueueStream<T>
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
{
    queue: WorkQueue<T>,
    get: GetState,
    ended: bool,
}

impl<T> WorkQueueStream<T>
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
{
    pub(crate) fn new(queue: WorkQueue<T>) -> Self {
        Self {
            queue,
            get: GetState::default(),
            ended: false,
        }
    }

    /// The queue this stream reads, e.g. to call `done`.
    pub fn queue(&self) -> &WorkQueue<T> {
        &self.queue
    }
}

impl<T> fmt::Debug for WorkQueueStream<T>
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkQueueStream")
            .field("queue", &self.queue)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl<T> Stream for WorkQueueStream<T>
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
{
    type Item = T;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        let next = poll_get(&this.queue.shared, &mut this.get, cx);
        if let Poll::Ready(None) = next {
            this.ended = true;
        }
        next
    }
}

impl<T> FusedStream for WorkQueueStream<T>
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
{
    fn is_terminated(&self) -> bool {
        self.ended
    }
}

impl<T> Drop for WorkQueueStream<T>
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
{
    fn drop(&mut self) {
        cancel_get(&self.queue.shared, &mut self.get);
    }
}
