//! Metrics: the provider trait a user implements (or takes from the
//! `prometheus` feature) and the recorder the workers drive.
//!
//! The metrics and their meaning follow controller-runtime, so dashboards
//! and alerts written for Go operators keep working. Workers record metrics
//! only when they have both a [name](crate::Workers::name) and a
//! [provider](crate::Workers::metrics_provider); otherwise no recorder
//! exists and the workers read no clock for metrics.
//!
//! The metric handle traits are the workqueue's own
//! ([`CounterMetric`], [`GaugeMetric`], [`SettableGaugeMetric`],
//! [`HistogramMetric`]), so one adapter serves both crates.

use std::fmt;
use std::time::Duration;

pub use ctrlkit_workqueue::metrics::{
    CounterMetric, GaugeMetric, HistogramMetric, SettableGaugeMetric,
};

/// Name of the counter of finished syncs, by controller and `result`.
pub const RECONCILE_TOTAL_METRIC: &str = "controller_runtime_reconcile_total";
/// Name of the counter of failed syncs (terminal ones, panics and timeouts
/// included).
pub const RECONCILE_ERRORS_METRIC: &str = "controller_runtime_reconcile_errors_total";
/// Name of the counter of syncs that failed with a terminal error.
pub const TERMINAL_RECONCILE_ERRORS_METRIC: &str =
    "controller_runtime_terminal_reconcile_errors_total";
/// Name of the counter of syncs that panicked.
pub const RECONCILE_PANICS_METRIC: &str = "controller_runtime_reconcile_panics_total";
/// Name of the histogram of sync durations in seconds.
pub const RECONCILE_TIME_METRIC: &str = "controller_runtime_reconcile_time_seconds";
/// Name of the gauge of workers currently running a sync.
pub const ACTIVE_WORKERS_METRIC: &str = "controller_runtime_active_workers";
/// Name of the gauge of the configured number of workers.
pub const MAX_CONCURRENT_RECONCILES_METRIC: &str = "controller_runtime_max_concurrent_reconciles";
/// Name of the label that carries the controller's name on every metric.
pub const CONTROLLER_LABEL: &str = "controller";
/// Name of the label of [`RECONCILE_TOTAL_METRIC`] that carries a
/// [`ReconcileResult`].
pub const RESULT_LABEL: &str = "result";

/// Bucket upper bounds, in seconds, of [`RECONCILE_TIME_METRIC`]: from 5 ms
/// to 60 s, as controller-runtime.
pub const RECONCILE_TIME_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

/// The `result` label of [`RECONCILE_TOTAL_METRIC`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReconcileResult {
    /// The sync returned [`Action::done`](crate::Action::done).
    Success,
    /// The sync failed: an error (terminal or not), a panic or a timeout.
    Error,
    /// The sync returned [`Action::requeue`](crate::Action::requeue).
    Requeue,
    /// The sync returned [`Action::requeue_after`](crate::Action::requeue_after).
    RequeueAfter,
}

impl ReconcileResult {
    /// Every result, in the order of the label values' creation.
    pub const ALL: [Self; 4] = [
        Self::Success,
        Self::Error,
        Self::Requeue,
        Self::RequeueAfter,
    ];

    /// The label value: `success`, `error`, `requeue` or `requeue_after`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Error => "error",
            Self::Requeue => "requeue",
            Self::RequeueAfter => "requeue_after",
        }
    }

    const fn index(self) -> usize {
        match self {
            Self::Success => 0,
            Self::Error => 1,
            Self::Requeue => 2,
            Self::RequeueAfter => 3,
        }
    }
}

impl fmt::Display for ReconcileResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Creates the metrics of one named controller.
///
/// Each method is called once per [`run`](crate::Workers::run) of workers
/// with a name; `controller` is that name and should become the value of the
/// [`CONTROLLER_LABEL`] label. The returned metrics are updated on the
/// workers' tasks around every sync, so they must be cheap and must not
/// block (atomics are ideal). Two runs with the same name on one provider
/// should share the metrics.
///
/// Every method has a default that returns a metric which records nothing,
/// so an implementation can provide only the metrics it cares about.
pub trait MetricsProvider: Send + Sync {
    /// [`RECONCILE_TOTAL_METRIC`]: incremented once per finished sync with
    /// the matching `result`. Called once for each [`ReconcileResult`].
    fn new_reconcile_total_metric(
        &self,
        controller: &str,
        result: ReconcileResult,
    ) -> Box<dyn CounterMetric> {
        let _ = (controller, result);
        Box::new(Noop)
    }

