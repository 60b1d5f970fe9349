//! The workloads run by the `workload` binary (see the crate's README).
//!
//! Every function here must run inside a multi-thread tokio runtime: the
//! producer and the workers are spawned tasks, so the runtime's scheduler is
//! part of what is measured, as it is in a controller.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ctrlkit_workqueue::WorkQueue;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::stats::{Distribution, nanos};

/// How many `add_after`s the W3 producer makes before yielding to the
/// scheduler, as a producer fed by a watch stream would.
pub const PRODUCER_YIELD_EVERY: u64 = 1024;

/// How often (in adds) a [`Pacing::Backlog`] producer looks at the backlog.
const BACKLOG_CHECK_EVERY: u64 = 32;

/// How the producer of W1/W2 shares the runtime with the workers.
///
/// A producer task that never yields keeps the worker it woke in its
/// thread's LIFO slot (which other threads cannot steal) until it returns,
/// and a producer faster than the workers builds a backlog of up to every
/// item, which makes every operation of any hash-based queue memory-bound.
/// The figures therefore depend on the pacing, which is part of each result's
/// parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pacing {
    /// Every 32 adds, yield to the scheduler for as long as more than this
    /// many items are queued. The workers set the pace: the figure is the
    /// sustainable throughput with a bounded backlog. The default, with 1024.
    Backlog(usize),
    /// Yield after every `n` adds, whatever the backlog (free-running).
    YieldEvery(u64),
}

impl Default for Pacing {
    fn default() -> Self {
        Pacing::Backlog(1024)
    }
}

impl std::fmt::Display for Pacing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pacing::Backlog(n) => write!(f, "backlog:{n}"),
            Pacing::YieldEvery(n) => write!(f, "yield:{n}"),
        }
    }
}

impl std::str::FromStr for Pacing {
    type Err = String;

    /// Parses `backlog:N` or `yield:N` (N ≥ 1).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("expected backlog:N or yield:N with N >= 1, got {s:?}");
        let (kind, n) = s.split_once(':').ok_or_else(bad)?;
        let n: u64 = n.parse().map_err(|_| bad())?;
        if n == 0 {
            return Err(bad());
        }
        match kind {
            "backlog" => Ok(Pacing::Backlog(usize::try_from(n).map_err(|_| bad())?)),
            "yield" => Ok(Pacing::YieldEvery(n)),
            _ => Err(bad()),
        }
    }
}

/// Result of a throughput run (W1, W2).
#[derive(Debug, Clone, Copy)]
pub struct Throughput {
    /// Calls to `add` made by the producer.
    pub adds: u64,
    /// Items handed out by `get` (and marked done) in total.
    pub processed: u64,
    /// Time from the first `add` until the producer returned.
    pub producer_wall: Duration,
    /// Time from the first `add` until every worker saw the queue drained.
    pub wall: Duration,
    /// Largest queue length the producer saw (sampled when it checks or
    /// yields): how far the workers fell behind.
    pub max_backlog: usize,
}

impl Throughput {
    /// Items processed per second of wall time.
    pub fn items_per_sec(&self) -> f64 {
        self.processed as f64 / self.wall.as_secs_f64()
    }

    /// Adds per second of the producer's time.
    pub fn adds_per_sec(&self) -> f64 {
        self.adds as f64 / self.producer_wall.as_secs_f64()
    }
}

/// Spawns `workers` tasks that get + done until the queue is shut down and
/// empty; each returns how many items it processed.
fn spawn_drainers(queue: &WorkQueue<u64>, workers: usize) -> Vec<JoinHandle<u64>> {
    (0..workers.max(1))
        .map(|_| {
            let queue = queue.clone();
            tokio::spawn(async move {
                let mut processed = 0;
                while let Some(item) = queue.get().await {
                    queue.done(&item);
                    processed += 1;
                }
                processed
            })
        })
        .collect()
}

