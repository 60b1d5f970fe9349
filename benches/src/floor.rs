//! Floors: what the same work costs with the simplest standard parts.
//!
//! A figure on its own says as much about the machine as about the queue, so
//! the driver measures these floors in the same process and reports every
//! workload figure as a ratio to one of them.

use std::collections::{HashSet, VecDeque};
use std::hint::black_box;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::stats::{Distribution, nanos};
use crate::workloads::{DuePattern, random_delays};

/// The smallest "stingy" queue: client-go's algorithm (a FIFO, a dirty set
/// and a processing set) behind one `std::sync::Mutex`, with std's default
/// hasher, no waking, no metrics, no delays.
#[derive(Debug, Default)]
pub struct MutexQueue {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    queue: VecDeque<u64>,
    dirty: HashSet<u64>,
    processing: HashSet<u64>,
}

impl MutexQueue {
    /// Queues `item` unless it is already queued; an item being processed is
    /// marked and queued again by [`done`](Self::done).
    pub fn add(&self, item: u64) {
        let mut inner = self.lock();
        if inner.dirty.insert(item) && !inner.processing.contains(&item) {
            inner.queue.push_back(item);
        }
    }

    /// Takes the oldest queued item, if any, and marks it as processing.
    pub fn try_get(&self) -> Option<u64> {
        let mut inner = self.lock();
        let item = inner.queue.pop_front()?;
        inner.dirty.remove(&item);
        inner.processing.insert(item);
        Some(item)
    }

    /// Ends processing of `item`, queueing it again if it was re-added.
    pub fn done(&self, item: u64) {
        let mut inner = self.lock();
        inner.processing.remove(&item);
        if inner.dirty.contains(&item) {
            inner.queue.push_back(item);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the sets inconsistent
        // in a way that matters to a benchmark.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The cycle floor: one thread runs `cycles` add → get → done cycles on a
/// [`MutexQueue`] with distinct keys.
#[derive(Debug, Clone, Copy)]
pub struct CycleFloor {
    /// Number of cycles run.
    pub cycles: u64,
    /// Wall time of the whole loop.
    pub wall: Duration,
}

impl CycleFloor {
    /// Nanoseconds per cycle.
    pub fn ns_per_cycle(&self) -> f64 {
        self.wall.as_nanos() as f64 / self.cycles.max(1) as f64
    }

    /// Cycles per second.
    pub fn per_sec(&self) -> f64 {
        self.cycles as f64 / self.wall.as_secs_f64()
    }
}

/// Measures the [`CycleFloor`] on the calling thread.
pub fn cycle_floor(cycles: u64) -> CycleFloor {
    let queue = MutexQueue::default();
    // Warm up so the sets and the deque have their capacity.
    for i in 0..1024 {
        queue.add(i);
        if let Some(x) = queue.try_get() {
            queue.done(x);
        }
    }
    let start = Instant::now();
    for i in 0..cycles {
        queue.add(black_box(i));
        if let Some(x) = queue.try_get() {
            queue.done(black_box(x));
        }
    }
    CycleFloor {
        cycles,
        wall: start.elapsed(),
    }
}

/// The hand-off floor: the same ping-pong as workload W4, with a bare
/// [`Notify`] instead of a queue. `receivers` idle tasks wait on one
/// `Notify`; the driver stamps the time, wakes one, and waits for its
/// acknowledgement before the next round. Returns the wake-to-run latencies.
///
/// Must run inside a multi-thread tokio runtime (it spawns tasks).
pub async fn handoff_floor(rounds: u64, receivers: usize) -> Distribution {
    let base = Instant::now();
    let stamp = Arc::new(AtomicU64::new(0));
    let work = Arc::new(Notify::new());
    let ack = Arc::new(Notify::new());
    let remaining = Arc::new(AtomicU64::new(rounds));

    let mut tasks = Vec::with_capacity(receivers);
    for _ in 0..receivers.max(1) {
        let (stamp, work, ack, remaining) = (
            Arc::clone(&stamp),
            Arc::clone(&work),
            Arc::clone(&ack),
            Arc::clone(&remaining),
        );
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::with_capacity(rounds as usize);
            loop {
                work.notified().await;
                if remaining.load(Ordering::Acquire) == 0 {
                    return samples;
                }
                let now = nanos(base.elapsed());
                samples.push(now - stamp.load(Ordering::Acquire) as i64);
                ack.notify_one();
            }
        }));
    }

