//! The prometheus-client provider exposes client-go's names and buckets.
#![cfg(feature = "prometheus")]
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use ctrlkit_workqueue::{PrometheusMetricsProvider, WorkQueue};
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;

#[tokio::test(start_paused = true)]
async fn exposes_the_seven_metrics_per_queue_name() {
    let mut registry = Registry::default();
    let provider = Arc::new(PrometheusMetricsProvider::new(&mut registry));
    let a = WorkQueue::<u32>::builder()
        .name("alpha")
        .metrics_provider(provider.clone())
        .build();
    let b = WorkQueue::<u32>::builder()
        .name("beta")
        .metrics_provider(provider)
        .build();
    a.add(1);
    a.add(2);
    b.add(1);
    let item = a.get().await.unwrap();
    tokio::time::advance(Duration::from_millis(3)).await;
    a.done(&item);
    a.add_rate_limited(3);

    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    for line in [
        r#"workqueue_depth{name="alpha"} 1"#,
        r#"workqueue_depth{name="beta"} 1"#,
        r#"workqueue_adds_total{name="alpha"} 2"#,
        r#"workqueue_retries_total{name="alpha"} 1"#,
        r#"workqueue_queue_duration_seconds_count{name="alpha"} 1"#,
        r#"workqueue_work_duration_seconds_count{name="alpha"} 1"#,
        r#"workqueue_work_duration_seconds_sum{name="alpha"} 0.003"#,
        "# TYPE workqueue_unfinished_work_seconds gauge",
        "# TYPE workqueue_longest_running_processor_seconds gauge",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    let buckets = text
        .lines()
        .filter(|l| l.starts_with("workqueue_work_duration_seconds_bucket{") && l.contains("alpha"))
        .count();
    assert_eq!(buckets, 11, "ten bounds from 1e-8 to 10 s, plus +Inf");
}
