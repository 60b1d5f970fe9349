//! The reconcile metrics, through a recording provider and prometheus.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{Calls, RecordingMetrics, let_it_run, queue, start};
use ctrlkit_worker::metrics::{HistogramMetric, MetricsProvider, Noop, ReconcileResult};
use ctrlkit_worker::{Action, Failure, Stopped, Workers};

fn key(k: &str) -> String {
    k.to_string()
}

/// One sync per outcome, by key: each key's first attempt does what its
/// name says, later attempts succeed.
fn scripted_sync(
    queue: ctrlkit_workqueue::WorkQueue<String>,
    calls: Calls,
) -> impl Fn(String) -> futures::future::BoxFuture<'static, Result<Action, Failure<String>>>
+ Send
+ Sync
+ 'static {
    move |key: String| {
        let attempt = calls.record(&queue, &key);
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if attempt > 0 {
                return Ok(Action::done());
            }
            match key.as_str() {
                "error" => Err(Failure::Retry("conflict".to_string())),
                "terminal" => Err(Failure::Terminal("invalid".to_string())),
                "panic" => panic!("boom"),
                "requeue" => Ok(Action::requeue()),
                "requeue-after" => Ok(Action::requeue_after(Duration::from_secs(1))),
                "slow" => {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    Ok(Action::done())
                }
                _ => Ok(Action::done()),
            }
        })
    }
}

#[tokio::test(start_paused = true)]
async fn every_outcome_is_counted_under_the_controller_name() {
    let queue = queue();
    let calls = Calls::default();
    let metrics = RecordingMetrics::default();
    let workers = Workers::new(queue.clone(), scripted_sync(queue.clone(), calls.clone()))
        .name("rs")
        .concurrency(3)
        .timeout(Duration::from_secs(10))
        .metrics_provider(Arc::new(metrics.clone()));
    let running = start(workers);
    let_it_run().await;
    assert_eq!(metrics.get("max_concurrent/rs"), 3.0);
    assert_eq!(metrics.total("rs", ReconcileResult::Success), 0.0);

    for k in [
        "ok",
        "error",
        "terminal",
        "panic",
        "requeue",
        "requeue-after",
        "slow",
    ] {
        queue.add(key(k));
    }
    let_it_run().await;

    // First attempts: "ok" succeeds; "error", "terminal", "panic" and
    // "slow" (timed out) fail; the retries of all but "terminal" succeed.
    assert_eq!(metrics.total("rs", ReconcileResult::Success), 6.0);
    assert_eq!(metrics.total("rs", ReconcileResult::Error), 4.0);
    assert_eq!(metrics.total("rs", ReconcileResult::Requeue), 1.0);
    assert_eq!(metrics.total("rs", ReconcileResult::RequeueAfter), 1.0);
    assert_eq!(metrics.get("errors/rs"), 4.0);
    assert_eq!(metrics.get("terminal_errors/rs"), 1.0);
    assert_eq!(metrics.get("panics/rs"), 1.0);
    assert_eq!(metrics.get("time/rs"), 12.0, "one observation per sync");
    assert_eq!(calls.total(), 12);
    assert!(
        metrics.get("time/rs/sum") >= 11.0,
        "durations: eleven syncs of 100 ms, and 10 s until the timeout"
    );
    assert_eq!(metrics.get("active/rs"), 0.0, "no sync is running");
    assert_eq!(metrics.get("active/rs/peak"), 3.0, "all workers were busy");
    assert_eq!(running.stop().await, Stopped::Drained);
}

#[tokio::test(start_paused = true)]
async fn without_a_name_no_metrics_are_created() {
    let queue = queue();
    let metrics = RecordingMetrics::default();
    let sync = |_key: String| async { Ok::<_, String>(Action::done()) };
    let running =
        start(Workers::new(queue.clone(), sync).metrics_provider(Arc::new(metrics.clone())));
    queue.add(key("a"));
    let_it_run().await;
    running.stop().await;
    assert!(metrics.series().is_empty(), "{:?}", metrics.series());
}

/// A provider that only implements one metric: the others are no-ops.
struct OnlyTime(RecordingMetrics);

impl MetricsProvider for OnlyTime {
    fn new_reconcile_time_metric(&self, controller: &str) -> Box<dyn HistogramMetric> {
        self.0.new_reconcile_time_metric(controller)
    }
}

