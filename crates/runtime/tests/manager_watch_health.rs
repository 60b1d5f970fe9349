//! Watch health in `/readyz` and `/metrics`: a manager whose informer stops
//! hearing from the API server turns not ready, and says which informer.
#![allow(clippy::unwrap_used)]

mod manager_support;

use std::time::Duration;

use ctrlkit_runtime::manager::{Manager, Readiness};
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher;
use manager_support::{config, eventually, http_get};
use tokio_util::sync::CancellationToken;

/// Deadlock guard only.
const GUARD: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_fails_when_an_informer_hears_nothing_within_the_bound() {
    // Bookmarks every 200 ms and watches that end every second: a healthy
    // informer hears from the server many times within the bound.
    let cluster = TestCluster::start(
        TestClusterConfig::default().with_bookmark_interval(Duration::from_millis(200)),
    )
    .await
    .unwrap();
    let mut config = config("watch-health");
    config.watch_health_bound = Some(Duration::from_secs(3));
    config.metrics_addr = Some("127.0.0.1:0".parse().unwrap());
    let manager = Manager::with_client(cluster.client(), config).unwrap();
    let _pods = manager.informer::<Pod>(watcher::Config::default().timeout(1));
    let status = manager.status();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run(shutdown.clone()));

    eventually("ready", GUARD, || status.readiness() == Readiness::Ready).await;
    let metrics = status.endpoints().await.unwrap().metrics.unwrap();
    let (code, body) = http_get(metrics, "/metrics").await;
    assert_eq!(code, 200);
    assert!(
        body.contains(r#"informer_decode_errors_total{resource="pods"} 0"#),
        "{body}"
    );
    assert!(
        body.contains(r#"informer_seconds_since_last_response{resource="pods"} "#),
        "{body}"
    );

    // The API server goes away: every list and watch fails from now on.
    cluster.shutdown().await;
    eventually("watch unhealthy", GUARD, || {
        status.readiness() == Readiness::WatchUnhealthy
    })
    .await;
    let (_, body) = http_get(metrics, "/metrics").await;
    let silence: f64 = body
        .lines()
        .find_map(|l| l.strip_prefix(r#"informer_seconds_since_last_response{resource="pods"} "#))
        .unwrap()
        .parse()
        .unwrap();
    assert!(silence > 3.0, "{silence}");

    shutdown.cancel();
    tokio::time::timeout(GUARD, running)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