/// One producer adds `adds` keys (`i % distinct_keys` for the i-th add) while
/// `workers` tasks get + done; the producer shuts the queue down after its
/// last add and the workers drain what is left.
///
/// `pacing` says when the producer yields to the scheduler. W1 is
/// `keyed_throughput(1_000_000, 1_000_000, workers, _)` (all keys distinct),
/// W2 is `keyed_throughput(2_000_000, 1_000, 4, _)` (a dedup storm).
pub async fn keyed_throughput(
    adds: u64,
    distinct_keys: u64,
    workers: usize,
    pacing: Pacing,
) -> Throughput {
    let distinct_keys = distinct_keys.max(1);
    let queue = WorkQueue::<u64>::new();
    let drainers = spawn_drainers(&queue, workers);
    let start = Instant::now();
    let producer = {
        let queue = queue.clone();
        tokio::spawn(async move {
            let mut max_backlog = 0;
            for i in 0..adds {
                queue.add(i % distinct_keys);
                match pacing {
                    Pacing::YieldEvery(n) if i % n.max(1) == n.max(1) - 1 => {
                        max_backlog = max_backlog.max(queue.len());
                        tokio::task::yield_now().await;
                    }
                    Pacing::Backlog(bound) if i.is_multiple_of(BACKLOG_CHECK_EVERY) => {
                        let mut backlog = queue.len();
                        max_backlog = max_backlog.max(backlog);
                        while backlog > bound {
                            tokio::task::yield_now().await;
                            backlog = queue.len();
                        }
                    }
                    _ => {}
                }
            }
            let producer_wall = start.elapsed();
            queue.shut_down();
            (producer_wall, max_backlog)
        })
    };
    let (producer_wall, max_backlog) = producer.await.unwrap_or_default();
    let mut processed = 0;
    for drainer in drainers {
        processed += drainer.await.unwrap_or(0);
    }
    Throughput {
        adds,
        processed,
        producer_wall,
        wall: start.elapsed(),
        max_backlog,
    }
}

/// When the items of W3 (and of its floor F3) fall due.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DuePattern {
    /// Each item is added with a delay drawn uniformly from `0..max_delay`
    /// (see [`random_delays`]): about a thousand items fall due per
    /// millisecond. The default.
    #[default]
    Uniform,
    /// Every item falls due at the same instant, `max_delay` after the
    /// producer started: the queue must move the whole batch into the queue
    /// at once while workers wait for it.
    Burst,
}

impl std::fmt::Display for DuePattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DuePattern::Uniform => "uniform",
            DuePattern::Burst => "burst",
        })
    }
}

impl std::str::FromStr for DuePattern {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "uniform" => Ok(DuePattern::Uniform),
            "burst" => Ok(DuePattern::Burst),
            _ => Err(format!("expected uniform or burst, got {s:?}")),
        }
    }
}

impl DuePattern {
    /// The delay to add the `i`-th item with at `now`, given the drawn
    /// `delays` and the burst's `deadline`.
    pub fn delay(
        self,
        delays: &[Duration],
        i: usize,
        now: tokio::time::Instant,
        deadline: tokio::time::Instant,
    ) -> Duration {
        match self {
            DuePattern::Uniform => delays.get(i).copied().unwrap_or_default(),
            DuePattern::Burst => deadline.saturating_duration_since(now),
        }
    }
}

/// `items` delays drawn uniformly, with microsecond resolution, from
/// `0..max_delay` by a `StdRng` seeded with `seed` (W3 and its floor use the
/// same sequence).
pub fn random_delays(items: u64, max_delay: Duration, seed: u64) -> Vec<Duration> {
    let mut rng = StdRng::seed_from_u64(seed);
    let max_us = (max_delay.as_micros() as u64).max(1);
    (0..items)
        .map(|_| Duration::from_micros(rng.random_range(0..max_us)))
        .collect()
}

/// Result of the delayed workload (W3).
#[derive(Debug, Clone, Copy)]
pub struct Delayed {
    /// Items added with `add_after`.
    pub items: u64,
    /// Items handed out by `get`.
    pub processed: u64,
    /// Time from the first `add_after` until the last item was handed out.
    pub wall: Duration,
    /// Get time minus due time (add time + delay), over all items.
    pub lateness: Distribution,
}

