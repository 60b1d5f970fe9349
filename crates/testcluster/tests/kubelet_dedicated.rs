//! The kubelet simulation on a thread of its own
//! (`KubeletConfig::dedicated_thread`).
//!
//! One test per file on purpose: it counts the process's threads named
//! `kubelet-sim`, which a test running beside it could start too. Real
//! time throughout (the simulation's runtime is not the test's); timeouts
//! are only deadlock guards.
#![allow(clippy::unwrap_used)]

use std::{sync::Arc, time::Duration};

use ctrlkit_testcluster::{
    SystemClock, TestCluster, TestClusterConfig,
    kubelet::{Kubelet, KubeletConfig, KubeletError},
};
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api,
    api::PostParams,
    runtime::wait::{Condition, await_condition},
};

const GUARD: Duration = Duration::from_secs(60);

/// Threads of this process named `kubelet-sim` right now.
fn kubelet_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim_end() == "kubelet-sim")
        .count()
}

/// Waits (polling, real time) until no `kubelet-sim` thread is left.
async fn kubelet_threads_gone() {
    tokio::time::timeout(GUARD, async {
        while kubelet_threads() != 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the kubelet thread did not end");
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]},
    }))
    .unwrap()
}

fn restarts(p: &Pod) -> Option<i32> {
    let statuses = p.status.as_ref()?.container_statuses.as_ref()?;
    Some(statuses.first()?.restart_count)
}

async fn wait_for(api: &Api<Pod>, name: &str, cond: impl Condition<Pod>) {
    tokio::time::timeout(GUARD, await_condition(api.clone(), name, cond))
        .await
        .unwrap_or_else(|_| panic!("pod {name} never reached the expected state"))
        .unwrap();
}

fn ready(p: Option<&Pod>) -> bool {
    p.and_then(|p| p.status.as_ref()?.conditions.clone())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

async fn start() -> TestCluster {
    let kubelet = KubeletConfig::with_nodes(1, 10)
        .schedule_delay(Duration::from_millis(5))
        .start_delay(Duration::from_millis(20))
        .ready_delay(Duration::from_millis(20))
        .dedicated_thread(true);
    TestCluster::start(TestClusterConfig::default().with_kubelet(kubelet))
        .await
        .unwrap()
}

// The test's own runtime has one thread: pods still start, so the
// simulation runs elsewhere, and it is the `kubelet-sim` thread.
#[tokio::test(flavor = "current_thread")]
async fn a_dedicated_kubelet_runs_on_its_own_thread_takes_cues_and_stops_with_its_handle() {
    assert_eq!(kubelet_threads(), 0);
    let tc = start().await;
    assert_eq!(kubelet_threads(), 1);
    let pods: Api<Pod> = Api::default_namespaced(tc.client());
    pods.create(&PostParams::default(), &pod("web"))
        .await
        .unwrap();
    wait_for(&pods, "web", ready).await;

    // Cues cross from the test's runtime to the simulation's.
    let kubelet = tc.kubelet().unwrap();
    kubelet.crash_pod("default", "web").await.unwrap();
    assert_eq!(restarts(&pods.get("web").await.unwrap()), Some(1));
    let stats = kubelet.stats();
    assert_eq!((stats.bound, stats.started, stats.crashes), (1, 1, 1));

    // Shutting the cluster down stops the thread before it returns.
    tc.shutdown().await;
    assert_eq!(kubelet_threads(), 0);

    // Dropping the handle stops it too (asynchronously).
    let tc = start().await;
    assert_eq!(kubelet_threads(), 1);
    drop(tc);
    kubelet_threads_gone().await;

    // A client that cannot be built is an error, and no thread is left.
    let mut config = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
    config.root_cert = Some(vec![b"not a certificate".to_vec()]);
    let err = Kubelet::spawn_dedicated(config, KubeletConfig::default(), Arc::new(SystemClock))
        .await
        .unwrap_err();
    assert!(matches!(err, KubeletError::Client(_)), "{err:?}");
    assert!(std::error::Error::source(&err).is_some());
    kubelet_threads_gone().await;
}
