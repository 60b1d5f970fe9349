//! Helpers shared by the integration tests.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ctrlkit_worker::metrics::{
    CounterMetric, GaugeMetric, HistogramMetric, MetricsProvider, ReconcileResult,
    SettableGaugeMetric,
};
use ctrlkit_worker::{Stopped, SyncHandler, Workers};
use ctrlkit_workqueue::WorkQueue;
use ctrlkit_workqueue::rate_limiter::ItemExponentialFailureRateLimiter;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The backoff of the test queues: 10 ms doubling up to 1 s.
pub const BASE_DELAY: Duration = Duration::from_millis(10);

/// A queue with a small per-key exponential limiter (no overall bucket).
pub fn queue() -> WorkQueue<String> {
    WorkQueue::builder()
        .rate_limiter(ItemExponentialFailureRateLimiter::new(
            BASE_DELAY,
            Duration::from_secs(1),
        ))
        .build()
}

/// Lets paused time run far enough for every pending sync and retry that is
/// going to happen (backoff is capped at 1 s).
pub async fn let_it_run() {
    tokio::time::sleep(Duration::from_secs(60)).await;
}

/// One call of a sync.
#[derive(Debug, Clone)]
pub struct Call {
    pub key: String,
    pub at: Instant,
    /// `num_requeues` of the key when the sync started.
    pub requeues: u32,
}

/// Records every sync call.
#[derive(Clone, Default)]
pub struct Calls(Arc<Mutex<Vec<Call>>>);

impl Calls {
    /// Records a call of `key`; returns how many calls of `key` came before.
    pub fn record(&self, queue: &WorkQueue<String>, key: &str) -> usize {
        let mut calls = self.0.lock().unwrap();
        let before = calls.iter().filter(|c| c.key == key).count();
        calls.push(Call {
            key: key.to_string(),
            at: Instant::now(),
            requeues: queue.num_requeues(&key.to_string()),
        });
        before
    }

    pub fn of(&self, key: &str) -> Vec<Call> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.key == key)
            .cloned()
            .collect()
    }

    pub fn count(&self, key: &str) -> usize {
        self.of(key).len()
    }

    pub fn total(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

/// Workers running on a spawned task until `stop`.
pub struct Running {
    stop: oneshot::Sender<()>,
    pub handle: JoinHandle<Stopped>,
}

pub fn start<H>(workers: Workers<String, H>) -> Running
where
    H: SyncHandler<String>,
{
    let (stop, stopped) = oneshot::channel::<()>();
    let handle = tokio::spawn(workers.run(async move {
        let _ = stopped.await;
    }));
    Running { stop, handle }
}

impl Running {
    /// Asks for shutdown and waits for `run` to return.
    pub async fn stop(self) -> Stopped {
        self.request_stop().await
    }

    /// Asks for shutdown; the returned handle resolves when `run` returns.
    pub fn request_stop_now(self) -> JoinHandle<Stopped> {
        let _ = self.stop.send(());
        self.handle
    }

    async fn request_stop(self) -> Stopped {
        self.request_stop_now().await.unwrap()
    }
}

/// A metrics provider that keeps every value in a map, for assertions.
#[derive(Clone, Default)]
pub struct RecordingMetrics {
    values: Arc<Mutex<BTreeMap<String, f64>>>,
}

impl RecordingMetrics {
    /// The value of `series` (0 if never touched).
    pub fn get(&self, series: &str) -> f64 {
        self.values
            .lock()
            .unwrap()
            .get(series)
            .copied()
            .unwrap_or(0.0)
    }

    pub fn total(&self, controller: &str, result: ReconcileResult) -> f64 {
        self.get(&format!("reconcile_total/{controller}/{result}"))
    }

    pub fn series(&self) -> Vec<String> {
        self.values.lock().unwrap().keys().cloned().collect()
    }

    fn handle(&self, series: String) -> Box<Series> {
        self.values
            .lock()
            .unwrap()
            .entry(series.clone())
            .or_insert(0.0);
        Box::new(Series {
            values: Arc::clone(&self.values),
            series,
        })
    }
}

struct Series {
    values: Arc<Mutex<BTreeMap<String, f64>>>,
    series: String,
}

impl Series {
    fn update(&self, f: impl FnOnce(f64) -> f64) {
        let mut values = self.values.lock().unwrap();
        let value = values.entry(self.series.clone()).or_insert(0.0);
        *value = f(*value);
        let value = *value;
        let peak = values.entry(format!("{}/peak", self.series)).or_insert(0.0);
        *peak = peak.max(value);
    }
}

impl CounterMetric for Series {
    fn inc(&self) {
        self.update(|v| v + 1.0);
    }
}

impl GaugeMetric for Series {
    fn inc(&self) {
        self.update(|v| v + 1.0);
    }
    fn dec(&self) {
        self.update(|v| v - 1.0);
    }
}

impl SettableGaugeMetric for Series {
    fn set(&self, value: f64) {
        self.update(|_| value);
    }
}

impl HistogramMetric for Series {
    fn observe(&self, value: f64) {
        // Count of observations, and their sum under another series.
        self.update(|v| v + 1.0);
        let mut values = self.values.lock().unwrap();
        *values.entry(format!("{}/sum", self.series)).or_insert(0.0) += value;
    }
}

impl MetricsProvider for RecordingMetrics {
    fn new_reconcile_total_metric(
        &self,
        controller: &str,
        result: ReconcileResult,
    ) -> Box<dyn CounterMetric> {
        self.handle(format!("reconcile_total/{controller}/{result}"))
    }

    fn new_reconcile_errors_metric(&self, controller: &str) -> Box<dyn CounterMetric> {
        self.handle(format!("errors/{controller}"))
    }

    fn new_terminal_reconcile_errors_metric(&self, controller: &str) -> Box<dyn CounterMetric> {
        self.handle(format!("terminal_errors/{controller}"))
    }

    fn new_reconcile_panics_metric(&self, controller: &str) -> Box<dyn CounterMetric> {
        self.handle(format!("panics/{controller}"))
    }

    fn new_reconcile_time_metric(&self, controller: &str) -> Box<dyn HistogramMetric> {
        self.handle(format!("time/{controller}"))
    }

    fn new_active_workers_metric(&self, controller: &str) -> Box<dyn GaugeMetric> {
        self.handle(format!("active/{controller}"))
    }

    fn new_max_concurrent_reconciles_metric(
        &self,
        controller: &str,
    ) -> Box<dyn SettableGaugeMetric> {
        self.handle(format!("max_concurrent/{controller}"))
    }
}
