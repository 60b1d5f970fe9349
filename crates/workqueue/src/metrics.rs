//! Metrics: the provider trait a user implements (or takes from the
//! `prometheus` feature) and the recorder the queue drives.
//!
//! The seven metrics and their meaning follow client-go's workqueue, so
//! dashboards and alerts written for Go controllers keep working. A queue
//! records metrics only when it has both a name and a provider; otherwise the
//! recorder does not exist and the queue reads no clock for metrics.

use std::time::Duration;

use hashbrown::HashMap;
use tokio::time::Instant;

use crate::chunked::ChunkedVec;
use crate::item_store::Slot;

/// Name of the gauge of items waiting to be handed out.
pub const DEPTH_METRIC: &str = "workqueue_depth";
/// Name of the counter of adds that were not collapsed into a pending add.
pub const ADDS_METRIC: &str = "workqueue_adds_total";
/// Name of the histogram of seconds between an add and the `get` that
/// handed the item out.
pub const QUEUE_DURATION_METRIC: &str = "workqueue_queue_duration_seconds";
/// Name of the histogram of seconds between `get` and `done`.
pub const WORK_DURATION_METRIC: &str = "workqueue_work_duration_seconds";
/// Name of the gauge of seconds spent so far on items not yet done.
pub const UNFINISHED_WORK_METRIC: &str = "workqueue_unfinished_work_seconds";
/// Name of the gauge of seconds the longest-running item has been processed.
pub const LONGEST_RUNNING_PROCESSOR_METRIC: &str = "workqueue_longest_running_processor_seconds";
/// Name of the counter of `add_after` / `add_rate_limited` calls.
pub const RETRIES_METRIC: &str = "workqueue_retries_total";
/// Name of the label that carries the queue's name on every metric.
pub const NAME_LABEL: &str = "name";

/// Histogram bucket upper bounds, in seconds, for both duration histograms:
/// ten powers of ten from 10 ns to 10 s, as client-go.
pub const DURATION_BUCKETS: [f64; 10] = [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0];

/// How often the two "work in progress" gauges are refreshed.
pub const UNFINISHED_WORK_UPDATE_PERIOD: Duration = Duration::from_millis(500);

/// A monotonically increasing counter.
pub trait CounterMetric: Send + Sync {
    /// Adds one.
    fn inc(&self);
}

/// A gauge moved up and down by one.
pub trait GaugeMetric: Send + Sync {
    /// Adds one.
    fn inc(&self);
    /// Subtracts one.
    fn dec(&self);
}

/// A gauge set to an absolute value.
pub trait SettableGaugeMetric: Send + Sync {
    /// Sets the value.
    fn set(&self, value: f64);
}

/// A histogram (or summary) of observed values.
pub trait HistogramMetric: Send + Sync {
    /// Records one value.
    fn observe(&self, value: f64);
}

/// Creates the metrics of one named queue.
///
/// Each method is called once, when a queue with a name is built; `name` is
/// the queue's name and should become the value of the [`NAME_LABEL`] label.
/// The returned metrics are updated while the queue's internal lock is held,
/// so they must be cheap and must not block (atomics are ideal). Building two
/// queues with the same name on one provider should share the metrics.
pub trait MetricsProvider: Send + Sync {
    /// [`DEPTH_METRIC`]: incremented by every add that is not collapsed,
    /// decremented when `get` hands the item out.
    fn new_depth_metric(&self, name: &str) -> Box<dyn GaugeMetric>;
    /// [`ADDS_METRIC`]: adds that were not collapsed into a pending one.
    fn new_adds_metric(&self, name: &str) -> Box<dyn CounterMetric>;
    /// [`QUEUE_DURATION_METRIC`]: seconds from the (first pending) add to
    /// `get`. Use [`DURATION_BUCKETS`].
    fn new_latency_metric(&self, name: &str) -> Box<dyn HistogramMetric>;
    /// [`WORK_DURATION_METRIC`]: seconds from `get` to `done`. Use
    /// [`DURATION_BUCKETS`].
    fn new_work_duration_metric(&self, name: &str) -> Box<dyn HistogramMetric>;
    /// [`UNFINISHED_WORK_METRIC`]: sum over the items being processed of the
    /// seconds since their `get`, refreshed every
    /// [`UNFINISHED_WORK_UPDATE_PERIOD`]. Large values mean stuck workers.
    fn new_unfinished_work_seconds_metric(&self, name: &str) -> Box<dyn SettableGaugeMetric>;
    /// [`LONGEST_RUNNING_PROCESSOR_METRIC`]: the largest of those ages.
    fn new_longest_running_processor_seconds_metric(
        &self,
        name: &str,
    ) -> Box<dyn SettableGaugeMetric>;
    /// [`RETRIES_METRIC`]: every `add_after`, `add_after_with_priority` and
    /// `add_rate_limited` call made before shutdown, whatever its delay.
    fn new_retries_metric(&self, name: &str) -> Box<dyn CounterMetric>;
}