/// One producer adds `items` distinct keys with `add_after` delays drawn
/// uniformly (microsecond resolution) from `0..max_delay` by a `StdRng`
/// seeded with `seed`, or all due at once (`pattern`); `workers` tasks
/// get and mark done, stamping each get. The due time of an item is taken
/// just before its `add_after` call, so lateness includes the call itself.
pub async fn delayed(
    items: u64,
    max_delay: Duration,
    workers: usize,
    seed: u64,
    pattern: DuePattern,
) -> Delayed {
    let delays = match pattern {
        DuePattern::Uniform => random_delays(items, max_delay, seed),
        DuePattern::Burst => Vec::new(),
    };

    let queue = WorkQueue::<u64>::new();
    // tokio's clock, which the queue's timer uses too: with paused time
    // (tests) lateness stays meaningful; otherwise it is the std clock.
    let base = tokio::time::Instant::now();
    let processed = Arc::new(AtomicU64::new(0));
    let workers: Vec<JoinHandle<Vec<(u64, i64)>>> = (0..workers.max(1))
        .map(|_| {
            let queue = queue.clone();
            let processed = Arc::clone(&processed);
            tokio::spawn(async move {
                let mut stamps = Vec::with_capacity(items as usize);
                while let Some(item) = queue.get().await {
                    stamps.push((item, nanos(base.elapsed())));
                    queue.done(&item);
                    if processed.fetch_add(1, Ordering::AcqRel) + 1 == items {
                        queue.shut_down();
                    }
                }
                stamps
            })
        })
        .collect();

    let start_ns = nanos(base.elapsed());
    let deadline = base + max_delay;
    let due_ns: Vec<i64> = {
        let queue = queue.clone();
        tokio::spawn(async move {
            let mut due = Vec::with_capacity(items as usize);
            for key in 0..items as usize {
                let now = tokio::time::Instant::now();
                let delay = pattern.delay(&delays, key, now, deadline);
                due.push(nanos(now.saturating_duration_since(base)) + nanos(delay));
                queue.add_after(key as u64, delay);
                if key as u64 % PRODUCER_YIELD_EVERY == PRODUCER_YIELD_EVERY - 1 {
                    tokio::task::yield_now().await;
                }
            }
            due
        })
        .await
        .unwrap_or_default()
    };
    if items == 0 {
        queue.shut_down();
    }

    let mut lateness = Vec::with_capacity(items as usize);
    let mut last_get = start_ns;
    for worker in workers {
        for (item, at) in worker.await.unwrap_or_default() {
            last_get = last_get.max(at);
            if let Some(due) = due_ns.get(item as usize) {
                lateness.push(at - due);
            }
        }
    }
    Delayed {
        items,
        processed: processed.load(Ordering::Acquire),
        wall: Duration::from_nanos((last_get - start_ns).max(0) as u64),
        lateness: Distribution::of(lateness),
    }
}

/// `workers` idle tasks wait in `get`; the driver stamps the time, adds one
/// key, and waits until a worker has marked it done before the next round.
/// Returns the add-to-get latencies (W4).
pub async fn latency(rounds: u64, workers: usize) -> Distribution {
    let queue = WorkQueue::<u64>::new();
    let base = Instant::now();
    let stamp = Arc::new(AtomicU64::new(0));
    let ack = Arc::new(Notify::new());
    let waiting = Arc::new(AtomicUsize::new(0));

    let tasks: Vec<JoinHandle<Vec<i64>>> = (0..workers.max(1))
        .map(|_| {
            let (queue, stamp, ack) = (queue.clone(), Arc::clone(&stamp), Arc::clone(&ack));
            let waiting = Arc::clone(&waiting);
            tokio::spawn(async move {
                let mut samples = Vec::with_capacity(rounds as usize);
                waiting.fetch_add(1, Ordering::AcqRel);
                while let Some(item) = queue.get().await {
                    let now = nanos(base.elapsed());
                    samples.push(now - stamp.load(Ordering::Acquire) as i64);
                    queue.done(&item);
                    ack.notify_one();
                }
                samples
            })
        })
        .collect();

    // Let every worker reach `get` first, so all of them are idle.
    while waiting.load(Ordering::Acquire) < tasks.len() {
        tokio::task::yield_now().await;
    }
    let driver = {
        let queue = queue.clone();
        tokio::spawn(async move {
            for key in 0..rounds {
                stamp.store(nanos(base.elapsed()) as u64, Ordering::Release);
                queue.add(key);
                ack.notified().await;
            }
        })
    };
    let _ = driver.await;
    queue.shut_down();
    let mut samples = Vec::with_capacity(rounds as usize);
    for task in tasks {
        samples.extend(task.await.unwrap_or_default());
    }
    Distribution::of(samples)
}
