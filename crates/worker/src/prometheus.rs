//! A [`MetricsProvider`] backed by `prometheus-client`.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::metrics::{
    CONTROLLER_LABEL, CounterMetric, GaugeMetric, HistogramMetric, MetricsProvider,
    RECONCILE_TIME_BUCKETS, RESULT_LABEL, ReconcileResult, SettableGaugeMetric,
};

type Labels = Vec<(String, String)>;
type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

/// Registers controller-runtime's reconcile metrics in a `prometheus-client`
/// [`Registry`] and hands them to named workers, each controller's samples
/// labelled `controller="<name>"`.
///
/// Create one provider per registry and share it (it is cheap to clone)
/// between all controllers; runs with the same name share their series.
/// Every series of a controller exists (at zero) from the start of its
/// [`run`](crate::Workers::run), so dashboards see it before the first
/// error.
///
/// ```
/// use std::sync::Arc;
/// use ctrlkit_worker::{Action, PrometheusMetricsProvider, Workers};
/// use ctrlkit_workqueue::WorkQueue;
/// use prometheus_client::registry::Registry;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let mut registry = Registry::default();
/// let provider = PrometheusMetricsProvider::new(&mut registry);
/// let queue = WorkQueue::<String>::new();
/// queue.add("default/web".to_string());
/// queue.shut_down(); // process what is queued, then stop
///
/// Workers::new(queue, |_key: String| async { Ok::<_, String>(Action::done()) })
///     .name("replicaset")
///     .metrics_provider(Arc::new(provider))
///     .run(std::future::pending::<()>())
///     .await;
///
/// let mut text = String::new();
/// prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
/// assert!(text.contains(
///     r#"controller_runtime_reconcile_total{controller="replicaset",result="success"} 1"#
/// ));
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct PrometheusMetricsProvider {
    total: Family<Labels, Counter>,
    errors: Family<Labels, Counter>,
    terminal_errors: Family<Labels, Counter>,
    panics: Family<Labels, Counter>,
    time: HistogramFamily,
    active: Family<Labels, Gauge>,
    max_concurrent: Family<Labels, Gauge>,
}

fn reconcile_time_histogram() -> Histogram {
    Histogram::new(RECONCILE_TIME_BUCKETS)
}

impl PrometheusMetricsProvider {
    /// Registers the metric families in `registry`, under controller-runtime's
    /// names: `controller_runtime_reconcile_total`,
    /// `controller_runtime_reconcile_errors_total`,
    /// `controller_runtime_terminal_reconcile_errors_total`,
    /// `controller_runtime_reconcile_panics_total`,
    /// `controller_runtime_reconcile_time_seconds`,
    /// `controller_runtime_active_workers`,
    /// `controller_runtime_max_concurrent_reconciles`. Register once per
    /// registry: registering twice would expose every family twice.
    pub fn new(registry: &mut Registry) -> Self {
        let provider = Self {
            total: Family::default(),
            errors: Family::default(),
            terminal_errors: Family::default(),
            panics: Family::default(),
            time: Family::new_with_constructor(reconcile_time_histogram),
            active: Family::default(),
            max_concurrent: Family::default(),
        };
        // prometheus-client appends `_total` to counter names itself.
        registry.register(
            "controller_runtime_reconcile",
            "Finished syncs per controller and result",
            provider.total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Failed syncs per controller, including terminal errors, panics and timeouts",
            provider.errors.clone(),
        );
        registry.register(
            "controller_runtime_terminal_reconcile_errors",
            "Syncs per controller that failed with an error that is not retried",
            provider.terminal_errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_panics",
            "Syncs per controller that panicked",
            provider.panics.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Seconds each sync took, per controller",
            provider.time.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Workers per controller currently running a sync",
            provider.active.clone(),
        );
        registry.register(
            "controller_runtime_max_concurrent_reconciles",
            "Configured number of workers per controller",
            provider.max_concurrent.clone(),
        );
        provider
    }
}

fn labels(controller: &str) -> Labels {
    vec![(CONTROLLER_LABEL.to_string(), controller.to_string())]
}

impl MetricsProvider for PrometheusMetricsProvider {
    fn new_reconcile_total_metric(
        &self,
        controller: &str,
        result: ReconcileResult,
    ) -> Box<dyn CounterMetric> {
        let mut labels = labels(controller);
        labels.push((RESULT_LABEL.to_string(), result.as_str().to_string()));
        Box::new(PromCounter(self.total.get_or_create_owned(&labels)))
    }

    fn new_reconcile_errors_metric(&self, controller: &str) -> Box<dyn CounterMetric> {
        Box::new(PromCounter(
            self.errors.get_or_create_owned(&labels(controller)),
        ))
    }

    fn new_terminal_reconcile_errors_metric(&self, controller: &str) -> Box<dyn CounterMetric> {
        Box::new(PromCounter(
            self.terminal_errors
                .get_or_create_owned(&labels(controller)),
        ))
    }

    fn new_reconcile_panics_metric(&self, controller: &str) -> Box<dyn CounterMetric> {
        Box::new(PromCounter(
            self.panics.get_or_create_owned(&labels(controller)),
        ))
    }

    fn new_reconcile_time_metric(&self, controller: &str) -> Box<dyn HistogramMetric> {
        Box::new(PromHistogram(
            self.time.get_or_create_owned(&labels(controller)),
        ))
    }

    fn new_active_workers_metric(&self, controller: &str) -> Box<dyn GaugeMetric> {
        Box::new(PromGauge(
            self.active.get_or_create_owned(&labels(controller)),
        ))
    }

    fn new_max_concurrent_reconciles_metric(
        &self,
        controller: &str,
    ) -> Box<dyn SettableGaugeMetric> {
        Box::new(PromSettableGauge(
            self.max_concurrent.get_or_create_owned(&labels(controller)),
        ))
    }
}

struct PromCounter(Counter);
impl CounterMetric for PromCounter {
    fn inc(&self) {
        self.0.inc();
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

/// An integer gauge: the only settable metric is a worker count.
struct PromSettableGauge(Gauge);
impl SettableGaugeMetric for PromSettableGauge {
    fn set(&self, value: f64) {
        // Saturating conversion of a small whole number.
        self.0.set(value as i64);
    }
}

struct PromHistogram(Histogram);
impl HistogramMetric for PromHistogram {
    fn observe(&self, value: f64) {
        self.0.observe(value);
    }
}