#[tokio::test(start_paused = true)]
async fn providers_may_implement_only_some_metrics() {
    let queue = queue();
    let metrics = RecordingMetrics::default();
    let sync = |_key: String| async { Ok::<_, String>(Action::done()) };
    let running = start(
        Workers::new(queue.clone(), sync)
            .name("c")
            .metrics_provider(Arc::new(OnlyTime(metrics.clone()))),
    );
    queue.add(key("a"));
    let_it_run().await;
    running.stop().await;
    assert_eq!(metrics.series(), ["time/c", "time/c/peak", "time/c/sum"]);
    assert_eq!(metrics.get("time/c"), 1.0);
    // The no-op metric is public, for providers that compose.
    HistogramMetric::observe(&Noop, 1.0);
}

/// A histogram that panics the first time it is used: a bug outside the
/// sync that unwinds through a worker.
struct PanicsOnce(Arc<AtomicBool>);

impl HistogramMetric for PanicsOnce {
    fn observe(&self, _value: f64) {
        if !self.0.swap(true, Ordering::SeqCst) {
            panic!("metrics backend failure");
        }
    }
}

struct FaultyProvider(Arc<AtomicBool>);

impl MetricsProvider for FaultyProvider {
    fn new_reconcile_time_metric(&self, _controller: &str) -> Box<dyn HistogramMetric> {
        Box::new(PanicsOnce(Arc::clone(&self.0)))
    }
}

#[tokio::test(start_paused = true)]
async fn a_worker_that_dies_outside_the_sync_is_replaced_and_its_key_retried() {
    let queue = queue();
    let calls = Calls::default();
    let sync = {
        let (queue, calls) = (queue.clone(), calls.clone());
        move |key: String| {
            calls.record(&queue, &key);
            async { Ok::<_, String>(Action::done()) }
        }
    };
    let provider = FaultyProvider(Arc::new(AtomicBool::new(false)));
    let running = start(
        Workers::new(queue.clone(), sync)
            .name("c")
            .concurrency(1)
            .metrics_provider(Arc::new(provider)),
    );
    queue.add(key("a"));
    let_it_run().await;
    queue.add(key("b"));
    let_it_run().await;
    assert_eq!(calls.count("a"), 2, "the key of the dead worker came back");
    assert_eq!(calls.count("b"), 1, "a replacement worker took over");
    assert_eq!(running.stop().await, Stopped::Drained);
}

#[cfg(feature = "prometheus")]
#[tokio::test(start_paused = true)]
async fn prometheus_exposes_controller_runtime_names_with_the_controller_label() {
    use ctrlkit_worker::PrometheusMetricsProvider;
    use prometheus_client::registry::Registry;

    let mut registry = Registry::default();
    let provider = PrometheusMetricsProvider::new(&mut registry);
    let queue = queue();
    let calls = Calls::default();
    let running = start(
        Workers::new(queue.clone(), scripted_sync(queue.clone(), calls))
            .name("replicaset")
            .concurrency(5)
            .metrics_provider(Arc::new(provider)),
    );
    for k in [
        "ok",
        "error",
        "terminal",
        "panic",
        "requeue",
        "requeue-after",
    ] {
        queue.add(key(k));
    }
    let_it_run().await;
    running.stop().await;

    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for line in [
        r#"controller_runtime_reconcile_total{controller="replicaset",result="success"} 5"#,
        r#"controller_runtime_reconcile_total{controller="replicaset",result="error"} 3"#,
        r#"controller_runtime_reconcile_total{controller="replicaset",result="requeue"} 1"#,
        r#"controller_runtime_reconcile_total{controller="replicaset",result="requeue_after"} 1"#,
        r#"controller_runtime_reconcile_errors_total{controller="replicaset"} 3"#,
        r#"controller_runtime_terminal_reconcile_errors_total{controller="replicaset"} 1"#,
        r#"controller_runtime_reconcile_panics_total{controller="replicaset"} 1"#,
        r#"controller_runtime_reconcile_time_seconds_count{controller="replicaset"} 10"#,
        r#"controller_runtime_reconcile_time_seconds_bucket{le="0.005",controller="replicaset"} 0"#,
        r#"controller_runtime_reconcile_time_seconds_bucket{le="60.0",controller="replicaset"} 10"#,
        r#"controller_runtime_active_workers{controller="replicaset"} 0"#,
        r#"controller_runtime_max_concurrent_reconciles{controller="replicaset"} 5"#,
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
}
