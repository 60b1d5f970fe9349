//! Metrics through a recording `MetricsProvider`: the exact values of
//! client-go's metrics test, the retries counter, the periodic
//! work-in-progress gauges and their end at shutdown.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{s, settle};
use ctrlkit_workqueue::WorkQueue;
use ctrlkit_workqueue::metrics::{
    CounterMetric, GaugeMetric, HistogramMetric, MetricsProvider, SettableGaugeMetric,
};
use parking_lot::Mutex;
use tokio::time::advance;

#[derive(Debug, Default)]
struct Record {
    names: Vec<String>,
    depth: i64,
    adds: u64,
    retries: u64,
    latency: Vec<f64>,
    work: Vec<f64>,
    unfinished: Vec<f64>,
    longest: Vec<f64>,
}

#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Record>>);

#[derive(Clone, Copy)]
enum Kind {
    Depth,
    Adds,
    Retries,
    Latency,
    Work,
    Unfinished,
    Longest,
}

struct Metric(Recorder, Kind);

impl GaugeMetric for Metric {
    fn inc(&self) {
        self.0.0.lock().depth += 1;
    }
    fn dec(&self) {
        self.0.0.lock().depth -= 1;
    }
}
impl CounterMetric for Metric {
    fn inc(&self) {
        let mut r = self.0.0.lock();
        match self.1 {
            Kind::Adds => r.adds += 1,
            Kind::Retries => r.retries += 1,
            _ => unreachable!(),
        }
    }
}
impl HistogramMetric for Metric {
    fn observe(&self, value: f64) {
        let mut r = self.0.0.lock();
        match self.1 {
            Kind::Latency => r.latency.push(value),
            Kind::Work => r.work.push(value),
            _ => unreachable!(),
        }
    }
}
impl SettableGaugeMetric for Metric {
    fn set(&self, value: f64) {
        let mut r = self.0.0.lock();
        match self.1 {
            Kind::Unfinished => r.unfinished.push(value),
            Kind::Longest => r.longest.push(value),
            _ => unreachable!(),
        }
    }
}

impl Recorder {
    fn metric(&self, name: &str, kind: Kind) -> Box<Metric> {
        self.0.lock().names.push(name.to_string());
        Box::new(Metric(self.clone(), kind))
    }
}

impl MetricsProvider for Recorder {
    fn new_depth_metric(&self, name: &str) -> Box<dyn GaugeMetric> {
        self.metric(name, Kind::Depth)
    }
    fn new_adds_metric(&self, name: &str) -> Box<dyn CounterMetric> {
        self.metric(name, Kind::Adds)
    }
    fn new_latency_metric(&self, name: &str) -> Box<dyn HistogramMetric> {
        self.metric(name, Kind::Latency)
    }
    fn new_work_duration_metric(&self, name: &str) -> Box<dyn HistogramMetric> {
        self.metric(name, Kind::Work)
    }
    fn new_unfinished_work_seconds_metric(&self, name: &str) -> Box<dyn SettableGaugeMetric> {
        self.metric(name, Kind::Unfinished)
    }
    fn new_longest_running_processor_seconds_metric(
        &self,
        name: &str,
    ) -> Box<dyn SettableGaugeMetric> {
        self.metric(name, Kind::Longest)
    }
    fn new_retries_metric(&self, name: &str) -> Box<dyn CounterMetric> {
        self.metric(name, Kind::Retries)
    }
}

fn named_queue(recorder: &Recorder) -> WorkQueue<String> {
    WorkQueue::builder()
        .name("test")
        .metrics_provider(Arc::new(recorder.clone()))
        .build()
}

