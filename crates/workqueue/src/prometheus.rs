//! A [`MetricsProvider`] backed by `prometheus-client`.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::metrics::{
    CounterMetric, DURATION_BUCKETS, GaugeMetric, HistogramMetric, MetricsProvider, NAME_LABEL,
    SettableGaugeMetric,
};

type Labels = Vec<(String, String)>;
type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;
type FloatGauge = Gauge<f64, AtomicU64>;

/// Registers client-go's seven workqueue metrics in a `prometheus-client`
/// [`Registry`] and hands them to named queues, each queue's samples
/// labelled `name="<queue name>"`.
///
/// Create one provider per registry and share it (it is cheap to clone)
/// between all queues; queues with the same name share their series.
///
/// ```
/// use std::sync::Arc;
/// use ctrlkit_workqueue::{PrometheusMetricsProvider, WorkQueue};
/// use prometheus_client::registry::Registry;
///
/// let mut registry = Registry::default();
/// let provider = PrometheusMetricsProvider::new(&mut registry);
/// let queue = WorkQueue::<String>::builder()
///     .name("replicaset")
///     .metrics_provider(Arc::new(provider))
///     .build();
/// queue.add("default/web".to_string());
///
/// let mut text = String::new();
/// prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
/// assert!(text.contains(r#"workqueue_adds_total{name="replicaset"} 1"#));
/// assert!(text.contains(r#"workqueue_depth{name="replicaset"} 1"#));
/// ```
#[derive(Debug, Clone)]
pub struct PrometheusMetricsProvider {
    depth: Family<Labels, Gauge>,
    adds: Family<Labels, Counter>,
    latency: HistogramFamily,
    work_duration: HistogramFamily,
    unfinished: Family<Labels, FloatGauge>,
    longest: Family<Labels, FloatGauge>,
    retries: Family<Labels, Counter>,
}

fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

impl PrometheusMetricsProvider {
    /// Registers the metric families in `registry` (names as client-go:
    /// `workqueue_depth`, `workqueue_adds_total`,
    /// `workqueue_queue_duration_seconds`, `workqueue_work_duration_seconds`,
    /// `workqueue_unfinished_work_seconds`,
    /// `workqueue_longest_running_processor_seconds`,
    /// `workqueue_retries_total`). Register once per registry: registering
    /// twice would expose every family twice.
    pub fn new(registry: &mut Registry) -> Self {
        let provider = Self {
            depth: Family::default(),
            adds: Family::default(),
            latency: Family::new_with_constructor(duration_histogram),
            work_duration: Family::new_with_constructor(duration_histogram),
            unfinished: Family::default(),
            longest: Family::default(),
            retries: Family::default(),
        };
        // prometheus-client appends `_total` to counters itself.
        registry.register(
            "workqueue_depth",
            "Items waiting in the workqueue to be handed to a worker",
            provider.depth.clone(),
        );
        registry.register(
            "workqueue_adds",
            "Adds to the workqueue that were not collapsed into a pending add",
            provider.adds.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "Seconds an item waited in the workqueue before a worker took it",
            provider.latency.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "Seconds a worker spent on an item, from get to done",
            provider.work_duration.clone(),
        );
        registry.register(
            "workqueue_unfinished_work_seconds",
            "Seconds spent so far on items still in progress (not yet in work_duration); a steady rise means stuck workers",
            provider.unfinished.clone(),
        );
        registry.register(
            "workqueue_longest_running_processor_seconds",
            "Seconds the longest-running item of the workqueue has been in progress",
            provider.longest.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Delayed and rate-limited adds to the workqueue",
            provider.retries.clone(),
        );
        provider
    }
}

fn labels(name: &str) -> Labels {
    vec![(NAME_LABEL.to_string(), name.to_string())]
}

impl MetricsProvider for PrometheusMetricsProvider {
    fn new_depth_metric(&self, name: &str) -> Box<dyn GaugeMetric> {
        Box::new(PromGauge(self.depth.get_or_create_owned(&labels(name))))
    }

    fn new_adds_metric(&self, name: &str) -> Box<dyn CounterMetric> {
        Box::new(PromCounter(self.adds.get_or_create_owned(&labels(name))))
    }

    fn new_latency_metric(&self, name: &str) -> Box<dyn HistogramMetric> {
        Box::new(PromHistogram(
            self.latency.get_or_create_owned(&labels(name)),
        ))
    }

    fn new_work_duration_metric(&self, name: &str) -> Box<dyn HistogramMetric> {
        Box::new(PromHistogram(
            self.work_duration.get_or_create_owned(&labels(name)),
        ))
    }

    fn new_unfinished_work_seconds_metric(&self, name: &str) -> Box<dyn SettableGaugeMetric> {
        Box::new(PromFloatGauge(
            self.unfinished.get_or_create_owned(&labels(name)),
        ))
    }

    fn new_longest_running_processor_seconds_metric(
        &self,
        name: &str,
    ) -> Box<dyn SettableGaugeMetric> {
        Box::new(PromFloatGauge(
            self.longest.get_or_create_owned(&labels(name)),
        ))
    }

    fn new_retries_metric(&self, name: &str) -> Box<dyn CounterMetric> {
        Box::new(PromCounter(self.retries.get_or_create_owned(&labels(name))))
    }
}

struct PromGauge(Gauge);
impl GaugeMetric for PromGauge {
    fn inc(&self) {
        self.0.inc();
    }
    fn dec(&self) {
        self.0.dec();
    }
}

struct PromCounter(Counter);
impl CounterMetric for PromCounter {
    fn inc(&self) {
        self.0.inc();
    }
}

struct PromHistogram(Histogram);
impl HistogramMetric for PromHistogram {
    fn observe(&self, value: f64) {
        self.0.observe(value);
    }
}

struct PromFloatGauge(FloatGauge);
impl SettableGaugeMetric for PromFloatGauge {
    fn set(&self, value: f64) {
        self.0.set(value);
    }
}