/// The metrics of one queue plus the timestamps they need. Lives inside the
/// queue's lock.
///
/// Timestamps are kept by cell number in the item store (an item keeps its
/// cell from its add until its `done`), not by item: no copy of the item,
/// and 8 bytes per queued item where a map from item to time would cost
/// the item, the time and the map's own overhead.
pub(crate) struct QueueMetrics {
    depth: Box<dyn GaugeMetric>,
    adds: Box<dyn CounterMetric>,
    latency: Box<dyn HistogramMetric>,
    work_duration: Box<dyn HistogramMetric>,
    unfinished: Box<dyn SettableGaugeMetric>,
    longest: Box<dyn SettableGaugeMetric>,
    /// Time of the (first pending) add of the item in each cell, in
    /// nanoseconds since `epoch`; [`NO_STAMP`] when it is not queued.
    added_at: ChunkedVec<u64>,
    /// When `get` handed out the item in each cell that is being processed.
    started_at: HashMap<Slot, Instant>,
    epoch: Instant,
}

/// No add time recorded.
const NO_STAMP: u64 = u64::MAX;

impl QueueMetrics {
    /// Creates the metrics of queue `name`, all but the retries counter,
    /// which the delay store keeps (see [`new_retries`]).
    pub(crate) fn new(provider: &dyn MetricsProvider, name: &str) -> Self {
        Self {
            depth: provider.new_depth_metric(name),
            adds: provider.new_adds_metric(name),
            latency: provider.new_latency_metric(name),
            work_duration: provider.new_work_duration_metric(name),
            unfinished: provider.new_unfinished_work_seconds_metric(name),
            longest: provider.new_longest_running_processor_seconds_metric(name),
            added_at: ChunkedVec::default(),
            started_at: HashMap::new(),
            epoch: Instant::now(),
        }
    }

    /// An add of the item in cell `slot` that was not collapsed. Keeps the
    /// first add time.
    pub(crate) fn add(&mut self, slot: Slot) {
        self.adds.inc();
        self.depth.inc();
        let epoch = self.epoch;
        let stamp = self.added_at.get_or_fill(slot as usize, NO_STAMP);
        if *stamp == NO_STAMP {
            let since = Instant::now().saturating_duration_since(epoch);
            *stamp = u64::try_from(since.as_nanos()).unwrap_or(NO_STAMP - 1);
        }
    }

    /// The item in cell `slot` was handed out.
    pub(crate) fn get(&mut self, slot: Slot) {
        let now = Instant::now();
        self.depth.dec();
        self.started_at.insert(slot, now);
        if let Some(stamp) = self.added_at.get_mut(slot as usize) {
            let added = std::mem::replace(stamp, NO_STAMP);
            if added != NO_STAMP {
                let added = self.epoch + Duration::from_nanos(added);
                self.latency.observe(seconds(now, added));
            }
        }
    }

    /// The item in cell `slot` is done.
    pub(crate) fn done(&mut self, slot: Slot) {
        if let Some(started) = self.started_at.remove(&slot) {
            self.work_duration.observe(seconds(Instant::now(), started));
        }
    }

    /// Refreshes the two work-in-progress gauges.
    pub(crate) fn update_unfinished_work(&self) {
        let now = Instant::now();
        let mut total = 0.0;
        let mut longest = 0.0_f64;
        for started in self.started_at.values() {
            let age = seconds(now, *started);
            total += age;
            longest = longest.max(age);
        }
        self.unfinished.set(total);
        self.longest.set(longest);
    }
}

/// The retries counter of queue `name` (counted by the delay store, which
/// `add_after` uses without the queue's lock).
pub(crate) fn new_retries(provider: &dyn MetricsProvider, name: &str) -> Box<dyn CounterMetric> {
    provider.new_retries_metric(name)
}

fn seconds(now: Instant, then: Instant) -> f64 {
    now.saturating_duration_since(then).as_secs_f64()
}