    /// [`RECONCILE_ERRORS_METRIC`]: every failed sync, terminal errors,
    /// panics and timeouts included.
    fn new_reconcile_errors_metric(&self, controller: &str) -> Box<dyn CounterMetric> {
        let _ = controller;
        Box::new(Noop)
    }

    /// [`TERMINAL_RECONCILE_ERRORS_METRIC`]: syncs that failed with a
    /// terminal error (also counted in the errors metric).
    fn new_terminal_reconcile_errors_metric(&self, controller: &str) -> Box<dyn CounterMetric> {
        let _ = controller;
        Box::new(Noop)
    }

    /// [`RECONCILE_PANICS_METRIC`]: syncs that panicked (also counted in the
    /// errors metric).
    fn new_reconcile_panics_metric(&self, controller: &str) -> Box<dyn CounterMetric> {
        let _ = controller;
        Box::new(Noop)
    }

    /// [`RECONCILE_TIME_METRIC`]: seconds each sync took, whatever its
    /// result. Use [`RECONCILE_TIME_BUCKETS`].
    fn new_reconcile_time_metric(&self, controller: &str) -> Box<dyn HistogramMetric> {
        let _ = controller;
        Box::new(Noop)
    }

    /// [`ACTIVE_WORKERS_METRIC`]: incremented when a worker takes a key,
    /// decremented when it is done with it.
    fn new_active_workers_metric(&self, controller: &str) -> Box<dyn GaugeMetric> {
        let _ = controller;
        Box::new(Noop)
    }

    /// [`MAX_CONCURRENT_RECONCILES_METRIC`]: set to the number of workers
    /// when they start.
    fn new_max_concurrent_reconciles_metric(
        &self,
        controller: &str,
    ) -> Box<dyn SettableGaugeMetric> {
        let _ = controller;
        Box::new(Noop)
    }
}

/// A metric that records nothing: the default of every [`MetricsProvider`]
/// method.
#[derive(Debug, Clone, Copy, Default)]
pub struct Noop;

impl CounterMetric for Noop {
    fn inc(&self) {}
}

impl GaugeMetric for Noop {
    fn inc(&self) {}
    fn dec(&self) {}
}

impl SettableGaugeMetric for Noop {
    fn set(&self, _value: f64) {}
}

impl HistogramMetric for Noop {
    fn observe(&self, _value: f64) {}
}

/// The metrics of one run of workers.
pub(crate) struct Recorder {
    total: [Box<dyn CounterMetric>; 4],
    errors: Box<dyn CounterMetric>,
    terminal_errors: Box<dyn CounterMetric>,
    panics: Box<dyn CounterMetric>,
    time: Box<dyn HistogramMetric>,
    active: Box<dyn GaugeMetric>,
    max_concurrent: Box<dyn SettableGaugeMetric>,
}

impl Recorder {
    /// Creates the metrics of `controller`.
    pub(crate) fn new(provider: &dyn MetricsProvider, controller: &str) -> Self {
        Self {
            total: ReconcileResult::ALL
                .map(|result| provider.new_reconcile_total_metric(controller, result)),
            errors: provider.new_reconcile_errors_metric(controller),
            terminal_errors: provider.new_terminal_reconcile_errors_metric(controller),
            panics: provider.new_reconcile_panics_metric(controller),
            time: provider.new_reconcile_time_metric(controller),
            active: provider.new_active_workers_metric(controller),
            max_concurrent: provider.new_max_concurrent_reconciles_metric(controller),
        }
    }

    pub(crate) fn started(&self, workers: usize) {
        // Exact for any realistic worker count.
        self.max_concurrent.set(workers as f64);
    }

    pub(crate) fn sync_began(&self) {
        self.active.inc();
    }

    pub(crate) fn sync_ended(&self) {
        self.active.dec();
    }

    pub(crate) fn observe(&self, result: ReconcileResult, elapsed: Duration) {
        self.total[result.index()].inc();
        self.time.observe(elapsed.as_secs_f64());
        if result == ReconcileResult::Error {
            self.errors.inc();
        }
    }

    pub(crate) fn terminal(&self) {
        self.terminal_errors.inc();
    }

    pub(crate) fn panicked(&self) {
        self.panics.inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_labels_are_controller_runtimes() {
        let labels: Vec<_> = ReconcileResult::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(labels, ["success", "error", "requeue", "requeue_after"]);
        for (i, result) in ReconcileResult::ALL.iter().enumerate() {
            assert_eq!(result.index(), i);
        }
    }

    #[test]
    fn buckets_increase() {
        assert!(RECONCILE_TIME_BUCKETS.windows(2).all(|w| w[0] < w[1]));
    }
}
