//! The manager's HTTP endpoints on real sockets (port 0): `/metrics`,
//! `/healthz`, `/readyz`, one server or two, bind errors; readiness with a
//! real informer against the test cluster.
#![allow(clippy::unwrap_used)]

mod manager_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ctrlkit_runtime::manager::{FnRunnable, Manager, ManagerError, Readiness};
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher;
use manager_support::{config, eventually, http_get, offline_client, probe};
use prometheus_client::metrics::counter::Counter;
use tokio_util::sync::CancellationToken;

const LOOPBACK_ANY_PORT: &str = "127.0.0.1:0";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_server_serves_metrics_health_and_readiness() {
    let mut config = config("endpoints");
    config.metrics_addr = Some(LOOPBACK_ANY_PORT.parse().unwrap());
    config.health_addr = config.metrics_addr;
    let mut manager = Manager::with_client(offline_client(), config).unwrap();
    let counter = Counter::<u64>::default();
    manager
        .registry_mut()
        .register("demo_things", "things done", counter.clone());
    counter.inc();
    let synced = Arc::new(AtomicBool::new(false));
    let flag = synced.clone();
    let (work, _) = probe("work", Duration::ZERO);
    manager.add(work).add(
        FnRunnable::new("gate", |stop: CancellationToken| async move {
            stop.cancelled().await;
            Ok::<_, std::io::Error>(())
        })
        .with_synced(move || flag.load(Ordering::SeqCst)),
    );
    let status = manager.status();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run(shutdown.clone()));

    let endpoints = status.endpoints().await.unwrap();
    let addr = endpoints.metrics.unwrap();
    assert_eq!(
        endpoints.health,
        Some(addr),
        "one server for equal addresses"
    );
    assert_ne!(addr.port(), 0);

    assert_eq!(http_get(addr, "/healthz").await, (200, "ok".into()));
    assert_eq!(
        http_get(addr, "/readyz").await,
        (503, "informer caches not synced yet".into())
    );
    synced.store(true, Ordering::SeqCst);
    eventually("ready", Duration::from_secs(10), || status.is_ready()).await;
    assert_eq!(http_get(addr, "/readyz").await, (200, "ok".into()));
    let (code, metrics) = http_get(addr, "/metrics").await;
    assert_eq!(code, 200);
    assert!(metrics.contains("demo_things_total 1"), "{metrics}");
    assert_eq!(http_get(addr, "/nope").await.0, 404);

    shutdown.cancel();
    running.await.unwrap().unwrap();
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "endpoints stop with the manager"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_endpoints_are_not_served() {
    let mut metrics_only = config("metrics-only");
    metrics_only.metrics_addr = Some(LOOPBACK_ANY_PORT.parse().unwrap());
    let manager = Manager::with_client(offline_client(), metrics_only).unwrap();
    let status = manager.status();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run(shutdown.clone()));
    let endpoints = status.endpoints().await.unwrap();
    assert_eq!(endpoints.health, None);
    let addr = endpoints.metrics.unwrap();
    assert_eq!(http_get(addr, "/metrics").await.0, 200);
    assert_eq!(http_get(addr, "/healthz").await.0, 404);
    assert_eq!(http_get(addr, "/readyz").await.0, 404);
    shutdown.cancel();
    running.await.unwrap().unwrap();

    let mut health_only = config("health-only");
    health_only.health_addr = Some(LOOPBACK_ANY_PORT.parse().unwrap());
    let manager = Manager::with_client(offline_client(), health_only).unwrap();
    let status = manager.status();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run(shutdown.clone()));
    let endpoints = status.endpoints().await.unwrap();
    assert_eq!(endpoints.metrics, None);
    let addr = endpoints.health.unwrap();
    assert_eq!(http_get(addr, "/metrics").await.0, 404);
    assert_eq!(http_get(addr, "/healthz").await.0, 200);
    shutdown.cancel();
    running.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_in_use_fails_the_start_naming_the_address() {
    let taken = tokio::net::TcpListener::bind(LOOPBACK_ANY_PORT)
        .await
        .unwrap();
    let addr = taken.local_addr().unwrap();
    let mut config = config("bind");
    config.health_addr = Some(addr);
    let mut manager = Manager::with_client(offline_client(), config).unwrap();
    let (work, trace) = probe("work", Duration::ZERO);
    manager.add(work);
    let status = manager.status();
    let err = manager.run(CancellationToken::new()).await.unwrap_err();
    assert!(matches!(err, ManagerError::Bind { addr: a, .. } if a == addr));
    assert!(err.to_string().contains(&addr.to_string()), "{err}");
    assert_eq!(status.endpoints().await, None);
    assert!(
        !trace.started(),
        "nothing starts when an endpoint cannot listen"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_a_real_informer_and_namespace_scoping() {
    let cluster = TestCluster::start(TestClusterConfig::default())
        .await
        .unwrap();
    let mut config = config("informers");
    config.namespace = Some("default".into());
    let manager = Manager::with_client(cluster.client(), config).unwrap();
    let pods = manager.informer::<Pod>(watcher::Config::default());
    assert_eq!(manager.namespace(), Some("default"));
    assert_eq!(manager.factory().len(), 1);
    assert!(
        manager
            .api::<Pod>()
            .resource_url()
            .contains("/namespaces/default/"),
        "{}",
        manager.api::<Pod>().resource_url()
    );
    let status = manager.status();
    assert_eq!(status.readiness(), Readiness::NotSynced);
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run(shutdown.clone()));
    eventually("the pod informer to sync", Duration::from_secs(10), || {
        status.is_ready()
    })
    .await;
    assert!(pods.has_synced());
    shutdown.cancel();
    running.await.unwrap().unwrap();
    cluster.shutdown().await;
}