#[tokio::test(start_paused = true)]
async fn metric_values_follow_client_go() {
    let recorder = Recorder::default();
    let queue = named_queue(&recorder);
    settle().await;
    {
        let r = recorder.0.lock();
        assert_eq!(r.names.len(), 7);
        assert!(r.names.iter().all(|n| n == "test"));
    }

    queue.add(s("foo"));
    {
        let r = recorder.0.lock();
        assert_eq!((r.adds, r.depth), (1, 1));
    }

    advance(Duration::from_micros(50)).await;
    let item = queue.get().await.unwrap();
    assert_eq!(recorder.0.lock().latency, vec![5e-5]);
    assert_eq!(recorder.0.lock().depth, 0);

    for _ in 0..5 {
        queue.add(s("foo"));
    }
    {
        let r = recorder.0.lock();
        assert_eq!((r.adds, r.depth), (2, 1), "only the first re-add counts");
    }

    advance(Duration::from_micros(25)).await;
    queue.done(&item);
    {
        let r = recorder.0.lock();
        assert_eq!(r.work, vec![2.5e-5]);
        assert_eq!(r.depth, 1);
    }

    let item = queue.get().await.unwrap();
    assert_eq!(
        recorder.0.lock().latency,
        vec![5e-5, 2.5e-5],
        "measured from the re-add during processing"
    );

    // The work-in-progress gauges are refreshed every 500 ms.
    assert!(recorder.0.lock().unfinished.is_empty());
    advance(Duration::from_millis(500)).await;
    settle().await;
    {
        let r = recorder.0.lock();
        assert_eq!(r.unfinished, vec![0.5]);
        assert_eq!(r.longest, vec![0.5]);
    }

    queue.done(&item);
    let r = recorder.0.lock();
    assert_eq!(r.work, vec![2.5e-5, 0.5]);
    assert_eq!((r.adds, r.depth, r.retries), (2, 0, 0));
}

#[tokio::test(start_paused = true)]
async fn work_in_progress_gauges_sum_and_max_over_items() {
    let recorder = Recorder::default();
    let queue = named_queue(&recorder);
    settle().await;
    queue.add(s("a"));
    let _a = queue.get().await.unwrap();
    advance(Duration::from_millis(100)).await;
    queue.add(s("b"));
    let _b = queue.get().await.unwrap();
    advance(Duration::from_millis(400)).await;
    settle().await;
    let r = recorder.0.lock();
    assert_eq!(r.unfinished, vec![0.5 + 0.4]);
    assert_eq!(r.longest, vec![0.5]);
}

#[tokio::test(start_paused = true)]
async fn gauges_stop_updating_after_shutdown() {
    let recorder = Recorder::default();
    let queue = named_queue(&recorder);
    settle().await;
    advance(Duration::from_millis(600)).await;
    settle().await;
    let updates = recorder.0.lock().unfinished.len();
    assert!(updates >= 1, "updated at least once");
    queue.shut_down();
    advance(Duration::from_secs(3600)).await;
    settle().await;
    assert_eq!(recorder.0.lock().unfinished.len(), updates);
}

#[tokio::test(start_paused = true)]
async fn retries_count_every_add_after_before_shutdown() {
    let recorder = Recorder::default();
    let queue = named_queue(&recorder);
    queue.add_after(s("a"), Duration::ZERO);
    queue.add_after(s("b"), Duration::from_millis(10));
    queue.add_after(s("b"), Duration::from_millis(20)); // merged, still counted
    queue.add_rate_limited(s("c"));
    assert_eq!(recorder.0.lock().retries, 4);
    queue.add(s("d"));
    assert_eq!(recorder.0.lock().retries, 4, "plain adds are not retries");
    queue.shut_down();
    queue.add_after(s("e"), Duration::ZERO);
    queue.add_rate_limited(s("f"));
    assert_eq!(
        recorder.0.lock().retries,
        4,
        "nothing counted after shutdown"
    );
}

#[tokio::test(start_paused = true)]
async fn no_metrics_without_a_name() {
    let recorder = Recorder::default();
    let unnamed = WorkQueue::<String>::builder()
        .metrics_provider(Arc::new(recorder.clone()))
        .build();
    let empty_name = WorkQueue::<String>::builder()
        .name("")
        .metrics_provider(Arc::new(recorder.clone()))
        .build();
    for queue in [&unnamed, &empty_name] {
        queue.add(s("a"));
        queue.add_after(s("b"), Duration::from_millis(1));
        let item = queue.get().await.unwrap();
        queue.done(&item);
    }
    assert!(recorder.0.lock().names.is_empty(), "no metric was created");
    assert_eq!(
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks(),
        2,
        "only the timer tasks of the two delays"
    );
}

#[test]
fn gauges_refresh_for_a_queue_built_outside_a_runtime() {
    let recorder = Recorder::default();
    let queue = named_queue(&recorder);
    queue.add(s("a"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async {
        let item = queue.get().await.unwrap(); // never parks
        settle().await;
        advance(Duration::from_millis(600)).await;
        settle().await;
        queue.done(&item);
    });
    assert!(!recorder.0.lock().unfinished.is_empty());
}