    let driver = {
        let (work, ack) = (Arc::clone(&work), Arc::clone(&ack));
        tokio::spawn(async move {
            for _ in 0..rounds {
                stamp.store(nanos(base.elapsed()) as u64, Ordering::Release);
                work.notify_one();
                ack.notified().await;
                remaining.fetch_sub(1, Ordering::AcqRel);
            }
        })
    };
    let _ = driver.await;
    // Release every receiver: `remaining` is 0 now.
    for _ in 0..tasks.len() {
        work.notify_one();
    }
    let mut samples = Vec::new();
    for task in tasks {
        // notify_one stores a single permit: keep poking until each exits.
        let mut task = task;
        loop {
            tokio::select! {
                result = &mut task => {
                    samples.extend(result.unwrap_or_default());
                    break;
                }
                _ = tokio::time::sleep(Duration::from_millis(1)) => work.notify_one(),
            }
        }
    }
    Distribution::of(samples)
}

/// The timer floor for W3: the same due times as W3 (see
/// [`delayed`](crate::workloads::delayed)), each served by a bare spawned
/// task sleeping until its due time instead of a queue. A producer task
/// spawns them (yielding every 1,024, as W3's producer does) and each
/// records its lateness (wake time − due time). It is the obvious
/// alternative to a delaying queue (one task per delayed item) and shows
/// tokio's timer and the machine's scheduling latency; it is a reference
/// point rather than a strict lower bound, since a task per item costs more
/// than a queue entry.
pub async fn timer_floor(
    items: u64,
    max_delay: Duration,
    seed: u64,
    pattern: DuePattern,
) -> Distribution {
    let delays = match pattern {
        DuePattern::Uniform => random_delays(items, max_delay, seed),
        DuePattern::Burst => Vec::new(),
    };
    let deadline = tokio::time::Instant::now() + max_delay;
    let sleepers = tokio::spawn(async move {
        let mut sleepers = Vec::with_capacity(items as usize);
        for i in 0..items as usize {
            let now = tokio::time::Instant::now();
            let due = now + pattern.delay(&delays, i, now, deadline);
            sleepers.push(tokio::spawn(async move {
                tokio::time::sleep_until(due).await;
                nanos(tokio::time::Instant::now().saturating_duration_since(due))
            }));
            if i % 1024 == 1023 {
                tokio::task::yield_now().await;
            }
        }
        sleepers
    })
    .await
    .unwrap_or_default();
    let mut samples = Vec::with_capacity(sleepers.len());
    for sleeper in sleepers {
        if let Ok(late) = sleeper.await {
            samples.push(late);
        }
    }
    Distribution::of(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutex_queue_is_stingy() {
        let q = MutexQueue::default();
        q.add(1);
        q.add(1);
        assert_eq!(q.try_get(), Some(1));
        assert_eq!(q.try_get(), None);
        q.add(1); // while processing: queued again on done
        assert_eq!(q.try_get(), None);
        q.done(1);
        assert_eq!(q.try_get(), Some(1));
        q.done(1);
        assert_eq!(q.try_get(), None);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn handoff_floor_collects_every_round() {
        let d = handoff_floor(200, 4).await;
        assert_eq!(d.count, 200);
        assert!(d.p50_ns >= 0);
    }

    #[tokio::test(start_paused = true)]
    async fn timer_floor_is_within_a_tick_with_paused_time() {
        for pattern in [DuePattern::Uniform, DuePattern::Burst] {
            let d = timer_floor(500, Duration::from_millis(20), 3, pattern).await;
            assert_eq!(d.count, 500);
            assert!((0..=1_000_000).contains(&d.max_ns), "{pattern}: {d:?}");
        }
    }

    #[test]
    fn cycle_floor_runs() {
        let f = cycle_floor(1000);
        assert_eq!(f.cycles, 1000);
        assert!(f.per_sec() > 0.0);
    }
}
